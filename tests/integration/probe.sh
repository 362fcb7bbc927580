#!/bin/bash
# probe.sh - replicalbctl probe (design.md §6): one pass of TCP connects to
# every replica, each within its cluster's connect_timeout_ms and all at
# once, counting a failure as a program's failed connect would; --json;
# --interval; and with it running, a silent replica is demoted before any
# program connects to it.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

HPORT=$(free_port)
CPORT=$(free_port)	# nothing listens: refused

write_config <<EOF2
load_balancing = "in_order";
distributed_replica_error_half_life = 600;
connect_timeout_ms = 800;
state_dir = "$T/state";
clusters = (
  { name = "web.cluster"; port = $HPORT;
    replicas = ( "127.0.0.2", "127.0.0.3", "127.0.0.4" ); },
  { name = "mixed.cluster";
    replicas = ( "127.0.0.3:$HPORT", "127.0.0.5:$CPORT",
                 "unresolvable.invalid:$HPORT", "127.0.0.4" ); }
);
EOF2

start_replica silent 127.0.0.2 "$HPORT" blackhole || fail "start silent replica"
start_replica r3 127.0.0.3 "$HPORT" http || fail "start r3"
start_replica r4 127.0.0.4 "$HPORT" http || fail "start r4"

check_eq "before probing, the silent replica comes first" \
	"127.0.0.2 127.0.0.3 127.0.0.4" "$(peek web.cluster)"

t0=$(now_ms)
out=$(timeout 10 "$RLBCTL" probe)
rc=$?
ms=$(($(now_ms) - t0))
check_eq "probe exits 3 when a replica failed" 3 "$rc"
check_le "one pass takes about one bound (800 ms), not one per replica" \
	2000 "$ms"
check_match "silent replica: timed out, counted" \
	"127\.0\.0\.2:$HPORT 127\.0\.0\.2 failed: Connection timed out \(error counted\)" \
	"$out"
check_match "live replica: ok" "127\.0\.0\.3:$HPORT 127\.0\.0\.3 ok [0-9]+ ms" "$out"
check_match "refusing replica: refused, counted" \
	"127\.0\.0\.5:$CPORT 127\.0\.0\.5 failed: Connection refused \(error counted\)" \
	"$out"
check_match "unresolvable replica: counted as a resolution failure" \
	"unresolvable\.invalid:$HPORT - failed: .* \(error counted\)" "$out"
check_match "replica without a port of its own: not probed" \
	"  127\.0\.0\.4 - failed: no port of its own" "$out"
check_eq "errors counted exactly as a failed connect would" \
	"1 0 0" "$(cluster_errors web.cluster)"
check_eq "mixed cluster: refused and unresolvable counted, others not" \
	"0 1 1 0" "$(cluster_errors mixed.cluster)"
check_eq "after one probe, the silent replica goes last" \
	"127.0.0.3 127.0.0.4 127.0.0.2" "$(peek web.cluster)"

# A program resolving now never touches the silent replica.
t0=$(now_ms)
got=$(timeout 10 env LD_PRELOAD="$RLB_LIB" curl -s --max-time 8 \
	"http://web.cluster:$HPORT/")
check_match "curl is served at once by a live replica" "replica=r3" "$got"
check_le "curl took well under the bound" 700 "$(($(now_ms) - t0))"

json=$(timeout 10 "$RLBCTL" probe --json web.cluster 2>&1)
check_eq "probe takes no cluster argument" 1 "$?"
json=$(timeout 10 "$RLBCTL" probe --json)
check_eq "JSON: one object per replica, parsed" \
	"7 web.cluster 127.0.0.2 false true Connection timed out" \
	"$($PY -c '
import json, sys
d = json.loads(sys.argv[1])
p = d["probes"]
s = p[0]
print(len(p), s["cluster"], s["address"], str(s["ok"]).lower(),
      str(s["counted"]).lower(), s["error"])' "$json")"
check_eq "JSON: a live replica has its time and no error" "true None" \
	"$($PY -c '
import json, sys
p = json.loads(sys.argv[1])["probes"][1]
print(str(p["ok"]).lower(), p["error"])' "$json")"
check_eq "two probes: two errors for the silent replica" \
	"2 0 0" "$(cluster_errors web.cluster)"

# --interval: passes repeat until stopped; every pass counts again.
timeout 4.6 "$RLBCTL" probe --interval 1 --json >"$T/interval.out" 2>&1
passes=$(grep -c '"probes"' "$T/interval.out")
check_ge "--interval 1 starts a pass every second (4 passes of 0.8 s in 4.6 s)" 4 "$passes"
check_eq "--interval: usage error for a bad interval" 1 \
	"$(timeout 5 "$RLBCTL" probe --interval 0 >/dev/null 2>&1; echo $?)"

# All replicas answering: exit 0.
write_config <<EOF2
connect_timeout_ms = 800;
state_dir = "$T/state2";
clusters = ( { name = "ok.cluster"; port = $HPORT;
               replicas = ( "127.0.0.3", "127.0.0.4" ); } );
EOF2
out=$(timeout 10 "$RLBCTL" probe)
check_eq "probe exits 0 when every replica answered" 0 "$?"
check_eq "nothing counted when every replica answered" "0 0" \
	"$(cluster_errors ok.cluster)"
finish
