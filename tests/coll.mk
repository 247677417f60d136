# Collectives and the TCP transport: unit tests of the pure parts, then multi-rank programs under tprun.
check_PROGRAMS += tests/coll_unit tests/coll_check tests/coll_fault tests/coll_intruder tests/device_unit tests/stream_unit tests/gpu/cuda_device
tests_coll_unit_SOURCES = tests/coll_unit.c
tests_coll_unit_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/devices/host
tests_coll_unit_LDADD = libtp_internal.la -lm
tests_coll_unit_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
tests_device_unit_SOURCES = tests/device_unit.c
tests_device_unit_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/devices/host
tests_device_unit_LDADD = libtp_internal.la -lm
tests_device_unit_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
tests_stream_unit_SOURCES = tests/stream_unit.c
tests_stream_unit_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/devices/host -I$(top_srcdir)/devices/cuda
tests_stream_unit_LDADD = libtp_internal.la -lm
tests_stream_unit_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
EXTRA_DIST += tests/fake_libcuda.c tests/fake_libamdhip64.c tests/stream_drivers.sh tests/reduce_ref.h tests/f16_ref.h tests/tcp_raw.h
# GPU tests: exit 77 without a usable GPU.
tests_gpu_cuda_device_SOURCES = tests/gpu/cuda_device.c
tests_gpu_cuda_device_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests -I$(top_srcdir)/devices/host -I$(top_srcdir)/devices/cuda
tests_gpu_cuda_device_LDADD = libtp_internal.la -lm
tests_gpu_cuda_device_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
tests_coll_check_SOURCES = tests/coll_check.c
tests_coll_check_LDADD = libtp.la -lm
tests_coll_check_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
tests_coll_fault_SOURCES = tests/coll_fault.c
tests_coll_fault_LDADD = libtp_internal.la
# -Wl,--wrap: the oversize mode rewrites one frame header on its way into the socket.
tests_coll_fault_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS) -Wl,--wrap=sendmsg
check_PROGRAMS += tests/tcp_order
tests_tcp_order_SOURCES = tests/tcp_order.c
tests_tcp_order_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/transports/tcp
tests_tcp_order_LDADD = libtp_internal.la
tests_tcp_order_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/tcp_order
tests_coll_intruder_SOURCES = tests/coll_intruder.c
tests_coll_intruder_LDADD = libtp.la
tests_coll_intruder_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/coll_unit tests/device_unit tests/stream_unit tests/stream_drivers.sh tests/gpu/cuda_device tests/coll_check.sh tests/coll_fault.sh tests/coll_mlp.sh tests/coll_intruders.sh tests/coll_connect.sh
EXTRA_DIST += tests/coll_check.sh tests/coll_fault.sh tests/coll_mlp.sh tests/coll_intruders.sh tests/coll_connect.sh
# Every collective and send/recv case over every registered transport (tests/coll_check --conformance).
TESTS += tests/conformance.sh
EXTRA_DIST += tests/conformance.sh
# The staging provider over host streams (tests/stage_check.sh).
check_PROGRAMS += tests/stage_check
tests_stage_check_SOURCES = tests/stage_check.c
tests_stage_check_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/runtime -I$(top_srcdir)/devices/cuda
tests_stage_check_LDADD = libtp_internal.la -lm -ldl
tests_stage_check_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/stage_check.sh tests/gpu/stage_cuda.sh
EXTRA_DIST += tests/stage_check.sh tests/gpu/stage_cuda.sh
# The NCCL provider against a fake libnccl.so.2 over Unix sockets (tests/nccl/fake_nccl.c), no GPU needed.
check_LTLIBRARIES += tests/nccl/libfakenccl.la
tests_nccl_libfakenccl_la_SOURCES = tests/nccl/fake_nccl.c
tests_nccl_libfakenccl_la_LDFLAGS = -module -avoid-version -rpath /nowhere
tests_nccl_libfakenccl_la_LIBADD = -lm
check_PROGRAMS += tests/nccl/nccl_rank
tests_nccl_nccl_rank_SOURCES = tests/nccl/nccl_rank.c tests/nccl/nccl_cases.h
tests_nccl_nccl_rank_LDADD = libtp_internal.la -lm
tests_nccl_nccl_rank_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/nccl/nccl_fake.sh
EXTRA_DIST += tests/nccl/nccl_fake.sh
# GPU tests of the NCCL provider (77 without a GPU): bit for bit against the host engine, fate during an all-reduce
# loop, a benchmark against a raw NCCL loop (tests/gpu/nccl_gpu.sh); run by hand on a GPU machine.
check_PROGRAMS += tests/gpu/nccl_gpu
tests_gpu_nccl_gpu_SOURCES = tests/gpu/nccl_gpu.c tests/nccl/nccl_cases.h
tests_gpu_nccl_gpu_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/tests/nccl
tests_gpu_nccl_gpu_LDADD = libtp.la -lm
tests_gpu_nccl_gpu_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
EXTRA_DIST += tests/gpu/nccl_gpu.sh tests/gpu/torch_nccl.py tests/gpu/slice_probe.c
# The shm transport against a peer that writes garbage into its segments, and every rank SIGKILLed.
check_PROGRAMS += tests/shm_fault
tests_shm_fault_SOURCES = tests/shm_fault.c
tests_shm_fault_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/transports/shm
tests_shm_fault_LDADD = libtp.la
tests_shm_fault_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/shm_fault.sh
# The shm sender's streaming copy against memcpy.
check_PROGRAMS += tests/shm_write_unit
tests_shm_write_unit_SOURCES = tests/shm_write_unit.c
tests_shm_write_unit_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/transports/shm
tests_shm_write_unit_LDADD = libtp_internal.la
tests_shm_write_unit_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/shm_write_unit
# TP_SHM_CMA_BYTES=auto's choice of way for a class of exchanges.
# The 2-rank pair's choice of way, streamed or lent (runtime/coll_pair_way.c), both ranks played call by call.
check_PROGRAMS += tests/coll_pair_unit
tests_coll_pair_unit_SOURCES = tests/coll_pair_unit.c
tests_coll_pair_unit_LDADD = libtp_internal.la
tests_coll_pair_unit_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/coll_pair_unit
check_PROGRAMS += tests/shm_xchg_unit
tests_shm_xchg_unit_SOURCES = tests/shm_xchg_unit.c
tests_shm_xchg_unit_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/transports/shm
tests_shm_xchg_unit_LDADD = libtp_internal.la
tests_shm_xchg_unit_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/shm_xchg_unit
EXTRA_DIST += tests/shm_fault.sh
# shm where peers may not take a rank's fds (no pidfd_getfd, Yama's ptrace_scope), played by an LD_PRELOAD shim.
check_LTLIBRARIES += tests/libfakeptrace.la
tests_libfakeptrace_la_SOURCES = tests/fake_ptrace.c
tests_libfakeptrace_la_LDFLAGS = -module -avoid-version -rpath /nowhere
tests_libfakeptrace_la_LIBADD = -ldl
TESTS += tests/shm_ptrace.sh
EXTRA_DIST += tests/shm_ptrace.sh
check_PROGRAMS += tests/shm_lend
tests_shm_lend_SOURCES = tests/shm_lend.c
tests_shm_lend_LDADD = libtp.la
tests_shm_lend_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/shm_lend.sh
EXTRA_DIST += tests/shm_lend.sh
check_PROGRAMS += tests/shm_ring
tests_shm_ring_SOURCES = tests/shm_ring.c
tests_shm_ring_LDADD = libtp.la
tests_shm_ring_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/shm_ring.sh
EXTRA_DIST += tests/shm_ring.sh
# Hierarchical collectives on namespace hosts (root only, else 77): bits, placements, a rank killed mid-call.
check_PROGRAMS += tests/coll_hier_loop
tests_coll_hier_loop_SOURCES = tests/coll_hier_loop.c
tests_coll_hier_loop_LDADD = libtp.la
tests_coll_hier_loop_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/coll_hier_local.sh tests/coll_hier.sh tests/coll_hier_fate.sh
EXTRA_DIST += tests/coll_hier_local.sh tests/coll_hier.sh tests/coll_hier_fate.sh
