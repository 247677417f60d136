#!/bin/bash
# tcp_bench.sh: tprun over TCP (TP_TRANSPORTS=tcp) beside Open MPI forced to TCP over loopback, or with --transport
# shm over shared memory beside Open MPI's vader, 2 ranks, in interleaved rounds: each round runs every variant of
# ours and then Open MPI, so a ratio compares runs minutes apart at most. Prints, per op and size, each round's p50
# ratio to Open MPI and the median. Not run by make check.
#   examples/bench/tcp_bench.sh [--transport tcp|shm] [--rounds N] [--sizes LIST] [--ops LIST] [--iters N]
#                               [--ranks N] [--json FILE] [--stat p50|p10|min|p90] [--no-barrier]
#                               [--same-process] [--variant NAME=SETTINGS]...
# A variant is a name and space-separated VAR=value settings for its tprun run, e.g. --variant 'p1m=TP_PART_BYTES=1M';
# BUILD=dir among them runs dir/tprun and dir/tp-bench instead (another build, for before/after in one run). Without
# --variant one variant named after the transport runs with no settings. --json FILE keeps every row (one JSON object a line). --stat picks
# the per-call statistic compared (default p50; min and p10 show the path without the machine's load). --no-barrier
# has both programs time their calls back to back after one barrier (a row is then the slowest rank's mean per call,
# the same for every --stat). With a barrier before each call, calls over 256 bytes take their sender's own connection
# and the barrier the shared one, so the acknowledgement TCP sends for every second frame on a one-way connection
# falls on every other call (BENCHMARKS.md, "Twelfth pass").
# tprun binds each rank to a core of its own (TP_BIND_TO=core unless set), as Open MPI does by default at up to one
# rank per core (coll_bench.sh does the same). --same-process runs ab_bench.c instead: libtp and Open MPI in the same
# processes under mpirun, blocks of 10 calls of each in turn, so a round compares the two at the same moments; over
# TCP at 2 ranks it adds "tcp-floor", the call's bytes exchanged over bare loopback sockets: all_reduce, all_gather
# and sendrecv up to 256 B on one socket (the least any implementation over the kernel's TCP pays that round), larger
# all_gather and sendrecv on one socket each way with libtp's socket settings (what the kernel charges for the bytes
# without libtp's machinery). Run it from the build directory (it links ./.libs/libtp.so);
# every TP_* variable set goes to the ranks, and --variant does not apply. Where the build has tests/bench/floor_probe, each round starts with it
# (the vCPU placement it ran in) and its rows carry it as "floor_us".
set -euo pipefail
export TP_BIND_TO=${TP_BIND_TO:-core}
here=$(cd "$(dirname "$0")" && pwd)
transport=tcp rounds=3 stat=p50 ranks=2 sizes=16,1048576,4194304 ops=allreduce,allgather iters= json_out= variants=() no_barrier=()
same_process=0
die() {
    echo "tcp_bench.sh: $*" >&2
    exit 1
}
while [ $# -gt 0 ]; do
    if [ "$1" = --no-barrier ] || [ "$1" = --same-process ]; then
        [ "$1" = --no-barrier ] && no_barrier=(--no-barrier) || same_process=1
        shift
        continue
    fi
    [ $# -ge 2 ] || die "$1 needs a value (see the comment at the top of $0)"
    case $1 in
    --transport) case $2 in tcp | shm) transport=$2 ;; *) die "--transport: expected tcp or shm, got \"$2\"" ;; esac ;;
    --rounds) rounds=$2 ;;
    --ranks) ranks=$2 ;;
    --sizes) sizes=$2 ;;
    --ops) ops=$2 ;;
    --stat) case $2 in p50 | p10 | p90 | min) stat=$2 ;; *) die "--stat: expected p50, p10, p90 or min, got \"$2\"" ;; esac ;;
    --iters) iters=$2 ;;
    --json) json_out=$2 ;;
    --variant) case $2 in *=*) variants+=("$2") ;; *) die "--variant: expected NAME=SETTINGS, got \"$2\"" ;; esac ;;
    *) die "unknown option $1 (see the comment at the top of $0)" ;;
    esac
    shift 2
done
case $rounds in '' | *[!0-9]* | 0) die "--rounds: expected a positive integer, got \"$rounds\"" ;; esac
[ "$same_process" = 0 ] || [ ${#variants[@]} -eq 0 ] || die "--variant does not apply with --same-process (one libtp a process)"
[ "$same_process" = 0 ] || [ -e ./.libs/libtp.so ] ||
    die "--same-process: no ./.libs/libtp.so here: run it from the build directory"
[ ${#variants[@]} -gt 0 ] || variants=("$transport=")
peer=ompi-tcp peer_args=(--mca btl tcp,self --mca pml ob1 --mca btl_tcp_if_include lo)
[ "$transport" = shm ] && peer=ompi-vader peer_args=()
command -v mpicc.openmpi >/dev/null || die "mpicc.openmpi not found: run scripts/install-deps.sh (libopenmpi-dev)"
work=$(mktemp -d "${TMPDIR:-/tmp}/tcp-bench.XXXXXX")
trap 'rm -rf "$work"' EXIT
mpicc.openmpi -O2 -o "$work/ompi_bench" "$here/mpi_coll_bench.c" 2>"$work/cc.err" ||
    die "mpicc.openmpi cannot build mpi_coll_bench.c: $(head -n 3 "$work/cc.err")"
ab=()
if [ "$same_process" = 1 ]; then
    sh "$here/ab_build.sh" ./.libs "$work/ab_bench" 2>"$work/cc.err" ||
        die "mpicc.openmpi cannot build ab_bench.c: $(head -n 3 "$work/cc.err")"
    ab=(--ours "$transport")
    [ "$transport" != tcp ] || [ "$ranks" != 2 ] || ab+=(--floor)
    for v in $(compgen -e | grep '^TP_' || true); do peer_args+=(-x "$v"); done
fi
args=(--json --ops "$ops" --sizes "$sizes" ${no_barrier[@]+"${no_barrier[@]}"})
[ -z "$iters" ] || args+=(--iters "$iters")
results=$work/rows.jsonl
for round in $(seq 1 "$rounds"); do
    floor=null
    if [ -x ./tests/bench/floor_probe ]; then
        probe=$(./tests/bench/floor_probe) && floor=$(echo "$probe" | awk '{print $7}') && echo "tcp_bench.sh: $probe" >&2
    fi
    if [ "$same_process" = 1 ]; then
        TP_TRANSPORTS=$transport mpirun.openmpi --allow-run-as-root --oversubscribe -x TP_TRANSPORTS \
            ${peer_args[@]+"${peer_args[@]}"} -n "$ranks" "$work/ab_bench" --impl "$peer" "${ab[@]}" "${args[@]}" \
            2>"$work/one.err" | sed "s/}$/,\"round\":$round,\"floor_us\":$floor}/" >>"$results" ||
            die "ab_bench failed in round $round: $(grep -v -e '^---' -e '^ *$' "$work/one.err" | head -n 20)"
        echo "tcp_bench.sh: round $round of $rounds done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
        continue
    fi
    for v in "${variants[@]}"; do
        name=${v%%=*} settings=${v#*=} build=. envs=()
        for kv in $settings; do
            case $kv in BUILD=*) build=${kv#BUILD=} ;; *=*) envs+=("$kv") ;; *) die "variant $name: \"$kv\" is not VAR=value" ;; esac
        done
        env ${envs[@]+"${envs[@]}"} TP_TRANSPORTS=$transport "$build/tprun" -n "$ranks" "$build/tp-bench" "${args[@]}" \
            >"$work/one.jsonl" 2>"$work/one.err" ||
            die "variant $name failed in round $round (status $?): $(tail -n 3 "$work/one.err")"
        sed "s/\"impl\":\"tprun\"/\"impl\":\"$name\",\"round\":$round,\"floor_us\":$floor/" "$work/one.jsonl" >>"$results"
    done
    mpirun.openmpi --allow-run-as-root --oversubscribe ${peer_args[@]+"${peer_args[@]}"} \
        -n "$ranks" "$work/ompi_bench" --impl "$peer" "${args[@]}" 2>"$work/one.err" |
        sed "s/\"impl\":\"$peer\"/\"impl\":\"$peer\",\"round\":$round,\"floor_us\":$floor/" >>"$results" ||
        die "Open MPI failed in round $round: $(tail -n 3 "$work/one.err")"
    echo "tcp_bench.sh: round $round of $rounds done, load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
done
[ -z "$json_out" ] || cp "$results" "$json_out"
python3 - "$results" "$stat" "$peer" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
peer = sys.argv[3]
p50 = {(r["impl"], r["op"], r["bytes"], r["round"]): r[sys.argv[2] + "_us"] for r in rows}
impls = list(dict.fromkeys(r["impl"] for r in rows if r["impl"] != peer))
rounds = sorted({r["round"] for r in rows})
def size(b):
    return "%g MiB" % (b / 1048576) if b >= 1048576 else "%g KiB" % (b / 1024) if b >= 1024 else "%d B" % b
print("%s per call, us\n" % sys.argv[2])
if "tcp-floor" in impls:
    print("tcp-floor: the call's bytes over bare loopback sockets in the same processes. Up to 256 B: the least an\n"
          "implementation over the kernel's TCP pays in that round, so its ratio is the best any could reach there;\n"
          "above: what the kernel charges for those bytes with libtp's socket settings, without libtp's machinery\n")
print("| op | size | impl | %s | median ratio | max ratio |" % " | ".join("round %d: ours / %s (ratio)" % (r, peer) for r in rounds))
print("|---|---:|---|%s---:|---:|" % ("---|" * len(rounds)))
for op, b in dict.fromkeys((r["op"], r["bytes"]) for r in rows):
    for impl in impls:
        cells, ratios = [], []
        for r in rounds:
            a, o = p50.get((impl, op, b, r)), p50.get((peer, op, b, r))
            if a is None or o is None:
                cells.append("-")
                continue
            ratios.append(a / o)
            cells.append("%.1f / %.1f (%.2f)" % (a, o, a / o))
        med = "%.2f" % statistics.median(ratios) if ratios else "-"
        mx = "%.2f" % max(ratios) if ratios else "-"
        print("| %s | %s | %s | %s | %s | %s |" % (op, size(b), impl, " | ".join(cells), med, mx))
PY
