#!/usr/bin/env python3
"""bench_report.py - turn the raw lines of scripts/bench into the table of
figures and bench/results.json (schema: BENCHMARKS.md, "results.json").

Usage: bench_report.py RAW_DIR OUT.json [--quick 0|1] [--runs K]
       [--seconds S] [--load-start "L1 L5 L15"] [--load-end "..."]
       [--haproxy VERSION] [--commit ID]
       bench_report.py --markdown RESULTS.json...
         the figures as a Markdown table, one column per file, and their
         median (BENCHMARKS.md)

Every figure is a ratio of two measurements made side by side in the same
run; its value is the median over runs (and rounds) of those ratios.
"""
import argparse
import datetime
import json
import os
import platform
import statistics
import sys

POLICIES = ["random", "nearest_hostname", "hostname_levenshtein_distance",
            "hostname_longest_common_prefix",
            "hostname_longest_common_suffix", "in_order", "first_or_random",
            "round_robin"]


def lines(raw, name):
    path = os.path.join(raw, name)
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [l.split() for l in f if l.strip()]


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def num(s):
    return None if s == "-" else float(s)


def keyed(tokens):
    """'conns 5 errors 0 ...' -> {'conns': 5.0, 'errors': 0.0, ...}"""
    return {tokens[i]: num(tokens[i + 1]) for i in range(0, len(tokens) - 1, 2)}


def loadavg(s):
    return [float(x) for x in s.split()] if s else None


def machine(load_start, load_end):
    """The "machine" object of a results file."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for l in f:
                if l.startswith("model name"):
                    model = l.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpus": os.cpu_count(), "cpu": model,
            "kernel": platform.release(),
            "loadavg_start": loadavg(load_start),
            "loadavg_end": loadavg(load_end)}


def markdown(paths):
    """The figures of one or more results.json files as a Markdown table:
    one column per file, and their median when there are several."""
    docs = []
    for p in paths:
        with open(p) as f:
            docs.append(json.load(f))
    head = "| figure | " + " | ".join(
        "session %d (load %s)" % (i + 1, (d["machine"].get("loadavg_start") or
                                      ["?"])[0])
        for i, d in enumerate(docs))
    if len(docs) > 1:
        head += " | median"
    print(head + " | goal | met |")
    print("|---" * (len(docs) + 3 + (len(docs) > 1)) + "|")
    for k, f in enumerate(docs[-1]["figures"]):
        vals = []
        for d in docs:
            g = [x for x in d["figures"] if x["id"] == f["id"]]
            vals.append(g[0]["value"] if g else None)
        fmt = (lambda v: "-" if v is None else "%.2f" % v)
        row = "| %s | %s" % (f["label"], " | ".join(fmt(v) for v in vals))
        v = med(vals)
        if len(docs) > 1:
            row += " | **%s**" % fmt(v)
        met = None if v is None else (
            v <= f["goal_value"] if f["goal_op"] == "<=" else
            v >= f["goal_value"] if f["goal_op"] == ">=" else
            all(x == f["goal_value"] for x in vals if x is not None))
        unit = "" if f["unit"] == "x" else " " + f["unit"]
        print(row + " | %s%s%s | %s |" % (
            f["goal_op"].replace("<=", "≤").replace(">=", "≥"),
            " %g" % f["goal_value"], unit,
            "-" if met is None else "yes" if met else "**no**"))
    return 0


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--markdown":
        return markdown(sys.argv[2:])
    ap = argparse.ArgumentParser()
    ap.add_argument("raw")
    ap.add_argument("out")
    ap.add_argument("--quick", type=int, default=0)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--seconds", type=int, default=0)
    ap.add_argument("--load-start", default="")
    ap.add_argument("--load-end", default="")
    ap.add_argument("--haproxy", default="")
    ap.add_argument("--commit", default="")
    a = ap.parse_args()

    figures = []
    details = {}

    def figure(fid, label, value, goal_op, goal, unit, how, per_run=None,
               control=None):
        met = None
        if value is not None:
            met = value <= goal if goal_op == "<=" else \
                value >= goal if goal_op == ">=" else value == goal
        figures.append({
            "id": fid, "label": label,
            "value": None if value is None else round(value, 4),
            "unit": unit, "goal": "%s %g" % (goal_op, goal),
            "goal_op": goal_op, "goal_value": goal, "met": bool(met),
            "measured": value is not None,
            "per_run": [None if v is None else round(v, 4)
                        for v in (per_run or [])],
            "control": None if control is None else round(control, 4),
            "how": how})

    runs = range(1, a.runs + 1)

    # ---- bench_hooks ----
    hooks = {}  # (run, cfg, op) -> (next, sym, diff, ratio)
    for t in lines(a.raw, "hooks"):
        hooks[(int(t[0]), t[1], t[2])] = tuple(num(x) for x in t[3:7])

    def hk(run, cfg, op, col):
        v = hooks.get((run, cfg, op))
        return None if v is None else v[col]

    ops = sorted({k[2] for k in hooks})
    details["hooks_ns"] = {
        cfg: {op: {col: med([hk(r, cfg, op, i) for r in runs])
                   for i, col in enumerate(["libc", "hooked", "added",
                                            "ratio"])}
              for op in ops if any((r, cfg, op) in hooks for r in runs)}
        for cfg in ["plain", "preload", "stub", "stubpre"]}

    per = [hk(r, "preload", "connect_eisconn", 3) for r in runs]
    figure("connect_nonreplica_vs_libc",
           "connect() to a non-replica address / libc", med(per), "<=",
           1.02, "x",
           "bench_hooks, preloaded: connect() of a connected TCP socket to "
           "a non-replica 127.0.0.1 address (the kernel answers EISCONN), "
           "through the hook / through libc's connect, median of per-round "
           "ratios of 4 ms batches", per,
           med([hk(r, "plain", "connect_eisconn", 3) for r in runs]))

    def ratio(x, y):
        return None if x is None or y is None or y == 0 else x / y

    per = [ratio(hk(r, "preload", "getaddrinfo_virtual", 1),
                 hk(r, "preload", "getaddrinfo_numeric", 0)) for r in runs]
    figure("virtual3_vs_numeric",
           "virtual getaddrinfo, 3 pinned replicas / glibc "
           "getaddrinfo(\"127.0.0.1\")", med(per), "<=", 1.5, "x",
           "bench_hooks, preloaded, one process: getaddrinfo+freeaddrinfo "
           "of the virtual name (3 pinned replicas) / glibc's own numeric "
           "lookup (called below the hook), medians over interleaved rounds",
           per)
    per = [ratio(hk(r, "preload", "getaddrinfo_hosts", 0),
                 hk(r, "preload", "getaddrinfo_virtual", 1)) for r in runs]
    figure("hosts_vs_virtual3",
           "glibc /etc/hosts lookup / virtual getaddrinfo", med(per), ">=",
           25, "x",
           "bench_hooks, preloaded, one process: glibc's getaddrinfo"
           "(\"localhost\") through NSS files / the virtual lookup", per)

    # ---- bench_scale ----
    scale = {}  # policy -> n -> {virtual_ns, floor_ns, ratio}
    for t in lines(a.raw, "scale"):
        run, pol, n = int(t[0]), t[1], int(t[2])
        d = scale.setdefault(pol, {}).setdefault(n, {"virtual_ns": [],
                                                     "floor_ns": [],
                                                     "ratio": []})
        d["virtual_ns"].append(float(t[4]))
        d["floor_ns"].append(float(t[5]))
        d["ratio"].append(float(t[6]))
    details["scale"] = {pol: {str(n): {k: med(v) for k, v in d.items()}
                              for n, d in sorted(scale[pol].items())}
                        for pol in POLICIES if pol in scale}
    for pol in POLICIES:
        per = scale.get(pol, {}).get(1000, {}).get("ratio", [])
        figure("virtual1000_vs_floor." + pol,
               "virtual getaddrinfo, 1,000 replicas, %s / the floor" % pol,
               med(per), "<=", 2, "x",
               "bench_scale, preloaded (REPLICALB_LOAD_BALANCING=%s): "
               "getaddrinfo+freeaddrinfo of a 1,000-replica virtual name / "
               "malloc, fill, link and free of 1,000 glibc-layout nodes "
               "(struct addrinfo + sockaddr_in in one allocation), median of "
               "per-round ratios" % pol, per)

    # ---- bench_threads ----
    th = {}  # (which, T) -> {ops: [], speedup: []}
    for t in lines(a.raw, "threads"):
        d = th.setdefault((t[2], int(t[1])), {"ops_per_s": [], "speedup": []})
        d["ops_per_s"].append(float(t[3]))
        d["speedup"].append(float(t[4]))
    details["threads"] = {
        which: {str(n): {k: med(v) for k, v in d.items()}
                for (w, n), d in sorted(th.items()) if w == which}
        for which in ["virtual", "control"]}
    details["threads"]["virtual_vs_control_2"] = med(
        [ratio(v, c) for v, c in zip(
            th.get(("virtual", 2), {}).get("speedup", []),
            th.get(("control", 2), {}).get("speedup", []))])
    per = th.get(("virtual", 2), {}).get("speedup", [])
    figure("threads2_vs_1",
           "2 threads resolving / 1 thread (same process)", med(per), ">=",
           1.8, "x",
           "bench_threads, preloaded: lookups per second of 2 threads "
           "resolving the 3-replica virtual name / of 1 thread, median of "
           "per-round ratios of 30 ms batches; control: the same with "
           "glibc's numeric lookup",
           per, med(th.get(("control", 2), {}).get("speedup", [])))

    # ---- bench_threads -u: connecting and closing ----
    tc = {}
    for t in lines(a.raw, "threads-conn"):
        tc.setdefault((t[2], int(t[1])), []).append(float(t[4]))
    details["threads_conn"] = {}
    for n in (2, 8):
        v, c = tc.get(("virtual", n), []), tc.get(("control", n), [])
        rel = med([ratio(x, y) for x, y in zip(v, c)])
        details["threads_conn"][str(n)] = {"virtual": med(v),
                                           "control": med(c)}
        figure("threads_conn%d_vs_control" % n,
               "%d threads connecting and closing: speedup / control's" % n,
               rel, ">=", 0.95, "x",
               "bench_threads -u, preloaded: UDP sockets connected to a "
               "replica's address (the ledger takes each in flight, counts "
               "it, drops it at close, host-wide) per second of %d threads "
               "/ of 1 thread, against the same through libc's connect and "
               "close (the control); median of per-round ratios" % n,
               [ratio(x, y) for x, y in zip(v, c)], med(c))

    # ---- bench_conn ----
    conn = {}  # (run, round) -> cfg -> fields
    for t in lines(a.raw, "conn"):
        conn.setdefault((int(t[0]), int(t[1])), {})[t[2]] = keyed(t[3:])

    def cratio(cfg, other, field):
        return [ratio(v[cfg][field], v[other][field])
                for v in conn.values() if cfg in v and other in v]

    details["conn"] = {
        cfg: {f: med([v[cfg][f] for v in conn.values() if cfg in v])
              for f in ["rate", "p50_us", "p99_us", "conns", "errors"]}
        for cfg in ["direct", "preload", "spread", "haproxy"]
        if any(cfg in v for v in conn.values())}
    details["conn"]["rate_preload_vs_spread"] = med(
        cratio("preload", "spread", "rate"))
    details["conn"]["p99_preload_vs_spread"] = med(
        cratio("preload", "spread", "p99_us"))
    details["conn"]["rate_spread_vs_direct"] = med(
        cratio("spread", "direct", "rate"))
    details["conn"]["haproxy_version"] = a.haproxy or None
    how = ("bench_conn, one client connection at a time for a fixed time: "
           "getaddrinfo, connect to the first address, send an HTTP/1.0 "
           "request, read the reply to EOF, close; against bench_backend "
           "(C, epoll) on 127.77.0.1-3; preload: round_robin over the 3 "
           "backends by the virtual name; direct: the address of one "
           "backend; haproxy: Debian's HAProxy %s, mode tcp, balance "
           "roundrobin, same 3 backends; spread (a control): the client "
           "itself rotating over the 3 addresses, no library. Rounds "
           "interleave them in a rotating order; median of per-round "
           "ratios"
           % (a.haproxy or "(not installed)"))
    per = cratio("preload", "direct", "rate")
    figure("conn_rate_vs_direct",
           "short TCP connections: preload rate / direct rate", med(per),
           ">=", 0.98, "x", how, per)
    per = cratio("preload", "direct", "p99_us")
    figure("conn_p99_vs_direct",
           "short TCP connections: preload p99 / direct p99", med(per),
           "<=", 1.03, "x", how, per)
    per = cratio("preload", "haproxy", "rate")
    figure("conn_rate_vs_haproxy",
           "short TCP connections: preload rate / HAProxy rate", med(per),
           ">=", 2, "x", how, per)
    details["conn"]["p99_preload_vs_haproxy"] = med(
        cratio("preload", "haproxy", "p99_us"))

    # ---- bench_errors ----
    er = {}
    for t in lines(a.raw, "errors"):
        er.setdefault(int(t[0]), {})[t[1]] = keyed(t[2:])
    for phase, fid, label, how in (
            ("warm", "errors_counted_exact",
             "16 processes recording errors: errors counted / refusals",
             "16 preloaded processes, started together on a state that "
             "exists already"),
            ("cold", "errors_counted_exact_cold",
             "the same, 16 processes starting on no state yet",
             "16 preloaded processes, started together, that find no "
             "state yet and attach to it all at once")):
        per = [ratio(v[phase]["counted"], v[phase]["refused"])
               for v in er.values() if phase in v]
        # Exactness is all or nothing: the worst run is the figure.
        worst = max(per, key=lambda x: abs(x - 1)) if per else None
        figure(fid, label, worst, "==", 1, "x",
               "bench_errors: %s, each resolving a 3-replica virtual name "
               "and connecting to the first address, where nothing listens; "
               "the sum of the replicas' error counts (replicalbctl status "
               "--json) after, minus before / the refusals the processes "
               "saw; the run furthest from 1 is the figure" % how, per)
    details["errors"] = {
        cfg: {f: med([v[cfg][f] for v in er.values() if cfg in v])
              for f in ["procs", "attempts", "refused", "counted", "seconds",
                        "rate"]}
        for cfg in ["warm", "cold", "plain"]
        if any(cfg in v for v in er.values())}
    details["errors"]["rate_warm_vs_plain"] = med(
        [ratio(v["warm"]["rate"], v["plain"]["rate"])
         for v in er.values() if "warm" in v and "plain" in v])

    # ---- bench_rss ----
    rss = {}
    for t in lines(a.raw, "rss"):
        rss.setdefault(int(t[0]), {}).setdefault(t[1], []).append(float(t[2]))
    per = [(med(v["preload"]) - med(v["plain"])) / 1024
           for v in rss.values() if "preload" in v and "plain" in v]
    figure("rss_added_mib", "resident memory added, 3-replica config",
           med(per), "<=", 1, "MiB",
           "bench_rss: VmRSS of a small program that resolves once, "
           "preloaded with a 3-replica config (virtual name) minus without "
           "the library (\"127.0.0.1\"), medians of 3 each per run", per)
    details["rss_kb"] = {cfg: med([x for v in rss.values()
                                   for x in v.get(cfg, [])])
                         for cfg in ["plain", "preload"]}

    # ---- bench_first ----
    fi = {}
    for t in lines(a.raw, "first"):
        fi.setdefault(int(t[0]), {}).setdefault(t[1], []).append(float(t[2]))
    per = [ratio(med(v["dns"]), med(v["cfg"]))
           for v in fi.values() if "dns" in v and "cfg" in v]
    figure("first_dns_shared_vs_config",
           "new process, DNS cluster with a fresh shared answer / config "
           "cluster (first resolution)", med(per), "<=", 2, "x",
           "bench_first: the first getaddrinfo() of a new preloaded "
           "process, the library's start included: a dns= cluster whose "
           "host-wide shared answer is fresh (no DNS asked) / a cluster of "
           "3 config replicas, medians of the interleaved pairs per run",
           per)
    details["first_ns"] = {c: med([x for v in fi.values()
                                   for x in v.get(c, [])])
                           for c in ["cfg", "dns"]}

    # ---- bench_nss ----
    ns = {}
    for t in lines(a.raw, "nss"):
        ns[int(t[0])] = keyed(t[1:])
    per = [ratio(v["module"], v["preload"]) for v in ns.values()]
    figure("nss_module_vs_preload",
           "NSS module gethostbyname4_r / the preload's getaddrinfo",
           med(per), "<=", 1.5, "x",
           "bench_nss: in one preloaded process, interleaved batches of "
           "2,000: the module's _nss_replicalb_gethostbyname4_r of a "
           "3-replica cluster / getaddrinfo() of it through the preload "
           "(with freeaddrinfo), medians of 15 rounds per run", per)
    per = [ratio(v["module"], v["files"]) for v in ns.values()]
    figure("nss_module_vs_files",
           "NSS module gethostbyname4_r / glibc files gethostbyname4_r",
           med(per), "<=", 1, "x",
           "bench_nss: the same batches against libnss_files.so.2's "
           "_nss_files_gethostbyname4_r(\"localhost\")", per)
    details["nss_ns"] = {k: med([v[k] for v in ns.values()])
                         for k in ["preload", "module", "files"]
                         if ns}

    # ---- bench_refresh ----
    rf = {}
    for t in lines(a.raw, "refresh"):
        rf.setdefault(int(t[0]), {})[t[1]] = [float(x) for x in t[2:5]]
    per = [v["refresh"][2] for v in rf.values() if "refresh" in v]
    figure("dns_refresh_in_flight",
           "resolutions while a DNS refresh is in flight / none in flight",
           med(per), ">=", 0.95, "x",
           "bench_refresh: the preload layer linked in-process, its DNS "
           "answered from memory; resolutions per second of an srv cluster "
           "(3 targets with their addresses) while one refresh is held at "
           "the server / while none is in flight; median of per-round "
           "ratios", per)
    details["refresh"] = {
        "in_flight_per_s": med([v["refresh"][0] for v in rf.values()
                                if "refresh" in v]),
        "idle_per_s": med([v["refresh"][1] for v in rf.values()
                           if "refresh" in v]),
        "dns_vs_config_cluster": med([v["membership"][2]
                                      for v in rf.values()
                                      if "membership" in v]),
    }

    doc = {
        "schema": 1,
        "date": datetime.datetime.now(datetime.timezone.utc)
        .strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": a.commit, "quick": bool(a.quick), "runs": a.runs,
        "seconds": a.seconds,
        "machine": machine(a.load_start, a.load_end),
        "figures": figures, "details": details}
    with open(a.out + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(a.out + ".tmp", a.out)

    # ---- the table ----
    print("\nfigures (%s, %d run%s, load average %s at the start, %s at the "
          "end, %s CPUs)" % ("quick" if a.quick else "full", a.runs,
                             "" if a.runs == 1 else "s", a.load_start,
                             a.load_end, os.cpu_count()))
    for f in figures:
        v = "-" if f["value"] is None else "%.3f" % f["value"]
        rng = [x for x in f["per_run"] if x is not None]
        spread = " [%.3f-%.3f]" % (min(rng), max(rng)) if len(rng) > 1 \
            else ""
        ctl = "" if f["control"] is None else \
            "  (control %.3f)" % f["control"]
        print("  %-66s %8s %-4s goal %-7s %s%s%s" % (
            f["label"][:66], v, f["unit"], f["goal"],
            "met" if f["met"] else ("NOT met" if f["measured"]
                                    else "not measured"), spread, ctl))
    c = details.get("conn", {})
    print("\nfor information")
    for cfg in ["direct", "preload", "spread", "haproxy"]:
        if cfg in c:
            print("  short connections, %-8s %9.0f /s  p50 %7.1f us  p99 "
                  "%7.1f us" % (cfg, c[cfg]["rate"], c[cfg]["p50_us"],
                                c[cfg]["p99_us"]))
    if c.get("rate_preload_vs_spread") is not None:
        print("  preload / spread (the client rotating by itself): rate "
              "%.3f, p99 %.3f; spread / direct: rate %.3f" % (
                  c["rate_preload_vs_spread"], c["p99_preload_vs_spread"],
                  c["rate_spread_vs_direct"]))
    if c.get("p99_preload_vs_haproxy") is not None:
        print("  preload p99 / HAProxy p99: %.2f" %
              c["p99_preload_vs_haproxy"])
    t = details["threads"]
    if t.get("virtual_vs_control_2") is not None:
        print("  threads: 2-thread speedup, virtual / control: %.2f" %
              t["virtual_vs_control_2"])
    for which in ["virtual", "control"]:
        if which in t and t[which]:
            print("  threads, %-8s %s" % (which, "  ".join(
                "%sT %.2fx" % (n, d["speedup"])
                for n, d in t[which].items())))
    e = details.get("errors", {})
    if "warm" in e:
        print("  16 processes recording errors: %.0f attempts/s preloaded, "
              "%.0f plain (%.2fx)" % (
                  e["warm"]["rate"], e.get("plain", {}).get("rate") or 0,
                  e["rate_warm_vs_plain"] or 0))
        for f in figures:
            if f["id"].startswith("errors_counted"):
                print("    %s: counted / refused per run: %s" % (
                    "cold" if f["id"].endswith("cold") else "warm",
                    " ".join("%.4f" % x for x in f["per_run"])))
    r = details.get("refresh", {})
    if r.get("idle_per_s"):
        print("  refresh: %.0f/s in flight, %.0f/s idle; a DNS cluster / a "
              "config cluster: %.3f" % (r["in_flight_per_s"],
                                        r["idle_per_s"],
                                        r["dns_vs_config_cluster"] or 0))
    if details.get("first_ns", {}).get("cfg"):
        print("  first resolution of a new process: config %.0f us, "
              "DNS (shared answer) %.0f us" % (
                  details["first_ns"]["cfg"] / 1000,
                  (details["first_ns"]["dns"] or 0) / 1000))
    print("  rss: %.0f kB plain, %.0f kB preloaded" % (
        details["rss_kb"]["plain"] or 0, details["rss_kb"]["preload"] or 0))
    h = details["hooks_ns"].get("preload", {})
    if h:
        print("  ns/op, preloaded: virtual %.0f, numeric %.0f, hosts %.0f, "
              "connect EISCONN %.0f -> %.0f, refused cycle ratio %.3f" % (
                  h["getaddrinfo_virtual"]["hooked"],
                  h["getaddrinfo_numeric"]["libc"],
                  h["getaddrinfo_hosts"]["libc"],
                  h["connect_eisconn"]["libc"],
                  h["connect_eisconn"]["hooked"],
                  h["tcp_refused_cycle"]["ratio"]))
    s = details.get("scale", {})
    if s:
        ns = sorted({int(n) for p in s.values() for n in p})
        print("  virtual lookup / floor by replica count:")
        print("    %-32s %s" % ("policy", " ".join("%7d" % n for n in ns)))
        for pol, d in s.items():
            print("    %-32s %s" % (pol, " ".join(
                "%7.2f" % d[str(n)]["ratio"] if str(n) in d else "      -"
                for n in ns)))
    met = sum(f["met"] for f in figures)
    print("\n%d of %d goals met" % (met, len(figures)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
