#!/bin/bash
# state_file.sh - shared state in SysV segments named by state files
# (design.md §5.8, §5.9, §12): a segment is sized to its cluster and made
# at the cluster's first use, never for a name that is not virtual (a
# config of 2,000 clusters); programs that start together on an empty
# state directory count exactly what they inject; five programs (python3,
# curl, socat) that resolve and connect survive every damage a user can do
# to the directory (emptying, cutting, replacing or removing the state
# file, ipcrm of the segment, a segment of mode 0666 named in its place);
# `replicalbctl remove-state` removes what is no longer used. Programs in
# two IPC namespaces that share the directory keep a state each, with one
# warning and nothing set aside. When another user fills kernel.shmmni,
# programs share their counts through a sealed memfd, and replicalbctl
# status and record-error work on it. A default state directory that another
# user created first is replaced by $HOME/.cache/replicalb, with one
# warning for three programs.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

S=$REPLICALB_STATE_DIR/damage.cluster.state
PORT=$(free_port)
DEAD=$(free_port) # nothing listens there

# seg_of FILE : the segment id a state file names, or nothing.
seg_of()
{
	awk '$1 == "replicalb-state" && $3 == "shm" {print $4}' "$1" 2>/dev/null
}
# seg_field ID COLUMN : a column of /proc/sysvipc/shm for segment ID
# (4 size, 3 perms, 5 cpid), or nothing.
seg_field()
{
	awk -v id="$1" -v col="$2" '$2 == id {print $col}' /proc/sysvipc/shm
}
# segs_list : the ids of the segments that exist now.
segs_list()
{
	awk 'NR > 1 { print $2 }' /proc/sysvipc/shm
}

# segs_made_by PID BEFORE : how many segments process PID created that
# are not in BEFORE (a file of segs_list). Process numbers wrap around
# (at 32,768 here, within one run of the suite), and an older process of
# the same number may have left a segment behind.
segs_made_by()
{
	awk -v pid="$1" 'NR == FNR { old[$1] = 1; next }
		FNR > 1 && $5 == pid && !($2 in old)' "$2" /proc/sysvipc/shm |
		wc -l
}

start_replica r2 127.0.0.2 "$PORT" http || fail "start replica r2"
start_replica r3 127.0.0.3 "$PORT" http || fail "start replica r3"
cat <<EOF | write_config
load_balancing = "round_robin";
distributed_replica_error_cap = 1000000;
distributed_replica_error_half_life = 86400;
clusters = (
  { name = "damage.cluster";
    port = $PORT;
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); },
  { name = "start.cluster";
    port = $DEAD;
    replicas = ( "127.0.0.5" ); }
);
EOF

# ---------------------------------------------------------------------
# Sized to the cluster, made at first use

check_eq "first program resolves" "127.0.0.2 127.0.0.3 127.0.0.4" \
	"$(preload $PY "$GAI" -u -4 damage.cluster 80 | tr ' ' '\n' | sort | xargs)"
check "state file created" test -f "$S"
check_eq "only the cluster used has a state file" "damage.cluster.state" \
	"$(ls "$REPLICALB_STATE_DIR")"
check_eq "state file mode" 600 "$(stat -c %a "$S")"
SEG=$(seg_of "$S")
check_match "it names a segment" '^[0-9]+$' "$SEG"
check_eq "3 replicas: 128-byte header, 8 slots of 64 bytes, the ledger (256 rows of 32, 256 entries of 96)" 33408 \
	"$(seg_field "$SEG" 4)"
check_eq "segment mode" 600 "$(seg_field "$SEG" 3)"
check_match "ipcs shows it" "^0x00000000 +$SEG +[a-z0-9]+ +600 +33408 " \
	"$(ipcs -m)"
cp "$S" "$T/backup.state"

# ---------------------------------------------------------------------
# Five programs resolve and connect while the state is damaged

cat >"$T/client.py" <<'EOF'
import socket, sys, time
port, seconds = int(sys.argv[1]), float(sys.argv[2])
end = time.monotonic() + seconds
ok = fail = 0
while time.monotonic() < end:
    try:
        s = socket.create_connection(("damage.cluster", port), timeout=2)
        s.close()
        ok += 1
    except OSError:
        fail += 1
    time.sleep(0.005)
print(ok, fail)
EOF
# loop_run NAME SECONDS CMD... : run CMD again and again for SECONDS;
# $T/NAME.crashes gets how many runs died of a signal.
loop_run()
{
	local name=$1 end=$(($(now_ms) + $2 * 1000)) crashes=0 runs=0 rc
	shift 2
	while [ "$(now_ms)" -lt "$end" ]; do
		"$@" >/dev/null 2>>"$T/$name.err"
		rc=$?
		runs=$((runs + 1))
		[ "$rc" -ge 128 ] && crashes=$((crashes + 1))
	done
	echo "$crashes" >"$T/$name.crashes"
	echo "$runs" >"$T/$name.runs"
}

# The last damage lands 7.5 s in: the programs live on long enough to
# follow it (once a second) with their counts.
SECS=10
pids=
for i in 1 2 3; do
	(
		preload $PY "$T/client.py" "$PORT" "$SECS" >"$T/py$i.out" \
			2>"$T/py$i.err"
		echo $? >"$T/py$i.rc"
	) &
	pids="$pids $!"
done
loop_run curl "$SECS" preload curl -s -o /dev/null --max-time 3 \
	"http://damage.cluster:$PORT/" &
pids="$pids $!"
loop_run socat "$SECS" preload socat -T 2 /dev/null \
	"TCP:damage.cluster:$PORT,connect-timeout=2" &
pids="$pids $!"
for pid in $pids; do bg_track "$pid"; done

# A segment of mode 0666 with the right size, named by the state file.
forge_0666()
{
	$PY - "$S" <<'EOF'
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
sid = libc.shmget(0, 33408, 0o1666)  # IPC_PRIVATE, IPC_CREAT | 0666
tmp = sys.argv[1] + ".forged"
with open(tmp, "w") as f:
    f.write("replicalb-state 1 shm %d 0123456789abcdef\n" % sid)
import os
os.chmod(tmp, 0o600)
os.rename(tmp, sys.argv[1])
print(sid)
EOF
}

sleep 1.5
: >"$S"
sleep 0.8
truncate -s 64 "$S"
sleep 0.8
cp "$T/backup.state" "$S"
sleep 0.8
rm -f "$S"
sleep 1.2
ipcrm -m "$(seg_of "$S")" 2>/dev/null
sleep 1.2
FORGED=$(forge_0666)
sleep 1.2
: >"$S"
for pid in $pids; do wait "$pid"; done

crashes=0
for i in 1 2 3; do
	rc=$(cat "$T/py$i.rc")
	[ "$rc" -ge 128 ] && crashes=$((crashes + 1))
	check_eq "python program $i survived (135 = SIGBUS)" 0 "$rc"
	read -r ok failed <"$T/py$i.out"
	check_ge "python program $i connected" 50 "${ok:-0}"
	check_eq "python program $i: every connect reached a replica" 0 \
		"${failed:-x}"
done
for p in curl socat; do
	check_eq "no $p run died of a signal ($(cat "$T/$p.runs") runs)" 0 \
		"$(cat "$T/$p.crashes")"
	crashes=$((crashes + $(cat "$T/$p.crashes")))
done
echo "    crashes under damage: $crashes"
check_ge "damaged state files were set aside" 2 \
	"$(ls "$REPLICALB_STATE_DIR" | grep -c '^damage.cluster.state.corrupt-')"
SEG2=$(seg_of "$S")
check_match "the state file names a segment again" '^[0-9]+$' "$SEG2"
check_eq "of mode 0600" 600 "$(seg_field "$SEG2" 3)"
check "the forged segment is not it" test "$SEG2" != "$FORGED"
check_eq "the forged segment was left alone" 666 "$(seg_field "$FORGED" 3)"
ipcrm -m "$FORGED" 2>/dev/null
check_match "the mode was reported" "mode 0666" "$(cat "$T"/*.err)"
# How many refusals there are depends on how often a fresh segment put
# 127.0.0.4 first (7 to 15 seen): the counts must not all be gone.
check_ge "the refused replica's errors survived the damage" 3 \
	"$(replica_errors damage.cluster 127.0.0.4)"
check_match "status uses the state file" "damage.cluster.state\"" \
	"$(rlbctl status --json)"
# A program that moved away from a segment and exited before others had
# followed may leave it unnamed; remove-state finds such segments.
out=$(rlbctl remove-state)
echo "    remove-state after the damage:" $out
check_eq "remove-state keeps the state in use" "$SEG2" "$(seg_of "$S")"
check_eq "and its segment" 33408 "$(seg_field "$SEG2" 4)"
check_eq "nothing of the directory is left to remove" "" \
	"$(rlbctl remove-state)"

# ---------------------------------------------------------------------
# Processes that start together on an empty state directory

# start_round DIR N M : N preloaded python3 processes, released at once,
# each connect M times to the refusing replica of start.cluster.
start_round()
{
	local dir=$1 n=$2 m=$3 i pids=
	rm -f "$T/go"
	for i in $(seq "$n"); do
		REPLICALB_STATE_DIR=$dir preload $PY -c '
import os, socket, sys, time
while not os.path.exists(sys.argv[1]):
    time.sleep(0.0005)
for i in range(int(sys.argv[3])):
    try:
        socket.create_connection(("start.cluster", int(sys.argv[2])), 1).close()
    except OSError:
        pass
' "$T/go" "$DEAD" "$m" &
		pids="$pids $!"
	done
	sleep 0.3
	touch "$T/go"
	for i in $pids; do wait "$i"; done
}

ROUNDS=15 N=6 M=20
bad=0 private=0
for r in $(seq $ROUNDS); do
	dir=$T/start.$r
	start_round "$dir" $N $M 2>"$T/start.err"
	got=$(REPLICALB_STATE_DIR=$dir replica_errors start.cluster 127.0.0.5)
	[ "$got" = $((N * M)) ] || { bad=$((bad + 1)); echo "    round $r: $got"; }
	grep -q private "$T/start.err" && private=$((private + 1))
	rm_state_segments "$dir"
done
check_eq "$ROUNDS rounds of $N programs x $M refused connects: each counted $((N * M))" \
	0 "$bad"
check_eq "no program fell back to private state" 0 "$private"

bad=0
for r in $(seq 10); do
	dir=$T/rec.$r
	pids=
	for i in $(seq $N); do
		REPLICALB_STATE_DIR=$dir rlbctl record-error start.cluster \
			127.0.0.5 7 &
		pids="$pids $!"
	done
	for pid in $pids; do wait "$pid"; done
	got=$(REPLICALB_STATE_DIR=$dir replica_errors start.cluster 127.0.0.5)
	[ "$got" = $((N * 7)) ] || { bad=$((bad + 1)); echo "    round $r: $got"; }
	rm_state_segments "$dir"
done
check_eq "10 rounds of $N record-error 7 started together: each counted $((N * 7))" \
	0 "$bad"

# ---------------------------------------------------------------------
# 2,000 clusters: no state work for a name that is not virtual

BIG=$T/big.conf
$PY - "$BIG" <<'EOF'
import sys
with open(sys.argv[1], "w") as f:
    f.write("clusters = (\n")
    f.write(",\n".join('  { name = "c%d.cluster"; replicas = ( "127.0.0.%d" ); }'
                       % (i, 2 + i % 200) for i in range(2000)))
    f.write("\n);\n")
EOF
cat >"$T/localhost.py" <<'EOF'
import socket, sys, time
t = time.monotonic()
socket.getaddrinfo("localhost", 80)
ms = (time.monotonic() - t) * 1000
for name in sys.argv[1:]:
    socket.getaddrinfo(name, 80)
print("%.1f" % ms)
EOF
# big_run [NAMES...] : localhost (and NAMES) in a preloaded python whose
# pid goes to $T/big.pid; prints the milliseconds of localhost.
big_run()
{
	(
		echo "$BASHPID" >"$T/big.pid"
		exec env REPLICALB_CONFIG="$BIG" \
			REPLICALB_STATE_DIR="$T/big-state" \
			LD_PRELOAD="$RLB_LIB" $PY "$T/localhost.py" "$@"
	)
}
segs_list >"$T/segs.before"
first=$(big_run)
check_eq "localhost: no segment made" 0 \
	"$(segs_made_by "$(cat "$T/big.pid")" "$T/segs.before")"
check_not "localhost: no state directory, no state file" test -e "$T/big-state"
later=$(big_run)
plain=$($PY "$T/localhost.py")
echo "    getaddrinfo(localhost) under 2,000 clusters: ${first} ms first," \
	"${later} ms later, ${plain} ms without the library"
segs_list >"$T/segs.before"
big_run c1.cluster c2.cluster c3.cluster >/dev/null
check_eq "three virtual names: three segments" 3 \
	"$(segs_made_by "$(cat "$T/big.pid")" "$T/segs.before")"
check_eq "and three state files" 3 "$(ls "$T/big-state" | wc -l)"
sizes=$(for f in "$T"/big-state/*.state; do seg_field "$(seg_of "$f")" 4; done | sort -u)
check_eq "one replica: 128 + 4 x 64 bytes + the ledger (8192 + 256 x 96) each" 33152 "$sizes"

# ---------------------------------------------------------------------
# remove-state

echo junk >"$T/big-state/c9.cluster.state.corrupt-1-1"
old=$(seg_of "$T/big-state/c2.cluster.state")
cat >"$T/small.conf" <<'EOF'
clusters = ( { name = "c1.cluster"; replicas = ( "127.0.0.3" ); } );
EOF
out=$(REPLICALB_STATE_DIR=$T/big-state rlbctl -c "$T/small.conf" remove-state)
check_eq "remove-state keeps the clusters of the config" \
	"c1.cluster.state" "$(ls "$T/big-state")"
check_match "and says what it removed" "removed segment $old" "$out"
check "the segment of a removed cluster is gone" test -z "$(seg_field "$old" 2)"
old=$(seg_of "$T/big-state/c1.cluster.state")
REPLICALB_STATE_DIR=$T/big-state rlbctl -c "$T/small.conf" remove-state --all \
	>/dev/null
check_eq "remove-state --all removes every state file" "" \
	"$(ls "$T/big-state")"
check "and its segment" test -z "$(seg_field "$old" 2)"

# ---------------------------------------------------------------------
# Two IPC namespaces that share the state directory (a container's
# default, with /tmp or a volume shared): each keeps its own state beside
# the other's, nothing is set aside, the second warns once (design.md
# §5.8). Each program resolves for 3 s, reading the state file again once
# a second; the namespaces' segments go with them.

ns_run()	# N: a python3 loop in an IPC namespace of its own
{
	REPLICALB_STATE_DIR=$T/ns-state unshare -i env LD_PRELOAD="$RLB_LIB" \
		$PY -c '
import socket, time
end = time.time() + 3
while time.time() < end:
    socket.getaddrinfo("damage.cluster", 80, socket.AF_INET)
    time.sleep(0.01)
' 2>"$T/ns$1.err"
}

if [ "$(id -u)" = 0 ] && unshare -i true 2>/dev/null; then
	ns_run 1 &
	ns1=$!
	sleep 0.5 # the first names its segment first
	ns_run 2 &
	ns2=$!
	wait "$ns1" "$ns2"
	check_eq "two IPC namespaces: nothing set aside" 0 \
		"$(ls "$T/ns-state" | grep -c corrupt)"
	check_eq "a state file of each namespace" 2 \
		"$(ls "$T/ns-state" | grep -c '^damage\.cluster\.state')"
	check_eq "no warning in the first, one in the second" "0 1" \
		"$(grep -c 'replicalb\[' "$T/ns1.err") $(grep -c 'replicalb\[' "$T/ns2.err")"
	check_match "it says why" "another IPC namespace" "$(cat "$T/ns2.err")"
else
	echo "    (IPC namespaces: needs root; not run)"
fi

# ---------------------------------------------------------------------
# Another user fills kernel.shmmni (issue 20, defect 4; design.md §12.12),
# in an IPC namespace of its own with shmmni = 16: uid 65534 takes every
# id, and root gets none either. Two python3 programs that count refused
# connects share their counts through a sealed memfd (the second started
# while the first holds it), `replicalbctl status` shows the sum and
# `record-error` adds to it. Before: both programs private, status 0,
# record-error refused.

fill_ns=$T/fill.ipcns
if [ "$(id -u)" = 0 ] && touch "$fill_ns" &&
	unshare --ipc="$fill_ns" true 2>/dev/null; then
	in_ns() { nsenter --ipc="$fill_ns" "$@"; }
	in_ns sh -c 'echo 16 >/proc/sys/kernel/shmmni'
	shmget_all='
import ctypes, os, sys
if sys.argv[1] != "0":
    os.setgid(int(sys.argv[1]))
    os.setuid(int(sys.argv[1]))
libc = ctypes.CDLL(None, use_errno=True)
n = 0
while n < 100 and libc.shmget(0, 1, 0o1600) >= 0:  # IPC_PRIVATE, 0600
    n += 1
print(n, os.strerror(ctypes.get_errno()))
'
	check_eq "uid 65534 takes all 16 ids" "16 No space left on device" \
		"$(in_ns $PY -c "$shmget_all" 65534)"
	check_eq "and root gets none" "0 No space left on device" \
		"$(in_ns $PY -c "$shmget_all" 0)"
	cat >"$T/fill.conf" <<EOF
distributed_replica_error_cap = 1000000;
distributed_replica_error_half_life = 86400;
clusters = ( { name = "fill.cluster"; port = $DEAD;
	       replicas = ( "127.0.0.6" ); },
	     { name = "fill-rr.cluster"; port = $DEAD;
	       load_balancing = "round_robin";
	       replicas = ( "127.0.0.6", "127.0.0.7", "127.0.0.8" ); } );
EOF
	cat >"$T/fill.py" <<'EOF'
import os, socket, sys, time
port, n, ready, stop = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
refused = 0
for _ in range(n):
    try:
        socket.create_connection(("fill.cluster", port), timeout=2).close()
    except ConnectionRefusedError:
        refused += 1
print(refused, flush=True)
open(ready, "w").close()
while stop != "-" and not os.path.exists(stop):
    time.sleep(0.05)
EOF
	saved_config=$REPLICALB_CONFIG saved_dir=$REPLICALB_STATE_DIR
	saved_ctl=$RLBCTL
	export REPLICALB_CONFIG=$T/fill.conf REPLICALB_STATE_DIR=$T/fill-state
	printf '#!/bin/sh\nexec nsenter --ipc="%s" "%s" "$@"\n' \
		"$fill_ns" "$RLBCTL" >"$T/fill-ctl"
	chmod +x "$T/fill-ctl"
	RLBCTL=$T/fill-ctl
	# nsenter and env exec: $! is the program's own number.
	nsenter --ipc="$fill_ns" env LD_PRELOAD="$RLB_LIB" $PY "$T/fill.py" \
		"$DEAD" 10 "$T/fill1.ready" "$T/fill.stop" >"$T/fill1.out" \
		2>"$T/fill1.err" &
	fill1=$!
	for _ in $(seq 100); do
		[ -e "$T/fill1.ready" ] && break
		sleep 0.1
	done
	in_ns env LD_PRELOAD="$RLB_LIB" $PY "$T/fill.py" "$DEAD" 10 \
		"$T/fill2.ready" - >"$T/fill2.out" 2>"$T/fill2.err"
	check_eq "the programs saw 10 refused connects each" "10 10" \
		"$(cat "$T/fill1.out") $(cat "$T/fill2.out")"
	check_match "the state file names the first program's memfd" \
		"^replicalb-state 3 memfd $fill1 [0-9]+ [0-9]+ [0-9a-f]{16} [0-9a-f]{16}\$" \
		"$(cat "$T/fill-state/fill.cluster.state")"
	check_eq "status shows both programs' counts" 20 \
		"$(replica_errors fill.cluster 127.0.0.6)"
	check_eq "status: the state file is shared" shared \
		"$(rlbctl status --json | $PY -c 'import json, sys
print(json.load(sys.stdin)["clusters"][0]["state_file_use"])')"
	check "record-error works" rlbctl record-error fill.cluster 127.0.0.6 5
	check_eq "and the programs' state has it" 25 \
		"$(replica_errors fill.cluster 127.0.0.6)"
	check_eq "one warning in the first program, for the limit" 1 \
		"$(grep -c 'replicalb\[' "$T/fill1.err")"
	check_match "it names shmmni and the memfd" "shmmni.*memfd" \
		"$(cat "$T/fill1.err")"
	check_empty "none in the second" "$T/fill2.err"
	touch "$T/fill.stop"
	wait "$fill1"
	check_eq "the first program exits well" 0 $?
	# Nobody holds the memfd now: the counts were saved beside the
	# state file, and the next program starts from them (before: from
	# nothing, and status showed 0).
	check_eq "status with no program running: the saved counts" 25 \
		"$(replica_errors fill.cluster 127.0.0.6)"
	in_ns env LD_PRELOAD="$RLB_LIB" $PY "$T/fill.py" "$DEAD" 3 \
		"$T/fill3.ready" - >"$T/fill3.out" 2>"$T/fill3.err"
	check_eq "a program started later adds to them" "3 28" \
		"$(cat "$T/fill3.out") $(replica_errors fill.cluster 127.0.0.6)"
	# round_robin turns through programs that each resolve once and
	# exit (curl in a loop): the counter outlives them too.
	firsts=
	for _ in 1 2 3; do
		firsts="$firsts $(in_ns env LD_PRELOAD="$RLB_LIB" $PY -c '
import socket
print(socket.getaddrinfo("fill-rr.cluster", 1, type=socket.SOCK_STREAM)[0][4][0])')"
	done
	check_eq "three short programs start at three replicas" 3 \
		"$(echo $firsts | tr ' ' '\n' | sort -u | wc -l)"
	export REPLICALB_CONFIG=$saved_config REPLICALB_STATE_DIR=$saved_dir
	RLBCTL=$saved_ctl
	umount "$fill_ns"
else
	echo "    (shmmni filled by another user: needs root and IPC namespaces; not run)"
fi

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
for f in /tmp/home/.cache/replicalb/*.state; do
	ipcrm -m "$(awk "{print \$4}" "$f")" || true
done
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
