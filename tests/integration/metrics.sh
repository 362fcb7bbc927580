#!/bin/bash
# metrics.sh - `replicalbctl status --prometheus` (design.md §17): the
# node_exporter textfile format, checked by promtool and by a strict parser
# of the text format of our own, against what `status --json` says, after
# real traffic (curl, and python3 holding a connection open); labels with
# characters the format escapes; one cluster alone; --json with
# --prometheus refused; the example unit writes the file whole.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
rlb_setup

PORT=$(free_port)
DEAD=$(free_port) # nothing listens: refused
write_config <<EOF
load_balancing = "in_order";
clusters = (
  { name = "m.cluster"; port = $PORT;
    replicas = ( "127.0.0.2:$DEAD",
                 { host = "odd\\"name\\\\x"; address = "127.0.0.3"; } ); },
  { name = "idle.cluster"; replicas = ( "127.0.0.4:9" ); }
);
EOF
start_replica r 127.0.0.3 "$PORT" || fail "replica"

# Traffic: two curls (the first refused on the first replica, which its
# error then puts last, then served), and a python3 that holds one
# connection open while status is taken.
for i in 1 2; do
	preload curl -s -o /dev/null "http://m.cluster:$PORT/" 2>>"$T/curl.err"
done
mkfifo "$T/go"
preload $PY -c '
import socket, sys
s = socket.create_connection(("m.cluster", '"$PORT"'), timeout=5)
print("held", flush=True)
open(sys.argv[1]).read()
s.close()' "$T/go" >"$T/held.out" 2>"$T/held.err" &
HELD=$!
wait_until 10 grep -q held "$T/held.out"
rlbctl status --prometheus >"$T/m.prom" 2>"$T/m.err"
rc=$?
rlbctl status --json >"$T/m.json"
echo >"$T/go"
wait "$HELD"
check_eq "status --prometheus: exit 0" 0 "$rc"
check_empty "status --prometheus: nothing on stderr" "$T/m.err"
check_empty "curl: silent" "$T/curl.err"

if command -v promtool >/dev/null; then
	check "promtool check metrics accepts it" \
		sh -c 'promtool check metrics <"$1" >"$1.lint" 2>&1' sh "$T/m.prom"
	check_empty "promtool: no lint remark" "$T/m.prom.lint"
else
	fail "promtool is not installed (package prometheus, scripts/deps.sh)"
fi

# The text format, parsed strictly (prometheus.io/docs/instrumenting/
# exposition_formats): every family's HELP and TYPE once, before its
# samples, which are not split; names and labels well-formed; values
# floats; counters _total; then every replica value against status --json.
check_eq "the parser and status --json agree" "ok" "$($PY - "$T/m.prom" "$T/m.json" <<'PYEOF'
import json, re, sys
text = open(sys.argv[1]).read()
status = json.load(open(sys.argv[2]))
assert text.endswith("\n"), "no final newline"
name_re = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
lab_re = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\\\|\\"|\\n)*)"'
sample_re = re.compile(r"^(%s)(?:\{(%s(?:,%s)*)\})? (\S+)$" %
                       (name_re, lab_re, lab_re))
helped, typed, seen, samples = set(), {}, [], {}
for line in text.split("\n")[:-1]:
    if line.startswith("# HELP "):
        n = line.split(" ")[2]
        assert n not in helped, "HELP twice: " + n
        helped.add(n)
        continue
    if line.startswith("# TYPE "):
        _, _, n, t = line.split(" ")
        assert n not in typed and t in ("gauge", "counter"), line
        assert n in helped, "TYPE before HELP: " + n
        typed[n] = t
        continue
    assert not line.startswith("#"), "stray comment: " + line
    m = sample_re.match(line)
    assert m, "not a sample: " + line
    n = m.group(1)
    assert n in typed, "a sample before its TYPE: " + line
    if seen and seen[-1] != n:
        assert n not in seen, "family split: " + n
    seen.append(n)
    labels = {}
    for k, v in re.findall(lab_re, m.group(2) or ""):
        labels[k] = (v.replace('\\"', '"').replace("\\n", "\n")
                     .replace("\\\\", "\\"))
    if typed[n] == "counter":
        assert n.endswith("_total"), "counter not _total: " + n
    value = float(m.group(m.lastindex))
    samples[(n, tuple(sorted(labels.items())))] = value
keys = {"errors": "replicalb_replica_errors",
        "slowdowns": "replicalb_replica_slowdowns",
        "recovery_seconds": "replicalb_replica_recovery_seconds",
        "connects": "replicalb_replica_connects_total",
        "failures": "replicalb_replica_failures_total",
        "in_flight": "replicalb_replica_in_flight"}
n = 0
for c in status["clusters"]:
    key = ("replicalb_cluster_replicas", (("cluster", c["name"]),))
    assert samples[key] == len(c["replicas"]), key
    for r in c["replicas"]:
        for k, fam in keys.items():
            hits = [v for (f, l), v in samples.items() if f == fam and
                    dict(l)["cluster"] == c["name"] and
                    dict(l)["host"] == r["host"]]
            assert len(hits) == 1, (fam, r["host"], hits)
            # (a second may pass between the two commands)
            slack = 1 if k == "recovery_seconds" else 0
            assert abs(hits[0] - r[k]) <= slack, (fam, r["host"], hits[0], r[k])
            n += 1
assert n == 3 * len(keys), n
print("ok")
PYEOF
)"
prom=$(cat "$T/m.prom")
check "the refused replica: one failure" grep -qxF \
	"replicalb_replica_failures_total{cluster=\"m.cluster\",host=\"127.0.0.2\",port=\"$DEAD\",source=\"config\"} 1" \
	"$T/m.prom"
check "the replica served: three connects, its name escaped, the cluster's port" \
	grep -qxF "replicalb_replica_connects_total{cluster=\"m.cluster\",host=\"odd\\\"name\\\\x\",port=\"$PORT\",source=\"config\"} 3" \
	"$T/m.prom"
check_match "the held connection is in flight" \
	"replicalb_replica_in_flight\\{cluster=\"m.cluster\",host=\"odd[^}]*\\} 1" \
	"$prom"
check_match "the refused replica has errors" \
	"replicalb_replica_errors\\{cluster=\"m.cluster\",host=\"127.0.0.2\"[^}]*\\} [1-9]" \
	"$prom"

# One cluster alone; and one format at a time.
check_eq "status --prometheus CLUSTER: that cluster's samples only" \
	"idle.cluster" \
	"$(rlbctl status --prometheus idle.cluster | grep -v '^#' | grep -o 'cluster="[^"]*"' | sort -u | cut -d'"' -f2)"
rlbctl status --json --prometheus >/dev/null 2>"$T/both.err"
check_eq "--json with --prometheus: a usage error (exit 1)" 1 $?
check_match "... that says so" "one or the other" "$(cat "$T/both.err")"

# The example unit: the file is written whole (a temporary file renamed
# into place), so node_exporter never reads half of one. Its command, run
# with the build's replicalbctl and a directory of the test's.
svc=$top_srcdir/etc/systemd/replicalb-metrics.service
dir=$T/textfile
mkdir -p "$dir"
cmd=$(sed -n "s/^ExecStart=\\/bin\\/sh -c '\\(.*\\)'\$/\\1/p" "$svc")
check_match "replicalb-metrics.service renames a whole file into place" \
	'status --prometheus >.*\.tmp.* && exec mv ' "$cmd"
cmd=${cmd//@bindir@/$top_builddir}
cmd=${cmd//\/var\/lib\/prometheus\/node-exporter/$dir}
sh -c "$cmd"
check_eq "the unit's command: exit 0" 0 $?
check "... writes replicalb.prom" grep -q '^replicalb_replica_errors{' "$dir/replicalb.prom"
check_eq "... and leaves no temporary file" "replicalb.prom" "$(ls "$dir")"
finish
