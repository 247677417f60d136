# tp_mlp: the project's main job, a tensor-parallel MLP checked bit for bit against the rank-order reference.
noinst_PROGRAMS += examples/tp_mlp
examples_tp_mlp_SOURCES = examples/tp_mlp.c
examples_tp_mlp_LDADD = libtp.la
examples_tp_mlp_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
# tp-bench: p50 / p90 tables of the collectives (tprun -n N tp-bench); examples/bench/ compares it with MPI.
bin_PROGRAMS += tp-bench
tp_bench_SOURCES = examples/tp_bench.c examples/bench/bench_schedule.h examples/bench/bench_tp_call.h
tp_bench_LDADD = libtp.la
EXTRA_DIST += examples/bench/coll_bench.sh examples/bench/mpi_coll_bench.c examples/bench/coll_hier_bench.sh
EXTRA_DIST += examples/bench/tcp_bench.sh examples/bench/ab_bench.c examples/bench/ab_build.sh examples/bench/bench_mpi_call.h
