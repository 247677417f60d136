#!/bin/bash
# coll_hier_bench.sh: flat against hierarchical host collectives on namespace hosts (tests/netns_lib.sh: root only,
# hosts a, b, c, d joined by veth pairs over a bridge): tp-bench under tprun with TP_COLL_HIER=off, then on,
# alternated --reps times, for M hosts x 2 ranks for each M of --hosts (2 to 4); prints the "hierarchical" table of
# p50s (the median over the repetitions) and hier / flat. Run from the build directory. Not run by make check.
#   examples/bench/coll_hier_bench.sh [--hosts "2 4"] [--reps N] [--ops LIST] [--sizes "16 65536 1048576 4194304"]
# LIST is tp-bench's: allreduce,allgather,reduce_scatter,bcast.
set -u -o pipefail
BENCH_PROG=${BENCH_PROG:-$PWD/tp-bench}
NETNS_TEST_TIMEOUT=${NETNS_TEST_TIMEOUT:-3000}
NETNS_HOSTS="a b c d"
# netns_lib.sh runs this script again under timeout with its arguments: they are read after it.
. "$(dirname "$0")/../../tests/netns_lib.sh"
hosts="2" reps=3 ops=allreduce,allgather,reduce_scatter,bcast sizes="16 65536 1048576 4194304"
while [ $# -gt 0 ]; do
    case $1 in
    --hosts) hosts=${2-} ;;
    --reps) reps=${2-} ;;
    --ops) ops=${2-} ;;
    --sizes) sizes=${2-} ;;
    *) echo "coll_hier_bench.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift 2
done
results=$D/results.jsonl
for m in $hosts; do
    case $m in 2) place=a:2,b:2 ;; 3) place=a:2,b:2,c:2 ;; 4) place=a:2,b:2,c:2,d:2 ;;
    *) echo "coll_hier_bench.sh: --hosts: each 2, 3 or 4, got '$m'" >&2; exit 2 ;; esac
    for rep in $(seq 1 "$reps"); do
        for mode in off on; do
            step "$m hosts x 2 ranks, TP_COLL_HIER=$mode, repetition $rep"
            TP_COLL_HIER=$mode tprun_on_a -n $((2 * m)) -H $place "$BENCH_PROG" --json --ops "$ops" --sizes "${sizes// /,}" \
                2>"$D/err" | sed "s/^{/{\"hosts\":$m,\"mode\":\"$mode\",/" >>"$results" ||
                { echo "coll_hier_bench.sh: tp-bench failed: $(tail -3 "$D/err")" >&2; exit 1; }
        done
    done
done
python3 - "$results" "$sizes" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
sizes = [int(s) for s in sys.argv[2].split()]
print("hierarchical: p50 us, median of the repetitions (TP_COLL_HIER=off vs on), veth namespace hosts")
print("%-6s %-10s %10s %12s %12s %10s" % ("hosts", "op", "bytes", "flat", "hier", "hier/flat"))
for m in sorted({r["hosts"] for r in rows}):
    for op in dict.fromkeys(r["op"] for r in rows):
        for b in sizes:
            p = {mode: [r["p50_us"] for r in rows if r["hosts"] == m and r["op"] == op and r["bytes"] == b
                        and r["mode"] == mode] for mode in ("off", "on")}
            if not p["off"] or not p["on"]:
                continue
            f, h = statistics.median(p["off"]), statistics.median(p["on"])
            print("%-6s %-10s %10d %12.1f %12.1f %10.2f" % ("%dx2" % m, op, b, f, h, h / f))
PY
