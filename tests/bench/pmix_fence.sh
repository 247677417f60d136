#!/bin/sh
# pmix_fence.sh: PMIx_Fence latency (µs, p50/p90 over ITERS fences with a 1 KiB key each) under tprun --pmix, with
# every fence sent through tprun's hub (fence_localonly_opt=0, the path of multi-host jobs), under mpirun (Open
# MPI 4.1) and, when srun works here, under srun --mpi=pmix; rounds interleave the servers.
# Run from the build directory after `make bench`. Environment: NS ("2 4 8"), ROUNDS (3), ITERS (300).
set -eu
NS=${NS:-"2 4 8"}
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-300}
prog=$(pwd)/tests/bench/pmix_fence
test -x "$prog" || { echo "pmix_fence.sh: $prog is missing (PMIx headers, then make bench)" >&2; exit 1; }
to="timeout -k 2 60"
have_srun=0
$to srun --mpi=pmix -n 1 true >/dev/null 2>&1 && have_srun=1
echo "| server | ranks | collect p50 | collect p90 | bare p50 | bare p90 |"
echo "|---|---:|---:|---:|---:|---:|"
round=1
while [ "$round" -le "$ROUNDS" ]; do
    for n in $NS; do
        $to ./tprun --pmix -n "$n" "$prog" "$ITERS" "tprun --pmix (r$round)"
        PMIX_MCA_pmix_server_fence_localonly_opt=0 $to ./tprun --pmix -n "$n" "$prog" "$ITERS" "tprun --pmix, via hub (r$round)"
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 $to mpirun.openmpi --oversubscribe -n "$n" "$prog" \
            "$ITERS" "mpirun (r$round)"
        if [ $have_srun = 1 ]; then $to srun --mpi=pmix --overcommit -n "$n" "$prog" "$ITERS" "srun (r$round)"; fi
    done
    round=$((round + 1))
done
