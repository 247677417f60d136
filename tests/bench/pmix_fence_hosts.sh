#!/bin/bash
# pmix_fence_hosts.sh: PMIx_Fence latency with ranks on two and three test hosts (network namespaces of
# tests/netns_lib.sh; root): tprun --pmix (the hub path every multi-host fence takes) against mpirun (Open MPI 4.1,
# its daemons started over the same ssh), rounds interleaved. Same columns as pmix_fence.sh.
# Run from the build directory after `make bench`. Environment: ROUNDS (3), ITERS (300).
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-300}
NETNS_TEST_TIMEOUT=600
. "$(dirname "$0")/../netns_lib.sh"
prog=$PWD/tests/bench/pmix_fence
for round in $(seq 1 "$ROUNDS"); do
    for hosts in "-n 2 -H a:1,b:1" "-n 4 -H a:2,b:2" "-n 6 -H a:2,b:2,c:2"; do
        tprun_on_a --pmix $hosts "$prog" "$ITERS" "tprun --pmix $hosts (r$round)"
        in_ns a timeout -k 2 60 mpirun.openmpi --allow-run-as-root --oversubscribe --mca plm_rsh_agent "$SSH" \
            --mca btl_tcp_if_include mgmt0 --mca oob_tcp_if_include mgmt0 ${hosts/-H/--host} "$prog" "$ITERS" \
            "mpirun $hosts (r$round)"
    done
done
