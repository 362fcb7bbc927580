#!/bin/bash
# program_life.sh - a program's normal life is never a replica failure
# (design.md §5.2-§5.4, issue 11): pools connecting in parallel to
# healthy replicas with a slow handshake; connections established and
# reset later; vfork, dup, the program's own options, fd reuse by another
# thread, unreadable addresses; failover for Java's HttpClient and for
# curl fetching several URLs over one answer. Signals during a bounded
# connect are program_signals.sh's. The lab: tests/integration/lib_life.sh.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/integration/lib_life.sh"

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
