#!/bin/bash
# dns_shared.sh - DNS members shared by the host (issue 21, deliverable 5;
# design.md §15.6) against a real BIND 9 in a private namespace
# (tests/integration/lib_dns.sh): 20 programs started one after another
# within one TTL ask DNS once between them (named's query log); a new
# program while DNS is down gets the last good members from the shared
# answer and reaches them; a damaged shared answer is set aside and the
# members asked again; a stale one answers at once and is refreshed;
# replicalbctl resolve -v shows the shared answer's age and origin.
#
#   127.0.0.71-73  web: w1..w3 (SRV targets, addresses in the answer)
#   127.0.0.74-75  pool: p74, p75 (dns=, A records)
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/integration/lib_dns.sh"
DNS_TTL=30
dns_enter_ns "$@"
dns_setup

Z=$DNS_ZONE
PORT=$(free_port)
for spec in w1:71 w2:72 w3:73 p74:74 p75:75; do
	start_replica "${spec%%:*}" "127.0.0.${spec#*:}" "$PORT" http ||
		fail "replica $spec"
done
dns_update <<EOF || fail "the zone"
$(dns_rr_add_srv _http._tcp.web.$Z 0 0 "$PORT" w1.$Z)
$(dns_rr_add_srv _http._tcp.web.$Z 0 0 "$PORT" w2.$Z)
$(dns_rr_add_srv _http._tcp.web.$Z 0 0 "$PORT" w3.$Z)
$(dns_rr_add_a w1.$Z 127.0.0.71)
$(dns_rr_add_a w2.$Z 127.0.0.72)
$(dns_rr_add_a w3.$Z 127.0.0.73)
$(dns_rr_add_a pool.$Z 127.0.0.74)
$(dns_rr_add_a pool.$Z 127.0.0.75)
send
EOF

write_config <<EOF
connect_timeout_ms = 300;
clusters = (
  { name = "web.cluster"; srv = "_http._tcp.web.$Z";
    dns_cache_ttl = 60; load_balancing = "round_robin"; },
  { name = "pool.cluster"; dns = "pool.$Z"; port = $PORT;
    dns_cache_ttl = 60; load_balancing = "round_robin"; }
);
EOF

# The questions named was asked since mark, of one name and type.
queries_since()	# MARK NAME TYPE
{
	tail -n +$(($1 + 1)) "$DNS_DIR/named.log" |
		grep -ci "query: $2 IN $3 " || true
}

# One program: one resolution and one request; its line.
one_program()	# TAG CLUSTER
{
	preload $PY "$DNSCLIENT" -n 1 "$2" 80 >>"$T/$1.log" 2>>"$T/$1.err"
}

# -------------------------------------------------------------------
# 1. 20 programs in a row, within one TTL: DNS is asked once per
# question; every program is served.
mark=$(wc -l <"$DNS_DIR/named.log")
for i in $(seq 20); do
	one_program web web.cluster
	one_program pool pool.cluster
done
check_eq "20 programs: every web program served" 20 \
	"$(grep -c ' ok .*served=w' "$T/web.log")"
check_eq "20 programs: every pool program served" 20 \
	"$(grep -c ' ok .*served=p7' "$T/pool.log")"
check_le "20 programs: the SRV question asked at most once" 1 \
	"$(queries_since "$mark" "_http._tcp.web.$Z" SRV)"
check_le "20 programs: the A question asked at most once" 1 \
	"$(queries_since "$mark" "pool.$Z" A)"
check_le "20 programs: the AAAA question asked at most once" 1 \
	"$(queries_since "$mark" "pool.$Z" AAAA)"
check_eq "20 programs: round robin turns across programs" 3 \
	"$(grep -o 'served=w[0-9]' "$T/web.log" | sort -u | wc -l)"
check "the shared answers are in the state directory" \
	test -f "$REPLICALB_STATE_DIR/web.cluster.members"
cat "$T/web.err" "$T/pool.err" >"$T/twenty.err"
check_empty "20 programs: silent" "$T/twenty.err"

# replicalbctl sees the members as a new program would: from the fresh
# shared answer, asking DNS nothing, and says so.
mark=$(wc -l <"$DNS_DIR/named.log")
rlbctl resolve -v --peek web.cluster >"$T/ctl.out" 2>&1
check_match "resolve -v: the host's shared answer, and its age" 	"answer: the host's shared answer, [0-9]+ ms old" "$(cat "$T/ctl.out")"
check_match "resolve -v: its members" "w1.$Z" "$(cat "$T/ctl.out")"
check_eq "resolve -v: replicalbctl asked DNS nothing" 0 \
	"$(queries_since "$mark" "_http._tcp.web.$Z" SRV)"
# A cluster whose DNS gives no members: valid, so check exits 0, but it
# warns; and no replicalbctl command warns about the NXDOMAIN itself (the
# check's own lines say what DNS answered).
cat >"$T/none.conf" <<EOF
state_dir = "$T/none-state";
clusters = ( { name = "none.cluster"; dns = "none.$Z"; port = 80; } );
EOF
out=$(rlbctl -c "$T/none.conf" check 2>"$T/none.err")
check_eq "check of a cluster with no members: exit 0" 0 $?
check_match "... warns that programs get nothing" \
	"warning: no replicas: a program resolving none.cluster gets EAI_(NONAME|AGAIN)" "$out"
check_match "... and ends ok with the warning counted" "^ok \(1 warning\)$" "$out"
rlbctl -c "$T/none.conf" status >/dev/null 2>>"$T/none.err"
check_empty "no NXDOMAIN warning on stderr (check, status)" "$T/none.err"
# The same members, and their answer's age, as metrics (design.md §17).
rlbctl status --prometheus web.cluster >"$T/web.prom" 2>&1
check "status --prometheus: the DNS members" grep -qxF \
	'replicalb_cluster_dns_members{cluster="web.cluster"} 3' "$T/web.prom"
check_match "status --prometheus: the shared answer's age in seconds" \
	'^replicalb_cluster_dns_answer_age_seconds\{cluster="web.cluster"\} [0-9.e+-]+$' \
	"$(cat "$T/web.prom")"
check "status --prometheus: promtool accepts it" \
	sh -c 'promtool check metrics <"$1" >/dev/null 2>&1' sh "$T/web.prom"

# -------------------------------------------------------------------
# 2. DNS down: a new program gets the last good members at once.
dns_stop
: >"$T/down.log"
t0=$(now_ms)
one_program down web.cluster
one_program down pool.cluster
check_le "DNS down: two new programs take under 2 s" 2000 $(($(now_ms) - t0))
check_eq "DNS down: both served from the shared members" 2 \
	"$(grep -c ' ok .*served=[wp]' "$T/down.log")"

# -------------------------------------------------------------------
# 3. A damaged shared answer is set aside; the members are asked again.
dns_start || fail "named again"
printf 'replicalb-members 1 garbage\n' >"$REPLICALB_STATE_DIR/web.cluster.members"
mark=$(wc -l <"$DNS_DIR/named.log")
one_program damaged web.cluster
check_eq "damaged: served" 1 "$(grep -c ' ok .*served=w' "$T/damaged.log")"
check_eq "damaged: set aside" 1 \
	"$(ls "$REPLICALB_STATE_DIR" | grep -c '^web.cluster.members.corrupt-')"
check_eq "damaged: DNS asked again" 1 \
	"$(queries_since "$mark" "_http._tcp.web.$Z" SRV)"
check_match "damaged: one warning naming the file" \
	'web.cluster.members: not a valid shared answer' "$(cat "$T/damaged.err")"

# -------------------------------------------------------------------
# 4. Stale (past its TTL, here made old by hand): answers at once, and
# is refreshed in the background for everyone.
f=$REPLICALB_STATE_DIR/pool.cluster.members
old=$($PY - "$f" <<'PYEOF'
import sys, time
from pathlib import Path
p = Path(sys.argv[1])
lines = p.read_text().split("\n")
w = lines[0].split(" ")
w[3] = str(int(time.time() * 1000) - 120000)   # two minutes old
print(w[3])
lines[0] = " ".join(w)
p.write_text("\n".join(lines))
PYEOF
)
# The hash covers only the members, so the edited header stays valid.
# replicalbctl, with DNS down, shows the stale answer a new program
# would ride on (the session's rule), and says why.
dns_stop
rlbctl resolve -v --peek pool.cluster >"$T/ctl-stale.out" 2>&1
check_match "resolve -v, DNS down: the stale shared answer, and why" \
	"answer: the host's shared answer, [0-9]+ ms old \\(stale: DNS did not answer\\)" \
	"$(cat "$T/ctl-stale.out")"
check_match "resolve -v, DNS down: its members" "127.0.0.74" "$(cat "$T/ctl-stale.out")"
dns_start || fail "named once more"
mark=$(wc -l <"$DNS_DIR/named.log")
# A program that lives a little (3 lookups 0.3 s apart): its background
# refresh has the time to end.
preload $PY "$DNSCLIENT" -n 3 -i 0.3 pool.cluster 80 >"$T/stale.log" \
	2>"$T/stale.err"
first_ms=$(head -n1 "$T/stale.log" | cut -d' ' -f2)
check_le "stale: the first lookup did not wait for DNS (ms)" 100 \
	"${first_ms%.*}"
check_eq "stale: served" 3 "$(grep -c ' ok .*served=p7' "$T/stale.log")"
wait_until 5 test "$(queries_since "$mark" "pool.$Z" A)" -ge 1
check_ge "stale: refreshed in the background" 1 \
	"$(queries_since "$mark" "pool.$Z" A)"
now_wall=$(head -n1 "$f" | cut -d' ' -f4)
check "stale: the shared answer is new again" test "$now_wall" -gt "$old"

# -------------------------------------------------------------------
# 5. remove-state: a cluster's shared answer goes with it, the others'
# stay.
cat >"$T/pool-only.conf" <<EOF
clusters = ( { name = "pool.cluster"; dns = "pool.$Z"; port = $PORT; } );
EOF
rlbctl -c "$T/pool-only.conf" remove-state >"$T/remove.out" 2>&1
check "remove-state: the removed cluster's shared answer is gone" \
	test ! -e "$REPLICALB_STATE_DIR/web.cluster.members"
check "remove-state: the kept cluster's stays" \
	test -f "$REPLICALB_STATE_DIR/pool.cluster.members"
check_match "remove-state: says so" "removed .*/web.cluster.members" \
	"$(cat "$T/remove.out")"
finish
