#!/bin/bash
# silent_clients.sh - the figures of issue 7: real clients against a
# cluster whose first replica is silent (SYNs dropped: a listener with a
# full accept queue), policy in_order, connect_timeout_ms 1000. For each
# client: seconds to a served request on its first and its second run
# (each with a fresh process), and the errors counted against the silent
# replica after each run. Without the library each first run waits for
# the kernel's SYN timeout (~130 s); that run is cut at LIMIT seconds.
#
#   bash bench/silent_clients.sh [BUILDDIR]   (default: build/check)
#
# Needs the test dependencies (scripts/deps.sh) and a built tree.
top=$(cd "$(dirname "$0")/.." && pwd)
export top_srcdir=$top
export top_builddir=${1:-$top/build/check}
export RLB_LIB=$top_builddir/.libs/libreplicalb.so
. "$top/tests/lib.sh"
rlb_setup
LIMIT=${LIMIT:-20}

HPORT=$(free_port)
RPORT=$(free_port)
write_config <<EOF2
load_balancing = "in_order";
distributed_replica_error_half_life = 600;
connect_timeout_ms = 1000;
state_dir = "$T/state";
clusters = (
  { name = "silent.cluster"; replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); },
  { name = "redis.cluster"; port = $RPORT;
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); }
);
EOF2
start_replica silent 127.0.0.2 "$HPORT" blackhole >/dev/null
start_replica silent-redis 127.0.0.2 "$RPORT" blackhole >/dev/null
start_replica r3 127.0.0.3 "$HPORT" http >/dev/null
start_replica r4 127.0.0.4 "$HPORT" http >/dev/null
start_redis redis3 127.0.0.3 "$RPORT" >/dev/null
start_redis redis4 127.0.0.4 "$RPORT" >/dev/null

URL="http://silent.cluster:$HPORT/"
cat >"$T/gh.py" <<EOF2
import socket
s = socket.create_connection((socket.gethostbyname("silent.cluster"), $HPORT))
s.sendall(b"GET / HTTP/1.0\r\n\r\n")
print(s.recv(100).split(b"\r\n")[0].decode())
EOF2
cat >"$T/aio.py" <<EOF2
import asyncio
async def main():
    r, w = await asyncio.open_connection("silent.cluster", $HPORT)
    w.write(b"GET / HTTP/1.0\r\n\r\n")
    print((await r.readline()).decode().strip())
asyncio.run(main())
EOF2

# run NAME CLUSTER [ENV=VALUE...] -- CMD... : two runs, preloaded.
run()
{
	local name=$1 cluster=$2 envs=() t0 t1 rc out e1 e2 s1 s2
	shift 2
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	rlbctl reset >/dev/null 2>&1
	for i in 1 2; do
		t0=$(now_ms)
		out=$(timeout "$LIMIT" env LD_PRELOAD="$RLB_LIB" "${envs[@]}" \
			"$@" 2>&1)
		rc=$?
		t1=$(now_ms)
		local secs
		secs=$(awk -v ms=$((t1 - t0)) 'BEGIN { printf "%.2f", ms / 1000 }')
		[ $rc -eq 124 ] && secs=">$LIMIT"
		[ $rc -ne 0 ] && [ $rc -ne 124 ] && secs="$secs(exit $rc)"
		eval "s$i=\$secs"
		eval "e$i=\$(replica_errors $cluster 127.0.0.2)"
	done
	printf '%-34s %9s %6s %9s %6s\n' "$name" "$s1" "$e1" "$s2" "$e2"
}

printf '%-34s %9s %6s %9s %6s\n' client "run1 s" errors "run2 s" errors
run "curl" silent.cluster -- curl -sf "$URL" -o /dev/null
run "python3 urllib (blocking)" silent.cluster -- \
	$PY -c "import urllib.request; urllib.request.urlopen('$URL').read()"
run "python3 asyncio (non-blocking)" silent.cluster -- $PY "$T/aio.py"
run "redis-cli (hiredis, non-blocking)" redis.cluster -- \
	redis-cli -h redis.cluster -p "$RPORT" ping
run "wget" silent.cluster -- wget -q -O /dev/null "$URL"
printf 'GET / HTTP/1.0\r\n\r\n' >"$T/req"
run "socat (one address) --failover" silent.cluster \
	REPLICALB_CONNECT_FAILOVER=1 -- \
	socat -u "OPEN:$T/req" "TCP:silent.cluster:$HPORT"
run "gethostbyname client --failover" silent.cluster \
	REPLICALB_CONNECT_FAILOVER=1 -- $PY "$T/gh.py"
run "socat (one address), no failover" silent.cluster -- \
	socat -u "OPEN:$T/req" "TCP:silent.cluster:$HPORT"
