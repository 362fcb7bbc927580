#!/bin/bash
# state_file.sh - a state file that is locked, truncated, emptied, restored
# by cp or hard-linked never stalls or kills the programs that use it
# (design.md §5.8, §5.9, §12.4, §12.9): resolving python3 processes survive
# `truncate -s 64`, `: >` and `cp` over their state file, the truncated file
# is set aside and recreated, and a program that starts while another
# process holds the file's flock resolves at once. A default state
# directory that another user created first is replaced by
# $HOME/.cache/replicalb, with one warning for three programs.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

NPROC=5
# Resolutions per process, 200 ms apart: about 8 s. The check for a
# shrunk file runs at most once per clock tick (design.md §12.9), so a
# program that touches its state more often than that can still meet a
# truncation between check and access; this pace keeps that window (tens
# of microseconds per resolution) from making the test flaky on a loaded
# machine, while every damage still lands between resolutions.
ROUNDS=40
S=$REPLICALB_STATE_DIR/damage.cluster.state

# mono : the monotonic time; ms_since START : milliseconds since then.
mono()
{
	$PY -c 'import time; print(time.monotonic())'
}
ms_since()
{
	$PY -c "import time; print(int((time.monotonic() - $1) * 1000))"
}

cat <<EOF | write_config
load_balancing = "round_robin";
clusters = (
  { name = "damage.cluster";
    port = 9;
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); }
);
EOF

check_eq "first program resolves" "127.0.0.2 127.0.0.3 127.0.0.4" \
	"$(preload $PY "$GAI" -u -4 damage.cluster 80 | tr ' ' '\n' | sort | xargs)"
check "state file created" test -f "$S"
cp "$S" "$T/copy.state"
SIZE=$(stat -c %s "$S")

# ---------------------------------------------------------------------
# Damage while programs resolve

for i in $(seq $NPROC); do
	(
		preload $PY "$GAI" -n $ROUNDS -s 0.2 -u -4 damage.cluster 80 \
			>"$T/out.$i" 2>"$T/err.$i"
		echo $? >"$T/rc.$i"
	) &
	bg_track $!
done
# Each damage lands while every program is resolving (has printed N lines).
lines_at_least()	# N
{
	local i
	for i in $(seq $NPROC); do
		[ "$(wc -l <"$T/out.$i" 2>/dev/null || echo 0)" -ge "$1" ] ||
			return 1
	done
}
wait_until 30 lines_at_least 5 || fail "programs started"
truncate -s 64 "$S"
wait_until 30 lines_at_least 15 || fail "programs go on after truncate"
: >"$S"
wait_until 30 lines_at_least 25 || fail "programs go on after : >"
cp "$T/copy.state" "$S"
wait

for i in $(seq $NPROC); do
	check_eq "program $i survived (135 = SIGBUS)" 0 "$(cat "$T/rc.$i")"
	check_eq "program $i resolved every time" $ROUNDS \
		"$(grep -c '127.0.0' "$T/out.$i")"
done
check_ge "the truncated file was set aside" 1 \
	"$(ls "$REPLICALB_STATE_DIR" | grep -c '^damage.cluster.state.corrupt-')"
check_eq "the state file is whole again" "$SIZE" "$(stat -c %s "$S")"
check_match "the truncation was noticed" "truncated while in use" \
	"$(cat "$T"/err.*)"
check_match "status uses the file" "damage.cluster.state\"" \
	"$(rlbctl status --json)"

# ---------------------------------------------------------------------
# A held flock: no stall, shared state where the file is whole

start=$(mono)
preload $PY "$GAI" -n 3 -u -4 damage.cluster 80 >/dev/null 2>&1
base=$(ms_since "$start")
$PY -c '
import fcntl, sys, time
f = open(sys.argv[1])
fcntl.flock(f, fcntl.LOCK_EX)
print("locked", flush=True)
time.sleep(60)
' "$S" >"$T/lock.out" &
LOCKER=$!
bg_track $LOCKER
wait_until 5 grep -q locked "$T/lock.out" || fail "lock the state file"
start=$(mono)
preload $PY "$GAI" -n 3 -u -4 damage.cluster 80 >"$T/locked.out" \
	2>"$T/locked.err"
ms=$(ms_since "$start")
echo "    resolving 3 times: $base ms unlocked, $ms ms with the file locked"
check_eq "resolves with the lock held" 3 "$(grep -c '127.0.0' "$T/locked.out")"
check "no stall on a held lock ($ms ms, $base ms unlocked)" \
	test "$ms" -lt $((base + 1000))
check_empty "no warning for a held lock" "$T/locked.err"
start=$(mono)
rlbctl record-error damage.cluster 127.0.0.3 5 >"$T/rec.out" 2>&1
rc=$?
ms=$(ms_since "$start")
check_eq "record-error works on the shared file under the lock ($ms ms)" \
	0 "$rc"
check_eq "and every program sees it" 5 \
	"$(replica_errors damage.cluster 127.0.0.3)"
kill $LOCKER 2>/dev/null
wait $LOCKER 2>/dev/null

# ---------------------------------------------------------------------
# A hard link to the state file is not written through

ln "$S" "$T/linked.state"
cp "$T/linked.state" "$T/linked.before"
preload $PY "$GAI" -n 3 -u -4 damage.cluster 80 >/dev/null 2>"$T/link.err"
check "the hard-linked file is not written" \
	cmp -s "$T/linked.state" "$T/linked.before"
check_eq "the state file has one link again" 1 "$(stat -c %h "$S")"
check_match "the link was reported" "link" "$(cat "$T/link.err")"

# ---------------------------------------------------------------------
# A default state directory squatted by another user (root: chown), in a
# mount namespace of its own so that the real /tmp is not touched

squat_run()	# prints the programs' stdout, then the fallback's entries
{
	unshare -m bash -c '
set -e
cd /
mount --make-rprivate /
mount --bind "$1" /mnt
mount -t tmpfs -o mode=1777 none /tmp
mkdir "/tmp/replicalb-$(id -u)"
chown 65534:65534 "/tmp/replicalb-$(id -u)"
mkdir /tmp/home
export HOME=/tmp/home REPLICALB_CONFIG=/mnt/replicalb.conf
unset XDG_RUNTIME_DIR REPLICALB_STATE_DIR
for i in 1 2 3; do
	env LD_PRELOAD="$2" "$3" /mnt/gai.py -u -4 damage.cluster 80
done
ls -A /tmp/home/.cache/replicalb
' squat "$T" "$pre" "$PY"
}

if [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
	# Copies: a library under /tmp would be hidden by the new /tmp.
	mkdir "$T/preload"
	pre=
	for lib in $RLB_LIB; do
		cp "$lib" "$T/preload/"
		pre="$pre /mnt/preload/${lib##*/}"
	done
	out=$(squat_run 2>"$T/squat.err")
	check_eq "three programs resolve with the default squatted" 3 \
		"$(printf '%s\n' "$out" | grep -c '127.0.0')"
	check_match "they share the fallback directory" \
		'^damage.cluster.state$' "$out"
	check_eq "one warning for three programs" 1 \
		"$(grep -c 'replicalb\[' "$T/squat.err")"
	check_match "it names the squat and the fallback" \
		"uid 65534.*using /tmp/home/.cache/replicalb" "$(cat "$T/squat.err")"
else
	echo "    (squatted default: needs root and mount namespaces; not run)"
fi

finish
