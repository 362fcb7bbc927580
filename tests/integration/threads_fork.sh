#!/bin/bash
# threads_fork.sh - 16 threads resolving and connecting at once, with fork
# children that resolve and exec children (the hammer itself, /bin/true,
# python3) under the preload (design.md §5): no crash, no
# deadlock, and the shared error count of the refusing replica equals the
# number of refused connects that all processes saw.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

HAMMER=$top_builddir/tests/helpers/hammer
PORT=$(free_port)
# 16 threads x ITERS rounds; threads 0-3 fork every FORK_EVERY rounds (a
# child does 3 rounds), threads 4-5 exec every EXEC_EVERY rounds (the
# hammer doing 3 rounds, /bin/true, python3).
ITERS=500 FORK_EVERY=50 EXEC_EVERY=125
FORKS=$((4 * ITERS / FORK_EVERY))
EXEC_ROUNDS=$((2 * ITERS / EXEC_EVERY))
ROUNDS=$((16 * ITERS + 3 * FORKS + 3 * EXEC_ROUNDS))

config()	# POLICY FIRST SECOND
{
	cat <<EOF
use_hedged_requests = false; # the bounded connect, unhedged (design.md §5.3); hedged*.sh test the hedge
load_balancing = "$1";
distributed_replica_error_half_life = 1000000;
distributed_replica_error_cap = 1000000;
connect_timeout_ms = 60000;
clusters = (
  { name = "hammer.cluster";
    port = $PORT;
    replicas = ( "$2", "$3" ); }
);
EOF
}
config in_order 127.0.0.2 127.0.0.3 | write_config

check "hammer is built" test -x "$HAMMER"
start_replica up 127.0.0.3 "$PORT" tcp || fail "start replica 127.0.0.3"
# 127.0.0.2:$PORT has no listener: every connect to it is refused.

field()	# NAME LINE
{
	printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"
}

hammer_run()	# LABEL [env assignments...]
{
	local label=$1 out rc refused
	shift
	out=$(timeout 60 env "$@" LD_PRELOAD="$RLB_LIB" "$HAMMER" -t 16 \
		-i $ITERS -f $FORK_EVERY -x $EXEC_EVERY -p "$PY" hammer.cluster 1 \
		</dev/null 2>"$T/hammer.err")
	rc=$?
	echo "    $label: $out"
	check_eq "$label: exits 0 (124 = deadlock/timeout)" "0" "$rc"
	check_empty "$label: silent" "$T/hammer.err"
	check_eq "$label: every round resolved and reached both replicas" \
		"$ROUNDS $ROUNDS $ROUNDS" \
		"$(field rounds "$out") $(field ok "$out") $(field refused "$out")"
	check_eq "$label: fork and exec children all reaped" \
		"$FORKS $((3 * EXEC_ROUNDS)) 0" \
		"$(field forks "$out") $(field execs "$out") $(field failures "$out")"
	REFUSED=$(field refused "$out")
}

hammer_run "in_order"
check_eq "in_order: refusing replica's count = refused connects" \
	"$REFUSED" "$(replica_errors hammer.cluster 127.0.0.2)"
check_eq "in_order: the healthy replica has no errors" "0" \
	"$(replica_errors hammer.cluster 127.0.0.3)"
first=$REFUSED

hammer_run "round_robin" REPLICALB_LOAD_BALANCING=round_robin
got=$(replica_errors hammer.cluster 127.0.0.2)
want=$((first + ${REFUSED:-0}))
check_eq "round_robin: count grows by exactly the refused connects" \
	"$want" "$got"
check_eq "round_robin: the healthy replica has no errors" "0" \
	"$(replica_errors hammer.cluster 127.0.0.3)"
check_eq "the refusing replica is last" "127.0.0.3 127.0.0.2" \
	"$(peek hammer.cluster)"

# The config changing under the threads (snapshots swapped while in use):
# rewritten every 0.2 s until the hammer is done, alternating two
# versions with the same replicas, so that their counts carry over.
before=$(replica_errors hammer.cluster 127.0.0.2)
(
	for i in $(seq 150); do
		[ -f "$T/hammer.done" ] && break
		if [ $((i % 2)) -eq 0 ]; then
			config in_order 127.0.0.2 127.0.0.3 | write_config
		else
			config round_robin 127.0.0.3 127.0.0.2 | write_config
		fi
		sleep 0.2
	done
) &
writer=$!
bg_track $writer
hammer_run "config reloading"
touch "$T/hammer.done"
wait "$writer"
config in_order 127.0.0.2 127.0.0.3 | write_config
check_eq "config reloading: count grew by exactly the refused connects" \
	"$((before + ${REFUSED:-0}))" "$(replica_errors hammer.cluster 127.0.0.2)"

# Four processes at once (4 threads each): N concurrent failures from many
# processes add exactly N.
before=$(replica_errors hammer.cluster 127.0.0.2)
pids=
for i in 1 2 3 4; do
	timeout 60 env LD_PRELOAD="$RLB_LIB" "$HAMMER" -t 4 -i 500 -f 0 -x 0 \
		hammer.cluster 1 </dev/null >"$T/par$i.out" 2>"$T/par$i.err" &
	pids="$pids $!"
done
total=0
for pid in $pids; do
	wait "$pid"
	rc=$?
	[ "$rc" -eq 0 ] || fail "parallel hammer exited $rc"
done
for i in 1 2 3 4; do
	n=$(field refused "$(cat "$T/par$i.out")")
	total=$((total + ${n:-0}))
done
check_eq "parallel: 4 x 2000 refused connects seen" "8000" "$total"
check_eq "parallel: the count grew by exactly that" "$((before + total))" \
	"$(replica_errors hammer.cluster 127.0.0.2)"
check_eq "parallel: silent" "" "$(cat "$T"/par*.err)"

finish
