#!/bin/bash
# nonblocking.sh - errors of non-blocking connects (design.md §5): a refusal read
# through getsockopt(SO_ERROR) or a repeated connect() counts once; a
# pending connect closed before connect_timeout_ms (a happy-eyeballs loser)
# does not count; one closed after it counts as a timeout; a blocking
# connect cut short by SO_SNDTIMEO counts as a timeout; the library never
# blocks a non-blocking connect.
#
# A connect that stays pending on loopback: a listener whose accept queue
# is full (listen(0), one connection queued and never accepted) drops
# further SYNs (replica_server.py --mode blackhole).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

PORT=$(free_port)
BPORT=$(free_port)

write_config <<EOF
use_hedged_requests = false; # the bounded connect, unhedged (design.md §5.3); hedged*.sh test the hedge
load_balancing = "in_order";
distributed_replica_error_half_life = 3600;
connect_timeout_ms = 200;
clusters = (
  { name = "nb.cluster";
    port = $PORT;
    replicas = ( "127.0.0.2", "127.0.0.3" ); },
  { name = "hole.cluster";
    replicas = ( "127.0.0.5:$BPORT", "127.0.0.3:$PORT" ); },
  { name = "up.cluster";
    port = $PORT;
    replicas = ( "127.0.0.3" ); }
);
EOF

start_replica up 127.0.0.3 "$PORT" http || fail "start replica 127.0.0.3"
start_replica hole 127.0.0.5 "$BPORT" blackhole || fail "start blackhole"
# 127.0.0.2:$PORT has no listener: connects to it are refused.

reset()
{
	rlbctl reset >/dev/null 2>&1
	check_eq "reset ($1)" "0 0 0 0" \
		"$(errs nb.cluster 127.0.0.2) $(errs hole.cluster 127.0.0.5) $(errs hole.cluster 127.0.0.3) $(errs up.cluster 127.0.0.3)"
}

# ---------------------------------------------------------------------
# asyncio: non-blocking connect, outcome read by getsockopt(SO_ERROR).

cat >"$T/asyncio_get.py" <<'EOF'
import asyncio, sys

async def main(host, port):
    r, w = await asyncio.wait_for(asyncio.open_connection(host, port), 10)
    w.write(b"GET / HTTP/1.0\r\nHost: x\r\n\r\n")
    data = await asyncio.wait_for(r.read(), 10)
    w.close()
    print(data.decode().rsplit("\r\n\r\n", 1)[-1].strip())

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
EOF
reset "asyncio"
out=$(preload $PY "$T/asyncio_get.py" nb.cluster 1 2>"$T/asyncio.err")
check_eq "asyncio: first replica refused, answer from the second" \
	"replica=up" "$out"
check_empty "asyncio: silent" "$T/asyncio.err"
check_eq "asyncio: refusal counted once" "1" "$(errs nb.cluster 127.0.0.2)"
check_eq "asyncio: the replica that answered is not counted" "0" \
	"$(errs nb.cluster 127.0.0.3)"

# ---------------------------------------------------------------------
# curl: non-blocking connects, poll, SO_ERROR.

reset "curl"
out=$(preload curl -q -sS --max-time 10 "http://nb.cluster:1/" 2>"$T/curl.err")
check_eq "curl: answer from the second replica" "replica=up" "$out"
check_empty "curl: silent" "$T/curl.err"
check_eq "curl: refusal counted once" "1" "$(errs nb.cluster 127.0.0.2)"

# ---------------------------------------------------------------------
# Hand-written non-blocking connects, one step at a time. The script
# prints what libc told it, so that a failure shows which step differs.

cat >"$T/nb.py" <<'EOF'
import errno, os, select, socket, sys, time

def first_addr(name):
    return socket.getaddrinfo(name, 1, socket.AF_INET, socket.SOCK_STREAM)[0][4]

def nb_connect(addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    t = time.monotonic()
    rc = s.connect_ex(addr)
    took = time.monotonic() - t
    return s, errno.errorcode.get(rc, str(rc)), took

def soerr(s):
    e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
    return errno.errorcode.get(e, str(e))

mode, name = sys.argv[1], sys.argv[2]
addr = first_addr(name)
print("addr", addr[0])
if mode == "soerror":
    # refusal read with getsockopt(SO_ERROR), twice (second read is 0)
    s, rc, took = nb_connect(addr)
    print("connect", rc)
    select.select([], [s], [], 5)
    print("so_error", soerr(s), soerr(s))
    s.close()
elif mode == "reconnect":
    # refusal read with a second connect()
    s, rc, took = nb_connect(addr)
    print("connect", rc)
    select.select([], [s], [], 5)
    rc2 = s.connect_ex(addr)
    print("reconnect", errno.errorcode.get(rc2, str(rc2)))
    s.close()
elif mode == "repeat":
    # the program's own TCP_SYNCNT, a pending connect asked about again
    # (EALREADY), then read back and closed after the bound: the bound's
    # lowered TCP_SYNCNT is never what the program reads, and the
    # attempt still counts as a timeout
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_SYNCNT, 5)
    s.setblocking(False)
    rc = s.connect_ex(addr)
    rc2 = s.connect_ex(addr)
    print("connect", errno.errorcode.get(rc, str(rc)),
          errno.errorcode.get(rc2, str(rc2)),
          "syncnt", s.getsockopt(socket.IPPROTO_TCP, socket.TCP_SYNCNT))
    time.sleep(0.4)
    s.close()
elif mode in ("quick", "slow"):
    # pending connect to the blackhole, closed before / after the timeout
    s, rc, took = nb_connect(addr)
    print("connect", rc, "fast" if took < 0.1 else "blocked %.3f" % took)
    time.sleep(0.05 if mode == "quick" else 0.6)
    _, w, _ = select.select([], [s], [], 0)
    print("pending", "no" if w else "yes", soerr(s))
    s.close()
elif mode in ("unpolled", "dup2"):
    # unpolled: connect, never look at the outcome, close after 0.5 s;
    # dup2: a pipe replaces the pending socket's fd after 50 ms (which
    # ends the attempt), and that fd is closed 0.5 s later
    s, rc, took = nb_connect(addr)
    print("connect", rc)
    if mode == "dup2":
        time.sleep(0.05)
        r, w = os.pipe()
        os.dup2(r, s.fileno())
        os.close(r)
        os.close(w)
    time.sleep(0.5)
    s.close()
    print("closed")
elif mode == "errno":
    # blocking connect through libc directly: errno is libc's, untouched
    # by the library's bookkeeping (success keeps a preset value)
    import ctypes, struct
    libc = ctypes.CDLL(None, use_errno=True)
    sa = struct.pack("<H", socket.AF_INET) + struct.pack(">H", addr[1]) + \
        socket.inet_aton(addr[0]) + bytes(8)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ctypes.set_errno(4242)
    rc = libc.connect(s.fileno(), sa, len(sa))
    e = ctypes.get_errno()
    ctypes.set_errno(4242)
    rc2 = libc.close(s.detach())
    print("connect", rc, errno.errorcode.get(e, str(e)), "close", rc2,
          ctypes.get_errno())
elif mode in ("sndtimeo", "sndtimeo_short"):
    # blocking connect cut short by SO_SNDTIMEO: the program's own
    # (100 ms, shorter than the bound) gives EINPROGRESS as libc does;
    # a longer one (300 ms) loses to connect_timeout_ms (200): ETIMEDOUT.
    # Either way the program's SO_SNDTIMEO reads back as it set it.
    us = 100000 if mode == "sndtimeo_short" else 300000
    tv = (0).to_bytes(8, "little") + us.to_bytes(8, "little")
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
    t0 = time.monotonic()
    rc = s.connect_ex(addr)
    ms = (time.monotonic() - t0) * 1000
    print("connect", errno.errorcode.get(rc, str(rc)),
          "in-bound" if ms < 200 + 150 else "late %d ms" % ms,
          "sndtimeo", "kept" if s.getsockopt(socket.SOL_SOCKET,
                                             socket.SO_SNDTIMEO, 16) == tv
          else "changed")
    s.close()
EOF

nbpy()
{
	timeout 20 env LD_PRELOAD="$RLB_LIB" $PY "$T/nb.py" "$@" \
		2>>"$T/nb.err"
}
: >"$T/nb.err"

reset "SO_ERROR"
check_eq "SO_ERROR: refusal reported by getsockopt" \
	"$(printf 'addr 127.0.0.2\nconnect EINPROGRESS\nso_error ECONNREFUSED 0')" \
	"$(nbpy soerror nb.cluster)"
check_eq "SO_ERROR: counted exactly once" "1" "$(errs nb.cluster 127.0.0.2)"

reset "repeated connect"
out=$(nbpy reconnect nb.cluster)
check_match "repeated connect: refusal reported by connect()" \
	'^reconnect ECONNREFUSED$' "$out"
check_eq "repeated connect: counted exactly once" "1" \
	"$(errs nb.cluster 127.0.0.2)"

reset "happy eyeballs"
out=$(nbpy quick hole.cluster)
check_eq "quick close: connect to the blackhole pends, library does not block" \
	"$(printf 'addr 127.0.0.5\nconnect EINPROGRESS fast\npending yes 0')" "$out"
check_eq "quick close (50 ms < connect_timeout_ms 200): not counted" "0" \
	"$(errs hole.cluster 127.0.0.5)"

out=$(nbpy slow hole.cluster)
check_eq "slow close: still pending after 600 ms" \
	"$(printf 'addr 127.0.0.5\nconnect EINPROGRESS fast\npending yes 0')" "$out"
check_eq "slow close (600 ms > connect_timeout_ms 200): counted as timeout" \
	"1" "$(errs hole.cluster 127.0.0.5)"
check_eq "slow close: the other replica untouched" "0" \
	"$(errs hole.cluster 127.0.0.3)"
check_eq "after the timeout, the blackholed replica goes last" \
	"127.0.0.3 127.0.0.5" "$(peek hole.cluster)"

reset "repeated connect while pending"
check_eq "repeated connect: EALREADY, the program's TCP_SYNCNT reads back" \
	"$(printf 'addr 127.0.0.5\nconnect EINPROGRESS EALREADY syncnt 5')" \
	"$(nbpy repeat hole.cluster)"
check_eq "repeated connect: closed after the bound, counted as a timeout" \
	"1" "$(errs hole.cluster 127.0.0.5)"

reset "SO_SNDTIMEO"
check_eq "blocking connect with SO_SNDTIMEO 100 ms < bound: EINPROGRESS" \
	"$(printf 'addr 127.0.0.5\nconnect EINPROGRESS in-bound sndtimeo kept')" \
	"$(nbpy sndtimeo_short hole.cluster)"
check_eq "SO_SNDTIMEO cut-short connect counted as timeout" "1" \
	"$(errs hole.cluster 127.0.0.5)"
reset "SO_SNDTIMEO longer than the bound"
check_eq "blocking connect with SO_SNDTIMEO 300 ms > bound 200 ms: ETIMEDOUT" \
	"$(printf 'addr 127.0.0.5\nconnect ETIMEDOUT in-bound sndtimeo kept')" \
	"$(nbpy sndtimeo hole.cluster)"
check_eq "bounded connect counted as timeout" "1" \
	"$(errs hole.cluster 127.0.0.5)"

reset "unpolled"
check_eq "unpolled connect to a live replica, closed after 0.5 s" \
	"$(printf 'addr 127.0.0.3\nconnect EINPROGRESS\nclosed')" \
	"$(nbpy unpolled up.cluster)"
check_eq "it had completed: nothing counted" "0" "$(errs up.cluster 127.0.0.3)"
check_eq "unpolled connect to a refusing replica, closed after 0.5 s" \
	"$(printf 'addr 127.0.0.2\nconnect EINPROGRESS\nclosed')" \
	"$(nbpy unpolled nb.cluster)"
check_eq "it had failed: counted once" "1" "$(errs nb.cluster 127.0.0.2)"

reset "errno"
check_eq "errno: connect to a replica that answers keeps errno, close too" \
	"$(printf 'addr 127.0.0.3\nconnect 0 4242 close 0 4242')" \
	"$(nbpy errno up.cluster)"
check_eq "errno: refused connect to a replica sets ECONNREFUSED" \
	"$(printf 'addr 127.0.0.2\nconnect -1 ECONNREFUSED close 0 4242')" \
	"$(nbpy errno nb.cluster)"
check_eq "errno: that refusal counted" "1" "$(errs nb.cluster 127.0.0.2)"

reset "dup2"
check_eq "pending socket replaced by dup2 after 50 ms, closed 0.5 s later" \
	"$(printf 'addr 127.0.0.5\nconnect EINPROGRESS\nclosed')" \
	"$(nbpy dup2 hole.cluster)"
check_eq "the attempt ended at 50 ms: not counted as a timeout" "0" \
	"$(errs hole.cluster 127.0.0.5)"

check_empty "all of the above: silent" "$T/nb.err"

# The same with debug logging: what the program sees (errno included) is
# unchanged, and the log has one selection and one counted error.
reset "debug"
: >"$T/nb.err"
check_eq "debug: SO_ERROR refusal, program output unchanged" \
	"$(printf 'addr 127.0.0.2\nconnect EINPROGRESS\nso_error ECONNREFUSED 0')" \
	"$(REPLICALB_LOG_LEVEL=debug nbpy soerror nb.cluster)"
check_eq "debug: two lines (selection, counted error)" "2" \
	"$(grep -c '^replicalb\[[0-9]*\]: ' "$T/nb.err")"
check_eq "debug: nothing but prefixed lines" "$(grep -c . "$T/nb.err")" \
	"$(grep -c '^replicalb\[[0-9]*\]: ' "$T/nb.err")"
reset "debug, repeated connect"
out=$(REPLICALB_LOG_LEVEL=debug nbpy reconnect nb.cluster)
check_match "debug: repeated connect still reports ECONNREFUSED" \
	'^reconnect ECONNREFUSED$' "$out"
check_eq "debug: counted once" "1" "$(errs nb.cluster 127.0.0.2)"

finish
