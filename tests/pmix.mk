# PMIx: libtp under mpirun and srun --mpi=pmix, tprun inside a Slurm allocation, tprun as a PMIx server.
TESTS += tests/pmix_mpirun.sh
EXTRA_DIST += tests/pmix_lib.sh tests/pmix_mpirun.sh
