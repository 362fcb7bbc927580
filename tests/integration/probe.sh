#!/bin/bash
# probe.sh - replicalbctl probe (design.md §6): one pass of TCP connects to
# every replica, each within its cluster's connect_timeout_ms and all at
# once, counting a failure as a program's failed connect would; --json;
# --interval; and with it running, a silent replica is demoted before any
# program connects to it. Only the replica's failures count (design.md §6.1):
# connect_timeout_ms = 0 is no bound; 300 replicas under ulimit -n 256
# are all probed; a slow lookup of one cluster charges no other; a count
# that could not be stored (a read-only state directory) is reported as
# not stored and exits 4; the HTTP check (a 503, no answer in time, no
# HTTP: counted; a 200: healthy); the systemd units leave the state
# writable.
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

# ---------------------------------------------------------------------
# connect_timeout_ms = 0 means no bound: a live replica answers, a
# refusing one is refused (before: every replica "timed out" at once).
write_config <<EOF2
connect_timeout_ms = 0;
state_dir = "$T/state0";
clusters = ( { name = "zero.cluster"; port = $HPORT;
               replicas = ( "127.0.0.3", "127.0.0.5:$CPORT" ); } );
EOF2
out=$(timeout 10 "$RLBCTL" probe)
check_eq "timeout 0: exit 3 (the refusing replica was counted)" 3 "$?"
check_match "timeout 0: the live replica answers" \
	"127\.0\.0\.3:$HPORT 127\.0\.0\.3 ok [0-9]+ ms" "$out"
check_match "timeout 0: the refusing replica is refused, counted" \
	"127\.0\.0\.5:$CPORT 127\.0\.0\.5 failed: Connection refused \(error counted\)" \
	"$out"
check_eq "timeout 0: only the refusing replica counted" "0 1" \
	"$(cluster_errors zero.cluster)"

# A silent replica with no bound: the probe waits for the kernel's
# outcome. In a network namespace of its own (root), the kernel gives up
# after one SYN retry (net.ipv4.tcp_syn_retries = 1: about 3 s), and
# that timeout counts.
if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null &&
	unshare -n true 2>/dev/null; then
	cat >"$T/zero_ns.sh" <<EOF2
ip link set lo up 2>/dev/null || exit 90
echo 1 >/proc/sys/net/ipv4/tcp_syn_retries || exit 91
. "$top_srcdir/tests/lib.sh"
T=$T
start_replica silent0 127.0.0.2 $HPORT blackhole >/dev/null || exit 92
t0=\$(now_ms)
"$RLBCTL" -c "$T/zero.conf" probe
echo "rc=\$? ms=\$((\$(now_ms) - t0))"
stop_replica silent0
EOF2
	cat >"$T/zero.conf" <<EOF2
connect_timeout_ms = 0;
state_dir = "$T/state0ns";
clusters = ( { name = "zerosilent.cluster"; port = $HPORT;
               replicas = ( "127.0.0.2" ); } );
EOF2
	out=$(timeout 30 unshare -n bash "$T/zero_ns.sh" 2>&1)
	check_match "timeout 0, silent: the kernel's timeout, counted" \
		"127\.0\.0\.2:$HPORT 127\.0\.0\.2 failed: Connection timed out \(error counted\)" \
		"$out"
	ms=$(printf '%s\n' "$out" | sed -n 's/^rc=3 ms=\([0-9]*\)$/\1/p')
	check_ge "timeout 0, silent: waited for the kernel (about 3 s)" 2500 "$ms"
	check_le "timeout 0, silent: and no longer" 10000 "$ms"
	check_eq "timeout 0, silent: one error stored" 1 \
		"$(rlbctl -c "$T/zero.conf" status --json | $PY -c '
import json, sys
print(json.load(sys.stdin)["clusters"][0]["replicas"][0]["errors"])')"
else
	# No namespace: it is still waiting after 2 s, well past 0 ms.
	timeout 2 "$RLBCTL" -c /dev/stdin probe >/dev/null 2>&1 <<EOF2
connect_timeout_ms = 0;
state_dir = "$T/state0b";
clusters = ( { name = "zerosilent.cluster"; port = $HPORT;
               replicas = ( "127.0.0.2" ); } );
EOF2
	check_eq "timeout 0, silent: still waiting after 2 s" 124 "$?"
fi

# ---------------------------------------------------------------------
# 300 replicas under ulimit -n 256: probed in batches within the limit,
# every one of them answers (before: EMFILE, counted as their errors).
{
	echo "connect_timeout_ms = 2000;"
	echo "state_dir = \"$T/state300\";"
	echo "clusters = ( { name = \"many.cluster\"; replicas = ("
	for i in $(seq 300); do
		[ "$i" = 1 ] || printf ', '
		printf '{ host = "r%d"; port = %d; address = "127.0.0.3"; }\n' \
			"$i" "$HPORT"
	done
	echo "); } );"
} | write_config
out=$(ulimit -n 256 && timeout 20 "$RLBCTL" probe 2>&1)
rc=$?
check_eq "300 replicas, ulimit -n 256: exit 0" 0 "$rc"
check_eq "300 replicas, ulimit -n 256: every one answers" 300 \
	"$(printf '%s\n' "$out" | grep -c ' ok [0-9]* ms$')"
check_eq "300 replicas, ulimit -n 256: no local error" 0 \
	"$(printf '%s\n' "$out" | grep -c -i 'local error\|open files')"
check_eq "300 replicas, ulimit -n 256: nothing counted" 0 \
	"$(cluster_errors many.cluster | tr ' ' '\n' | grep -vc '^0$')"

# With no descriptor to spare even for the state file (ulimit -n 4), the
# refused replica's error cannot be stored: reported as not stored, never
# as counted, exit 4 (before: "Too many open files (error counted)").
write_config <<EOF2
connect_timeout_ms = 800;
clusters = ( { name = "fd.cluster";
               replicas = ( "127.0.0.5:$CPORT" ); } );
EOF2
out=$(ulimit -n 4 && timeout 10 "$RLBCTL" probe 2>/dev/null)
rc=$?
check_eq "ulimit -n 4: exit 4 (the probe fell short)" 4 "$rc"
check_match "ulimit -n 4: the failure is not stored, not counted" \
	"127\.0\.0\.5:$CPORT 127\.0\.0\.5 failed: Connection refused \(error not stored" \
	"$out"
check_eq "ulimit -n 4: nothing in the state" 0 "$(cluster_errors fd.cluster)"

# ---------------------------------------------------------------------
# A slow lookup of one cluster's replica (2 s, through an LD_PRELOAD
# shim) charges no other: the other cluster's live replica answers
# (before: it timed out, counted, as did the slow one itself).
SLOWGAI=$top_builddir/tests/helpers/.libs/libslowgai.so
[ -f "$SLOWGAI" ] || fail "slow getaddrinfo shim not built: $SLOWGAI"
write_config <<EOF2
connect_timeout_ms = 800;
state_dir = "$T/stateslow";
clusters = (
  { name = "fast.cluster"; replicas = ( "127.0.0.3:$HPORT" ); },
  { name = "slow.cluster"; replicas = ( "slowname.test:$HPORT" ); }
);
EOF2
out=$(timeout 15 env LD_PRELOAD="$SLOWGAI" SLOW_GAI_NAME=slowname.test \
	SLOW_GAI_MS=2000 SLOW_GAI_ADDR=127.0.0.4 "$RLBCTL" probe 2>&1)
check_eq "slow lookup: exit 0" 0 "$?"
check_match "slow lookup: the other cluster's replica answers" \
	"127\.0\.0\.3:$HPORT 127\.0\.0\.3 ok [0-9]+ ms" "$out"
check_match "slow lookup: the slow one answers once resolved" \
	"slowname\.test:$HPORT 127\.0\.0\.4 ok [0-9]+ ms" "$out"
check_eq "slow lookup: nothing counted" "0 0" \
	"$(cluster_errors fast.cluster) $(cluster_errors slow.cluster)"

# ---------------------------------------------------------------------
# A read-only state directory: the refused replica's error cannot be
# stored; it is reported as not stored (never as counted), exit 4, and
# status shows 0 afterwards. Root writes through modes: a read-only bind
# mount in a mount namespace of its own; others: chmod.
export REPLICALB_STATE_DIR=$T/ro
write_config <<EOF2
connect_timeout_ms = 800;
clusters = ( { name = "ro.cluster";
               replicas = ( "127.0.0.5:$CPORT", "127.0.0.3:$HPORT" ); } );
EOF2
mkdir -m 0700 "$T/ro"
ro_probe()
{
	if [ "$(id -u)" = 0 ]; then
		unshare -m bash -c 'mount --make-rprivate / &&
			mount --bind "$1" "$1" &&
			mount -o remount,bind,ro "$1" && shift && exec "$@"' \
			ro "$T/ro" timeout 10 "$RLBCTL" probe "$@"
	else
		chmod 0500 "$T/ro"
		timeout 10 "$RLBCTL" probe "$@"
		chmod 0700 "$T/ro"
	fi
}
out=$(ro_probe 2>"$T/ro.err")
rc=$?
check_eq "read-only state: exit 4 (a failure not stored)" 4 "$rc"
check_match "read-only state: reported as not stored" \
	"127\.0\.0\.5:$CPORT 127\.0\.0\.5 failed: Connection refused \(error not stored" \
	"$out"
check_eq "read-only state: never reported as counted" 0 \
	"$(printf '%s\n' "$out" | grep -c 'error counted')"
check_match "read-only state: the live replica still answers" \
	"127\.0\.0\.3:$HPORT 127\.0\.0\.3 ok" "$out"
check_eq "read-only state: status shows nothing stored" "0 0" \
	"$(cluster_errors ro.cluster)"
json=$(ro_probe --json 2>/dev/null)
check_eq "read-only state, JSON: counted false, stored false, not ours" \
	"false false false Connection refused" "$($PY -c '
import json, sys
p = json.loads(sys.argv[1])["probes"][0]
print(str(p["counted"]).lower(), str(p["stored"]).lower(),
      str(p["ours"]).lower(), p["error"])' "$json")"

# ---------------------------------------------------------------------
# The HTTP check (health_check_path, design.md §6.1): ClickHouse answers
# GET /replicas_status with 503 when a replica lags, on its HTTP port
# beside the native one. A replica whose check answers 503, or nothing
# within health_check_timeout_ms, or no HTTP, fails as a refused connect
# does, and a program's next resolution puts it last; a 200 is healthy.
NATIVE=$(free_port)	# nothing listens: the check does not go there
HTTP=$(free_port)
for n in 2 3 4 5; do echo 200 >"$T/status.$n"; done
echo 503 >"$T/status.3"
start_replica h2 127.0.0.2 "$HTTP" http --status-file "$T/status.2" \
	--log-accepts || fail "start h2"
start_replica h3 127.0.0.3 "$HTTP" http --status-file "$T/status.3" \
	--log-accepts || fail "start h3"
start_replica h4 127.0.0.4 "$HTTP" http --delay-ms 3000 || fail "start h4"
start_replica h5 127.0.0.5 "$HTTP" tcp || fail "start h5"
cat >"$T/http.conf" <<EOF2
load_balancing = "in_order";
distributed_replica_error_half_life = 600;
state_dir = "$T/state-http";
health_check_timeout_ms = 300;
clusters = (
  { name = "lag.cluster"; port = $NATIVE;
    health_check_path = "/replicas_status"; health_check_port = $HTTP;
    replicas = ( "127.0.0.3", "127.0.0.2", "127.0.0.4", "127.0.0.5" ); }
);
EOF2
hctl() { "$RLBCTL" -c "$T/http.conf" "$@"; }
cluster_errors_of() { REPLICALB_CONFIG=$1 cluster_errors "$2"; }
check_eq "before the check, the lagging replica comes first" \
	"127.0.0.3 127.0.0.2 127.0.0.4 127.0.0.5" "$(hctl resolve --peek lag.cluster)"
t0=$(now_ms)
out=$(timeout 10 "$RLBCTL" -c "$T/http.conf" probe)
rc=$?
check_eq "HTTP check: probe exits 3 (failures counted)" 3 "$rc"
check_le "... within the connect bound and the 300 ms answer bound" 2500 \
	$(($(now_ms) - t0))
check_match "503: failed, counted" \
	"127\.0\.0\.3:$NATIVE 127\.0\.0\.3 failed: HTTP status 503 \(error counted\)" "$out"
check_match "200: ok" "127\.0\.0\.2:$NATIVE 127\.0\.0\.2 ok [0-9]+ ms, HTTP 200" "$out"
check_match "no answer in time: failed, counted" \
	"127\.0\.0\.4:$NATIVE 127\.0\.0\.4 failed: no HTTP answer within 300 ms \(error counted\)" "$out"
check_match "not HTTP: failed, counted" \
	"127\.0\.0\.5:$NATIVE 127\.0\.0\.5 failed: not an HTTP answer \(error counted\)" "$out"
check_eq "errors: the lagging, the silent and the non-HTTP replica" \
	"1 0 1 1" "$(cluster_errors_of "$T/http.conf" lag.cluster)"
check_eq "after one pass, programs get the healthy replica first" \
	"127.0.0.2 127.0.0.3 127.0.0.4 127.0.0.5" "$(hctl resolve --peek lag.cluster)"
check_match "the check asked the path on the HTTP port" \
	"^GET /replicas_status 503$" "$(cat "$T/srv-h3.out")"
json=$(hctl probe --json)
check_eq "probe --json: http_status of each" "503 200 None None" "$($PY -c '
import json, sys
print(" ".join(str(p.get("http_status")) for p in json.loads(sys.argv[1])["probes"]))' "$json")"
# The lag is over: 200 again, healthy, nothing more counted.
echo 200 >"$T/status.3"
out=$(hctl probe)
check_match "the replica caught up: ok" "127\.0\.0\.3 ok [0-9]+ ms, HTTP 200" "$out"
check_eq "... and counted nothing more" "2 0 3 3" "$(cluster_errors_of "$T/http.conf" lag.cluster)"
printf 'clusters = ( { name = "x.cluster"; health_check_path = "replicas_status";\n  replicas = ( "127.0.0.2:1" ); } );\n' >"$T/bad-http.conf"
check_eq "a path without / is a config error naming file:line" \
	"$T/bad-http.conf:1: health_check_path must start with /" \
	"$("$RLBCTL" -c "$T/bad-http.conf" check 2>&1)"

# ---------------------------------------------------------------------
# The systemd units: ProtectSystem=strict and ProtectHome=read-only make
# every path read-only, $XDG_RUNTIME_DIR (under /run/user) included, so
# the state directory must be created and made writable by the unit.
for u in replicalb-probe.service replicalb-probe-once.service; do
	f=$top_srcdir/etc/systemd/$u
	check_match "$u: the state directory is created" \
		'^RuntimeDirectory=replicalb$' "$(cat "$f")"
	check_match "$u: and kept when the unit stops" \
		'^RuntimeDirectoryPreserve=yes$' "$(cat "$f")"
	check_match "$u: and writable under ProtectSystem=strict" \
		'^ReadWritePaths=(.* )?%t/replicalb( |$)' "$(cat "$f")"
	check_match "$u: exit 3 (failures counted) is a success" \
		'^SuccessExitStatus=3$' "$(cat "$f")"
done
if command -v systemd-analyze >/dev/null; then
	mkdir -p "$T/units" "$T/xdg"
	chmod 0700 "$T/xdg"
	# The units; the drop-in (replicalb-preload.conf) is no unit.
	for u in "$top_srcdir"/etc/systemd/*.service \
		"$top_srcdir"/etc/systemd/*.timer; do
		sed "s|@bindir@|$top_builddir|g" "$u" >"$T/units/${u##*/}"
	done
	check "systemd-analyze verify --user accepts the units" \
		env XDG_RUNTIME_DIR="$T/xdg" timeout 60 systemd-analyze verify \
		--user --man=no "$T"/units/*
fi
finish
