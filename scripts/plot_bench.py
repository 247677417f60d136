#!/usr/bin/env python3
"""plot_bench.py: one PNG of collective latency and bandwidth against message size, tprun beside its peers.

    scripts/plot_bench.py [--ranks N] [--ops LIST] [--title TEXT] -o OUT.png INPUT...

Each INPUT is what the benchmarks print: JSON rows (tp-bench --json, examples/bench/coll_bench.sh --json,
examples/bench/tcp_bench.sh --json FILE), coll_bench.sh's markdown tables ("### tprun over shm, 2 ranks" and their
rows), or tp-bench's plain table ("tp-bench: 2 ranks, ..." then "op bytes iters p50_us p90_us"). "-" reads stdin.
The figure has one row per op: p50 latency (us) and bandwidth (bytes per rank / p50, GB/s) against bytes per rank,
both axes logarithmic, one line per implementation (tprun-shm, tprun-tcp, ompi-vader, ompi-tcp, mpich, ...). Rows
seen more than once (several rounds) are plotted at their median. Needs matplotlib (scripts/install-deps.sh).
"""
import argparse
import json
import re
import statistics
import sys

UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}


def fail(msg):
    print("plot_bench.py: " + msg, file=sys.stderr)
    sys.exit(1)


def p50_of(cell):
    """"12.3 / 45.6" (p50 / p90) or "12.3" -> 12.3; "not run" -> None."""
    m = re.match(r"\s*([0-9.]+)", cell)
    return float(m.group(1)) if m else None


def parse(text, name):
    """Rows (impl, ranks, op, bytes, p50_us) from one input, whichever of the three forms it holds."""
    rows, ranks, md_impls, plain_ranks = [], None, None, None
    for n, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if s.startswith("{"):
            try:
                r = json.loads(s)
                rows.append((r["impl"], int(r["ranks"]), r["op"], int(r["bytes"]), float(r["p50_us"])))
            except (ValueError, KeyError, TypeError) as e:
                fail("%s line %d: a JSON row without impl, ranks, op, bytes and p50_us (%s)" % (name, n, e))
            continue
        m = re.match(r"#+ tprun over (\S+), (\d+) ranks", s)
        if m:
            ranks, md_impls = int(m.group(2)), None
            continue
        if s.startswith("| op | size |"):
            cols = [c.strip() for c in s.strip("|").split("|")]
            md_impls = [(i, c.split(" p50")[0].replace("tprun ", "tprun-")) for i, c in enumerate(cols)
                        if c.endswith("p50 / p90")]
            continue
        if s.startswith("|") and md_impls and ranks is not None and not s.startswith("|---"):
            cols = [c.strip() for c in s.strip("|").split("|")]
            m = re.match(r"([0-9.]+) (B|KiB|MiB|GiB)$", cols[1])
            if not m:
                fail("%s line %d: size \"%s\" is not like \"4 KiB\"" % (name, n, cols[1]))
            b = int(float(m.group(1)) * UNITS[m.group(2)])
            for i, impl in md_impls:
                v = p50_of(cols[i]) if i < len(cols) else None
                if v is not None:
                    rows.append((impl, ranks, cols[0], b, v))
            continue
        m = re.match(r"tp-bench: (\d+) ranks", s)
        if m:
            plain_ranks = int(m.group(1))
            continue
        m = re.match(r"([a-z_]+)\s+(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)$", s)
        if m and plain_ranks is not None:
            rows.append(("tprun", plain_ranks, m.group(1), int(m.group(2)), float(m.group(4))))
    return rows


def size_label(b):
    for unit in ("GiB", "MiB", "KiB"):
        if b >= UNITS[unit]:
            return "%g %s" % (b / UNITS[unit], unit)
    return "%d B" % b


def main():
    ap = argparse.ArgumentParser(description="Plots benchmark tables: latency and bandwidth against size.")
    ap.add_argument("inputs", nargs="+", metavar="INPUT")
    ap.add_argument("-o", "--output", required=True, metavar="OUT.png")
    ap.add_argument("--ranks", type=int, help="which world size to plot (default: the smallest in the input)")
    ap.add_argument("--ops", help="comma-separated ops to plot (default: every op in the input)")
    ap.add_argument("--title", default="", help="a line above the plots (machine, date, commit)")
    a = ap.parse_args()
    rows = []
    for path in a.inputs:
        try:
            text = sys.stdin.read() if path == "-" else open(path, encoding="utf-8").read()
        except OSError as e:
            fail("cannot read %s: %s" % (path, e.strerror))
        got = parse(text, path)
        if not got:
            fail("%s: no benchmark rows (expected tp-bench or coll_bench.sh output, JSON or tables)" % path)
        rows += got
    ranks = a.ranks if a.ranks is not None else min(r[1] for r in rows)
    rows = [r for r in rows if r[1] == ranks]
    if not rows:
        fail("no rows at %d ranks in the input" % ranks)
    ops = list(dict.fromkeys(r[2] for r in rows))
    if a.ops:
        want = a.ops.split(",")
        missing = [o for o in want if o not in ops]
        if missing:
            fail("--ops: %s not in the input (it has %s)" % (",".join(missing), ",".join(ops)))
        ops = want
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        fail("matplotlib is not installed: run scripts/install-deps.sh (Debian package python3-matplotlib)")
    by = {}
    for impl, _, op, b, v in rows:
        by.setdefault((op, impl), {}).setdefault(b, []).append(v)
    impls = list(dict.fromkeys(r[0] for r in rows))
    fig, axes = plt.subplots(len(ops), 2, figsize=(11, 3.6 * len(ops)), squeeze=False)
    for k, op in enumerate(ops):
        lat, bw = axes[k]
        for impl in impls:
            pts = sorted((b, statistics.median(vs)) for b, vs in by.get((op, impl), {}).items())
            if not pts:
                continue
            xs, ys = [p[0] for p in pts], [p[1] for p in pts]
            style = "-" if impl.startswith(("tprun", "mem-")) else "--"  # ours solid, peers dashed
            lat.plot(xs, ys, style, marker="o", markersize=3, label=impl)
            bw.plot(xs, [b / (us * 1e3) for b, us in pts], style, marker="o", markersize=3, label=impl)
        for ax, what in ((lat, "p50 latency (us)"), (bw, "bandwidth (GB/s, bytes per rank / p50)")):
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("bytes per rank")
            ax.set_ylabel(what)
            ax.set_title("%s, %d ranks" % (op, ranks))
            ax.grid(True, which="both", alpha=0.3)
            ticks = sorted({r[3] for r in rows if r[2] == op})
            if len(ticks) > 8:
                ticks = ticks[:: (len(ticks) + 7) // 8]
            ax.set_xticks(ticks)
            ax.set_xticklabels([size_label(t) for t in ticks], rotation=30, fontsize=8)
        lat.legend(fontsize=8)
    if a.title:
        fig.suptitle(a.title, fontsize=10)
    fig.tight_layout()
    try:
        fig.savefig(a.output, dpi=90)
    except OSError as e:
        fail("cannot write %s: %s" % (a.output, e.strerror))


if __name__ == "__main__":
    main()
