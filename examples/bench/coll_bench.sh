#!/bin/bash
# coll_bench.sh: tp-bench under tprun over each transport (TP_TRANSPORTS=shm, then tcp) and the same loop with Open
# MPI (its shared-memory path, vader, and forced to TCP over loopback) and MPICH, for 2, 3 and 4 ranks; prints one
# table per transport and world with our ratio to each peer. Not run by make check.
#   examples/bench/coll_bench.sh [--ranks "2 3 4"] [--transports "shm tcp"] [--max-bytes N] [--ops LIST] [--iters N]
#                                [--json]
# TPRUN and BENCH_PROG name the programs (default: ./tprun and ./tp-bench in the build directory). A peer that
# cannot be built or fails to run stops the script with its own messages.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
TPRUN=${TPRUN:-./tprun}
BENCH_PROG=${BENCH_PROG:-./tp-bench}
ranks="2 3 4" transports="shm tcp" opts=() json=0
die() {
    echo "coll_bench.sh: $*" >&2
    exit 1
}
while [ $# -gt 0 ]; do
    case $1 in
    --ranks) ranks=${2-}; shift ;;
    --transports) transports=${2-}; shift ;;
    --max-bytes | --ops | --iters) [ $# -ge 2 ] || die "$1 needs a value"; opts+=("$1" "$2"); shift ;;
    --json) json=1 ;;
    *) echo "coll_bench.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
work=$(mktemp -d "${TMPDIR:-/tmp}/coll-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
cores=$(nproc)
for cc in mpicc.openmpi mpicc.mpich; do
    command -v $cc >/dev/null || die "$cc not found: run scripts/install-deps.sh (libopenmpi-dev, mpich, libmpich-dev)"
    $cc -O2 -o "$work/${cc#mpicc.}_bench" "$here/mpi_coll_bench.c" 2>"$work/cc.err" ||
        die "$cc cannot build mpi_coll_bench.c: $(head -n 3 "$work/cc.err")"
done
# Runs one MPI peer; a failure stops the script with the peer's own last messages.
run_peer() {
    local name=$1 n=$2
    shift 2
    "$@" >>"$results" 2>"$work/peer.err" || die "$name failed at $n ranks (status $?): $(tail -n 5 "$work/peer.err")"
}
results=$work/results.jsonl
# The vCPU placement regime moves shared-memory numbers several-fold: probed before and after (docs/BENCHMARKS.md).
PROBE=${PROBE:-./tests/bench/floor_probe}
probe() { [ -x "$PROBE" ] && echo "coll_bench.sh: $1: $("$PROBE")" >&2 || echo "coll_bench.sh: $PROBE not built: no floor probe" >&2; }
probe before
for n in $ranks; do
    for tr in $transports; do
        TP_TRANSPORTS=$tr "$TPRUN" -n "$n" "$BENCH_PROG" --json "${opts[@]}" >"$work/tprun.jsonl" ||
            die "tp-bench failed at $n ranks over $tr (status $?)"
        sed "s/\"impl\":\"tprun\"/\"impl\":\"tprun-$tr\"/" "$work/tprun.jsonl" >>"$results"
    done
    # Open MPI's defaults on one host: ob1 with vader (shared memory, CMA single copy)
    run_peer "Open MPI" "$n" mpirun.openmpi --allow-run-as-root --oversubscribe -n "$n" "$work/openmpi_bench" \
        --impl ompi-vader "${opts[@]}"
    run_peer "Open MPI" "$n" mpirun.openmpi --allow-run-as-root --oversubscribe --mca btl tcp,self --mca pml ob1 \
        --mca btl_tcp_if_include lo -n "$n" "$work/openmpi_bench" --impl ompi-tcp "${opts[@]}"
    # MPICH only spins: oversubscribed it takes milliseconds per call, so it runs where each rank has a core
    if [ "$n" -le "$cores" ]; then
        run_peer MPICH "$n" mpiexec.hydra -n "$n" "$work/mpich_bench" --impl mpich "${opts[@]}"
    else
        echo "coll_bench.sh: MPICH not run at $n ranks: this host has $cores cores (MPICH spins)" >&2
    fi
done
probe after
if [ "$json" = 1 ]; then cat "$results"; exit 0; fi
python3 - "$results" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
key = lambda r: (r["ranks"], r["op"], r["bytes"])
by = {}
for r in rows: by.setdefault(key(r), {})[r["impl"]] = r
def size(b):
    for u, s in ((1 << 20, "MiB"), (1 << 10, "KiB")):
        if b >= u: return "%d %s" % (b // u, s)
    return "%d B" % b
ours = sorted({i[len("tprun-"):] for d in by.values() for i in d if i.startswith("tprun-")}, key=lambda t: (t != "shm", t))
cell = lambda r: "%.1f / %.1f" % (r["p50_us"], r["p90_us"]) if r else "not run"
for tr in ours:
    ompi = "ompi-vader" if tr == "shm" else "ompi-tcp"
    for n in sorted({k[0] for k in by}):
        print("\n### tprun over %s, %d ranks\n" % (tr, n))
        print("| op | size | tprun %s p50 / p90 | %s p50 / p90 | tprun/ompi | mpich p50 / p90 | tprun/mpich |" % (tr, ompi))
        print("|---|---:|---:|---:|---:|---:|---:|")
        for k in sorted((k for k in by if k[0] == n), key=lambda k: (k[1], k[2])):
            d, t = by[k], by[k].get("tprun-" + tr)
            ratio = lambda r: "%.2f" % (t["p50_us"] / r["p50_us"]) if r and t else "-"
            o, m = d.get(ompi), d.get("mpich")
            print("| %s | %s | %s | %s | %s | %s | %s |" % (k[1], size(k[2]), cell(t), cell(o), ratio(o), cell(m), ratio(m)))
PY
