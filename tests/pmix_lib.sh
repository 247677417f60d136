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
