#!/bin/bash
# trust.sh - the file trust rule (design.md §2.7) with real programs: a
# config file, @include'd file or apps.d/APP.conf that someone else owns or
# may write, or that sits in a directory others may write, is not used, with
# one message naming it and why; a FIFO in its place never hangs anything.
# The attack of issue 8: another user's apps.d/python3.conf, planted next to
# the config, redirects the cluster. Runs as root to give files to nobody.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
umask 022	# what the test writes is trusted unless it says otherwise
rlb_setup

[ "$(id -u)" = 0 ] || skip "needs root to give files to another user"
NOBODY=$(id -u nobody 2>/dev/null || echo 65534)

GOOD=127.0.0.2		# the replica of the trusted config
EVIL=127.0.0.66		# where planted files send it
THROUGH=127.0.0.99		# what nss_wrapper answers: the library passed through
echo "$THROUGH x.cluster" >"$T/hosts"
export NSS_WRAPPER_HOSTS=$T/hosts

# cluster ADDR : a config whose x.cluster is the one replica ADDR.
cluster()
{
	echo "clusters = ( { name = \"x.cluster\";" \
		"replicas = ( { host = \"r\"; address = \"$1\"; } ); } );"
}

# fresh MODE : an empty config directory $D of this mode holding a trusted
# replicalb.conf (root's, 0644) for GOOD, and REPLICALB_CONFIG naming it.
fresh()
{
	D=$T/etc.$((++CASE))
	mkdir "$D"
	chmod "$1" "$D"
	cluster $GOOD >"$D/replicalb.conf"
	chmod 0644 "$D/replicalb.conf"
	export REPLICALB_CONFIG=$D/replicalb.conf
}
CASE=0

# resolve : python3 (apps.d/python3.conf) resolves x.cluster with the library
# over nss_wrapper, in at most 5 s; prints the address, or "hung". stderr
# goes to $T/err.
resolve()
{
	local out
	out=$(timeout 5 env LD_PRELOAD="$RLB_LIB $NSS_WRAPPER_LIB" \
		$PY "$GAI" -u -4 x.cluster 80 2>"$T/err")
	[ $? = 124 ] && out=hung
	echo "$out"
}

# one_message NAME ERE : $T/err is exactly one line, matching ERE.
one_message()
{
	local err
	err=$(cat "$T/err")
	check_eq "$1: one message" 1 "$(grep -c . "$T/err")"
	check_match "$1: message says why" "$2" "$err"
}

# ctl_check : `replicalbctl -a python3 check` in at most 5 s; sets CRC,
# COUT and CERR (stderr).
ctl_check()
{
	COUT=$(timeout 5 "$RLBCTL" -a python3 check 2>"$T/cerr")
	CRC=$?
	CERR=$(cat "$T/cerr")
}

q()	# ERE-quote a path
{
	printf '%s' "$1" | sed 's/[][\.*^$+?(){}|]/\\&/g'
}

# --- 1. The attack: apps.d/python3.conf planted next to the config ----------

# Before anything: a trusted app file takes effect.
fresh 0755
mkdir "$D/apps.d"
cluster $EVIL >"$D/apps.d/python3.conf"
check_eq "trusted apps.d/python3.conf takes effect" "$EVIL" "$(resolve)"
check_empty "trusted apps.d/python3.conf: no message" "$T/err"

# In a sticky world-writable directory (1777, as /tmp) someone else creates
# apps.d and python3.conf: the main config stays in force, alone.
fresh 1777
mkdir -m 0755 "$D/apps.d"
cluster $EVIL >"$D/apps.d/python3.conf"
chown -R "$NOBODY" "$D/apps.d"
check_eq "1777 dir, nobody's apps.d/python3.conf: main config used" \
	"$GOOD" "$(resolve)"
one_message "1777 dir, nobody's apps.d/python3.conf" \
	"^replicalb\[[0-9]+\]: $(q "$D")/apps\.d/python3\.conf: not used: owned by uid $NOBODY\$"
ctl_check
check_eq "replicalbctl check with nobody's app file: status 0" 0 "$CRC"
check_match "replicalbctl check with nobody's app file: says so" \
	"$(q "$D")/apps\.d/python3\.conf: not used: owned by uid $NOBODY\$" "$CERR"

# Root's own file, but in an apps.d that anyone may write.
fresh 0755
mkdir -m 0777 "$D/apps.d"
cluster $EVIL >"$D/apps.d/python3.conf"
check_eq "apps.d 0777: main config used" "$GOOD" "$(resolve)"
one_message "apps.d 0777" \
	": not used: directory $(q "$D")/apps\.d is writable by group and others\$"

# The config in a world-writable directory without the sticky bit: anyone
# could replace it, so it is not used at all.
fresh 0777
mkdir -m 0755 "$D/apps.d"
cluster $EVIL >"$D/apps.d/python3.conf"
chown -R "$NOBODY" "$D/apps.d"
check_eq "0777 dir: nothing used, names pass through" "$THROUGH" "$(resolve)"
one_message "0777 dir" \
	"$(q "$D")/replicalb\.conf: not used: directory $(q "$D") is writable by group and others.*passing everything through"
ctl_check
check_eq "replicalbctl check, 0777 dir: status 1" 1 "$CRC"

# --- 2. The main file and its includes ---------------------------------------

fresh 0755
check_eq "root's 0644 config in a 0755 dir: used" "$GOOD" "$(resolve)"
check_empty "root's 0644 config: no message" "$T/err"
ctl_check
check_eq "replicalbctl check, root's 0644 config: status 0" 0 "$CRC"

chmod 0664 "$D/replicalb.conf"
check_eq "group-writable config: names pass through" "$THROUGH" "$(resolve)"
one_message "group-writable config" \
	"$(q "$D")/replicalb\.conf: not used: writable by group; passing"
ctl_check
check_eq "replicalbctl check, group-writable config: status 1" 1 "$CRC"
check_eq "replicalbctl check, group-writable config: the message" \
	"$D/replicalb.conf: not used: writable by group" "$CERR"

fresh 0755
cluster $EVIL >"$D/inc.conf"
printf '# includes a file of nobody'"'"'s\n@include "inc.conf"\n' \
	>"$D/replicalb.conf"
chown "$NOBODY" "$D/inc.conf"
check_eq "nobody's @include'd file: names pass through" "$THROUGH" "$(resolve)"
one_message "nobody's @include'd file" \
	"$(q "$D")/replicalb\.conf:2: $(q "$D")/inc\.conf: not used: owned by uid $NOBODY; passing"
ctl_check
check_eq "replicalbctl check, nobody's @include'd file: status 1" 1 "$CRC"
chown 0 "$D/inc.conf"
check_eq "the same file, root's: used" "$EVIL" "$(resolve)"

# A symlink to a trusted file is fine (configs often are links).
fresh 0755
mv "$D/replicalb.conf" "$D/real.conf"
ln -s real.conf "$D/replicalb.conf"
check_eq "symlink to a trusted file: used" "$GOOD" "$(resolve)"

# --- 3. Never blocked by a FIFO ----------------------------------------------

fresh 0755
rm "$D/replicalb.conf"
mkfifo -m 0600 "$D/replicalb.conf"
t0=$(date +%s)
check_eq "FIFO as the config: python3 not blocked, passes through" \
	"$THROUGH" "$(resolve)"
one_message "FIFO as the config" \
	"$(q "$D")/replicalb\.conf: not used: a FIFO, not a regular file"
ctl_check
check_eq "FIFO as the config: replicalbctl check not blocked, status 1" \
	1 "$CRC"
check_eq "FIFO as the config: replicalbctl check's message" \
	"$D/replicalb.conf: not used: a FIFO, not a regular file" "$CERR"

fresh 0755
mkfifo -m 0600 "$D/inc.conf"
printf '@include "inc.conf"\n' >>"$D/replicalb.conf"
check_eq "FIFO @include'd: python3 not blocked, passes through" \
	"$THROUGH" "$(resolve)"
one_message "FIFO @include'd" \
	"$(q "$D")/replicalb\.conf:2: $(q "$D")/inc\.conf: not used: a FIFO, not a regular file"
ctl_check
check_eq "FIFO @include'd: replicalbctl check not blocked, status 1" \
	1 "$CRC"

fresh 0755
mkdir "$D/apps.d"
mkfifo -m 0600 "$D/apps.d/python3.conf"
check_eq "FIFO as apps.d/python3.conf: not blocked, main config used" \
	"$GOOD" "$(resolve)"
one_message "FIFO as apps.d/python3.conf" \
	"python3\.conf: not used: a FIFO, not a regular file"
check "all FIFO cases took well under 5 s each" \
	test $(($(date +%s) - t0)) -lt 10

# --- 4. A running program: an untrusted version never takes over ------------

fresh 0755
env LD_PRELOAD="$RLB_LIB $NSS_WRAPPER_LIB" $PY "$GAI" -u -4 -n 150 -s 0.1 \
	x.cluster 80 >"$T/orders" 2>"$T/running.err" &
RUNNING=$!
bg_track $RUNNING
wait_until 3 grep -q "^$GOOD\$" "$T/orders"
# Replaced (by rename) with a group-writable version for EVIL.
cluster $EVIL >"$D/new.conf"
chmod 0664 "$D/new.conf"
mv "$D/new.conf" "$D/replicalb.conf"
sleep 2.5
check_eq "group-writable new version: last good config kept" "$GOOD" \
	"$(sort -u "$T/orders")"
check_eq "group-writable new version: one message" 1 \
	"$(grep -c . "$T/running.err")"
check_match "group-writable new version: keeping the last good config" \
	"writable by group; keeping the last good config" \
	"$(cat "$T/running.err")"
# Mended by chmod alone: noticed (the ctime changed), now in force.
chmod 0644 "$D/replicalb.conf"
check "chmod 0644: the new version is picked up" \
	wait_until 4 grep -q "^$EVIL\$" "$T/orders"
check_eq "no further messages" 1 "$(grep -c . "$T/running.err")"
kill "$RUNNING" 2>/dev/null
wait "$RUNNING" 2>/dev/null

finish
