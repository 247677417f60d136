#!/usr/bin/env python3
"""boot_bench.py: the bootstrap at scale, median wall ms of interleaved rounds, and how many runs failed.

Run from a build directory after `make bench`:
  boot_bench.py [--base DIR] [--rounds 7] [--ns 16,64,128,256] [--mpi] [--first 64]
Columns: forkn N /bin/true (the fork floor), tprun -n N /bin/true, tprun -n N bench_rank boot (this build, and
DIR's with --base), mpirun.openmpi -n N mpi_hello with --mpi; --first N adds the first all_reduce of 16 B at N.
Every cell runs under a 120 s timeout; a failed run is counted and left out of the median, its last lines kept.
"""
import argparse, os, statistics, subprocess, sys, time

def run(cmd, env=None):
    t = time.monotonic()
    p = subprocess.run(["timeout", "-k", "5", "120"] + cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    return (time.monotonic() - t) * 1e3, p.returncode, p.stdout.decode(errors="replace")

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--base")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--ns", default="16,64,128,256")
    ap.add_argument("--mpi", action="store_true")
    ap.add_argument("--only", default="", help="comma-separated column names to run")
    ap.add_argument("--first", type=int, default=0)
    a = ap.parse_args()
    b = os.getcwd()
    cols = [("forkn", lambda n: [f"{b}/tests/bench/forkn", str(n), "/bin/true"]),
            ("tprun /bin/true", lambda n: [f"{b}/tprun", "-n", str(n), "--gpus-per-rank", "0", "/bin/true"]),
            ("boot (this)", lambda n: [f"{b}/tprun", "-n", str(n), "--gpus-per-rank", "0", f"{b}/tests/bench/bench_rank", "boot"])]
    if a.base:
        cols.append(("boot (base)", lambda n: [f"{a.base}/tprun", "-n", str(n), "--gpus-per-rank", "0", f"{a.base}/tests/bench/bench_rank", "boot"]))
    if a.mpi:
        cols.append(("mpirun hello", lambda n: ["mpirun.openmpi", "--allow-run-as-root", "--oversubscribe", "-n", str(n),
                                                 f"{b}/tests/bench/mpi_hello_ompi"]))
    if a.only:
        keep = a.only.split(",")
        cols = [c for c in cols if c[0] in keep]
    ns = [int(x) for x in a.ns.split(",")]
    times = {(c, n): [] for c, _ in cols for n in ns}
    fails = {(c, n): [] for c, _ in cols for n in ns}
    firsts = []
    for r in range(a.rounds):
        for n in ns:
            for c, f in cols:
                ms, rc, out = run(f(n))
                print(f"round {r + 1} N={n} {c}: {ms:.0f} ms, status {rc}", file=sys.stderr, flush=True)
                (times if rc == 0 else fails)[(c, n)].append(ms if rc == 0 else out.strip().splitlines()[-3:])
        if a.first:
            ms, rc, out = run([f"{b}/tprun", "-n", str(a.first), "--gpus-per-rank", "0", f"{b}/tests/bench/bench_rank", "first"])
            got = [l for l in out.splitlines() if l.startswith("first all_reduce")]
            if rc == 0 and got:
                firsts.append(float(got[0].split(": ")[1].split()[0]))
            else:
                fails.setdefault(("first", a.first), []).append(out.strip().splitlines()[-3:])
    print("| N | " + " | ".join(c for c, _ in cols) + " |")
    print("|---:|" + "---:|" * len(cols))
    for n in ns:
        cells = []
        for c, _ in cols:
            t, fl = times[(c, n)], fails[(c, n)]
            cell = f"{statistics.median(t):.0f}" if t else "-"
            if fl:
                cell += f" ({len(fl)} of {len(t) + len(fl)} failed)"
            cells.append(cell)
        print(f"| {n} | " + " | ".join(cells) + " |")
    if a.first:
        print(f"\nfirst all_reduce 16 B at N={a.first}, slowest rank, median of {len(firsts)}: "
              f"{statistics.median(firsts) if firsts else float('nan'):.2f} ms (all: {', '.join(f'{x:.2f}' for x in firsts)})")
    for k, fl in fails.items():
        for lines in fl[:2]:
            print(f"failed {k}: " + " / ".join(lines), file=sys.stderr)

main()
