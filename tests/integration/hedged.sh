#!/bin/bash
# hedged.sh - hedged connects (design.md §5.10, issue 22). The first
# replica is silent (a listener with a full accept queue: the kernel drops
# the SYNs). With the defaults (use_hedged_requests, 50 ms), a connect to
# it races the next replica after 50 ms, and the program gets that one's
# connection, on its own descriptor, with its options: a blocking python
# client, a non-blocking asyncio client and curl each get an answer in
# well under the connect bound (1 s) where without hedging they wait for
# it (1 s blocking, about 3 s non-blocking); getpeername names the
# replica reached; the silent replica counts one slowdown and no error;
# -d logs the hedge; an event loop stalls about the hedge time. A socket
# shared with another descriptor, in an epoll set or with an option a
# hedge cannot copy is never hedged, nor is one with use_hedged_requests
# = false; with no other replica, a non-blocking connect is given back
# after the hedge time.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

HPORT=$(free_port)
write_config <<EOF
load_balancing = "in_order";
distributed_replica_error_half_life = 600;
connect_timeout_ms = 1000;
state_dir = "$T/state";
clusters = (
  { name = "hedge.cluster"; port = $HPORT;
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); },
  { name = "hedge2.cluster"; port = $HPORT;
    replicas = ( "127.0.0.2", "127.0.0.3" ); },
  { name = "shared.cluster"; port = $HPORT;
    replicas = ( "127.0.0.2", "127.0.0.3" ); },
  { name = "off.cluster"; port = $HPORT; use_hedged_requests = false;
    replicas = ( "127.0.0.2", "127.0.0.3" ); },
  { name = "alone.cluster"; port = $HPORT; replicas = ( "127.0.0.2" ); }
);
EOF

start_replica silent 127.0.0.2 "$HPORT" blackhole || fail "start silent replica"
start_replica r3 127.0.0.3 "$HPORT" http || fail "start r3"
start_replica r4 127.0.0.4 "$HPORT" http || fail "start r4"

# 1. Blocking python, the options it set read back after the swap.
cat > "$T/block.py" <<'EOF'
import socket, sys, time
host, port = sys.argv[1], int(sys.argv[2])
ai = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)[0]
s = socket.socket(ai[0], ai[1], ai[2])
import os, struct
tv = struct.pack("ll", 7, 250000)
opts = [(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
        (socket.IPPROTO_TCP, socket.TCP_NODELAY, 1),
        (socket.SOL_SOCKET, socket.SO_RCVBUF, 65536),
        (socket.SOL_SOCKET, socket.SO_SNDBUF, 32768),
        (socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, 77),
        (socket.IPPROTO_TCP, socket.TCP_KEEPINTVL, 9),
        (socket.IPPROTO_TCP, socket.TCP_KEEPCNT, 4),
        (socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, 4321),
        (socket.IPPROTO_IP, socket.IP_TOS, 0x10),
        (socket.IPPROTO_IP, socket.IP_TTL, 33),
        (socket.SOL_SOCKET, socket.SO_PRIORITY, 3),
        (socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv),
        (socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 3))]
for lvl, name, v in opts:
    s.setsockopt(lvl, name, v)
def read(l, n, v):
    return s.getsockopt(l, n, 16) if isinstance(v, bytes) else s.getsockopt(l, n)
# Inheritable: no FD_CLOEXEC, which the swap must keep.
s.set_inheritable(True)
before = [read(*o) for o in opts] + [s.get_inheritable()]
fd = s.fileno()
t0 = time.monotonic()
s.connect(ai[4])
ms = (time.monotonic() - t0) * 1000
after = [read(*o) for o in opts] + [s.get_inheritable()]
# A connection with the same options made directly to the replica
# reached reads the same.
r = socket.socket(ai[0], ai[1], ai[2])
for lvl, name, v in opts:
    r.setsockopt(lvl, name, v)
r.set_inheritable(True)
r.connect(s.getpeername())
ref = [r.getsockopt(l, n, 16) if isinstance(v, bytes) else r.getsockopt(l, n)
       for l, n, v in opts] + [r.get_inheritable()]
r.close()
s.sendall(b"GET / HTTP/1.0\r\n\r\n")
data = b""
while True:  # HTTP/1.0: the answer ends with the connection
    chunk = s.recv(4096)
    if not chunk:
        break
    data += chunk
body = data.decode(errors="replace")
print("ms=%d" % ms)
print("peer=%s" % s.getpeername()[0])
print("samefd=%s" % (s.fileno() == fd))
print("options=%s" % ("same" if after == ref else "%s != %s" % (after, ref)))
print("unconnected=%s" % ("same" if before == after else "differ"))
print("blocking=%s" % s.getblocking())
print("body=%s" % body.split("\r\n\r\n", 1)[-1].strip())
EOF
out=$(REPLICALB_LOG_LEVEL=debug preload timeout 10 "$PY" "$T/block.py" hedge.cluster "$HPORT" 2>"$T/block.err")
ms=$(sed -n 's/^ms=//p' <<<"$out")
check_le "blocking python: connected within the hedge, not the bound (ms)" 400 "${ms:-9999}"
check_eq "blocking python: getpeername names the replica reached" "peer=127.0.0.3" "$(grep '^peer=' <<<"$out")"
check_eq "blocking python: the same descriptor" "samefd=True" "$(grep '^samefd=' <<<"$out")"
check_eq "blocking python: every option reads as on a connection made without a hedge" "options=same" "$(grep '^options=' <<<"$out")"
check_eq "blocking python: ... and as set" "unconnected=same" "$(grep '^unconnected=' <<<"$out")"
check_eq "blocking python: still a blocking socket" "blocking=True" "$(grep '^blocking=' <<<"$out")"
check_eq "blocking python: served by the hedge's replica" "body=replica=r3" "$(grep '^body=' <<<"$out")"
check_match "-d logs the hedge" "connect to 127.0.0.2:$HPORT: no answer in 50 ms: hedging to 127.0.0.3:$HPORT" "$(cat "$T/block.err")"
check_match "-d logs the winner" "hedged connect: 127.0.0.3:$HPORT won" "$(cat "$T/block.err")"
check_eq "the silent replica: one slowdown" 1 "$(replica_stat hedge.cluster 127.0.0.2 slowdowns)"
check_eq "the silent replica: no error" 0 "$(replica_stat hedge.cluster 127.0.0.2 errors)"
check_eq "the replica reached: two connects (the hedge's, the reference's)" 2 "$(replica_stat hedge.cluster 127.0.0.3 connects)"
check_eq "nothing left in flight" 0 "$(replica_stat hedge.cluster 127.0.0.2 in_flight)"

# 2. asyncio (non-blocking) and curl, on a cluster not seen yet.
cat > "$T/aio.py" <<'EOF'
import asyncio, sys, time
async def main():
    t0 = time.monotonic()
    r, w = await asyncio.open_connection(sys.argv[1], int(sys.argv[2]))
    ms = (time.monotonic() - t0) * 1000
    w.write(b"GET / HTTP/1.0\r\n\r\n")
    body = (await r.read()).decode(errors="replace")
    print("ms=%d peer=%s %s" % (ms, w.get_extra_info("peername")[0],
                                body.split("\r\n\r\n", 1)[-1].strip()))
asyncio.run(main())
EOF
out=$(preload timeout 10 "$PY" "$T/aio.py" hedge2.cluster "$HPORT")
ms=$(sed -n 's/^ms=\([0-9]*\).*/\1/p' <<<"$out")
check_le "asyncio: connected within the hedge (ms)" 500 "${ms:-9999}"
check_match "asyncio: the hedge's replica" "peer=127.0.0.3 replica=r3" "$out"
rlbctl reset hedge2.cluster >/dev/null
t=$(preload timeout 10 curl -sS -o /dev/null -w '%{time_connect}' "http://hedge2.cluster:$HPORT/")
check_le "curl: connected within the hedge (ms)" 500 "$(awk -v t="${t:-9}" 'BEGIN { printf "%d", t * 1000 }')"
check_eq "curl: the silent replica has a slowdown, no error" "1 0" \
	"$(replica_stat hedge2.cluster 127.0.0.2 slowdowns) $(replica_stat hedge2.cluster 127.0.0.2 errors)"

# 2b. The stall an event loop sees: a 5 ms timer's worst lateness while
# asyncio connects to a cluster whose first replica is silent (hedged
# inside connect(): about the hedge time, design.md §5.10).
cat > "$T/stall.py" <<'EOF'
import asyncio, sys, time
async def main():
    late = 0.0
    done = False
    async def tick():
        nonlocal late
        while not done:
            t = time.monotonic()
            await asyncio.sleep(0.005)
            late = max(late, time.monotonic() - t - 0.005)
    ticker = asyncio.ensure_future(tick())
    await asyncio.sleep(0.05)
    r, w = await asyncio.open_connection(sys.argv[1], int(sys.argv[2]))
    w.close()
    done = True
    await ticker
    print("late=%d" % (late * 1000))
asyncio.run(main())
EOF
rlbctl reset hedge2.cluster >/dev/null
late=$(preload timeout 10 "$PY" "$T/stall.py" hedge2.cluster "$HPORT" | sed -n 's/^late=//p')
echo "# asyncio timer lateness while one connect is hedged: ${late:-?} ms"
check_ge "event loop stall: the connect waited inside connect() (ms)" 40 "${late:-0}"
check_le "event loop stall: at most about a hedge time (ms)" 150 "${late:-9999}"

# 3. Never hedged: a socket with another descriptor, hedging off. Both
# wait for the bound (about 1 s) and count an error.
cat > "$T/shared.py" <<'EOF'
import os, socket, sys, time
host, port, how = sys.argv[1], int(sys.argv[2]), sys.argv[3]
ai = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)[0]
if how == "sent":
    a, b = socket.socketpair()
    if os.fork() == 0:
        a.close()
        got = socket.recv_fds(b, 1, 1)
        time.sleep(3)
        os._exit(0)
    b.close()
elif how == "after":  # made after a fork, never shared: hedged
    if os.fork() == 0:
        os._exit(0)
    os.wait()
s = socket.socket(ai[0], ai[1], ai[2])
if how == "sent":
    socket.send_fds(a, [b"x"], [s.fileno()])
if how == "fork" and os.fork() == 0:
    time.sleep(3)
    os._exit(0)
if how == "dup":
    other = os.dup(s.fileno())
if how == "odd":  # options the hedge does not copy
    s.setsockopt(socket.IPPROTO_IP, 11, 1)  # IP_RECVERR
if how == "mss":
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1200)
if how == "bound":  # a local port of its own
    s.bind(("0.0.0.0", 0))
if how == "bpf":  # a classic BPF filter: one instruction, accept all
    import ctypes, struct
    insn = ctypes.create_string_buffer(struct.pack("HBBI", 0x06, 0, 0, 0xffffffff))
    prog = struct.pack("HL", 1, ctypes.addressof(insn))
    s.setsockopt(socket.SOL_SOCKET, 26, prog)  # SO_ATTACH_FILTER
t0 = time.monotonic()
try:
    s.connect(ai[4])
    r = "connected"
except OSError as e:
    r = e.__class__.__name__
print("%s ms=%d" % (r, (time.monotonic() - t0) * 1000))
EOF
out=$(preload timeout 10 "$PY" "$T/shared.py" shared.cluster "$HPORT" dup)
ms=$(sed -n 's/.*ms=//p' <<<"$out")
check_match "a socket with another descriptor is not hedged" "^TimeoutError" "$out"
check_ge "it waits for the bound (ms)" 900 "${ms:-0}"
check_eq "its replica counts an error, no slowdown" "1 0" \
	"$(replica_stat shared.cluster 127.0.0.2 errors) $(replica_stat shared.cluster 127.0.0.2 slowdowns)"
# A socket a fork() child holds too, or one sent to another process
# (SCM_RIGHTS) before its connect: the other process would keep the old
# socket. Both wait for the bound.
for how in fork sent; do
	rlbctl reset shared.cluster >/dev/null
	out=$(preload timeout 10 "$PY" "$T/shared.py" shared.cluster "$HPORT" $how)
	check_match "a socket $how to another process before its connect is not hedged" "^TimeoutError" "$out"
done
rlbctl reset shared.cluster >/dev/null
out=$(preload timeout 10 "$PY" "$T/shared.py" shared.cluster "$HPORT" after)
check_match "a socket made after a fork, not shared, is hedged" "^connected ms=" "$out"
check_le "... within the hedge (ms)" 400 "$(sed -n 's/.*ms=//p' <<<"$out")"

rlbctl reset shared.cluster >/dev/null
out=$(preload timeout 10 "$PY" "$T/shared.py" shared.cluster "$HPORT" odd)
check_match "a socket with an option a hedge cannot copy is not hedged" "^TimeoutError" "$out"
rlbctl reset shared.cluster >/dev/null
out=$(preload timeout 10 "$PY" "$T/shared.py" shared.cluster "$HPORT" mss)
check_match "nor one with TCP_MAXSEG set" "^TimeoutError" "$out"
for how in bound bpf; do
	rlbctl reset shared.cluster >/dev/null
	out=$(preload timeout 10 "$PY" "$T/shared.py" shared.cluster "$HPORT" $how)
	check_match "nor one $how (a port / a BPF filter)" "^TimeoutError" "$out"
done
out=$(preload timeout 10 "$PY" "$T/shared.py" off.cluster "$HPORT" no)
ms=$(sed -n 's/.*ms=//p' <<<"$out")
check_match "use_hedged_requests = false: not hedged" "^TimeoutError" "$out"
check_ge "use_hedged_requests = false: the bound (ms)" 900 "${ms:-0}"

# 3b. Nor one in an epoll set: given back after the hedge time, unhedged.
cat > "$T/epoll.py" <<'EOF'
import errno, select, socket, sys, time
ai = socket.getaddrinfo(sys.argv[1], int(sys.argv[2]), socket.AF_INET,
                        socket.SOCK_STREAM)[0]
s = socket.socket(ai[0], ai[1], ai[2])
s.setblocking(False)
ep = select.epoll()
ep.register(s.fileno(), select.EPOLLOUT)
t0 = time.monotonic()
rc = s.connect_ex(ai[4])
print("%s %s" % (errno.errorcode.get(rc, rc), s.getpeername()[0] if rc == 0 else "-"))
EOF
rlbctl reset hedge2.cluster >/dev/null
out=$(preload timeout 10 "$PY" "$T/epoll.py" hedge2.cluster "$HPORT")
check_eq "a socket in an epoll set is not hedged" "EINPROGRESS -" "$out"

# 4. Nothing to hedge to (one replica): a non-blocking connect is given
# back after the hedge time, still under way, and bounded by the kernel.
cat > "$T/alone.py" <<'EOF'
import errno, select, socket, sys, time
ai = socket.getaddrinfo(sys.argv[1], int(sys.argv[2]), socket.AF_INET,
                        socket.SOCK_STREAM)[0]
s = socket.socket(ai[0], ai[1], ai[2])
s.setblocking(False)
t0 = time.monotonic()
rc = s.connect_ex(ai[4])
ms = (time.monotonic() - t0) * 1000
select.select([], [s], [], 10)
err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
print("%s %d %s %d" % (errno.errorcode.get(rc, rc), ms, errno.errorcode.get(err, err),
                       (time.monotonic() - t0) * 1000))
EOF
out=$(preload timeout 20 "$PY" "$T/alone.py" alone.cluster "$HPORT")
read -r rc ms err total <<<"$out"
check_eq "alone: connect() gives EINPROGRESS" EINPROGRESS "$rc"
check_ge "alone: ... after the hedge time (ms)" 45 "${ms:-0}"
check_le "alone: ... not later (ms)" 400 "${ms:-9999}"
check_eq "alone: the attempt times out" ETIMEDOUT "$err"
check_le "alone: bounded by the kernel (ms)" 6000 "${total:-99999}"
check_eq "alone: one error" 1 "$(replica_stat alone.cluster 127.0.0.2 errors)"

finish
