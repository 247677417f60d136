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
# TIMEOUT, JSON (a file to write every sample to), FROM_JSON (such a file: fit and print it, measure nothing),
# and the across-hosts parameters at the end.
import json, os, statistics, subprocess, sys, threading, time

b = os.path.abspath(sys.argv[1])
ns = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "4,8,16,32,64,128,256,512").split(",")]
runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
first_max = int(os.environ.get("FIRST_MAX", "64"))
fate_max = int(os.environ.get("FATE_MAX", "256"))
timeout = float(os.environ.get("TIMEOUT", "120"))


def timed(cmd):
    # A plain wait, and a timer for the timeout: subprocess's own timeout polls with doubling sleeps, which rounds
    # a run up to 4, 8, 16, 32 ... ms.
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    killer = threading.Timer(timeout, p.kill)
    killer.start()
    rc = p.wait()
    ms = (time.perf_counter() - t0) * 1e3
    killer.cancel()
    return ms if rc == 0 else None


def fate_ms(n):
    cmd = [b + "/tests/bench/bench_failfast", "-n", str(n), "--torchrun", "--min-right", str(n - 1), "--",
           b + "/tests/bench/bench_rank", "spin"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout).stdout.split("\t")
        return float(out[4]) if len(out) > 5 and out[7] == "0" else None
    except (subprocess.TimeoutExpired, ValueError, IndexError):
        return None


# --gpus-per-rank 0: on a GPU host tprun would refuse more ranks than GPUs; what is measured is the launch.
cases = {
    "fork": lambda n: [b + "/tests/bench/forkn", str(n), "/bin/true"],
    "launch": lambda n: [b + "/tprun", "--gpus-per-rank", "0", "-n", str(n), "/bin/true"],
    "boot": lambda n: [b + "/tprun", "--gpus-per-rank", "0", "-n", str(n), b + "/tests/bench/bench_rank", "boot"],
    "call": lambda n: [b + "/tprun", "--gpus-per-rank", "0", "-n", str(n), b + "/tp-bench", "--ops", "allreduce",
                       "--max-bytes", "16", "--iters", "1"],
}
samples = {(c, n): [] for c in list(cases) + ["fate"] for n in ns}
# Issue 16's medians on the GPU host (16 idle cores, build 1e4250a), and its fail-fast ones (docs/SCALE.md):
# FROM_JSON=gpu-1e4250a fits these.
GPU_1E4250A = {"fork/4": [2.0], "launch/4": [2.9], "boot/4": [4.8], "fate/4": [1.0], "fork/16": [2.9],
               "launch/16": [4.9], "boot/16": [33.2], "fate/16": [2.8], "fork/64": [5.6], "launch/64": [9.2],
               "boot/64": [325.5], "fate/64": [16.5], "fork/128": [9.4], "launch/128": [17.5], "boot/128": [723.1]}
if os.environ.get("FROM_JSON"):  # the fit and tables again from a JSON=FILE run's samples, measuring nothing
    src = os.environ["FROM_JSON"]
    saved = GPU_1E4250A if src == "gpu-1e4250a" else json.load(open(src))
    for k, v in saved.items():
        c, n = k.split("/")
        if int(n) in ns:
            samples[(c, int(n))] = v
for r in range(0 if os.environ.get("FROM_JSON") else runs):
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
pts = [(n, med("fork", n)[0]) for n in ns if med("fork", n)[0] is not None]
if len(pts) >= 2:
    models["fork"] = ([0, 1], fit([p[0] for p in pts], [p[1] for p in pts], [0, 1]))
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

# Across hosts, 8 ranks per host (docs/SCALE.md's model): the one-host fits above plus the launch tree's hops.
# T_HOP_MS: one ssh login plus the agent's start (800: namespace hosts on the development VM); FANOUT (32);
# RTT_MS: one round trip between hosts (0.05); HB_MS: rank 0's heartbeat CPU per peer per interval (fate_cpu.py);
# ROUND_MS below.
hop = float(os.environ.get("T_HOP_MS", "800"))
F = int(os.environ.get("FANOUT", "32"))
rtt = float(os.environ.get("RTT_MS", "0.05"))
hb = float(os.environ.get("HB_MS", "0.09"))
# ROUND_MS: one round of the first call's dissemination with the connection it opens (bench_rank first at 64 ranks
# on the GPU host, 1836c6d: 16.6 ms median over log2 64 = 6 rounds).
round_ms = float(os.environ.get("ROUND_MS", "2.8"))


def depth(hosts):
    d, cap, level = 0, 0, 1
    while cap < hosts:
        level *= F
        cap += level
        d += 1
    return d


def model(name, n):
    powers, p = models[name]
    return sum(c * n ** k for k, c in zip(powers, p))


if all(m in models for m in ("launch", "bootstrap", "fate", "fork")):
    import math
    a_l, b_l = models["launch"][1]
    c_msg = max(b_l - models["fork"][1][1], 0)  # tprun's own cost per rank above the fork floor: an upper bound
    a_b, b_b, c_b = models["bootstrap"][1]
    print()
    print("| across hosts (8 ranks per host) | 1k | 10k | 100k |")
    print("|---|---:|---:|---:|")
    rows = {
        "hosts": lambda n: "%d" % (n // 8),
        "tree depth (fan-out %d)" % F: lambda n: "%d" % depth(n // 8),
        "launch, tree (s)": lambda n: "%.2f" % ((depth(n // 8) * hop + model("launch", 8) + c_msg * n) / 1e3),
        "launch, flat (s)": lambda n: "%.2f" % ((math.ceil(n / 8 / 32) * hop + model("launch", 8) + c_msg * n) / 1e3),
        # rank 0 alone sends every rank the whole table: the one-host fit's N^2 is its cost, not a share per rank
        "bootstrap, rank 0 sends the table to every rank (s)": lambda n: "%.3g" % (model("bootstrap", n) / 1e3),
        "bootstrap, its N^2 records from rank 0": lambda n: "%.3g" % (float(n) * n),
        "first call, log2 N rounds at ROUND_MS each (ms)": lambda n: "%.0f" % (math.ceil(math.log2(n)) * round_ms),
        "fate, SIGKILL to all gone, one-host slope (ms)": lambda n: "%.0f" % (model("fate", n) + 2 * rtt),
        "fate, rank 0's FAIL writes at 3 us each (ms)": lambda n: "%.0f" % (model("fate", 8) + 3e-3 * n + 2 * rtt),
        "heartbeat star: rank 0 CPU per 250 ms interval (ms)": lambda n: "%.0f" % (hb * n),
    }
    for name, f in rows.items():
        print("| %s | %s |" % (name, " | ".join(f(n) for n in (1000, 10000, 100000))))
