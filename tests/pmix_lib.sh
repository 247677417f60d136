# pmix_lib.sh: helpers for the PMIx test scripts (sourced after runtime_lib.sh): skips and a bounded mpirun.
have_pmix_build() { grep -q '^#define HAVE_PMIX 1' ./config.h 2>/dev/null; }

skip() { echo "skip: $*"; exit 77; }

# mpirun of Open MPI 4.1 as root, oversubscribed; -k because a wedged mpirun can ignore SIGTERM.
MPIRUN=${MPIRUN:-mpirun.openmpi}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun_n() {
    local limit=$1
    shift
    timeout -k 5 "$limit" "$MPIRUN" --oversubscribe -n "$@"
}

# pmix_tells_all CLIENT: whether this libpmix gives a failed fence's status to every local participant. Up to 4.2.2
# it does; from 4.2.3 (every 5.0 and 6.x release) its reply loop, _mdxcbfunc, tells the first and then overwrites the
# status with PMIX_GDS_MARK_MODEX_COMPLETE's SUCCESS for the rest (fixed on openpmix's master, 75d11d40e; docs/PMIX.md).
pmix_tells_all() {
    "$1" version | awk '{split($2, v, "."); exit !(v[1] < 4 || (v[1] == 4 && (v[2] < 2 || (v[2] == 2 && v[3] + 0 < 3))))}'
}
