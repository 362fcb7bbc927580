# lib_life.sh - the lab of program_life.sh and program_signals.sh
# (sourced after tests/lib.sh): a private network namespace (unshare -n;
# root) where nftables drops every SYN to the silent replica, and the
# first SYN of each connection to the slow ones, so that they answer
# after the kernel's 1 s retransmission: healthy replicas with a 1 s
# handshake. One config of clusters over them, and connlife's helpers.
#
#   127.0.0.2  refusing (nothing listens)
#   127.0.0.3  healthy (replica_server http, r3)
#   127.0.0.4, .6, .7  healthy, 1 s handshake (r4, r6, r7)
#   127.0.0.5  silent (every SYN dropped)
#   127.0.0.8  accepts, sends a line, resets the connection 0.5 s later
#
# Each test that sources it runs in a namespace of its own, so make -j2
# check runs them side by side.
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
