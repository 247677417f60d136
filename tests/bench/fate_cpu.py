# fate_cpu.py BUILD [NS] [WINDOW_S]: CPU that the fate heartbeat star costs. For each N ("128,256,512") it runs
# `tprun -n N tests/runtime_rank block` (ranks that boot, then only their fate thread is awake), waits until every
# rank is ready plus 2 s, then reads utime+stime (/proc/PID/stat) of rank 0 and of rank N-1 over WINDOW_S seconds
# (60). Prints one row per N: CPU ms per second of wall time (= % of one core x 10), ms per heartbeat interval
# (TP_HEARTBEAT_TIMEOUT / 4, from the environment: a loaded machine may need a longer one to boot at all), and
# what that work costs at the default interval of 250 ms, as a share of one core.
import os, signal, subprocess, sys, threading, time

b = sys.argv[1]
ns = [int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "128,256,512").split(",")]
window = float(sys.argv[3]) if len(sys.argv) > 3 else 60.0
hz = os.sysconf("SC_CLK_TCK")
interval_ms = float(os.environ.get("TP_HEARTBEAT_TIMEOUT", "1")) * 1000 / 4


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)


print("| N | rank 0 CPU ms/s | rank N-1 CPU ms/s | rank 0 ms per interval (%g ms) | rank 0 at 250 ms: %% of a core | boot s |"
      % interval_ms)
print("|---:|---:|---:|---:|---:|---:|")
for n in ns:
    t0 = time.time()
    p = subprocess.Popen([b + "/tprun", "-n", str(n), "--gpus-per-rank", "0", b + "/tests/runtime_rank", "block"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    pids = {}
    guard = threading.Timer(300, p.send_signal, [signal.SIGTERM])  # a boot that hangs: the row says so
    guard.start()
    for line in p.stdout:
        w = line.split()
        if len(w) > 6 and w[0] == "ready" and w[1] == "rank":
            pids[int(w[2])] = int(w[6])
        if len(pids) == n:
            break
    boot = time.time() - t0
    guard.cancel()
    if len(pids) < n:
        print("| %d | boot failed (%d of %d ready) | | | | |" % (n, len(pids), n), flush=True)
        p.wait()
        continue
    time.sleep(2)
    a0, z0, w0 = cpu_ticks(pids[0]), cpu_ticks(pids[n - 1]), time.time()
    time.sleep(window)
    a1, z1, w1 = cpu_ticks(pids[0]), cpu_ticks(pids[n - 1]), time.time()
    p.send_signal(signal.SIGTERM)
    p.stdout.close()
    p.wait()
    r0 = (a1 - a0) * 1000.0 / hz / (w1 - w0)
    rl = (z1 - z0) * 1000.0 / hz / (w1 - w0)
    per = r0 * interval_ms / 1000.0
    print("| %d | %.2f | %.2f | %.3f | %.2f | %.1f |" % (n, r0, rl, per, per / 250.0 * 100, boot), flush=True)
