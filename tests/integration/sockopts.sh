#!/bin/bash
# sockopts.sh - established connections are the program's own (design.md §5.3,
# issue 7): whatever the library sets to bound a connect (TCP_SYNCNT,
# TCP_USER_TIMEOUT, SO_SNDTIMEO, O_NONBLOCK, ...), every option reads back
# after the connect exactly as without the library: with the program's
# own values or the defaults, for blocking connects, non-blocking ones
# (poll, SO_ERROR) and non-blocking ones never looked at before the first
# write; also after a timed-out attempt on another socket, and after
# connect_failover moved the same socket past a silent replica.
#
# tests/helpers/sockopts prints the options right after the connect and
# at the end, read with raw system calls (what the kernel holds for the
# connection; TCP_SYNCNT left out, see the helper) and through libc (what
# the program sees: all of them); its output with the library must equal
# its output connecting straight to the replica without it.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

HPORT=$(free_port)
SOCKOPTS=$top_builddir/tests/helpers/sockopts
[ -x "$SOCKOPTS" ] || fail "helper not built: $SOCKOPTS (make check builds it)"

write_config <<EOF
use_hedged_requests = false; # the bounded connect, unhedged (design.md §5.3); hedged*.sh test the hedge
load_balancing = "in_order";
distributed_replica_error_half_life = 600;
connect_timeout_ms = 1000;
state_dir = "$T/state";
clusters = (
  { name = "ok.cluster"; port = $HPORT; replicas = ( "127.0.0.3" ); },
  { name = "walk.cluster"; port = $HPORT;
    replicas = ( "127.0.0.2", "127.0.0.3" ); }
);
EOF
cat >"$T/fo.conf" <<EOF
use_hedged_requests = false; # the bounded connect, unhedged (design.md §5.3); hedged*.sh test the hedge
load_balancing = "in_order";
distributed_replica_error_half_life = 600;
connect_timeout_ms = 1000;
state_dir = "$T/state";
connect_failover = true;
clusters = (
  { name = "fo.cluster"; port = $HPORT;
    replicas = ( "127.0.0.2", "127.0.0.3" ); }
);
EOF

start_replica silent 127.0.0.2 "$HPORT" blackhole || fail "start silent replica"
start_replica r3 127.0.0.3 "$HPORT" http || fail "start r3"

# Option sets: none; the program's own values; explicit zeros and the
# values a library would use itself (TCP_SYNCNT 1).
SET_none=
SET_own="-s 5000 -r 7000 -u 30000 -y 4 -k"
SET_zero="-s 0 -r 250 -u 0 -y 1"

base()	# MODE SET : the helper straight to 127.0.0.3, no library
{
	timeout 10 "$SOCKOPTS" -m "$1" $2 127.0.0.3 "$HPORT" 2>&1
}
lib()	# MODE SET NAME : the helper through the library
{
	timeout 10 env LD_PRELOAD="$RLB_LIB" "$SOCKOPTS" -m "$1" $2 \
		"$3" "$HPORT" 2>"$T/lib.err"
}

# The helper itself (no library): the values it sets read back, and the
# defaults are what this kernel has.
syn=$(cat /proc/sys/net/ipv4/tcp_syn_retries)
check_eq "helper, no library: own values read back" \
	"$(printf '%s\n' 'connected: user_timeout=30000 sndtimeo=5.000000 rcvtimeo=7.000000 keepalive=1 nonblock=0' \
		'reply: replica=r3' \
		'end: user_timeout=30000 sndtimeo=5.000000 rcvtimeo=7.000000 keepalive=1 nonblock=0' \
		'end-libc: user_timeout=30000 syncnt=4 sndtimeo=5.000000 rcvtimeo=7.000000 keepalive=1 nonblock=0')" \
	"$(base block "$SET_own")"
check_eq "helper, no library: defaults (non-blocking, never peeked)" \
	"$(printf '%s\n' 'reply: replica=r3' \
		"end: user_timeout=0 sndtimeo=0.000000 rcvtimeo=0.000000 keepalive=0 nonblock=1" \
		"end-libc: user_timeout=0 syncnt=$syn sndtimeo=0.000000 rcvtimeo=0.000000 keepalive=0 nonblock=1")" \
	"$(base nopeek "$SET_none")"

# ---------------------------------------------------------------------
# A replica that answers: every mode, every option set.

for mode in block nonblock nopeek; do
	for set in none own zero; do
		eval "opts=\$SET_$set"
		want=$(base "$mode" "$opts")
		check_eq "$mode, options $set: as without the library" \
			"$want" "$(lib "$mode" "$opts" ok.cluster)"
		check_empty "$mode, options $set: nothing on stderr" "$T/lib.err"
	done
done

# ---------------------------------------------------------------------
# After a bounded connect: the silent replica first, the helper walks
# on to 127.0.0.3 with a new socket. Its own SO_SNDTIMEO of 5 s is longer
# than connect_timeout_ms: the library's bound ends the attempt after 1 s
# with ETIMEDOUT. Its own 300 ms is shorter: that one ends it, as without
# the library (EINPROGRESS on a blocking socket, design.md §5.1).

rlbctl reset >/dev/null 2>&1
t0=$(now_ms)
check_eq "walk past the silent replica, blocking, own options: as without the library" \
	"$(base block "$SET_own")" "$(lib block "$SET_own" walk.cluster)"
check_le "walk, own SO_SNDTIMEO 5 s: on after connect_timeout_ms (1 s + slack)" \
	2500 $(($(now_ms) - t0))
check_eq "walk, own SO_SNDTIMEO 5 s: the silent replica timed out (ETIMEDOUT)" \
	"127.0.0.2: Connection timed out" "$(cat "$T/lib.err")"
check_eq "walk, own SO_SNDTIMEO 5 s: counted" "1" \
	"$(replica_errors walk.cluster 127.0.0.2)"

rlbctl reset >/dev/null 2>&1
t0=$(now_ms)
check_eq "walk, own SO_SNDTIMEO 300 ms: as without the library" \
	"$(base block "-s 300")" "$(lib block "-s 300" walk.cluster)"
check_le "walk, own SO_SNDTIMEO 300 ms: on after it (+ slack)" \
	1000 $(($(now_ms) - t0))
check_eq "walk, own SO_SNDTIMEO 300 ms: the program's timeout, as without the library" \
	"127.0.0.2: Operation now in progress" "$(cat "$T/lib.err")"
check_eq "walk, own SO_SNDTIMEO 300 ms: counted" "1" \
	"$(replica_errors walk.cluster 127.0.0.2)"

# ---------------------------------------------------------------------
# connect_failover: the same socket, moved past the silent replica.

if rlbctl -c "$T/fo.conf" check >"$T/check.out" 2>&1; then
	pass "config with connect_failover accepted"
	# (Non-blocking ones take about 3 s each: two cases are enough.)
	for case in block:none block:own nonblock:own nopeek:own; do
		mode=${case%:*}
		set=${case#*:}
		eval "opts=\$SET_$set"
		rlbctl -c "$T/fo.conf" reset >/dev/null 2>&1
		want=$(base "$mode" "$opts")
		got=$(REPLICALB_CONFIG=$T/fo.conf lib "$mode" "$opts" \
			fo.cluster)
		check_eq "failover, $mode, options $set: as without the library" \
			"$want" "$got"
		# nopeek never asks how the connect went: its first write
		# fails and it walks on, as without failover.
		[ "$mode" = nopeek ] ||
			check_empty "failover, $mode, options $set: one connect, no failure seen" \
				"$T/lib.err"
		check_eq "failover, $mode, options $set: silent replica counted" \
			"1" "$(REPLICALB_CONFIG=$T/fo.conf replica_errors fo.cluster 127.0.0.2)"
	done
else
	fail "config with connect_failover accepted" "$(head -3 "$T/check.out")"
fi

finish
