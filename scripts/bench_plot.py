#!/usr/bin/python3
"""bench_plot.py - the plots of BENCHMARKS.md, drawn from results.json.

Usage: bench_plot.py [RESULTS.json [OUT_DIR]]
  default: bench/results.json, PNGs next to it:
  plot_scale.png    cost of a virtual lookup against replica count, per
                    policy, with the floor; and its ratio to the floor
  plot_conn.png     short connections: rate and p99 for the direct
                    connection, the preload, the spread control and HAProxy
  plot_threads.png  lookups per second of 1, 2, 8 threads over 1 thread
Needs Debian's python3-matplotlib (scripts/deps.sh), hence /usr/bin/python3.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

DPI = 80


def subtitle(doc):
    m = doc["machine"]
    load = m.get("loadavg_start") or ["?"]
    return "%s, %d run%s, %s CPUs, load average %s at the start (shared " \
        "VM)" % (doc["date"][:10], doc["runs"], "" if doc["runs"] == 1
                 else "s", m["cpus"], load[0])


def plot_scale(doc, out):
    scale = doc["details"]["scale"]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 4.2))
    floor = None
    for pol, d in scale.items():
        ns = sorted(int(n) for n in d)
        a1.plot(ns, [d[str(n)]["virtual_ns"] / 1e3 for n in ns], marker="o",
                ms=3, lw=1, label=pol)
        a2.plot(ns, [d[str(n)]["ratio"] for n in ns], marker="o", ms=3,
                lw=1, label=pol)
        floor = floor or (ns, [d[str(n)]["floor_ns"] / 1e3 for n in ns])
    if floor:
        a1.plot(floor[0], floor[1], "k--", lw=1.5,
                label="floor (malloc, link, free)")
    a2.axhline(2, color="k", ls=":", lw=1, label="goal at 1,000: 2x")
    for a in (a1, a2):
        a.set_xscale("log")
        a.set_xlabel("replicas (addresses in the answer)")
        a.grid(True, which="both", alpha=0.3)
    a1.set_yscale("log")
    a1.set_ylabel("µs per getaddrinfo + freeaddrinfo")
    a1.set_title("virtual lookup cost")
    a2.set_ylabel("virtual lookup / floor")
    a2.set_ylim(bottom=0)
    a2.set_title("over the floor of building the answer")
    a1.legend(fontsize=7)
    fig.suptitle(subtitle(doc), fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)


def plot_conn(doc, out):
    c = doc["details"]["conn"]
    cfgs = [k for k in ("direct", "preload", "spread", "haproxy") if k in c]
    names = {"direct": "direct\n(one backend)",
             "preload": "preload\n(round_robin, 3)",
             "spread": "control: client\nrotating itself, 3",
             "haproxy": "HAProxy %s\n(roundrobin, 3)" %
             (c.get("haproxy_version") or "").split("-")[0]}
    colors = {"direct": "#888888", "preload": "#1f77b4", "spread": "#bbbbbb",
              "haproxy": "#d62728"}
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    x = range(len(cfgs))
    a1.bar(x, [c[k]["rate"] / 1e3 for k in cfgs],
           color=[colors[k] for k in cfgs])
    for i, k in enumerate(cfgs):
        a1.annotate("%.1fk" % (c[k]["rate"] / 1e3), (i, c[k]["rate"] / 1e3),
                    ha="center", va="bottom", fontsize=8)
        a2.annotate("%.0f" % c[k]["p99_us"], (i + 0.19, c[k]["p99_us"]),
                    ha="center", va="bottom", fontsize=8)
    a1.set_ylabel("thousand connections per second")
    a1.set_title("rate (one client, one connection at a time)")
    w = 0.38
    a2.bar([i - w / 2 for i in x], [c[k]["p50_us"] for k in cfgs], w,
           color=[colors[k] for k in cfgs], alpha=0.5, label="p50")
    a2.bar([i + w / 2 for i in x], [c[k]["p99_us"] for k in cfgs], w,
           color=[colors[k] for k in cfgs], label="p99")
    a2.set_ylabel("µs per connection (resolve to close)")
    a2.set_title("latency: p50 (light), p99 (dark)")
    for a in (a1, a2):
        a.set_xticks(list(x))
        a.set_xticklabels([names[k] for k in cfgs], fontsize=7)
        a.grid(True, axis="y", alpha=0.3)
    fig.suptitle(subtitle(doc), fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)


def plot_threads(doc, out):
    t = doc["details"]["threads"]
    cpus = doc["machine"]["cpus"] or 1
    fig, a = plt.subplots(figsize=(5.5, 3.8))
    labels = {"virtual": "virtual name, 3 replicas (preload)",
              "control": "glibc getaddrinfo(\"127.0.0.1\") (control)"}
    for which, style in (("virtual", "o-"), ("control", "s--")):
        if which in t:
            ns = sorted(int(n) for n in t[which])
            a.plot(ns, [t[which][str(n)]["speedup"] for n in ns], style,
                   label=labels[which])
    ns = sorted(int(n) for n in t.get("virtual", {"1": 0}))
    a.plot(ns, [min(n, cpus) for n in ns], "k:", lw=1,
           label="ideal on %d CPUs" % cpus)
    a.axhline(1.8, color="g", ls=":", lw=1, label="goal at 2 threads: 1.8x")
    a.set_xscale("log", base=2)
    a.set_xticks(ns)
    a.set_xticklabels([str(n) for n in ns])
    a.set_xlabel("threads resolving in one process")
    a.set_ylabel("lookups per second / 1 thread's")
    a.set_ylim(bottom=0)
    a.grid(True, alpha=0.3)
    a.legend(fontsize=7)
    a.set_title(subtitle(doc), fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=DPI)
    plt.close(fig)


def main():
    top = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = sys.argv[1] if len(sys.argv) > 1 else \
        os.path.join(top, "bench", "results.json")
    outdir = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(path)
    with open(path) as f:
        doc = json.load(f)
    for name, fn in (("plot_scale.png", plot_scale),
                     ("plot_conn.png", plot_conn),
                     ("plot_threads.png", plot_threads)):
        out = os.path.join(outdir, name)
        fn(doc, out)
        print("%s (%d bytes)" % (out, os.path.getsize(out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
