#!/usr/bin/env python3
"""lb_plot.py - the load-balancing plot of BENCHMARKS.md, as SVG, with the
Python standard library alone (no plotting package on this machine).

Usage: bench/lb_plot.py [RESULTS-LB.json [OUT.svg]]
  default: bench/results-lb.json (scripts/bench), bench/plot_lb.svg
One row per scenario with a slow replica; left: the p99 latency against
the number of client processes, per configuration; right: the slow
replica's share of the requests.
"""
import json
import os
import sys
from xml.sax.saxutils import escape

CONFIGS = [("random", "random", "#1f77b4"),
           ("round_robin", "round_robin", "#2ca02c"),
           ("least_request", "least_request (2 choices)", "#d62728"),
           ("least_request_full", "least_request (full scan)", "#ff7f0e"),
           ("haproxy", "HAProxy leastconn", "#7f7f7f")]
HAPROXY = CONFIGS[-1][2]
PW, PH = 330, 210          # a panel's plotting area
ML, MR, MT, MB = 62, 18, 44, 44
FONT = "font-family='sans-serif'"


def nice_step(top, n=5):
    raw = top / n
    mag = 10 ** len(str(int(raw))) / 10 if raw >= 1 else 0.1
    while mag > raw:
        mag /= 10
    for m in (1, 2, 2.5, 5, 10):
        if raw <= m * mag:
            return m * mag
    return 10 * mag


def fmt(v):
    return ("%g" % round(v, 3))


class Svg:
    def __init__(self):
        self.parts = []

    def add(self, s):
        self.parts.append(s)

    def text(self, x, y, s, anchor="middle", extra=""):
        size = "" if "font-size" in extra else "font-size='11'"
        self.add("<text x='%.1f' y='%.1f' text-anchor='%s' %s %s %s>%s"
                 "</text>" % (x, y, anchor, FONT, size, extra, escape(s)))


def panel(svg, x0, y0, title, xs, series, ymax, ylabel, refs=()):
    """series: [(label, color, [(x, y or None)], available)]"""
    step = nice_step(ymax)
    top = step * max(1, -(-ymax // step))

    def px(i):
        return x0 + (i + 0.5) * PW / len(xs)

    def py(v):
        return y0 + PH - v / top * PH

    svg.text(x0 + PW / 2, y0 - 10, title, extra="font-weight='bold'")
    svg.add("<rect x='%d' y='%d' width='%d' height='%d' fill='none' "
            "stroke='#444'/>" % (x0, y0, PW, PH))
    v = 0.0
    while v <= top + 1e-9:
        y = py(v)
        svg.add("<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#ddd'/>"
                % (x0, y, x0 + PW, y))
        svg.text(x0 - 5, y + 4, fmt(v), anchor="end")
        v += step
    for i, n in enumerate(xs):
        svg.text(px(i), y0 + PH + 15, str(n))
    svg.text(x0 + PW / 2, y0 + PH + 32, "client processes (N)")
    svg.text(x0 - 46, y0 + PH / 2, ylabel,
             extra="transform='rotate(-90 %.1f %.1f)'" % (x0 - 46,
                                                          y0 + PH / 2))
    for k, (value, label) in enumerate(refs):
        y = py(value)
        svg.add("<line x1='%d' y1='%.1f' x2='%d' y2='%.1f' stroke='#999' "
                "stroke-dasharray='4 3'/>" % (x0, y, x0 + PW, y))
        # The first one's label above it at the right, the next below it
        # at the left: clear of the points, which stand at the middle.
        svg.text(x0 + PW - 4 if k == 0 else x0 + 4,
                 y - 4 if k == 0 else y + 13, label,
                 anchor="end" if k == 0 else "start", extra="fill='#777'")
    # HAProxy first, wide and dashed, so that the library's lines drawn
    # over it stay visible where they meet it.
    for label, color, pts, ok in sorted(series,
                                        key=lambda s: s[1] != HAPROXY):
        if not ok:
            continue
        xy = [(px(xs.index(n)), py(v)) for n, v in pts if v is not None]
        if len(xy) > 1:
            svg.add("<polyline fill='none' stroke='%s' stroke-width='%s' "
                    "%s points='%s'/>" % (
                        color, 4 if color == HAPROXY else 2,
                        "stroke-dasharray='7 4'" if color == HAPROXY
                        else "", " ".join("%.1f,%.1f" % p for p in xy)))
        for x, y in xy:
            svg.add("<circle cx='%.1f' cy='%.1f' r='3.5' fill='%s'/>"
                    % (x, y, color))


def title(sc, reps):
    """The scenario in words, from results-lb.json's setup."""
    slow, fast = reps[-1], reps[0]
    if slow["workers"] != fast["workers"]:
        return "%s serves %d at once, the others %d (%g ms each)" % (
            slow["replica"], slow["workers"], fast["workers"],
            fast["service_ms"])
    return "%s takes %g ms, the others %g (%d at once each)" % (
        slow["replica"], slow["service_ms"], fast["service_ms"],
        fast["workers"])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        here, "results-lb.json")
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        here, "plot_lb.svg")
    with open(src) as f:
        doc = json.load(f)
    cells = doc["cells"]
    scen = [s for s in ("conc", "slow50") if s in cells]
    width = 2 * (ML + PW + MR)
    height = 40 + len(scen) * (MT + PH + MB) + 24 + 18 * len(CONFIGS)
    svg = Svg()
    svg.add("<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' "
            "viewBox='0 0 %d %d'>" % (width, height, width, height))
    svg.add("<rect width='100%' height='100%' fill='white'/>")
    m = doc["machine"]
    svg.text(width / 2, 18, "Load balancing over 3 loopback replicas, one "
             "slow; a new connection per request",
             extra="font-size='13' font-weight='bold'")
    svg.text(width / 2, 33, "%s, %s, %d rounds of %g s, %s CPUs, load "
             "average %s at the start (shared VM)" % (
                 doc["date"][:10], doc.get("commit") or "?", doc["rounds"],
                 doc["seconds_each"], m["cpus"],
                 (m.get("loadavg_start") or ["?"])[0]),
             extra="fill='#555'")
    for row, sc in enumerate(scen):
        by_n = cells[sc]
        xs = sorted(int(n) for n in by_n)
        y0 = 40 + row * (MT + PH + MB) + MT
        p99, share = [], []
        for cfg, label, color in CONFIGS:
            ok = any(cfg in by_n[str(n)] for n in xs)
            p99.append((label, color, [
                (n, by_n[str(n)].get(cfg, {}).get("p99_ms")) for n in xs],
                ok))
            share.append((label, color, [
                (n, by_n[str(n)].get(cfg, {}).get("slow_share"))
                for n in xs], ok))
        ymax = max([v for _, _, pts, _ in p99 for _, v in pts
                    if v is not None] or [1])
        smax = max([v for _, _, pts, _ in share for _, v in pts
                    if v is not None] + [1 / 3])
        # The slow replica's share of the capacity (workers / service
        # time): what a balancer that filled every replica would send it.
        cap = [r["workers"] / max(r["service_ms"], 1e-9)
               for r in doc["setup"]["scenarios"][sc]]
        panel(svg, ML, y0, "p99: " + title(
            sc, doc["setup"]["scenarios"][sc]), xs, p99,
              ymax * 1.05, "p99 (ms)")
        panel(svg, ML + PW + MR + ML, y0, "slow replica's share", xs, share,
              smax * 1.1, "share of requests",
              refs=((1 / 3, "even split"),
                    (cap[-1] / sum(cap), "its share of the capacity")))
    y = 40 + len(scen) * (MT + PH + MB) + 10
    for i, (cfg, label, color) in enumerate(CONFIGS):
        ok = any(cfg in cells[sc][n] for sc in scen for n in cells[sc])
        yy = y + 18 * i
        svg.add("<line x1='%d' y1='%d' x2='%d' y2='%d' stroke='%s' "
                "stroke-width='3' %s/>" % (
                    ML, yy, ML + 24, yy, color if ok else "#ccc",
                    "stroke-dasharray='7 4'" if color == HAPROXY else ""))
        svg.text(ML + 32, yy + 4, label + ("" if ok else
                                           " (not available in this run)"),
                 anchor="start", extra="" if ok else "fill='#999'")
    svg.add("</svg>")
    with open(out + ".tmp", "w") as f:
        f.write("\n".join(svg.parts) + "\n")
    os.replace(out + ".tmp", out)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
