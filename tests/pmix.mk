# PMIx: libtp under mpirun and srun --mpi=pmix, tprun inside a Slurm allocation, tprun as a PMIx server.
TESTS += tests/pmix_mpirun.sh tests/pmix_slurm.sh tests/pmix_server.sh
EXTRA_DIST += tests/pmix_lib.sh tests/pmix_mpirun.sh tests/pmix_slurm.sh scripts/slurm-test-setup.sh \
	tests/pmix_server.sh tests/pmix_client.c
# A plain PMIx program (no libtp) for tprun --pmix, built against the PMIx headers and linked with libpmix.
if HAVE_PMIX
check_PROGRAMS += tests/pmix_client
tests_pmix_client_SOURCES = tests/pmix_client.c
tests_pmix_client_CPPFLAGS = $(TP_PMIX_CFLAGS)
tests_pmix_client_LDADD = $(TP_PMIX_LIBS)
endif
# tprun's tests start ranks themselves even when make check runs inside a Slurm allocation.
AM_TESTS_ENVIRONMENT = TP_LAUNCHER=local; export TP_LAUNCHER;
