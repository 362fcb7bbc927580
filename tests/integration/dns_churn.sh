#!/bin/bash
# dns_churn.sh - a long-running program through 1,000 membership changes
# (issue 15): one python3 process resolves an SRV cluster and connects to
# every address of each answer, in a loop, while one nsupdate session
# sends 1,000 updates to a real BIND 9 (tests/integration/lib_dns.sh),
# each adding or removing one target (floor 10 ms: the program refreshes
# all the time). Some targets refuse connections; at the end, each refused
# replica's error count in the shared state equals the refusals the
# program saw on its address: every failure attributed, none lost, though
# the program was handed far more addresses than the library's table of
# handed-out addresses held before (16,384).
#
#   127.0.0.41  rf1: refuses (nothing listens); a member throughout
#   127.0.0.42  rf2: refuses; comes and goes, a member at the end
#   127.0.0.43  h1, and the churning targets c00..c19 half of them
#   127.0.0.44  h2, and the other half
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/integration/lib_dns.sh"
dns_enter_ns "$@"
dns_setup

Z=$DNS_ZONE
SRV=_http._tcp.churn.$Z
PORT=$(free_port)
CHANGES=${RLB_DNS_CHANGES:-1000}
start_replica h1 127.0.0.43 "$PORT" tcp || fail "replica h1"
start_replica h2 127.0.0.44 "$PORT" tcp || fail "replica h2"

dns_update <<EOF || fail "the initial zone"
$(dns_rr_add_a rf1.$Z 127.0.0.41)
$(dns_rr_add_a rf2.$Z 127.0.0.42)
$(dns_rr_add_a h1.$Z 127.0.0.43)
$(dns_rr_add_a h2.$Z 127.0.0.44)
$(for i in $(seq 0 19); do dns_rr_add_a c$i.$Z 127.0.0.$((43 + i % 2)); done)
$(for h in rf1 h1 h2; do dns_rr_add_srv $SRV 0 0 "$PORT" $h.$Z; done)
send
EOF

write_config <<EOF
load_balancing = "round_robin";
dns_refresh_floor_ms = 10;
dns_cache_ttl = 1;
distributed_replica_error_half_life = 86400;
distributed_replica_error_cap = 1000000;
connect_timeout_ms = 1000;
clusters = ( { name = "churn.cluster"; srv = "$SRV"; } );
EOF

# The changes: every 10th toggles rf2, the others toggle c(i mod 20);
# one update message (`send`) each. rf2 is a member at the end.
declare -A member=()
{
	for i in $(seq "$CHANGES"); do
		if [ $((i % 10)) = 0 ]; then h=rf2; else h=c$((i % 20)); fi
		if [ -n "${member[$h]:-}" ]; then
			dns_rr_del_srv $SRV 0 0 "$PORT" $h.$Z
			unset "member[$h]"
		else
			dns_rr_add_srv $SRV 0 0 "$PORT" $h.$Z
			member[$h]=1
		fi
		echo send
	done
	if [ -z "${member[rf2]:-}" ]; then
		dns_rr_add_srv $SRV 0 0 "$PORT" rf2.$Z
		echo send
	fi
} >"$T/churn.nsupdate"
check_ge "the script holds $CHANGES updates" "$CHANGES" \
	"$(grep -c '^send$' "$T/churn.nsupdate")"

dns_client churn churn.cluster 80 -m all -i 0.002 -r 4
client_wait_lines churn 20 || fail "the client runs"
serial0=$(dns_serial)
t0=$(now_ms)
dns_update <"$T/churn.nsupdate" || fail "the $CHANGES updates"
ms=$(($(now_ms) - t0))
echo "# $CHANGES updates in one nsupdate session: $ms ms"
check_ge "the zone moved through every update" "$((serial0 + CHANGES))" \
	"$(dns_serial)"
# The end state reaches the program, then it stops.
t=$(now_ms)
wait_until 5 awk -v t="$t" '$1 * 1000 >= t + 100 && $4 ~ /127\.0\.0\.42:/ {f = 1} END {exit !f}' \
	"$T/churn.log" || fail "the program sees the final membership"
sleep 0.3
dns_client_stop churn
check_eq "the program exits 0" 0 "$?"

sets=$(awk '$3 == "ok" {print $4}' "$T/churn.log" | sort -u | wc -l)
echo "# the program saw $sets different answers in $(client_lines churn) rounds"
check_ge "the program saw the membership change (distinct answers)" 50 "$sets"
check_eq "every resolution succeeded (failed ones)" 0 \
	"$(awk '$3 != "ok"' "$T/churn.log" | wc -l)"
handed=$(awk '$1 == "handed" {print $2}' "$T/churn.sum")
echo "# addresses handed out to the program: ${handed:-?}"
check_ge "the program was handed more than 16,384 addresses" 16385 "${handed:-0}"
for r in rf1:41 rf2:42; do
	seen=$(awk -v a="127.0.0.${r#*:}" '$1 == "refused" && $2 == a {print $3}' "$T/churn.sum")
	got=$(replica_errors churn.cluster "${r%%:*}.$Z:$PORT")
	check_ge "${r%%:*}: the program saw refusals" 1 "${seen:-0}"
	check_eq "${r%%:*}: errors = the refusals the program saw" \
		"${seen:-none}" "$got"
done
check_eq "h1, h2: no errors" "0 0" \
	"$(replica_errors churn.cluster "h1.$Z:$PORT") $(replica_errors churn.cluster "h2.$Z:$PORT")"
check_empty "no warning while DNS works" "$T/churn.err"

finish
