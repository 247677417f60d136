#!/bin/bash
# coll_bench.sh: tp-bench under tprun over each transport (TP_TRANSPORTS=shm, then tcp) and the same loop with Open
# MPI (its shared-memory path, vader, and forced to TCP over loopback) and MPICH, for 2, 3 and 4 ranks; prints one
# table per transport and world with our ratio to each peer. Not run by make check.
#   examples/bench/coll_bench.sh [--ranks "2 3 4"] [--transports "shm tcp"] [--max-bytes N | --sizes LIST]
#                                [--ops LIST] [--iters N] [--rounds R] [--peers "ompi-vader ompi-tcp mpich"]
#                                [--base DIR] [--tp-mem] [--rewrite] [--no-barrier] [--json]
# --rounds R runs everything R times, interleaved (round 1 of every program, then round 2, ...); a cell is the
# median over the rounds of each round's p50 / p90, a ratio the median of the rounds' ratios (a loaded machine
# moves single runs several-fold). --base DIR also runs DIR's tprun and tp-bench (another build, e.g. the one
# before a change) in each round, as "base" columns. --tp-mem also runs tp-bench over shm with its buffers from
# tp_mem_alloc (peers read them in place), as "tp_mem" columns. --rewrite has every program write its send buffer
# before each call, inside the call's time, as an engine's compute would; --no-barrier has every program time its
# calls one after another after one barrier (a cell is then the slowest rank's mean per call). Run it under `nice -n -20` on a shared
# machine: every program inherits it. Where the kernel groups processes by session (/proc/sys/kernel/sched_autogroup_enabled is 1), nice
# only orders processes inside one session and each other session still gets an equal share of the CPUs; then, as
# root: setsid -w bash -c 'echo -20 > /proc/self/autogroup && exec nice -n -20 examples/bench/coll_bench.sh ...'
# tprun binds each rank to a core of its own (TP_BIND_TO=core unless set), as Open MPI does by default at up to one
# rank per core; oversubscribed, tprun gives the ranks the cores in turn and Open MPI leaves them unbound.
# TPRUN and BENCH_PROG name the programs (default: ./tprun and ./tp-bench in the build directory). A peer that
# cannot be built or fails to run stops the script with its own messages.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
TPRUN=${TPRUN:-./tprun}
BENCH_PROG=${BENCH_PROG:-./tp-bench}
ranks="2 3 4" transports="shm tcp" opts=() json=0 rounds=1 peers="ompi-vader ompi-tcp mpich" base="" tp_mem=0
die() {
    echo "coll_bench.sh: $*" >&2
    exit 1
}
while [ $# -gt 0 ]; do
    case $1 in
    --ranks) ranks=${2-}; shift ;;
    --transports) transports=${2-}; shift ;;
    --peers) peers=${2-}; shift ;;
    --rounds) rounds=${2-}; shift ;;
    --base) base=${2-}; shift ;;
    --max-bytes | --ops | --iters | --sizes) [ $# -ge 2 ] || die "$1 needs a value"; opts+=("$1" "$2"); shift ;;
    --json) json=1 ;;
    --tp-mem) tp_mem=1 ;;
    --rewrite | --no-barrier) opts+=("$1") ;;
    *) echo "coll_bench.sh: unknown option $1" >&2; exit 2 ;;
    esac
    shift
done
case $rounds in '' | *[!0-9]* | 0) die "--rounds takes a count of 1 or more, not '$rounds'" ;; esac
for p in $peers; do
    case $p in ompi-vader | ompi-tcp | mpich) ;; *) die "unknown peer '$p' in --peers: use ompi-vader, ompi-tcp, mpich" ;; esac
done
if [ -n "$base" ]; then
    [ -x "$base/tprun" ] && [ -x "$base/tp-bench" ] || die "--base $base: no tprun and tp-bench built there"
    base=$(cd "$base" && pwd)
fi
export TP_BIND_TO=${TP_BIND_TO:-core}
work=$(mktemp -d "${TMPDIR:-/tmp}/coll-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
cores=$(nproc)
for cc in mpicc.openmpi mpicc.mpich; do
    command -v $cc >/dev/null || die "$cc not found: run scripts/install-deps.sh (libopenmpi-dev, mpich, libmpich-dev)"
    $cc -O2 -o "$work/${cc#mpicc.}_bench" "$here/mpi_coll_bench.c" 2>"$work/cc.err" ||
        die "$cc cannot build mpi_coll_bench.c: $(head -n 3 "$work/cc.err")"
done
results=$work/results.jsonl
# Runs one program; its JSON rows get the round number; a failure stops the script with its last messages.
run_one() {
    local name=$1 n=$2 round=$3
    shift 3
    "$@" >"$work/one.jsonl" 2>"$work/one.err" || die "$name failed at $n ranks (status $?): $(tail -n 5 "$work/one.err")"
    sed "s/^{/{\"round\":$round,/" "$work/one.jsonl" >>"$results"
}
has_peer() { case " $peers " in *" $1 "*) return 0 ;; esac; return 1; }
# The vCPU placement regime moves shared-memory numbers several-fold: probed before and after (docs/BENCHMARKS.md).
PROBE=${PROBE:-./tests/bench/floor_probe}
probe() { [ -x "$PROBE" ] && echo "coll_bench.sh: $1: $("$PROBE"), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2 || echo "coll_bench.sh: $PROBE not built: no floor probe" >&2; }
probe before
for round in $(seq 1 "$rounds"); do
    for n in $ranks; do
        for tr in $transports; do
            TP_TRANSPORTS=$tr run_one "tp-bench over $tr" "$n" "$round" "$TPRUN" -n "$n" "$BENCH_PROG" --json "${opts[@]}"
            sed -i "s/\"impl\":\"tprun\"/\"impl\":\"tprun-$tr\"/" "$results"
            if [ "$tp_mem" = 1 ] && [ "$tr" = shm ]; then
                TP_TRANSPORTS=$tr run_one "tp-bench over $tr with tp_mem_alloc buffers" "$n" "$round" "$TPRUN" -n "$n" \
                    "$BENCH_PROG" --json --mem tp "${opts[@]}"
                sed -i "s/\"impl\":\"tprun-mem\"/\"impl\":\"mem-$tr\"/" "$results"
            fi
            if [ -n "$base" ]; then
                TP_TRANSPORTS=$tr run_one "the base build's tp-bench over $tr" "$n" "$round" "$base/tprun" -n "$n" \
                    "$base/tp-bench" --json "${opts[@]}"
                sed -i "s/\"impl\":\"tprun\"/\"impl\":\"base-$tr\"/" "$results"
            fi
        done
        # Open MPI's defaults on one host: ob1 with vader (shared memory, CMA single copy)
        has_peer ompi-vader && run_one "Open MPI" "$n" "$round" mpirun.openmpi --allow-run-as-root --oversubscribe \
            -n "$n" "$work/openmpi_bench" --impl ompi-vader "${opts[@]}"
        has_peer ompi-tcp && run_one "Open MPI" "$n" "$round" mpirun.openmpi --allow-run-as-root --oversubscribe \
            --mca btl tcp,self --mca pml ob1 --mca btl_tcp_if_include lo -n "$n" "$work/openmpi_bench" \
            --impl ompi-tcp "${opts[@]}"
        # MPICH only spins: oversubscribed it takes milliseconds per call, so it runs where each rank has a core
        if has_peer mpich && [ "$n" -le "$cores" ]; then
            run_one MPICH "$n" "$round" mpiexec.hydra -n "$n" "$work/mpich_bench" --impl mpich "${opts[@]}"
        elif has_peer mpich; then
            echo "coll_bench.sh: MPICH not run at $n ranks: this host has $cores cores (MPICH spins)" >&2
        fi
    done
    probe "after round $round"
done
if [ "$json" = 1 ]; then cat "$results"; exit 0; fi
python3 - "$results" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = {}  # (ranks, op, bytes) -> impl -> round -> row
for r in rows: by.setdefault((r["ranks"], r["op"], r["bytes"]), {}).setdefault(r["impl"], {})[r["round"]] = r
def size(b):
    for u, s in ((1 << 20, "MiB"), (1 << 10, "KiB")):
        if b >= u: return "%d %s" % (b // u, s)
    return "%d B" % b
med = statistics.median
def cell(runs):
    if not runs: return "not run"
    return "%.1f / %.1f" % (med(r["p50_us"] for r in runs.values()), med(r["p90_us"] for r in runs.values()))
def ratio(ours, theirs):  # the median of the rounds' ratios, each within one round
    q = [ours[k]["p50_us"] / theirs[k]["p50_us"] for k in ours if k in theirs and theirs[k]["p50_us"] > 0]
    return "%.2f" % med(q) if q else "-"
impls = {i for d in by.values() for i in d}
ours = sorted({i[len("tprun-"):] for i in impls if i.startswith("tprun-")}, key=lambda t: (t != "shm", t))
rounds = max(r["round"] for r in rows)
for tr in ours:
    ompi = "ompi-vader" if tr == "shm" else "ompi-tcp"
    base = "base-" + tr if "base-" + tr in impls else None
    mem = "mem-" + tr if "mem-" + tr in impls else None
    for n in sorted({k[0] for k in by}):
        print("\n### tprun over %s, %d ranks (%d round%s: medians)\n" % (tr, n, rounds, "s" if rounds > 1 else ""))
        head = "| op | size | tprun %s p50 / p90 |" % tr
        if base: head += " base p50 / p90 | tprun/base |"
        if mem: head += " tp_mem p50 / p90 | tp_mem/%s |" % ompi
        head += " %s p50 / p90 | tprun/ompi | mpich p50 / p90 | tprun/mpich |" % ompi
        print(head)
        print("|---|---:|" + "---:|" * (head.count("|") - 3))
        for k in sorted((k for k in by if k[0] == n), key=lambda k: (k[1], k[2])):
            d = by[k]
            t, o, m = d.get("tprun-" + tr, {}), d.get(ompi, {}), d.get("mpich", {})
            line = "| %s | %s | %s |" % (k[1], size(k[2]), cell(t))
            if base: line += " %s | %s |" % (cell(d.get(base, {})), ratio(t, d.get(base, {})))
            if mem: line += " %s | %s |" % (cell(d.get(mem, {})), ratio(d.get(mem, {}), o))
            line += " %s | %s | %s | %s |" % (cell(o), ratio(t, o), cell(m), ratio(t, m))
            print(line)
PY
