#!/bin/bash
# least_request.sh - load_balancing = "least_request" as a new user tries
# it (issue 21): three HTTP replicas, one slow (each answer waits 250 ms,
# the others' 5 ms); a mix of unrelated programs - curl loops and python3
# loops, each in its own shell, a new connection per request - first on a
# cluster with `random`, then on one with `least_request`, over the same
# replicas. least_request sends the slow replica visibly less of the
# traffic, because every process of the host sees the connections the
# others hold there: `status` shows them (IN_FLIGHT) while the load runs,
# and the connects each replica got after it.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

PORT=$(free_port)
write_config <<EOF
state_dir = "$T/state";
clusters = (
  { name = "rnd.cluster"; load_balancing = "random"; port = $PORT;
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); },
  { name = "lr.cluster"; load_balancing = "least_request"; port = $PORT;
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); }
);
EOF
start_replica fast1 127.0.0.2 "$PORT" http --delay-ms 5 || fail "fast1"
start_replica fast2 127.0.0.3 "$PORT" http --delay-ms 5 || fail "fast2"
start_replica slow 127.0.0.4 "$PORT" http --delay-ms 250 || fail "slow"

check "check accepts least_request" rlbctl check

cat >"$T/pyloop.py" <<'EOF'
import http.client, sys
name, n = sys.argv[1], int(sys.argv[2])
port = int(sys.argv[3])
for _ in range(n):
    c = http.client.HTTPConnection(name, port, timeout=10)
    c.request("GET", "/")
    print(c.getresponse().read().decode().strip(), flush=True)
    c.close()
EOF

# load CLUSTER : 3 curl loops and 2 python3 loops at once, each in its own
# shell, 24 requests each; their answers ("replica=NAME") in $T/CLUSTER.*
load()
{
	local c=$1 i pids=
	for i in 1 2 3; do
		bash -c 'for k in $(seq 24); do
			curl -s --max-time 10 "http://$1:$2/"; done' \
			_ "$c" "$PORT" >"$T/$c.curl$i" 2>>"$T/$c.err" &
		pids="$pids $!"
	done
	for i in 1 2; do
		bash -c '$0 "$1" "$2" 24 "$3"' "$PY" "$T/pyloop.py" "$c" \
			"$PORT" >"$T/$c.py$i" 2>>"$T/$c.err" &
		pids="$pids $!"
	done
	# What status shows meanwhile: the slow replica's connections in
	# flight, against the fast ones'.
	: >"$T/$c.inflight"
	while kill -0 $pids 2>/dev/null; do
		rlbctl status --json "$c" 2>/dev/null | $PY -c '
import json, sys
r = json.load(sys.stdin)["clusters"][0]["replicas"]
print(" ".join(str(x["in_flight"]) for x in r))' >>"$T/$c.inflight"
		sleep 0.1
	done
	wait $pids
}

# share CLUSTER : the slow replica's share of the answers, in percent,
# and the total ("12 120")
share()
{
	cat "$T/$1".curl* "$T/$1".py* | awk '
		/^replica=/ { n++; if ($0 == "replica=slow") s++ }
		END { printf "%d %d\n", n ? 100 * s / n : -1, n }'
}

export LD_PRELOAD=$RLB_LIB
load rnd.cluster
load lr.cluster
unset LD_PRELOAD

read -r rnd_share rnd_n <<<"$(share rnd.cluster)"
read -r lr_share lr_n <<<"$(share lr.cluster)"
echo "    slow replica's share: random ${rnd_share}% of $rnd_n," \
	"least_request ${lr_share}% of $lr_n"
check_eq "random: every request answered" 120 "$rnd_n"
check_eq "least_request: every request answered" 120 "$lr_n"
check_empty "the programs are silent" "$T/rnd.cluster.err"
check_empty "the programs are silent (least_request)" "$T/lr.cluster.err"
# random gives each replica a third; least_request, seeing the slow
# replica's connections pile up, sends it a small part.
check_ge "random: the slow replica gets its third (>= 15%)" 15 "$rnd_share"
check_le "least_request: the slow replica gets little (<= 15%)" 15 "$lr_share"
check "least_request: less than half of random's share" \
	test $((2 * lr_share)) -lt "$rnd_share"

# status showed why: under random, connections piled up on the slow one.
piled=$(awk '$3 > $1 && $3 > $2 && $3 >= 2 { n++ } END { print n + 0 }' \
	"$T/rnd.cluster.inflight")
check_ge "status: the slow replica's connections in flight piled up" 1 \
	"$piled"
check_eq "status: none in flight once the programs are done" "0 0 0" \
	"$(for h in 127.0.0.2 127.0.0.3 127.0.0.4; do
		replica_stat lr.cluster "$h" in_flight; done | tr '\n' ' ' |
		sed 's/ $//')"
lr_slow=$(replica_stat lr.cluster 127.0.0.4 connects)
lr_fast=$(($(replica_stat lr.cluster 127.0.0.2 connects) +
	$(replica_stat lr.cluster 127.0.0.3 connects)))
echo "    least_request connects: slow $lr_slow, fast $lr_fast"
check "status: the slow replica got the fewest connects" \
	test "$((lr_slow * 4))" -lt "$lr_fast"
check_eq "status: every connect counted" 120 "$((lr_slow + lr_fast))"
rlbctl resolve -v lr.cluster >"$T/resolve.out"
check_match "resolve -v shows the in-flight counts" "in_flight=0" \
	"$(cat "$T/resolve.out")"
finish
