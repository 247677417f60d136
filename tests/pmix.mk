# PMIx: libtp under mpirun and srun --mpi=pmix, tprun inside a Slurm allocation, tprun as a PMIx server.
TESTS += tests/pmix_mpirun.sh tests/pmix_slurm.sh
EXTRA_DIST += tests/pmix_lib.sh tests/pmix_mpirun.sh tests/pmix_slurm.sh scripts/slurm-test-setup.sh
# tprun's tests start ranks themselves even when make check runs inside a Slurm allocation.
AM_TESTS_ENVIRONMENT = TP_LAUNCHER=local; export TP_LAUNCHER;
