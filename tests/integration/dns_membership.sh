#!/bin/bash
# dns_membership.sh - replicas from DNS (issue 15) against a real BIND 9
# in a private namespace (tests/integration/lib_dns.sh): a three-line
# config balancing curl over SRV targets; targets added and removed by
# dynamic updates while a program runs; error counts of survivors and of
# a replica that leaves and returns; DNS down and frozen (last good kept,
# one warning, no resolution waits); NODATA and NXDOMAIN with a hold
# time; 300 targets over TCP; malformed answers from a broken server;
# a dns= cluster of A records. Every backend's address comes from DNS.
#
#   127.0.0.21-23  web: s1, s2 (own port), s3        (three-line config)
#   127.0.0.24-27  grow: g1..g3, then g4 added, g1 removed
#   127.0.0.28     counts: k1; .29 kr (nothing listens); .34 k2 added
#   127.0.0.31-33  pool (dns=, A records): p31..p33 (tcp)
#   127.0.0.35-37  down: d1, d2; d3 added after named's restart
#   127.0.0.38/39  empty: e1 (NODATA); nx: n1 (NXDOMAIN, hold 2 s)
#   127.0.0.54     bad_dns.py; 127.0.0.61/62 mal: m1, m2; .63 static
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/integration/lib_dns.sh"
dns_enter_ns "$@"
dns_setup

Z=$DNS_ZONE
PORT=$(free_port)
PORT2=$(free_port)
for spec in s1:21 s3:23 g1:24 g2:25 g3:26 g4:27 k1:28 k2:34 d1:35 d2:36 \
	d3:37 e1:38 n1:39 m1:61 m2:62 m63:63; do
	start_replica "${spec%%:*}" "127.0.0.${spec#*:}" "$PORT" http ||
		fail "replica $spec"
done
start_replica s2 127.0.0.22 "$PORT2" http || fail "replica s2"
for r in 31 32 33; do
	start_replica "p$r" "127.0.0.$r" "$PORT" tcp || fail "replica p$r"
done

# The zone: one update for everything the tests start from.
dns_update <<EOF || fail "the initial zone"
$(dns_rr_add_srv _http._tcp.web.$Z 0 0 "$PORT" S1.RLB.test)
$(dns_rr_add_srv _http._tcp.web.$Z 0 0 "$PORT2" s2.$Z)
$(dns_rr_add_srv _http._tcp.web.$Z 0 0 "$PORT" s3.$Z)
$(for spec in s1:21 s2:22 s3:23 g1:24 g2:25 g3:26 g4:27 k1:28 kr:29 k2:34 \
	d1:35 d2:36 d3:37 e1:38 n1:39; do
	dns_rr_add_a "${spec%%:*}.$Z" "127.0.0.${spec#*:}"
done)
$(for g in g1 g2 g3; do dns_rr_add_srv _http._tcp.grow.$Z 0 0 "$PORT" $g.$Z; done)
$(for k in k1 kr; do dns_rr_add_srv _http._tcp.counts.$Z 0 0 "$PORT" $k.$Z; done)
$(for d in d1 d2; do dns_rr_add_srv _http._tcp.down.$Z 0 0 "$PORT" $d.$Z; done)
$(dns_rr_add_srv _http._tcp.empty.$Z 0 0 "$PORT" e1.$Z)
$(dns_rr_add_srv _http._tcp.nx.$Z 0 0 "$PORT" n1.$Z)
$(for r in 31 32 33; do dns_rr_add_a pool.$Z 127.0.0.$r; done)
send
EOF

write_config <<EOF
load_balancing = "round_robin";
dns_refresh_floor_ms = 200;
dns_cache_ttl = 1;
distributed_replica_error_half_life = 86400;
distributed_replica_error_cap = 100000;
connect_timeout_ms = 1000;
clusters = (
  { name = "grow.cluster"; srv = "_http._tcp.grow.$Z"; },
  { name = "counts.cluster"; srv = "_http._tcp.counts.$Z"; },
  { name = "down.cluster"; srv = "_http._tcp.down.$Z"; },
  { name = "empty.cluster"; srv = "_http._tcp.empty.$Z"; },
  { name = "nx.cluster"; srv = "_http._tcp.nx.$Z"; dns_hold_nx = 2; },
  { name = "big.cluster"; srv = "_http._tcp.big.$Z"; },
  { name = "bigpool.cluster"; dns = "bigpool.$Z"; },
  { name = "pool.cluster"; dns = "pool.$Z"; },
  { name = "ghost.cluster"; srv = "_http._tcp.ghost.$Z"; },
  { name = "mal.cluster"; srv = "_http._tcp.mal.$Z"; },
  { name = "malnew.cluster"; srv = "_http._tcp.malnew.$Z"; port = $PORT;
    replicas = ( "127.0.0.63" ); }
);
EOF

# sorted_words : stdin's words, one line, sorted.
sorted_words()
{
	tr ' ' '\n' | sed '/^$/d' | sort | tr '\n' ' ' | sed 's/ $//'
}

# client_ok_since TAG MS : "ok" when every line at or after MS is ok, else
# the first other line; "none" when there is no line.
client_ok_since()
{
	awk -v t="$2" '$1 * 1000 >= t {n++; if ($3 != "ok") {print; bad = 1; exit}}
		END {if (!bad) print (n ? "ok" : "none")}' "$T/$1.log"
}

# client_served_since TAG MS : the replica names that served requests at
# or after MS, sorted, unique, one line.
client_served_since()
{
	awk -v t="$2" '$1 * 1000 >= t && $3 == "ok" {sub("served=", "", $5); print $5}' \
		"$T/$1.log" | sort -u | tr '\n' ' ' | sed 's/ $//'
}

# first_time TAG AWK-CONDITION : the wall-clock ms of the first line that
# matches, or "never".
first_time()
{
	awk "$2 {printf \"%.0f\\n\", \$1 * 1000; f = 1; exit} END {if (!f) print \"never\"}" \
		"$T/$1.log"
}

# -------------------------------------------------------------------
# 1. The three-line config: curl over three servers that exist only in
# DNS, SRV ports honoured (s2 listens on another port than curl's 80).
cat >"$T/three.conf" <<EOF
clusters = ({ name = "web.cluster";
  srv = "_http._tcp.web.$Z";
  load_balancing = "round_robin"; });
EOF
out=
for i in 1 2 3 4 5 6; do
	out="$out $(REPLICALB_CONFIG=$T/three.conf preload curl -s --max-time 5 http://web.cluster/)"
done
check_eq "three-line config: 6 curls hit each SRV target twice" \
	"2 replica=s1, 2 replica=s2, 2 replica=s3," \
	"$(echo $out | tr ' ' '\n' | sort | uniq -c | awk '{printf "%s %s, ", $1, $2}' | sed 's/ $//')"
check_eq "resolve --peek: the SRV targets, lowercase, no trailing dot" \
	"s1.rlb.test s2.rlb.test s3.rlb.test" \
	"$(REPLICALB_CONFIG=$T/three.conf rlbctl resolve --peek web.cluster | sorted_words)"
check_eq "status --json: source srv" "srv srv srv" \
	"$(for h in s1 s2 s3; do REPLICALB_CONFIG=$T/three.conf replica_stat web.cluster $h.$Z source; done | tr '\n' ' ' | sed 's/ $//')"
check_eq "status --json: each SRV record's port" "$PORT $PORT2" \
	"$(for h in s1 s2; do REPLICALB_CONFIG=$T/three.conf replica_stat web.cluster $h.$Z port; done | tr '\n' ' ' | sed 's/ $//')"

# replicalbctl check: a source that returns nothing is reported, and the
# config is still valid.
out=$(rlbctl check 2>&1)
rc=$?
check_eq "check: exit 0 with a DNS source that returns nothing" 0 "$rc"
check_match "check: the NXDOMAIN source 'returns nothing'" \
	'returns nothing' "$(printf '%s\n' "$out" | grep -i ghost)"
check_match "check: and says why" NXDOMAIN \
	"$(printf '%s\n' "$out" | grep -i ghost | grep 'returns nothing')"

# -------------------------------------------------------------------
# 8. dns=: every A record is a replica; python's create_connection is
# balanced over them; the hosts are the address texts.
out=$(preload $PY - "$PORT" <<'EOF'
import socket, sys
for i in range(6):
    s = socket.create_connection(("pool.cluster", int(sys.argv[1])), 3)
    print(s.makefile().readline().strip())
    s.close()
EOF
)
check_eq "dns=: 6 python connects hit each A record twice" \
	"2 replica=p31, 2 replica=p32, 2 replica=p33," \
	"$(echo $out | tr ' ' '\n' | sort | uniq -c | awk '{printf "%s %s, ", $1, $2}' | sed 's/ $//')"
check_eq "dns=: resolve --peek shows the address texts" \
	"127.0.0.31 127.0.0.32 127.0.0.33" \
	"$(rlbctl resolve --peek pool.cluster | sorted_words)"
check_eq "dns=: status --json source dns" dns \
	"$(replica_stat pool.cluster 127.0.0.31 source)"

# -------------------------------------------------------------------
# 2. A target added by a dynamic update gets traffic after the refresh
# (floor 200 ms, record TTL 0: well within a second), a removed one stops
# getting it, while one python process runs.
dns_client grow grow.cluster 80 -m http
client_wait_lines grow 6 || fail "grow: the client runs"
check_eq "grow: the first answers use the three targets" "g1 g2 g3" \
	"$(client_served_since grow 0)"
t_add=$(now_ms)
dns_add_srv _http._tcp.grow.$Z 0 0 "$PORT" g4.$Z || fail "grow: add g4"
t_added=$(now_ms)
wait_until 5 client_served_after grow g4 "$t_added"
t_g4=$(first_time grow "\$5 == \"served=g4\"")
check_match "grow: the added target g4 gets traffic" '^[0-9]+$' "$t_g4"
if [ "$t_g4" != never ]; then
	check_le "grow: within a second of the update (ms)" 1000 \
		"$((t_g4 - t_added))"
	echo "# grow: update took $((t_added - t_add)) ms; g4 served $((t_g4 - t_added)) ms after"
fi
wait_until 3 client_served_after grow g1 "$t_g4"
t_del=$(now_ms)
dns_del_srv _http._tcp.grow.$Z 0 0 "$PORT" g1.$Z || fail "grow: remove g1"
t_deleted=$(now_ms)
sleep 2
check_eq "grow: after the removal (+1 s) g1 gets nothing, the others all" \
	"g2 g3 g4" "$(client_served_since grow $((t_deleted + 1000)))"
t_last=$(awk '$5 == "served=g1" {t = $1} END {printf "%.0f\n", t * 1000}' "$T/grow.log")
[ "$t_last" -gt 0 ] || t_last=$t_deleted
echo "# grow: delete took $((t_deleted - t_del)) ms; g1 last served $((t_last - t_deleted)) ms after"
check_eq "grow: every resolution succeeded" ok "$(client_ok_since grow 0)"
dns_client_stop grow
check_eq "grow: the client exits 0" 0 "$?"
check_empty "grow: no warning while DNS works" "$T/grow.err"

# -------------------------------------------------------------------
# 3. Counts: kr refuses; the client connects to every address and counts
# what it sees refused. A target added (a refresh), kr removed and
# re-added (it left and returned within the half-life): the library's
# count of kr equals the client's throughout.
dns_client counts counts.cluster 80 -m all
client_wait_lines counts 10 || fail "counts: the client runs"
dns_add_srv _http._tcp.counts.$Z 0 0 "$PORT" k2.$Z || fail "counts: add k2"
t=$(now_ms)
wait_until 5 awk -v t="$t" '$1 * 1000 >= t && $4 ~ /127\.0\.0\.34:/ {f = 1} END {exit !f}' "$T/counts.log" ||
	fail "counts: the client sees k2"
dns_del_srv _http._tcp.counts.$Z 0 0 "$PORT" kr.$Z || fail "counts: remove kr"
t=$(now_ms)
wait_until 5 awk -v t="$t" '$1 * 1000 >= t + 300 && $3 == "ok" && $4 !~ /127\.0\.0\.29:/ {f = 1} END {exit !f}' "$T/counts.log" ||
	fail "counts: the client sees kr leave"
dns_add_srv _http._tcp.counts.$Z 0 0 "$PORT" kr.$Z || fail "counts: re-add kr"
t=$(now_ms)
wait_until 5 awk -v t="$t" '$1 * 1000 >= t + 300 && $4 ~ /127\.0\.0\.29:/ {f = 1} END {exit !f}' "$T/counts.log" ||
	fail "counts: the client sees kr return"
sleep 0.5
dns_client_stop counts
seen=$(awk '$1 == "refused" && $2 == "127.0.0.29" {print $3}' "$T/counts.sum")
check_ge "counts: the client saw kr refuse" 10 "${seen:-0}"
check_eq "counts: kr's errors = the refusals seen, across refreshes" \
	"${seen:-none}" "$(replica_errors counts.cluster "kr.$Z:$PORT")"
check_eq "counts: the survivor k1 has no errors" 0 \
	"$(replica_errors counts.cluster "k1.$Z:$PORT")"
check_eq "counts: the added k2 has no errors, source srv" "0 srv" \
	"$(replica_errors counts.cluster "k2.$Z:$PORT") $(replica_stat counts.cluster "k2.$Z:$PORT" source)"

# -------------------------------------------------------------------
# 4. DNS down: named stopped; the last membership stays, one warning.
# Frozen: queries time out, yet no resolution waits for them. Restarted:
# updates are picked up again.
dns_client down down.cluster 80 -m http
client_wait_lines down 6 || fail "down: the client runs"
dns_stop
t_down=$(now_ms)
sleep 2.5
check_eq "down: every resolution with named stopped succeeded" ok \
	"$(client_ok_since down "$t_down")"
check_eq "down: served by the last membership" "d1 d2" \
	"$(client_served_since down "$t_down")"
check_eq "down: one warning" 1 "$(client_warnings down)"
check "down: status works while DNS is down" \
	sh -c "'$RLBCTL' status --json | $PY -c 'import json, sys; json.load(sys.stdin)'"
check "down: named restarts" dns_start
dns_freeze
t_freeze=$(now_ms)
sleep 2.5
dns_thaw
check_eq "frozen: every resolution succeeded" ok \
	"$(client_ok_since down "$t_freeze")"
check_le "frozen: no resolution waited for the DNS timeout (max ms)" 500 \
	"$(awk -v t="$t_freeze" '$1 * 1000 >= t && $2 > m {m = $2} END {print m + 0}' "$T/down.log")"
dns_add_srv _http._tcp.down.$Z 0 0 "$PORT" d3.$Z || fail "down: add d3"
t=$(now_ms)
wait_until 5 client_served_after down d3 "$t"
check "down: after the restart an added target gets traffic" \
	client_served_after down d3 "$t"
dns_client_stop down
check_eq "down: the client exits 0" 0 "$?"

# -------------------------------------------------------------------
# 5. NODATA (SRV deleted, a TXT record left at the name): last good kept,
# one warning. NXDOMAIN (the name deleted), hold 2 s: kept about 2 s,
# then resolution fails; back when the record is.
dns_client empty empty.cluster 80 -m http
client_wait_lines empty 4 || fail "empty: the client runs"
dns_update <<EOF || fail "empty: NODATA"
$(dns_rr_add_txt _http._tcp.empty.$Z nodata)
$(dns_rr_del_srv _http._tcp.empty.$Z)
send
EOF
t=$(now_ms)
check_eq "empty: the name answers NODATA" "NOERROR:" \
	"$(dns_rcode SRV _http._tcp.empty.$Z):$(dns_query SRV _http._tcp.empty.$Z)"
sleep 2
check_eq "NODATA: every resolution succeeded" ok "$(client_ok_since empty "$t")"
check_eq "NODATA: served by the last good membership" e1 \
	"$(client_served_since empty "$t")"
check_eq "NODATA: one warning" 1 "$(client_warnings empty)"
dns_client_stop empty

dns_client nx nx.cluster 80 -m http
client_wait_lines nx 4 || fail "nx: the client runs"
dns_set_nxdomain _http._tcp.nx.$Z || fail "nx: delete the name"
t_nx=$(now_ms)
check_eq "nx: the name answers NXDOMAIN" NXDOMAIN "$(dns_rcode SRV _http._tcp.nx.$Z)"
wait_until 8 grep -q ' error ' "$T/nx.log"
t_err=$(first_time nx "\$1 * 1000 >= $t_nx && \$3 == \"error\"")
check_match "NXDOMAIN: resolution fails after the hold" '^[0-9]+$' "$t_err"
if [ "$t_err" != never ]; then
	echo "# nx: first failure $((t_err - t_nx)) ms after the update"
	check_ge "NXDOMAIN: the last good is kept for the 2 s hold (ms)" 1800 \
		"$((t_err - t_nx))"
	check_le "NXDOMAIN: and then emptied (ms)" 3500 "$((t_err - t_nx))"
fi
check_match "NXDOMAIN: getaddrinfo's error" 'error EAI_' \
	"$(grep -m1 ' error ' "$T/nx.log")"
check_not "NXDOMAIN: curl fails too" \
	preload curl -s --max-time 3 http://nx.cluster/
dns_add_srv _http._tcp.nx.$Z 0 0 "$PORT" n1.$Z || fail "nx: the name back"
t=$(now_ms)
wait_until 5 client_served_after nx n1 "$t"
check "NXDOMAIN: the name back, it is served again" client_served_after nx n1 "$t"
dns_client_stop nx

# -------------------------------------------------------------------
# 6. A large answer: 300 SRV targets, and 300 A records of one name;
# over UDP BIND sets TC, so the answer must arrive over TCP.
dns_update <<EOF || fail "big: 300 targets"
$(for i in $(seq -w 1 300); do
	dns_rr_add_srv _http._tcp.big.$Z 0 0 "$PORT" t$i.big.$Z
	dns_rr_add_a t$i.big.$Z 127.0.$((10#$i / 200 + 4)).$((10#$i % 200 + 1))
	dns_rr_add_a bigpool.$Z 127.0.$((10#$i / 200 + 8)).$((10#$i % 200 + 1))
done)
send
EOF
check_match "big: over UDP the answer is truncated" 'flags: qr aa tc' \
	"$(dns_dig +notcp +ignore SRV _http._tcp.big.$Z)"
out=$(rlbctl resolve --peek big.cluster)
check_eq "big: resolve --peek lists all 300 targets" 300 \
	"$(printf '%s\n' "$out" | tr ' ' '\n' | grep -E '^t[0-9]{3}\.big\.rlb\.test$' | sort -u | wc -l)"
check_eq "big: a program gets all 300 addresses" 300 \
	"$(preload $PY "$GAI" -u -4 big.cluster 80 | tr ' ' '\n' | grep -c '^127\.0\.[45]\.')"
out=$(rlbctl resolve --peek bigpool.cluster)
check_eq "bigpool: resolve --peek lists all 300 addresses" 300 \
	"$(printf '%s\n' "$out" | tr ' ' '\n' | grep -E '^127\.0\.(8|9)\.[0-9]+$' | sort -u | wc -l)"

# -------------------------------------------------------------------
# 7. Malformed answers (bad_dns.py on 127.0.0.54, the only server in the
# resolv.conf of this phase): a running program keeps its last good
# membership through every kind of broken message and warns; a new one
# whose first answer is broken gets the cluster's static replica; none
# crashes.
cat >"$DNS_DIR/bad.zone" <<EOF
_http._tcp.mal.$Z SRV 0 0 $PORT m1.mal.$Z
_http._tcp.mal.$Z SRV 0 0 $PORT m2.mal.$Z
_http._tcp.malnew.$Z SRV 0 0 $PORT m1.mal.$Z
m1.mal.$Z A 127.0.0.61
m2.mal.$Z A 127.0.0.62
EOF
bad_dns_mode good
bad_dns_start 127.0.0.54 || fail "bad_dns.py"
dns_use_server 127.0.0.54 || fail "resolv.conf for bad_dns.py"
dns_client mal mal.cluster 80 -m http
client_wait_lines mal 4 || fail "mal: the client runs"
t=$(now_ms)
for m in badptr loop short overrun count garbage; do
	bad_dns_mode "$m"
	sleep 0.6
done
rc=0
out=$(preload $PY "$DNSCLIENT" -n 5 -i 0.1 malnew.cluster 80 2>"$T/malnew.err") || rc=$?
check_eq "malformed first answer: the program exits normally" 0 "$rc"
check_eq "malformed first answer: the static replica serves" "m63" \
	"$(printf '%s\n' "$out" | awk '{sub("served=", "", $5); print $5}' | sort -u | tr '\n' ' ' | sed 's/ $//')"
check_ge "malformed first answer: a warning" 1 "$(client_warnings malnew)"
rc=0
preload $PY "$GAI" -u -4 mal.cluster 80 >/dev/null 2>&1 || rc=$?
check_le "malformed, no last good: getaddrinfo returns (no crash)" 1 "$rc"
bad_dns_mode good
dns_client_stop mal
check_eq "malformed: the running program exits 0" 0 "$?"
check_eq "malformed: every resolution succeeded" ok "$(client_ok_since mal "$t")"
check_eq "malformed: served by the last good membership" "m1 m2" \
	"$(client_served_since mal "$t")"
check_ge "malformed: a warning" 1 "$(client_warnings mal)"
dns_use_server "$DNS_ADDR"

# -------------------------------------------------------------------
# 9. Absolute names: under Kubernetes' search list and ndots:5, one
# refresh asks each source once, never with a search domain appended
# (and an SRV target's addresses come with the answer: no question).
DNS_RESOLV_SEARCH="ns.svc.cluster.local svc.cluster.local cluster.local" \
	DNS_RESOLV_OPTIONS="ndots:5" dns_use_server "$DNS_ADDR" ||
	fail "resolv.conf with a search list"
mark=$(wc -l <"$DNS_DIR/named.log")
out=$(REPLICALB_CONFIG=$T/three.conf rlbctl resolve --peek web.cluster)
check_eq "ndots:5: the members" "s1.rlb.test s2.rlb.test s3.rlb.test" \
	"$(printf '%s\n' "$out" | sorted_words)"
asked=$(tail -n +$((mark + 1)) "$DNS_DIR/named.log" | grep -c 'query: ' || true)
srv=$(tail -n +$((mark + 1)) "$DNS_DIR/named.log" |
	grep -c "query: _http._tcp.web.$Z IN SRV" || true)
check_eq "ndots:5: one refresh is one question" 1 "$asked"
check_eq "ndots:5: the SRV name as written, no search domain" 1 "$srv"
dns_use_server "$DNS_ADDR"

finish
