#!/bin/bash
# established.sh - an established connection behaves exactly as without
# the library (design.md §5.3, issue 7): nothing the library set to bound the
# connect (a short TCP_USER_TIMEOUT, SO_RCVTIMEO, O_NONBLOCK, keepalive)
# is left to cut it when the network drops every packet for 3 s.
#
# In a private network namespace (unshare -n; root only), an echo server
# on 127.0.0.3 and three clients: one without the library, one blocking
# and one non-blocking connect through it. Each exchanges a line, then
# sends a second one while an nftables rule drops every packet arriving on
# lo (100% loss, as netem would; this kernel may have no netem), for 3 s.
# TCP retransmits; after the loss each client gets its reply on the same
# connection. A TCP_USER_TIMEOUT of 1000 ms left on the socket would have
# aborted it (ETIMEDOUT), a leftover SO_RCVTIMEO or O_NONBLOCK would have
# failed the read.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
[ "$(id -u)" = 0 ] || skip "not root: unshare -n and nft need root"
rlb_setup

for tool in unshare ip nft; do
	command -v "$tool" >/dev/null ||
		fail "$tool not installed (scripts/deps.sh)"
done

PORT=$(free_port)
write_config <<EOF
load_balancing = "in_order";
distributed_replica_error_half_life = 600;
connect_timeout_ms = 1000;
state_dir = "$T/state";
clusters = (
  { name = "loss.cluster"; port = $PORT; replicas = ( "127.0.0.3" ); }
);
EOF

cat >"$T/echo.py" <<'EOF'
import socket, sys, threading

def serve(c):
    with c:
        f = c.makefile("rb")
        for line in f:
            c.sendall(line)

s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], int(sys.argv[2])))
s.listen(16)
print("ready", flush=True)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
EOF

cat >"$T/client.py" <<'EOF'
import errno, os, select, socket, sys, time

mode, host, port, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]

def line(s):
    data = b""
    while not data.endswith(b"\n"):
        chunk = s.recv(100)
        if not chunk:
            raise OSError(0, "EOF")
        data += chunk
    return data.decode().strip()

try:
    if mode == "block":
        s = socket.create_connection((host, port))
    else:
        addr = socket.getaddrinfo(host, port, socket.AF_INET,
                                  socket.SOCK_STREAM)[0][4]
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.connect_ex(addr)
        select.select([], [s], [], 10)
        e = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if e:
            raise OSError(e, os.strerror(e))
        s.setblocking(True)
    s.sendall(b"one\n")
    print("got", line(s), flush=True)
    for _ in range(500):
        if os.path.exists(go):
            break
        time.sleep(0.02)
    t0 = time.monotonic()
    s.sendall(b"two\n")
    got = line(s)
    print("got", got, flush=True)
    print("ms", int((time.monotonic() - t0) * 1000), flush=True)
except OSError as e:
    print("error", errno.errorcode.get(e.errno, e.errno), e.strerror,
          flush=True)
EOF

# Runs inside the namespace. Prints nothing itself; the clients write
# $T/ns-NAME.out, the steps $T/ns.log.
cat >"$T/ns.sh" <<EOF
exec >"$T/ns.log" 2>&1
set -x
ip link set lo up
$PY "$T/echo.py" 127.0.0.3 $PORT >"$T/ns-echo.out" 2>&1 &
echo_pid=\$!
for i in \$(seq 100); do
	grep -q ready "$T/ns-echo.out" && break
	sleep 0.05
done
timeout 20 $PY "$T/client.py" block 127.0.0.3 $PORT "$T/go" \
	>"$T/ns-base.out" 2>&1 &
c1=\$!
timeout 20 env LD_PRELOAD="$RLB_LIB" $PY "$T/client.py" block \
	loss.cluster $PORT "$T/go" >"$T/ns-lib-block.out" 2>&1 &
c2=\$!
timeout 20 env LD_PRELOAD="$RLB_LIB" $PY "$T/client.py" nonblock \
	loss.cluster $PORT "$T/go" >"$T/ns-lib-nonblock.out" 2>&1 &
c3=\$!
for i in \$(seq 100); do
	[ \$(cat "$T"/ns-base.out "$T"/ns-lib-*.out | grep -c '^got one\$') -eq 3 ] &&
		break
	sleep 0.05
done
nft add table inet rlbloss
nft add chain inet rlbloss input '{ type filter hook input priority 0; policy accept; }'
nft add rule inet rlbloss input drop
touch "$T/go"
sleep 3
nft delete table inet rlbloss
wait \$c1 \$c2 \$c3
kill \$echo_pid
EOF

timeout 40 unshare -n bash "$T/ns.sh"
check_eq "namespace script ran" "0" "$?"

for c in base lib-block lib-nonblock; do
	out=$(cat "$T/ns-$c.out" 2>/dev/null)
	check_eq "$c: both lines echoed on the one connection" \
		"$(printf 'got one\ngot two')" "$(printf '%s\n' "$out" | grep '^got\|^error')"
	# The reply came only after the loss ended: the loss was real.
	check_ge "$c: the second reply waited out the 3 s loss (ms)" 2500 \
		"$(printf '%s\n' "$out" | sed -n 's/^ms //p')"
done
check_eq "nothing counted against the replica" "0" \
	"$(replica_errors loss.cluster 127.0.0.3)"
[ "$RLB_FAIL" -eq 0 ] || sed 's/^/    | /' "$T/ns.log" | tail -30

finish
