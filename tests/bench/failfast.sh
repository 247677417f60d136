#!/bin/sh
# failfast.sh: rank 1 of N fails; bench_failfast times its peers' and launcher's end, interleaving the cases rep by rep.
# Run from the build directory after `make bench`; prints the tables of failfast_table.py.
# Environment: CASES (kill: tprun, torchrun-env, hydra, ompi, ompi-k0; stop: tprun-stop, tprun-stop-hb0.2),
# NS ("4 16"), REPS (20), OUT (results folder), BASE (another build directory: adds its tprun as the case
# base-tprun, or base-tprun-stop with CASES=stop, interleaved with the others, for before/after ratios).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=$(pwd)
CASES=${CASES:-kill}
NS=${NS:-"4 16"}
REPS=${REPS:-20}
OUT=${OUT:-bench-failfast-$(date +%Y%m%d-%H%M%S)}
case $CASES in
kill) CASES="tprun torchrun-env hydra ompi ompi-k0${BASE:+ base-tprun}" ;;
stop) CASES="tprun-stop tprun-stop-hb0.2${BASE:+ base-tprun-stop}" ;;
esac
BASE=${BASE:-}
for p in tprun tests/bench/bench_rank tests/bench/bench_failfast tests/bench/mpi_spin_ompi tests/bench/mpi_spin_mpich; do
    test -x "$p" || { echo "failfast.sh: $build/$p is missing (run make bench here)" >&2; exit 1; }
done
mkdir -p "$OUT"
"$here/machine.sh" > "$OUT/machine.txt"
ff="$build/tests/bench/bench_failfast"
rank="$build/tests/bench/bench_rank"
ompi="mpirun.openmpi --allow-run-as-root --oversubscribe"
rep=0
while [ "$rep" -lt "$REPS" ]; do
    for n in $NS; do
        for c in $CASES; do
            case $c in
            tprun) set -- --name-first tprun: --name-regex 'rank 1 \(host [^,]*, pid %p\) killed by signal 9 \(SIGKILL\)' \
                -- "$build/tprun" -n "$n" "$rank" spin ;;
            torchrun-env) set -- --torchrun --min-right $((n - 1)) -- "$rank" spin ;;
            hydra) set -- --name-regex 'PID %p RUNNING' -- mpiexec.hydra -n "$n" "$build/tests/bench/mpi_spin_mpich" compute ;;
            ompi) set -- --name-regex 'process rank 1 with PID' -- $ompi -n "$n" "$build/tests/bench/mpi_spin_ompi" compute ;;
            ompi-k0) set -- --name-regex 'process rank 1 with PID' -- $ompi --mca odls_base_sigkill_timeout 0 -n "$n" \
                "$build/tests/bench/mpi_spin_ompi" compute ;;
            base-tprun) set -- --name-first tprun: --name-regex 'rank 1 \(host [^,]*, pid %p\) killed by signal 9 \(SIGKILL\)' \
                -- "$BASE/tprun" -n "$n" "$BASE/tests/bench/bench_rank" spin ;;
            base-tprun-stop) set -- --signal STOP --min-right 1 -- "$BASE/tprun" -n "$n" "$BASE/tests/bench/bench_rank" spin ;;
            tprun-stop) set -- --signal STOP --min-right 1 -- "$build/tprun" -n "$n" "$rank" spin ;;
            tprun-stop-hb0.2) set -- --signal STOP --min-right 1 -- env TP_HEARTBEAT_TIMEOUT=0.2 "$build/tprun" -n "$n" \
                "$rank" spin ;;
            *) echo "failfast.sh: unknown case $c" >&2; exit 2 ;;
            esac
            BENCH_FAILFAST_LOG=1 "$ff" -n "$n" --label "$c" "$@" >> "$OUT/results.tsv" 2>> "$OUT/stderr.log" || true
        done
    done
    rep=$((rep + 1))
done
"$here/machine.sh" >> "$OUT/machine.txt"
python3 "$here/failfast_table.py" "$OUT/results.tsv"
