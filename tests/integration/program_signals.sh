#!/bin/bash
# program_signals.sh - the bound holds under signals, and a signal is
# never a replica failure (design.md §5.3, issue 11): signals during a
# bounded connect with and without SA_RESTART, retried connect()s, a
# socket made blocking between two connects, Python's PEP 475 wait, a
# failover under a storm, and signal storms at random points over many
# rounds. The lab: tests/integration/lib_life.sh.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/integration/lib_life.sh"

# ---------------------------------------------------------------------
# 1. Signals during a bounded blocking connect.

# A healthy replica whose handshake takes 1 s, a SIGALRM at 0.2 s with an
# SA_RESTART handler: libc restarts the connect, which succeeds at 1 s.
reset_all
want=$(plain -R -a 200 walk 127.0.0.4 "$PORT" | untimed)
got=$(life -R -a 200 walk slow.cluster "$PORT")
check_eq "SA_RESTART signal at 0.2 s, 1 s handshake: connected, as without the library" \
	"$want" "$(untimed <<<"$got")"
check_ge "... after the handshake (ms)" 900 "$(ms_of <<<"$got")"
check_eq "... nothing counted" "0 0" \
	"$(errs slow.cluster 127.0.0.4) $(slows slow.cluster 127.0.0.4)"

# Without SA_RESTART, libc gives EINTR at 0.2 s; so must we.
want=$(plain -a 200 walk 127.0.0.4 "$PORT" | untimed)
got=$(life -a 200 walk slow.cluster "$PORT")
check_eq "signal without SA_RESTART: EINTR, as without the library" \
	"$want" "$(untimed <<<"$got")"
check_le "... at the signal (ms)" 700 "$(ms_of <<<"$got")"

# A program that retries connect() after EINTR: the bound holds across
# the retry, the silent replica times out and counts once, the walk goes on.
reset_all
got=$(life -r -a 200 walk silent.cluster "$PORT")
check_eq "connect() retried after EINTR: ETIMEDOUT at the bound, next replica" \
	"$(printf 'attempt 127.0.0.5 ETIMEDOUT EINTR*1\nattempt 127.0.0.3 0\nconnected 127.0.0.3')" \
	"$(untimed <<<"$got")"
check_le "... within the bound (ms)" 1600 "$(ms_of <<<"$got")"
check_eq "... one error, for the silent replica" "1 0" \
	"$(errs silent.cluster 127.0.0.5) $(errs silent.cluster 127.0.0.3)"

# A non-blocking socket made blocking between two connect()s.
reset_all
got=$(life -b walk silent.cluster "$PORT")
check_eq "non-blocking, then blocking and connect() again: ETIMEDOUT at the bound" \
	"$(printf 'attempt 127.0.0.5 ETIMEDOUT\nattempt 127.0.0.3 0\nconnected 127.0.0.3')" \
	"$(untimed <<<"$got")"
check_le "... within the bound (ms)" 1600 "$(ms_of <<<"$got")"
check_eq "... one error" "1" "$(errs silent.cluster 127.0.0.5)"

# Python: one SIGALRM at 0.2 s (a handler without SA_RESTART; Python
# waits for the connect itself after EINTR, PEP 475). The attempt is then
# bounded as a non-blocking one, by the kernel (about 3 s), never 127 s.
write_elapsed_py
cat >"$T/alarm.py" <<'EOF'
import signal, socket, sys
sys.path.insert(0, sys.argv[3])
import elapsed
signal.signal(signal.SIGALRM, lambda *a: None)
if len(sys.argv) > 4:
    signal.setitimer(signal.ITIMER_REAL, 0.2, 0.05)
else:
    signal.setitimer(signal.ITIMER_REAL, 0.2)
try:
    s = socket.create_connection((sys.argv[1], int(sys.argv[2])))
    signal.setitimer(signal.ITIMER_REAL, 0)
    s.sendall(b"GET / HTTP/1.0\r\n\r\n")
    print(s.makefile().read().strip().splitlines()[-1])
except OSError as e:
    print("error", e)
EOF
reset_all
ELAPSED_MS_FILE=$T/alarm.ms timeout 30 env LD_PRELOAD="$RLB_LIB" \
	$PY "$T/alarm.py" silent.cluster "$PORT" "$T" >"$T/alarm.out" 2>&1
check_eq "python, SIGALRM at 0.2 s, silent first: served by the next replica" \
	"replica=r3" "$(cat "$T/alarm.out")"
check_le "... within the kernel's bound (ms)" 4500 "$(cat "$T/alarm.ms" 2>/dev/null || echo 99999)"
check_eq "... one error, for the silent replica" "1 0" \
	"$(errs silent.cluster 127.0.0.5) $(errs silent.cluster 127.0.0.3)"

# The same with connect_failover and a SIGALRM every 50 ms: the failover
# inside getsockopt(SO_ERROR) is ended by none of them and charges no
# healthy replica.
reset_all
ELAPSED_MS_FILE=$T/alarm.ms timeout 30 env LD_PRELOAD="$RLB_LIB" \
	$PY "$T/alarm.py" fo.cluster "$PORT" "$T" storm >"$T/alarm.out" 2>&1
check_eq "python, failover, a signal every 50 ms: served by the next replica" \
	"replica=r3" "$(cat "$T/alarm.out")"
check_eq "... one error, for the silent replica only" "1 0" \
	"$(errs fo.cluster 127.0.0.5) $(errs fo.cluster 127.0.0.3)"

# Non-blocking with connect_failover under a storm: the wait inside
# connect() survives every signal and gives a connected socket.
reset_all
got=$(life -n -S 3000 walk fo.cluster "$PORT")
check_eq "non-blocking failover under a signal storm: connected to the next replica" \
	"$(printf 'attempt 127.0.0.5 0\nconnected 127.0.0.5')" "$(untimed <<<"$got")"
check_le "... within one bound (ms)" 1600 "$(ms_of <<<"$got")"
check_eq "... one error, for the silent replica only" "1 0" \
	"$(errs fo.cluster 127.0.0.5) $(errs fo.cluster 127.0.0.3)"

# Storms at random points, many rounds: every round against the silent
# first replica (bound 300 ms) ends ETIMEDOUT within the bound and counts
# exactly one error; with SA_RESTART the program sees no EINTR at all.
# Two rounds run at a time, two programs storming at once (each round
# waits out its bound: the pair halves the test's time); the counts are
# the host's, so each round's error adds up all the same.
reset_all
bad=0 slow=0 eintr=0
: >"$T/signals"
export CONNLIFE_SIGNALS=$T/signals
pair=()
# storm_round I : round I, even ones with SA_RESTART; its period (us) and
# its output in $T/storm.I.
storm_round()
{
	local i=$1 period=$((500 + RANDOM % 20000)) flags=-r
	[ $((i % 2)) = 0 ] && flags=-R
	{
		echo "$period"
		life $flags -S "$period" walk storm.cluster "$PORT"
	} >"$T/storm.$i"
}
for i in $(seq "$ROUNDS"); do
	storm_round "$i" &
	pair+=($!)
	if [ $((i % 2)) = 0 ] || [ "$i" = "$ROUNDS" ]; then
		wait "${pair[@]}"
		pair=()
	fi
done
want_first="attempt 127.0.0.5 ETIMEDOUT"
for i in $(seq "$ROUNDS"); do
	period=$(head -n1 "$T/storm.$i")
	got=$(tail -n +2 "$T/storm.$i")
	first=$(head -n1 <<<"$got" | sed 's/ EINTR\*.*//')
	n=$(head -n1 <<<"$got" | sed -n 's/.* EINTR\*\([0-9]*\)$/\1/p')
	eintr=$((eintr + ${n:-0}))
	if [ "$first" != "$want_first" ] ||
		! grep -q '^connected 127.0.0.3 ' <<<"$got"; then
		bad=$((bad + 1))
		echo "round $i (period $period us): $got"
	elif [ $((i % 2)) = 0 ] && grep -q EINTR <<<"$got"; then
		bad=$((bad + 1))
		echo "round $i: EINTR seen under SA_RESTART: $got"
	fi
	ms=$(ms_of <<<"$got")
	[ "${ms:-9999}" -le 1200 ] || slow=$((slow + 1))
done
unset CONNLIFE_SIGNALS
echo "# storm: $ROUNDS rounds, $(awk '{ n += $1 } END { print n + 0 }' "$T/signals") signals delivered, $eintr EINTRs retried by the program"
check_eq "signal storms, $ROUNDS rounds: every round timed out and moved on" "0" "$bad"
check_le "... rounds past the bound (+0.9 s)" 2 "$slow"
check_eq "... errors counted == rounds, none for the healthy replica" \
	"$ROUNDS 0" "$(errs storm.cluster 127.0.0.5) $(errs storm.cluster 127.0.0.3)"

# Storms against a healthy replica with a 1 s handshake: connected every
# time, nothing counted.
reset_all
bad=0
for i in 1 2 3 4; do
	if [ $((i % 2)) = 0 ]; then flags=-R; else flags=-r; fi
	got=$(life $flags -S $((1000 + RANDOM % 5000)) walk slow.cluster "$PORT")
	grep -q '^connected 127.0.0.4 ' <<<"$got" || {
		bad=$((bad + 1))
		echo "slow round $i: $got"
	}
done
check_eq "signal storms, 1 s handshake: connected every time" "0" "$bad"
check_eq "... nothing counted" "0 0" \
	"$(errs slow.cluster 127.0.0.4) $(slows slow.cluster 127.0.0.4)"

check_empty "nothing on stderr from the clients" "$T/life.err"
finish
