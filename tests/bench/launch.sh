#!/bin/sh
# launch.sh: launch latency of tprun against forkn, Hydra and Open MPI, in interleaved hyperfine rounds.
# Run from the build directory after `make bench`; prints the markdown table of launch_table.py.
# Environment: NS (ranks, "1 2 4 16 64"), ROUNDS (4), RUNS per round (5), WARMUP per round (3),
# HELLO_RUNS_64 (runs per round of the MPI hellos at N=64, 3), OUT (results folder), BASE (another build
# directory: its tprun runs as base-tprun-true and base-tprun-boot in the same rounds, for before/after ratios).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(pwd)
NS=${NS:-"1 2 4 16 64"}
ROUNDS=${ROUNDS:-4}
RUNS=${RUNS:-5}
WARMUP=${WARMUP:-3}
HELLO_RUNS_64=${HELLO_RUNS_64:-3}
OUT=${OUT:-bench-launch-$(date +%Y%m%d-%H%M%S)}
for p in tprun tests/bench/bench_rank tests/bench/forkn tests/bench/mpi_hello_ompi tests/bench/mpi_hello_mpich; do
    test -x "$p" || { echo "launch.sh: $build/$p is missing (run make bench here)" >&2; exit 1; }
done
BASE=${BASE:-}
if [ -n "$BASE" ]; then
    for p in tprun tests/bench/bench_rank; do
        test -x "$BASE/$p" || { echo "launch.sh: BASE: $BASE/$p is missing (run make bench there)" >&2; exit 1; }
    done
fi
mkdir -p "$OUT"
"$here/machine.sh" > "$OUT/machine.txt"
# Every launcher cell runs under timeout, so a hang costs 5 s (30 s for an MPI hello) and shows as exit code 124.
to="timeout -k 1 5"
to_hello="timeout -k 1 30"
ompi="mpirun.openmpi --allow-run-as-root --oversubscribe"
round=1
while [ "$round" -le "$ROUNDS" ]; do
    for n in $NS; do
        hyperfine -N -i --warmup "$WARMUP" --runs "$RUNS" --export-json "$OUT/r$round-n$n-fast.json" --style none \
            -n forkn "$build/tests/bench/forkn $n /bin/true" \
            -n timeout "$to /bin/true" \
            -n tprun-true "$to $build/tprun -n $n /bin/true" \
            -n hydra-true "$to mpiexec.hydra -n $n /bin/true" \
            -n ompi-true "$to $ompi -n $n /bin/true" \
            -n tprun-boot "$to $build/tprun -n $n $build/tests/bench/bench_rank boot" \
            ${BASE:+-n base-tprun-true "$to $BASE/tprun -n $n /bin/true"} \
            ${BASE:+-n base-tprun-boot "$to $BASE/tprun -n $n $BASE/tests/bench/bench_rank boot"} >/dev/null
        hruns=$RUNS hwarm=$WARMUP
        if [ "$n" -ge 64 ]; then hruns=$HELLO_RUNS_64 hwarm=1; fi
        hyperfine -N -i --warmup "$hwarm" --runs "$hruns" --export-json "$OUT/r$round-n$n-hello.json" --style none \
            -n hydra-hello "$to_hello mpiexec.hydra -n $n $build/tests/bench/mpi_hello_mpich" \
            -n ompi-hello "$to_hello $ompi -n $n $build/tests/bench/mpi_hello_ompi" >/dev/null
    done
    round=$((round + 1))
done
"$here/machine.sh" >> "$OUT/machine.txt"
python3 "$here/launch_table.py" "$OUT"
