# scale_fit.py BUILD [NS] [RUNS]: the measurements behind docs/SCALE.md and the fit of its cost model.
# Run from anywhere after `make bench` (and `make check` for tests/runtime_rank) in BUILD. For each N in NS
# ("4,8,16,32,64,128,256,512") it takes the median of RUNS (5) interleaved runs of:
#   fork    forkn N /bin/true                       (the floor: fork, exec, wait)
#   launch  tprun -n N /bin/true                    (tprun's own launch and teardown)
#   boot    tprun -n N bench_rank boot              (launch + tp_init + tp_finalize)
#   first   tprun -n N tp-bench --ops allreduce --max-bytes 16 --iters 1, minus boot (N <= FIRST_MAX, 64): the
#           first collective after init with the connections it opens (none left to open in an eager build)
#   fate    bench_failfast --torchrun -n N: SIGKILL of rank 1 to every peer gone, no launcher (N <= FATE_MAX, 256)
# then fits launch = a + b N, boot - launch = a + b N + c N^2, fate = a + b N (least squares), and prints the
# measured table, the coefficients and the model's predictions at 1k, 10k and 100k ranks as markdown. A run
# that fails or times out (TIMEOUT s, 120) is counted as missing and said so. Environment: FIRST_MAX, FATE_MAX,
# TIMEOUT, JSON (a file to write every sample to).
import json, os, statistics, subprocess, sys, time

b = os.path.abspath(sys.argv[1])
ns = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "4,8,16,32,64,128,256,512").split(",")]
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
first_max = int(os.environ.get("FIRST_MAX", "64"))
fate_max = int(os.environ.get("FATE_MAX", "256"))
timeout = float(os.environ.get("TIMEOUT", "120"))


def timed(cmd):
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    return (time.perf_counter() - t0) * 1e3 if p.returncode == 0 else None


def fate_ms(n):
    cmd = [b + "/tests/bench/bench_failfast", "-n", str(n), "--torchrun", "--min-right", str(n - 1), "--",
           b + "/tests/bench/bench_rank", "spin"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout).stdout.split("\t")
        return float(out[4]) if len(out) > 5 and out[7] == "0" else None
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        return None


cases = {
    "fork": lambda n: [b + "/tests/bench/forkn", str(n), "/bin/true"],
    "launch": lambda n: [b + "/tprun", "-n", str(n), "/bin/true"],
    "boot": lambda n: [b + "/tprun", "-n", str(n), b + "/tests/bench/bench_rank", "boot"],
    "call": lambda n: [b + "/tprun", "-n", str(n), b + "/tp-bench", "--ops", "allreduce", "--max-bytes", "16",
                       "--iters", "1"],
}
samples = {(c, n): [] for c in list(cases) + ["fate"] for n in ns}
for r in range(runs):
    for n in ns:
        for c, cmd in cases.items():
            if c == "call" and n > first_max:
                continue
            samples[(c, n)].append(timed(cmd(n)))
        if n <= fate_max:
            samples[("fate", n)].append(fate_ms(n))
    print("round %d of %d done" % (r + 1, runs), file=sys.stderr, flush=True)
if os.environ.get("JSON"):
    with open(os.environ["JSON"], "w") as f:
        json.dump({"%s/%d" % k: v for k, v in samples.items()}, f)


def med(c, n):
    v = [x for x in samples[(c, n)] if x is not None]
    return (statistics.median(v), len(samples[(c, n)]) - len(v)) if v else (None, len(samples[(c, n)]))


def fit(xs, ys, powers):
    """Least squares of y = sum_k p_k x^powers[k] (normal equations, Gauss-Jordan)."""
    m = len(powers)
    A = [[sum(x ** (pi + pj) for x in xs) for pj in powers] + [sum(y * x ** pi for x, y in zip(xs, ys))]
         for pi in powers]
    for i in range(m):
        piv = max(range(i, m), key=lambda k: abs(A[k][i]))
        A[i], A[piv] = A[piv], A[i]
        for k in range(m):
            if k != i and A[i][i] != 0:
                f = A[k][i] / A[i][i]
                A[k] = [a - f * c for a, c in zip(A[k], A[i])]
    return [A[i][m] / A[i][i] for i in range(m)]


def cell(c, n):
    v, missing = med(c, n)
    if v is None:
        return "failed" if missing else ""
    return "%.1f%s" % (v, " (%d failed)" % missing if missing else "")


print("| N | fork ms | launch ms | boot ms | first call ms | fate ms (no launcher) |")
print("|---:|---:|---:|---:|---:|---:|")
for n in ns:
    first = ""
    if n <= first_max and med("call", n)[0] is not None and med("boot", n)[0] is not None:
        first = "%.1f" % (med("call", n)[0] - med("boot", n)[0])
    print("| %d | %s | %s | %s | %s | %s |" % (n, cell("fork", n), cell("launch", n), cell("boot", n), first,
                                               cell("fate", n)))

models = {}
pts = [(n, med("launch", n)[0]) for n in ns if med("launch", n)[0] is not None]
if len(pts) >= 2:
    models["launch"] = ([0, 1], fit([p[0] for p in pts], [p[1] for p in pts], [0, 1]))
pts = [(n, med("boot", n)[0] - med("launch", n)[0]) for n in ns
       if med("boot", n)[0] is not None and med("launch", n)[0] is not None]
if len(pts) >= 3:
    models["bootstrap"] = ([0, 1, 2], fit([p[0] for p in pts], [p[1] for p in pts], [0, 1, 2]))
pts = [(n, med("fate", n)[0]) for n in ns if med("fate", n)[0] is not None]
if len(pts) >= 2:
    models["fate"] = ([0, 1], fit([p[0] for p in pts], [p[1] for p in pts], [0, 1]))
print()
print("| model (ms) | a | b (per rank) | c (per rank^2) | 1k | 10k | 100k |")
print("|---|---:|---:|---:|---:|---:|---:|")
for name, (powers, p) in models.items():
    coef = dict(zip(powers, p))
    pred = ["%.4g" % sum(coef[k] * n ** k for k in coef) for n in (1000, 10000, 100000)]
    print("| %s | %.3g | %.3g | %s | %s |" % (name, coef.get(0, 0), coef.get(1, 0),
                                             "%.3g" % coef[2] if 2 in coef else "-", " | ".join(pred)))
