#!/bin/bash
# program_life.sh - a program's normal life is never a replica failure,
# and the bound holds under signals (design.md §5.2-§5.4,
# issue 11): signals during a bounded connect with and without
# SA_RESTART, retried connect()s, a socket made blocking between two
# connects, signal storms at random points; pools connecting in parallel
# to healthy replicas with a slow handshake; connections established and
# reset later; vfork, dup, the program's own options, fd reuse by another
# thread, unreadable addresses; failover for Java's HttpClient and for
# curl fetching several URLs over one answer.
#
# Runs in a private network namespace (unshare -n; root): nftables there
# drops every SYN to the silent replica, and the first SYN of each
# connection to the slow ones, so that they answer after the kernel's 1 s
# retransmission: healthy replicas with a 1 s handshake.
#
#   127.0.0.2  refusing (nothing listens)
#   127.0.0.3  healthy (replica_server http, r3)
#   127.0.0.4, .6, .7  healthy, 1 s handshake (r4, r6, r7)
#   127.0.0.5  silent (every SYN dropped)
#   127.0.0.8  accepts, sends a line, resets the connection 0.5 s later
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
[ "$(id -u)" = 0 ] || skip "not root: unshare -n and nft need root"
if [ -z "${RLB_IN_NETNS:-}" ]; then
	for tool in unshare ip nft; do
		command -v "$tool" >/dev/null ||
			{ echo "FAIL - $tool not installed (scripts/deps.sh)"; exit 1; }
	done
	exec env RLB_IN_NETNS=1 timeout 900 unshare -n bash "$0" "$@"
fi
ip link set lo up
rlb_setup nocanary
CONNLIFE=$top_builddir/tests/helpers/connlife
ROUNDS=${RLB_LIFE_ROUNDS:-200}

PORT=$(free_port)
nft -f - <<EOF || fail "nftables rules"
table inet rlblife {
  set seen { type ipv4_addr . inet_service; timeout 120s; }
  chain input {
    type filter hook input priority 0;
    ip daddr 127.0.0.5 tcp dport $PORT drop
    ip daddr { 127.0.0.4, 127.0.0.6, 127.0.0.7 } tcp dport $PORT tcp flags & (syn|ack) == syn ip saddr . tcp sport @seen accept
    ip daddr { 127.0.0.4, 127.0.0.6, 127.0.0.7 } tcp dport $PORT tcp flags & (syn|ack) == syn add @seen { ip saddr . tcp sport } drop
  }
}
EOF
for r in 3 4 6 7; do
	start_replica "r$r" "127.0.0.$r" "$PORT" http || fail "replica r$r"
done

cat >"$T/reset.py" <<'EOF'
import socket, struct, sys, threading, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
print("ready", flush=True)
def serve(c):
    c.sendall(b"hello\n")
    time.sleep(0.5)
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF
$PY "$T/reset.py" 127.0.0.8 "$PORT" >"$T/reset.out" 2>&1 &
echo $! >"$T/reset.pid"
wait_until 5 grep -q ready "$T/reset.out" || fail "reset server"

write_config <<EOF
use_hedged_requests = false; # the bounded connect, unhedged (design.md §5.3); hedged*.sh test the hedge
load_balancing = "in_order";
distributed_replica_error_half_life = 86400;
distributed_replica_error_cap = 100000;
connect_timeout_ms = 1000;
state_dir = "$T/state";
clusters = (
  { name = "silent.cluster"; port = $PORT;
    replicas = ( "127.0.0.5", "127.0.0.3" ); },
  { name = "storm.cluster"; port = $PORT; connect_timeout_ms = 300;
    distributed_replica_max_ignored_errors = 1000000;
    replicas = ( "127.0.0.5", "127.0.0.3" ); },
  { name = "slow.cluster"; port = $PORT; connect_timeout_ms = 2500;
    replicas = ( "127.0.0.4" ); },
  { name = "pool.cluster"; port = $PORT; connect_timeout_ms = 2500;
    load_balancing = "round_robin";
    replicas = ( "127.0.0.4", "127.0.0.6", "127.0.0.7" ); },
  { name = "fo.cluster"; port = $PORT; connect_failover = true;
    replicas = ( "127.0.0.5", "127.0.0.3" ); },
  { name = "forefuse.cluster"; port = $PORT; connect_failover = true;
    replicas = ( "127.0.0.2", "127.0.0.3" ); },
  { name = "reset.cluster"; port = $PORT; replicas = ( "127.0.0.8" ); },
  { name = "up.cluster"; port = $PORT; replicas = ( "127.0.0.3" ); },
  { name = "refuse.cluster"; port = $PORT; replicas = ( "127.0.0.2" ); }
);
EOF

life() { timeout 60 env LD_PRELOAD="$RLB_LIB" "$CONNLIFE" "$@" 2>>"$T/life.err"; }
plain() { timeout 60 "$CONNLIFE" "$@" 2>>"$T/life.err"; }
# Drop the times: "connected ADDR MS" -> "connected ADDR".
untimed() { sed -E 's/^(connected [0-9.]+|failed) [0-9]+$/\1/'; }
ms_of() { sed -nE 's/^(connected [0-9.]+|failed) ([0-9]+)$/\2/p'; }
slows() { replica_stat "$1" "$2" slowdowns; }
reset_all() { rlbctl reset >/dev/null 2>&1; }
: >"$T/life.err"

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
reset_all
bad=0 slow=0 eintr=0
: >"$T/signals"
export CONNLIFE_SIGNALS=$T/signals
for i in $(seq "$ROUNDS"); do
	period=$((500 + RANDOM % 20000))
	if [ $((i % 2)) = 0 ]; then
		got=$(life -R -S "$period" walk storm.cluster "$PORT")
		want_first="attempt 127.0.0.5 ETIMEDOUT"
	else
		got=$(life -r -S "$period" walk storm.cluster "$PORT")
		want_first="attempt 127.0.0.5 ETIMEDOUT"
	fi
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

# ---------------------------------------------------------------------
# 2. Parallel connects are not slowdowns.

cat >"$T/pool.py" <<'EOF'
import asyncio, socket, sys, threading
host, port, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
N = 6
if how == "asyncio":
    async def one():
        r, w = await asyncio.open_connection(host, port)
        w.write(b"GET / HTTP/1.0\r\n\r\n")
        data = (await r.read()).decode().split()[-1]
        w.close()
        return data
    async def main():
        return await asyncio.gather(*[one() for _ in range(N)])
    got = asyncio.run(main())
else:
    got = []
    def one():
        s = socket.create_connection((host, port))
        s.sendall(b"GET / HTTP/1.0\r\n\r\n")
        got.append(s.makefile().read().split()[-1])
        s.close()
    ts = [threading.Thread(target=one) for _ in range(N)]
    [t.start() for t in ts]
    [t.join() for t in ts]
print(" ".join(sorted(set(got))), len(got))
EOF
for how in asyncio threads; do
	reset_all
	got=$(timeout 30 env LD_PRELOAD="$RLB_LIB" $PY "$T/pool.py" pool.cluster "$PORT" "$how" 2>&1)
	check_eq "$how pool, 6 connects at once over 3 slow replicas: all served" \
		"replica=r4 replica=r6 replica=r7 6" "$got"
	check_eq "... no slowdown and no error against any healthy replica" \
		"0 0 0 / 0 0 0" \
		"$(slows pool.cluster 127.0.0.4) $(slows pool.cluster 127.0.0.6) $(slows pool.cluster 127.0.0.7) / $(cluster_errors pool.cluster)"
done

# Still a slowdown: an attempt given up for another replica that then
# connected (a hedged request), and one dropped before trying the next.
cat >"$T/hedge.py" <<'EOF'
import socket, sys, time
port, how = int(sys.argv[1]), sys.argv[2]
ai = socket.getaddrinfo("silent.cluster", port, socket.AF_INET, socket.SOCK_STREAM)
first, second = ai[0][4], ai[1][4]
s1 = socket.socket()
s1.setblocking(False)
s1.connect_ex(first)
time.sleep(0.2)
if how == "hedge":
    s2 = socket.create_connection(second)
    s1.close()
else:
    s1.close()
    s2 = socket.create_connection(second)
s2.close()
print("ok")
EOF
for how in hedge sequential; do
	reset_all
	timeout 20 env LD_PRELOAD="$RLB_LIB" $PY "$T/hedge.py" "$PORT" "$how" >/dev/null 2>&1
	check_eq "$how: the silent replica given up for the next counts one slowdown" \
		"1 0 0" \
		"$(slows silent.cluster 127.0.0.5) $(errs silent.cluster 127.0.0.5) $(slows silent.cluster 127.0.0.3)"
done

# ---------------------------------------------------------------------
# 3. An established connection reset later counts nothing.

cat >"$T/resetc.py" <<'EOF'
import select, socket, sys, time
host, port, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
addr = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)[0][4]
if how == "block":
    s = socket.create_connection(addr)
else:
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(addr)          # never reads SO_ERROR
    select.select([], [s], [], 5)
    s.setblocking(True)
print(s.recv(100).decode().strip())
time.sleep(1.0)                 # the reset arrives; nobody reads it
r, _, _ = select.select([s], [], [], 0)
print("reset pending", bool(r))
s.close()
EOF
for how in block nonblock; do
	reset_all
	got=$(timeout 20 env LD_PRELOAD="$RLB_LIB" $PY "$T/resetc.py" reset.cluster "$PORT" "$how" 2>&1)
	check_eq "$how: connection established, reset by the server 0.5 s later" \
		"$(printf 'hello\nreset pending True')" "$got"
	check_eq "... counts nothing" "0" "$(errs reset.cluster 127.0.0.8)"
done

# ---------------------------------------------------------------------
# 4. The program's socket stays the program's.

reset_all
got=$(life -w 1500 vfork silent.cluster "$PORT")
check_eq "vfork child closes the pending socket: the parent reads its own TCP_SYNCNT" \
	"$(printf 'connect EINPROGRESS\nsyncnt 4')" "$got"
check_eq "... and the parent's abandoned attempt still counts its timeout" \
	"1" "$(errs silent.cluster 127.0.0.5)"

got=$(life dup silent.cluster "$PORT")
def=$(sed -n 's/.* default //p' <<<"$got")
check_eq "dup, then close of the original: the copy has the program's TCP_SYNCNT" \
	"$(printf 'connect EINPROGRESS\ncopy syncnt %s default %s' "$def" "$def")" "$got"

check_eq "TCP_SYNCNT set by the program while pending: read back, kept" \
	"$(printf 'connect EINPROGRESS\npending syncnt 3\nso_error 0\nafter syncnt 3 raw 3')" \
	"$(life ownsyncnt slow.cluster "$PORT")"

check_eq "SO_SNDTIMEO set by another thread during the connect: kept" \
	"$(plain sndtimeo 127.0.0.4 "$PORT")" "$(life sndtimeo slow.cluster "$PORT")"

reset_all
got=$(life -x "127.0.0.3:$PORT" reuse silent.cluster "$PORT")
check_eq "fd closed and reused by another thread during a bounded connect: untouched" \
	"$(printf 'same number yes\nsndtimeo 7.0\nrequest answered')" \
	"$(grep -v '^connect ' <<<"$got")"

check_eq "unreadable address pointers: EFAULT, as libc" \
	"$(plain efault 127.0.0.3 "$PORT")" "$(life efault up.cluster "$PORT")"
check_eq "... which is EFAULT" "$(printf 'small EFAULT\nunmapped EFAULT')" \
	"$(plain efault 127.0.0.3 "$PORT")"

got=$(life unobserved up.cluster "$PORT")
def=$(sed -n 's/.* default //p' <<<"$got")
check_eq "non-blocking connect never observed: TCP_SYNCNT back after the next resolution" \
	"syncnt $def default $def" "$(tail -n1 <<<"$got")"

# ---------------------------------------------------------------------
# 5. Failover that reaches the programs that need it.

if command -v java >/dev/null; then
	cat >"$T/Get.java" <<'EOF'
import java.net.URI;
import java.net.http.*;
import java.time.Duration;
public class Get {
    public static void main(String[] a) throws Exception {
        HttpClient c = HttpClient.newBuilder()
            .connectTimeout(Duration.ofSeconds(20)).build();
        HttpResponse<String> r = c.send(
            HttpRequest.newBuilder(URI.create(a[0])).build(),
            HttpResponse.BodyHandlers.ofString());
        System.out.println(r.body().trim());
    }
}
EOF
	for cl in forefuse fo; do
		reset_all
		t0=$(now_ms)
		got=$(timeout 60 env LD_PRELOAD="$RLB_LIB" java -Xshare:auto \
			"$T/Get.java" "http://$cl.cluster:$PORT/" 2>&1 | tail -n1)
		ms=$(($(now_ms) - t0))
		check_eq "java HttpClient, $cl.cluster (first replica down), failover: served by the next" \
			"replica=r3" "$got"
		check_eq "... one error for the first replica, none for the next" "1 0" \
			"$(cluster_errors "$cl.cluster")"
		echo "# java $cl: $ms ms including the JVM"
	done
else
	fail "java not installed (scripts/deps.sh: openjdk-17-jdk-headless)"
fi

# curl fetching three URLs over one answer: with failover, the silent
# replica costs one bound, once; later connections skip it.
reset_all
t0=$(now_ms)
got=$(timeout 60 env LD_PRELOAD="$RLB_LIB" curl -s \
	"http://fo.cluster:$PORT/a" "http://fo.cluster:$PORT/b" \
	"http://fo.cluster:$PORT/c" 2>&1 | tr '\n' ' ')
ms=$(($(now_ms) - t0))
check_eq "curl, 3 URLs, silent first, failover: all served by the next replica" \
	"replica=r3 replica=r3 replica=r3 " "$got"
check_le "... one bound in all (ms)" 2500 "$ms"
check_eq "... one error" "1 0" "$(cluster_errors fo.cluster)"

# ECN asked on every SYN (net.ipv4.tcp_ecn = 1, this namespace only): a
# refused socket then reports TCPI_OPT_ECN, which is no evidence of a
# SYN-ACK. A resolution (which sweeps) between a refused non-blocking
# connect and the program's SO_ERROR must leave the attempt to its owner:
# every refusal counted.
if sysctl -q -w net.ipv4.tcp_ecn=1; then
	reset_all
	cat >"$T/ecn.py" <<'EOF'
import select, socket, sys
port, n, seen = int(sys.argv[1]), int(sys.argv[2]), 0
for _ in range(n):
    a = socket.getaddrinfo("refuse.cluster", port, socket.AF_INET,
                           socket.SOCK_STREAM)[0][4]
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex(a)
    select.select([], [s], [], 5)
    socket.getaddrinfo("up.cluster", port, socket.AF_INET, socket.SOCK_STREAM)
    if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 111:
        seen += 1
    s.close()
print(seen)
EOF
	got=$(timeout 60 env LD_PRELOAD="$RLB_LIB" $PY "$T/ecn.py" "$PORT" 50 2>>"$T/life.err")
	check_eq "tcp_ecn=1: the program saw 50 refusals" 50 "$got"
	check_eq "tcp_ecn=1: each counted once, a sweep between connect and SO_ERROR" \
		50 "$(errs refuse.cluster 127.0.0.2)"
	sysctl -q -w net.ipv4.tcp_ecn=2
else
	fail "sysctl net.ipv4.tcp_ecn in the test's namespace"
fi

check_empty "nothing on stderr from the clients" "$T/life.err"
finish
