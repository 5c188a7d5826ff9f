#!/usr/bin/env python3
"""benches/compare report: medians over rounds of every figure in rounds.tsv, the ratio
ringbroker / peer, issue 37's targets (met or not), the machine's load, and SVG plots
(hand-written, no dependencies): throughput bars and latency percentile curves per load."""
import argparse
import math
import statistics
from collections import defaultdict

WORKLOAD_LABEL = {
    "1k-p4": "1 KiB x 4 partitions",
    "100b-p100": "100 B x 100 partitions",
    "keyed-1k": "keyed 1 KiB (murmur2, 10k keys) x 16 partitions",
    "1k-p1000": "1 KiB x 1,000 partitions",
    "1k-p4-rf3": "1 KiB x 4 partitions, 3 brokers, RF=3, min ISR 2",
}
CLIENTS = [("rdk", "rdkafka_performance -P"), ("kpt", "kafka-producer-perf-test"),
           ("bench", "ringbroker bench produce"), ("keyed", "keyed producer (confluent-kafka)"),
           ("cons", "ringbroker bench consume"), ("kcons", "kafka-consumer-perf-test")]
PCTS = ["p50", "p99", "p999", "max"]
COLORS = {"ringbroker": "#d62728", "kafka": "#1f77b4", "tansu": "#2ca02c"}


def color(b):
    return COLORS.get(b, COLORS["kafka"] if b.startswith("kafka") else "#9467bd")


def load(path):
    vals = defaultdict(list)
    order = []
    for line in open(path):
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 6:
            continue
        _, w, acks, b, fig, v = parts
        if (w, acks) not in order:
            order.append((w, acks))
        try:
            vals[(w, acks, b, fig)].append(float(v))
        except ValueError:
            pass
    return vals, order


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", required=True)
    ap.add_argument("--loads")
    ap.add_argument("--peers", default="kafka")
    ap.add_argument("--plots")
    a = ap.parse_args()
    vals, order = load(a.rounds)
    peers = a.peers.split()
    brokers = ["ringbroker"] + peers

    def med(w, acks, b, fig):
        v = vals.get((w, acks, b, fig))
        return statistics.median(v) if v else None

    def n(x, digits=None):
        if x is None:
            return "-"
        if digits is None:
            digits = 0 if abs(x) >= 100 else (1 if abs(x) >= 10 else 2)
        return f"{x:,.{digits}f}"

    def ratio(r, p):
        return f"{r / p:.2f}" if r is not None and p else "-"

    out = []
    # ------------------------------------------------------------------ key figures, one row each
    k0 = peers[0]
    out.append(f"| workload | acks | max produce, best client (records/s): ringbroker / {k0} (ratio) "
               f"| broker CPU per produced record, bench produce (ns) | per consumed record, bench consume (ns) "
               f"| e2e p99 at 50 % (ms) | e2e p99.9 at 50 % (ms) | broker RSS median at 50 % (MiB) |")
    out.append("| --- | --- | --- | --- | --- | --- | --- | --- |")

    def pair(w, acks, fig, digits=None):
        r, p = med(w, acks, "ringbroker", fig), med(w, acks, k0, fig)
        if r is None and p is None:
            return "-"
        return f"{n(r, digits)} / {n(p, digits)} (**{ratio(r, p)}**)"

    for w, acks in order:
        cpu = "keyed_cpu" if w == "keyed-1k" else "bench_cpu"
        out.append(f"| {WORKLOAD_LABEL.get(w, w)} | {acks} | {pair(w, acks, 'max_rate')} | {pair(w, acks, cpu)} "
                   f"| {pair(w, acks, 'cons_cpu')} | {pair(w, acks, 'L50_e2e_p99')} | {pair(w, acks, 'L50_e2e_p999')} "
                   f"| {pair(w, acks, 'L50_e2e_rss_med')} |")
    out.append("")
    nrounds = len({l.split("\t")[0] for l in open(a.rounds) if l.strip()})
    out.append(f"Medians of {nrounds} round(s); ratio = ringbroker / peer. CPU = broker utime+stime per "
               "record (ns); RSS in MiB (sum over broker processes); latencies in ms "
               "(p50 / p99 / p99.9 / max).\n")
    for w, acks in order:
        head = "| figure | ringbroker | " + " | ".join(f"{p} | ratio" for p in peers) + " |"
        out.append(f"\n### {WORKLOAD_LABEL.get(w, w)}, acks={acks}\n")
        out.append(head)
        out.append("| --- | ---: |" + " ---: | ---: |" * len(peers))

        def row(label, fig, digits=None):
            r = med(w, acks, "ringbroker", fig)
            ps = [med(w, acks, p, fig) for p in peers]
            if r is None and all(p is None for p in ps):
                return
            out.append(f"| {label} | {n(r, digits)} | " +
                       " | ".join(f"{n(p, digits)} | {ratio(r, p)}" for p in ps) + " |")

        def lrow(label, fig):
            r = [med(w, acks, "ringbroker", f"{fig}_{k}") for k in PCTS]
            if all(x is None for x in r) and all(med(w, acks, p, f"{fig}_p99") is None for p in peers):
                return
            cells = [" / ".join(n(x) for x in r)]
            for p in peers:
                q = [med(w, acks, p, f"{fig}_{k}") for k in PCTS]
                cells.append(" / ".join(n(x) for x in q))
                cells.append(" / ".join(ratio(x, y) for x, y in zip(r, q)))
            out.append(f"| {label} | " + " | ".join(cells) + " |")

        for key, label in CLIENTS:
            row(f"{label} (records/s)", f"{key}_rate")
            row(f"  broker CPU per record ({key})", f"{key}_cpu")
        row("broker RSS peak during bench produce (MiB)", "bench_rss_peak")
        row("broker RSS peak during the Java producer (MiB)", "kpt_rss_peak")
        loads = sorted({f.split("_")[0] for (ww, aa, _, f) in vals if ww == w and aa == acks and f.endswith("_offered")},
                       key=lambda t: (t.startswith("at"), int(t[2:]) if t.startswith("at") else int(t[1:])))
        for t in loads:
            name = f"{t[1:]} % of {peers[0]}'s max" if t.startswith("L") else f"{int(t[2:]):,} records/s"
            row(f"**{name}**: offered load (records/s)", f"{t}_offered")
            row("  bench e2e achieved (records/s)", f"{t}_e2e_rate")
            lrow("  bench e2e end to end (ms)", f"{t}_e2e")
            lrow("  bench e2e produce ack (ms)", f"{t}_e2e_ack")
            lrow("  kafka-producer-perf-test produce latency (ms)", f"{t}_kpt")
            lrow("  rdkafka_performance produce latency (ms)", f"{t}_rdk")
            row("  broker CPU per record, e2e (produced and fetched, ns)", f"{t}_e2e_cpu")
            row("  broker RSS median during e2e (MiB)", f"{t}_e2e_rss_med")
            row("  broker RSS peak during e2e (MiB)", f"{t}_e2e_rss_peak")

    # ------------------------------------------------------------------ targets
    k = next((p for p in peers if p.startswith("kafka")), None)
    out.append("\n### Issue 37 targets (ringbroker against " + (k or "no Kafka peer") + ")\n")
    out.append("| target | figure | ringbroker | Kafka | ratio / value | met |")
    out.append("| --- | --- | ---: | ---: | ---: | --- |")

    def target(name, fig_label, r, p, ok, shown):
        if r is None or (p is None and k is not None and shown is None):
            out.append(f"| {name} | {fig_label} | {n(r)} | {n(p)} | - | not measured |")
            return
        out.append(f"| {name} | {fig_label} | {n(r)} | {n(p)} | {shown} | {'**met**' if ok else 'not met'} |")

    if k:
        for w in ("1k-p4", "100b-p100"):
            for acks in ("1", "all"):
                if (w, acks) not in order:
                    continue
                for key in ("rdk", "kpt", "bench"):
                    r, p = med(w, acks, "ringbroker", f"{key}_rate"), med(w, acks, k, f"{key}_rate")
                    if r is not None and p:
                        target("throughput >= 2x", f"{w} acks={acks} {key}", r, p, r / p >= 2, f"{r / p:.2f}")
                    r, p = med(w, acks, "ringbroker", f"{key}_cpu"), med(w, acks, k, f"{key}_cpu")
                    if r is not None and p:
                        target("CPU/record <= 1/3", f"{w} acks={acks} {key} (ns)", r, p, r / p <= 1 / 3, f"{r / p:.2f}")
        for w, acks in order:
            for pct, lab in (("p99", "p99"), ("p999", "p99.9")):
                r, p = med(w, acks, "ringbroker", f"L50_e2e_{pct}"), med(w, acks, k, f"L50_e2e_{pct}")
                if r is not None and p:
                    target(f"e2e {lab} at 50 % <= 1/5", f"{w} acks={acks} (ms)", r, p, r / p <= 0.2, f"{r / p:.2f}")
        for w, acks in order:
            r, p = med(w, acks, "ringbroker", "L50_e2e_rss_med"), med(w, acks, k, "L50_e2e_rss_med")
            if r is not None and p:
                target("RSS <= 1/10 (median, e2e at 50 %)", f"{w} acks={acks} (MiB)", r, p, r / p <= 0.1, f"{r / p:.3f}")
    r = med("1k-p4", "1", "ringbroker", "bench_cpu")
    target("CPU per produced 1 KiB record <= 0.7 us", "1k-p4 acks=1, bench produce (ns)", r, None, r is not None and r <= 700,
           n(r) if r is not None else None)
    r = med("1k-p4", "1", "ringbroker", "cons_cpu")
    target("CPU per consumed record <= 0.2 us", "1k-p4, bench consume (ns)", r, None, r is not None and r <= 200,
           n(r) if r is not None else None)
    fixed = sorted({f.split("_")[0] for (w, aa, b, f) in vals if w == "1k-p4" and aa == "1" and f.startswith("at") and f.endswith("_offered")})
    for t in fixed:
        for pct, lim in (("p99", 2.0), ("p999", 5.0)):
            r = med("1k-p4", "1", "ringbroker", f"{t}_e2e_{pct}")
            p = med("1k-p4", "1", k, f"{t}_e2e_{pct}") if k else None
            target(f"bench e2e {int(t[2:]):,}/s {pct} <= {lim:g} ms", "1k-p4 acks=1 (ms)", r, p, r is not None and r <= lim,
                   n(r) if r is not None else None)

    # ------------------------------------------------------------------ machine load
    if a.loads:
        la = [l.rstrip("\n").split("\t") for l in open(a.loads)][1:]
        if la:
            ones = [float(x[5].split()[0]) for x in la] + [float(x[6].split()[0]) for x in la]
            out.append(f"\nLoad average (1 min) at the start/end of the {len(la)} broker phases: "
                       f"min {min(ones):.2f}, median {statistics.median(ones):.2f}, max {max(ones):.2f} "
                       "(loads.tsv has each phase).")
    print("\n".join(out))
    if a.plots:
        plots(a.plots, vals, order, brokers, med)


# ---------------------------------------------------------------------- SVG
def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")



def svg_head(width, height, title_y, title):
    """The opening of a plot: the svg element, a white background and the title."""
    return [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="11">',
            '<rect width="100%" height="100%" fill="white"/>',
            f'<text x="10" y="{title_y}" font-size="13">{esc(title)}</text>']

def throughput_svg(path, order, brokers, med):
    groups = []
    for w, acks in order:
        for key, label in CLIENTS:
            vs = [med(w, acks, b, f"{key}_rate") for b in brokers]
            if any(v for v in vs):
                groups.append((f"{w} acks={acks}: {label}", vs))
    if not groups:
        return
    bar, gap, left, width = 9, 8, 330, 380
    hgt = 40 + len(groups) * (bar * len(brokers) + gap) + 30
    vmax = max(v for _, vs in groups for v in vs if v) or 1
    s = svg_head(left + width + 90, hgt, 18, "Max throughput (records/s, medians over rounds)")
    for i, b in enumerate(brokers):
        s.append(f'<rect x="{left + i * 110}" y="26" width="10" height="10" fill="{color(b)}"/>'
                 f'<text x="{left + i * 110 + 14}" y="35">{esc(b)}</text>')
    y = 46
    for label, vs in groups:
        s.append(f'<text x="{left - 6}" y="{y + bar * len(brokers) / 2 + 4}" text-anchor="end">{esc(label)}</text>')
        for i, v in enumerate(vs):
            if v:
                wd = width * v / vmax
                s.append(f'<rect x="{left}" y="{y + i * bar}" width="{wd:.1f}" height="{bar - 1}" fill="{color(brokers[i])}"/>'
                         f'<text x="{left + wd + 3:.1f}" y="{y + i * bar + bar - 2}" font-size="9">{v / 1000:,.0f}k</text>')
        y += bar * len(brokers) + gap
    s.append("</svg>")
    open(path, "w").write("\n".join(s))


def latency_svg(path, title, panels, brokers, med, w, acks):
    """panels: [(tag, label)]; per panel, x = percentile, y = ms (log); a line per broker for
    bench e2e end to end (solid) and kafka-producer-perf-test produce latency (dashed)."""
    pw, ph, top, left = 250, 200, 50, 50
    s = svg_head(max(left + len(panels) * (pw + 30) + 10, left + len(brokers) * 120 + 420),
                 top + ph + 30, 16, title)
    for i, b in enumerate(brokers):
        s.append(f'<line x1="{left + i * 120}" y1="30" x2="{left + i * 120 + 18}" y2="30" stroke="{color(b)}" stroke-width="2"/>'
                 f'<text x="{left + i * 120 + 22}" y="34">{esc(b)}</text>')
    s.append(f'<text x="{left + len(brokers) * 120}" y="34">solid: bench e2e end to end; dashed: kafka-producer-perf-test produce</text>')
    series = []
    for tag, _ in panels:
        for b in brokers:
            for fig in ("e2e", "kpt"):
                ys = [med(w, acks, b, f"{tag}_{fig}_{p}") for p in PCTS]
                series.extend(y for y in ys if y)
    if not series:
        return False
    lo = 10 ** math.floor(math.log10(max(min(series), 0.01)))
    hi = 10 ** math.ceil(math.log10(max(series)))
    if hi <= lo:
        hi = lo * 10

    def ypix(v):
        return top + ph - ph * (math.log10(max(v, lo)) - math.log10(lo)) / (math.log10(hi) - math.log10(lo))

    for pi, (tag, label) in enumerate(panels):
        x0 = left + pi * (pw + 30)
        s.append(f'<rect x="{x0}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>')
        s.append(f'<text x="{x0 + pw / 2}" y="{top - 4}" text-anchor="middle">{esc(label)}</text>')
        d = lo
        while d <= hi * 1.0001:
            yy = ypix(d)
            s.append(f'<line x1="{x0}" y1="{yy:.1f}" x2="{x0 + pw}" y2="{yy:.1f}" stroke="#eee"/>')
            if pi == 0:
                s.append(f'<text x="{x0 - 4}" y="{yy + 4:.1f}" text-anchor="end">{d:g} ms</text>')
            d *= 10
        xs = [x0 + 20 + j * (pw - 40) / (len(PCTS) - 1) for j in range(len(PCTS))]
        for j, p in enumerate(PCTS):
            s.append(f'<text x="{xs[j]:.1f}" y="{top + ph + 14}" text-anchor="middle">{"p99.9" if p == "p999" else p}</text>')
        for b in brokers:
            for fig, dash in (("e2e", ""), ("kpt", ' stroke-dasharray="4 3"')):
                pts = [(xs[j], med(w, acks, b, f"{tag}_{fig}_{p}")) for j, p in enumerate(PCTS)]
                pts = [(x, v) for x, v in pts if v]
                if len(pts) > 1:
                    s.append(f'<polyline fill="none" stroke="{color(b)}" stroke-width="2"{dash} points="' +
                             " ".join(f"{x:.1f},{ypix(v):.1f}" for x, v in pts) + '"/>')
    s.append("</svg>")
    open(path, "w").write("\n".join(s))
    return True


def plots(d, vals, order, brokers, med):
    throughput_svg(f"{d}/throughput.svg", order, brokers, med)
    for w, acks in order:
        tags = sorted({f.split("_")[0] for (ww, aa, _, f) in vals if ww == w and aa == acks and f.endswith("_offered")},
                      key=lambda t: (t.startswith("at"), int(t[2:]) if t.startswith("at") else int(t[1:])))
        panels = []
        for t in tags:
            r = med(w, acks, brokers[1] if len(brokers) > 1 else brokers[0], f"{t}_offered") or med(w, acks, "ringbroker", f"{t}_offered")
            name = f"{t[1:]} % ({r / 1000:,.0f}k/s)" if t.startswith("L") and r else f"{int(t[2:]) / 1000:,.0f}k/s"
            panels.append((t, name))
        if panels:
            latency_svg(f"{d}/latency-{w}-acks{acks}.svg", f"Latency, {WORKLOAD_LABEL.get(w, w)}, acks={acks} (ms, log scale; medians over rounds)",
                        panels, brokers, med, w, acks)


if __name__ == "__main__":
    main()
