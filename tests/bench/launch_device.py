# launch_device.py BUILD [RUNS] [NS]: launch and bootstrap latency of tprun alone (no MPI or hyperfine needed, so it
# runs on a bare machine such as the GPU host): forkn, tprun of /bin/true and of a boot-only libtp rank, RUNS
# interleaved runs per case (40), NS ranks ("1,4,16,64"); prints median and p90 in ms. tprun gets --gpus-per-rank 0:
# on a GPU host it would otherwise refuse more ranks than GPUs (what is measured is the launch, not the GPU's).
import statistics, subprocess, sys, time
b = sys.argv[1]
runs = int(sys.argv[2]) if len(sys.argv) > 2 else 40
cases = []
for n in [int(x) for x in (sys.argv[3] if len(sys.argv) > 3 else "1,4,16,64").split(",")]:
    cases += [("forkn %d /bin/true" % n, [b + "/tests/bench/forkn", str(n), "/bin/true"]),
              ("tprun -n %d /bin/true" % n, [b + "/tprun", "-n", str(n), "--gpus-per-rank", "0", "/bin/true"]),
              ("tprun -n %d bench_rank boot" % n, [b + "/tprun", "-n", str(n), "--gpus-per-rank", "0",
                                                  b + "/tests/bench/bench_rank", "boot"])]
t = {name: [] for name, _ in cases}
for _ in range(3):
    for name, cmd in cases: subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
for r in range(runs):
    for name, cmd in cases:
        t0 = time.perf_counter()
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        t[name].append((time.perf_counter() - t0) * 1e3)
        if p.returncode != 0: print("FAILED", name, p.returncode)
print("| case | median ms | p90 ms |")
print("|---|---:|---:|")
for name, _ in cases:
    v = sorted(t[name])
    print("| %s | %.1f | %.1f |" % (name, statistics.median(v), v[int(len(v) * 0.9)]))
