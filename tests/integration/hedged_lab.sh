#!/bin/bash
# hedged_lab.sh - hedged connects on the wire (design.md §5.10, issue 22),
# in the latency lab (lib_latency.sh: a TUN link into a second namespace,
# nft counters), with the defaults (use_hedged_requests, 50 ms):
# - healthy replicas: exactly no extra SYN;
# - a silent first replica: exactly one extra SYN (the hedge's), answered
#   in about the hedge time, and the silent loser sends nothing more;
# - a replica that answers SYNs after 200 ms: the first connection in
#   about the hedge time (<= 60 ms is the goal; 120 ms is asserted, for a
#   loaded machine), then, its slowdown having demoted it, the next
#   process goes straight to another replica (no SYN to it, <= 10 ms
#   goal); the slow loser costs at most one RST, no accept at its server,
#   no TIME_WAIT;
# - a non-blocking client (asyncio) likewise.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/integration/lib_latency.sh"
lat_enter_ns "$@"
lat_setup

A=10.77.0.2 B=10.77.0.3 C=10.77.0.4
PORT=$(free_port)
write_config <<EOF
load_balancing = "in_order";
distributed_replica_error_half_life = 600;
connect_timeout_ms = 1000;
state_dir = "$T/state";
clusters = (
  { name = "lab.cluster"; port = $PORT; replicas = ( "$A", "$B", "$C" ); }
);
EOF
lat_replica ra "$A" "$PORT" normal || fail "start ra"
lat_replica rb "$B" "$PORT" normal || fail "start rb"
lat_replica rc "$C" "$PORT" normal || fail "start rc"

# One timed connect through the library: "ok MS PEER" or "ERROR MS".
cat > "$T/one.py" <<'EOF'
import socket, sys, time
ai = socket.getaddrinfo(sys.argv[1], int(sys.argv[2]), socket.AF_INET,
                        socket.SOCK_STREAM)[0]
s = socket.socket(ai[0], ai[1], ai[2])
t0 = time.monotonic()
try:
    s.connect(ai[4])
    print("ok %d %s" % ((time.monotonic() - t0) * 1000, s.getpeername()[0]))
except OSError as e:
    print("%s %d" % (e.__class__.__name__, (time.monotonic() - t0) * 1000))
s.close()
EOF
one() { preload timeout 10 "$PY" "$T/one.py" lab.cluster "$PORT"; }
ms_of() { awk '{print $2}' <<<"$1"; }
reset_all()
{
	rlbctl reset lab.cluster >/dev/null
	lat_reset_counts "$A" "$B" "$C"
}

# 1. Healthy: one SYN, to the first replica, nothing else.
reset_all
out=$(one)
check_match "healthy: connected to the first replica" "^ok [0-9]+ $A\$" "$out"
check_eq "healthy: exactly one SYN, no extra" "1 0 0" \
	"$(lat_syns "$A") $(lat_syns "$B") $(lat_syns "$C")"

# 2. Silent first replica.
lat_mode "$A" silent
reset_all
out=$(one)
echo "# silent first replica, first connection: $(ms_of "$out") ms"
check_match "silent first: the second replica's connection" "^ok [0-9]+ $B\$" "$out"
check_le "silent first: answered in about the hedge time (ms)" 150 "$(ms_of "$out")"
check_eq "silent first: exactly one extra SYN (the hedge's)" "1 1 0" \
	"$(lat_syns "$A") $(lat_syns "$B") $(lat_syns "$C")"
sleep 1.3 # past the SYN retransmission a live attempt would make (1 s)
check_eq "the silent loser sends nothing more" "1 0" \
	"$(lat_syns "$A") $(lat_rsts "$A")"
check_eq "silent first: one slowdown, no error" "1 0" \
	"$(replica_stat lab.cluster "$A" slowdowns) $(replica_stat lab.cluster "$A" errors)"
out=$(one)
check_match "the next process goes to the second replica first" "^ok [0-9]+ $B\$" "$out"
check_eq "... with no SYN to the silent one" 1 "$(lat_syns "$A")"

# 3. A replica that answers SYNs after 200 ms.
lat_mode "$A" slow 200
reset_all
acc0=$(lat_accepts ra)
tw0=$(lat_timewait "$A") # the healthy case's own closed connection
out=$(one)
echo "# the 200 ms replica, first connection: $(ms_of "$out") ms"
check_match "slow first: the second replica's connection" "^ok [0-9]+ $B\$" "$out"
check_le "slow first: the first connection in about the hedge time (ms)" 120 "$(ms_of "$out")"
sleep 0.5 # the held SYN reaches the slow replica, its SYN-ACK comes back
check_le "the slow loser: at most one RST" 1 "$(lat_rsts "$A")"
check_eq "the slow loser: no accept at its server" "$acc0" "$(lat_accepts ra)"
check_eq "the slow loser: no TIME_WAIT" "$tw0" "$(lat_timewait "$A")"
check_eq "slow first: one slowdown on it" 1 "$(replica_stat lab.cluster "$A" slowdowns)"
lat_reset_counts "$A"
out=$(one)
echo "# the 200 ms replica demoted, next connection: $(ms_of "$out") ms"
check_match "demoted: the next connection goes elsewhere" "^ok [0-9]+ $B\$" "$out"
check_le "demoted: fast (ms)" 30 "$(ms_of "$out")"
check_eq "demoted: no SYN to the slow replica" 0 "$(lat_syns "$A")"

# 4. Non-blocking: asyncio against the silent first replica.
lat_mode "$A" silent
reset_all
cat > "$T/aio.py" <<'EOF'
import asyncio, sys, time
async def main():
    t0 = time.monotonic()
    r, w = await asyncio.open_connection(sys.argv[1], int(sys.argv[2]))
    print("ok %d %s" % ((time.monotonic() - t0) * 1000,
                        w.get_extra_info("peername")[0]))
    w.close()
asyncio.run(main())
EOF
out=$(preload timeout 10 "$PY" "$T/aio.py" lab.cluster "$PORT")
check_match "asyncio, silent first: the second replica" "^ok [0-9]+ $B\$" "$out"
check_le "asyncio, silent first: in about the hedge time (ms)" 200 "$(ms_of "$out")"
check_eq "asyncio: exactly one extra SYN" "1 1 0" \
	"$(lat_syns "$A") $(lat_syns "$B") $(lat_syns "$C")"

finish
