# Benchmarks: built by make (the MPI peers by make bench), run by hand as docs/BENCHMARKS.md shows; never by make check.
noinst_PROGRAMS += tests/bench/forkn tests/bench/bench_failfast tests/bench/bench_rank
tests_bench_forkn_SOURCES = tests/bench/forkn.c
tests_bench_bench_failfast_SOURCES = tests/bench/bench_failfast.c
tests_bench_bench_rank_SOURCES = tests/bench/bench_rank.c
tests_bench_bench_rank_LDADD = libtp.la
# A real executable, not libtool's shell wrapper, whose start-up would be timed with each rank.
tests_bench_bench_rank_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
# The host device's reduction alone, per type (tests/bench/reduce_bench.c).
noinst_PROGRAMS += tests/bench/reduce_bench
tests_bench_reduce_bench_SOURCES = tests/bench/reduce_bench.c
tests_bench_reduce_bench_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/devices/host
tests_bench_reduce_bench_LDADD = libtp_internal.la
tests_bench_reduce_bench_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
# The cache-line floor between CPUs 0 and 1 (which vCPU placement regime a shm benchmark ran in).
noinst_PROGRAMS += tests/bench/floor_probe
tests_bench_floor_probe_SOURCES = tests/bench/floor_probe.c tests/bench/pinned_pair.h
# What the single-copy path (memcpy + process_vm_readv) costs a rank of a 2-rank all_gather (tests/bench/copy_floor.c).
noinst_PROGRAMS += tests/bench/copy_floor
tests_bench_copy_floor_SOURCES = tests/bench/copy_floor.c tests/bench/pinned_pair.h
# The shm ring between CPUs 0 and 1 written cached and streaming (TP_SHM_WRITE), with its transport's own copy.
noinst_PROGRAMS += tests/bench/ring_probe
tests_bench_ring_probe_SOURCES = tests/bench/ring_probe.c tests/bench/pinned_pair.h
tests_bench_ring_probe_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/transports/shm
tests_bench_ring_probe_LDADD = libtp_internal.la
tests_bench_ring_probe_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
# Where the kernel leaves processes that wait on each other by yielding, unpinned or pinned in turn (turns_probe.c).
noinst_PROGRAMS += tests/bench/turns_probe
tests_bench_turns_probe_SOURCES = tests/bench/turns_probe.c tests/bench/pinned_pair.h
# Staged all_gather and its floors (tests/bench/stage_bench.c: tprun -n 2 ./tests/bench/stage_bench [--cuda]).
noinst_PROGRAMS += tests/bench/stage_bench
tests_bench_stage_bench_SOURCES = tests/bench/stage_bench.c
tests_bench_stage_bench_LDADD = libtp.la -ldl
tests_bench_stage_bench_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
# PMIx_Fence latency under any PMIx server (tests/bench/pmix_fence.sh), built against the PMIx headers.
if HAVE_PMIX
noinst_PROGRAMS += tests/bench/pmix_fence
tests_bench_pmix_fence_SOURCES = tests/bench/pmix_fence.c
tests_bench_pmix_fence_CPPFLAGS = $(TP_PMIX_CFLAGS)
tests_bench_pmix_fence_LDADD = $(TP_PMIX_LIBS)
endif
EXTRA_DIST += tests/bench/pmix_fence.sh tests/bench/pmix_fence_hosts.sh tests/bench/launch_device.py
EXTRA_DIST += tests/bench/mpi_hello.c tests/bench/mpi_spin.c tests/bench/launch.sh tests/bench/failfast.sh \
	tests/bench/launch_table.py tests/bench/failfast_table.py tests/bench/machine.sh \
	tests/bench/boot_bench.py

# The peers' programs, built with each MPI's own compiler wrapper.
MPICC_OMPI = mpicc.openmpi
MPICC_MPICH = mpicc.mpich
bench_mpi_binaries = tests/bench/mpi_hello_ompi tests/bench/mpi_hello_mpich tests/bench/mpi_spin_ompi \
	tests/bench/mpi_spin_mpich
CLEANFILES += $(bench_mpi_binaries)

tests/bench/mpi_hello_ompi: $(srcdir)/tests/bench/mpi_hello.c
	@$(MKDIR_P) tests/bench
	$(MPICC_OMPI) -O2 -o $@ $(srcdir)/tests/bench/mpi_hello.c
tests/bench/mpi_hello_mpich: $(srcdir)/tests/bench/mpi_hello.c
	@$(MKDIR_P) tests/bench
	$(MPICC_MPICH) -O2 -o $@ $(srcdir)/tests/bench/mpi_hello.c
tests/bench/mpi_spin_ompi: $(srcdir)/tests/bench/mpi_spin.c
	@$(MKDIR_P) tests/bench
	$(MPICC_OMPI) -O2 -o $@ $(srcdir)/tests/bench/mpi_spin.c
tests/bench/mpi_spin_mpich: $(srcdir)/tests/bench/mpi_spin.c
	@$(MKDIR_P) tests/bench
	$(MPICC_MPICH) -O2 -o $@ $(srcdir)/tests/bench/mpi_spin.c

# Everything the launch and fail-fast scripts run: tprun, bench_rank, the drivers and the MPI peers.
bench: all $(bench_mpi_binaries)
.PHONY: bench
# tp-bench's command line (no timing: the benchmarks themselves never run in make check).
TESTS += tests/bench_args.sh
EXTRA_DIST += tests/bench_args.sh
# scripts/plot_bench.py on saved tables (a PNG comes out; skipped without matplotlib).
TESTS += tests/plot_bench.sh
EXTRA_DIST += tests/plot_bench.sh scripts/plot_bench.py tests/plot_bench_sample.md tests/plot_bench_sample.jsonl \
	tests/plot_bench_sample.txt
