# Fuzz harnesses, one per parser of bytes from another process, host or file (docs/FUZZING.md). make check
# replays each one's committed corpus (tests/fuzz/corpus/NAME) through replay_main.c; make fuzz runs them under
# libFuzzer with ASan and UBSan (tests/fuzz/fuzz.sh).
FUZZ_RUNTIME_HARNESSES = record boot auth frame tcp_recv config env
FUZZ_LAUNCHER_HARNESSES = args wire fence plan agent_line
FUZZ_REPLAY = tests/fuzz/replay_main.c tests/fuzz/fuzz_util.c tests/fuzz/fuzz_util.h
FUZZ_RUNTIME_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/transports/tcp
FUZZ_LAUNCHER_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/launcher -I$(top_srcdir)/launcher/slurm -I$(top_srcdir)/launcher/pmix $(TP_PMIX_CFLAGS)

# tprun without its main and the three files the launcher harnesses compile in (their parsers are static).
check_LIBRARIES = tests/fuzz/libfuzz_tprun.a
tests_fuzz_libfuzz_tprun_a_SOURCES = tests/fuzz/fuzz_launcher_fakes.c launcher/core/loop.c launcher/local/local.c launcher/link/link.c \
	launcher/tprun_args.c launcher/tprun_hosts.c launcher/tprun_spawn.c launcher/tprun_output.c launcher/tprun_exit.c launcher/tprun_summary.c launcher/tprun_wire.c \
	launcher/slurm/slurm.c launcher/slurm/slurm_service.c launcher/services.c launcher/pmix/pmix_service.c launcher/pmix/tprun_pmix.c \
	launcher/pmix/tprun_pmix_ops.c launcher/pmix/tprun_pmix_fence.c launcher/pmix/tprun_pmix_loop.c launcher/pmix/tprun_agent_pmix.c \
	runtime/runtime_config.c runtime/runtime_log.c runtime/runtime_status.c runtime/runtime_iface.c \
	runtime/runtime_proc.c runtime/runtime_dl.c $(TP_CONFIG_TABLES)
tests_fuzz_libfuzz_tprun_a_SOURCES += launcher/bind/bind_plan.c launcher/bind/bind_service.c runtime/topo_gpu.c
tests_fuzz_libfuzz_tprun_a_CPPFLAGS = $(FUZZ_LAUNCHER_CPPFLAGS) $(HWLOC_CFLAGS)
FUZZ_LAUNCHER_LDADD = tests/fuzz/libfuzz_tprun.a -lm -ldl $(HWLOC_LIBS)

check_PROGRAMS += tests/fuzz/fuzz_record tests/fuzz/fuzz_boot tests/fuzz/fuzz_auth tests/fuzz/fuzz_frame \
	tests/fuzz/fuzz_tcp_recv tests/fuzz/fuzz_config tests/fuzz/fuzz_env
tests_fuzz_fuzz_record_SOURCES = tests/fuzz/fuzz_record.c $(FUZZ_REPLAY)
tests_fuzz_fuzz_boot_SOURCES = tests/fuzz/fuzz_boot.c $(FUZZ_REPLAY)
tests_fuzz_fuzz_auth_SOURCES = tests/fuzz/fuzz_auth.c $(FUZZ_REPLAY)
tests_fuzz_fuzz_frame_SOURCES = tests/fuzz/fuzz_frame.c $(FUZZ_REPLAY)
tests_fuzz_fuzz_tcp_recv_SOURCES = tests/fuzz/fuzz_tcp_recv.c $(FUZZ_REPLAY)
tests_fuzz_fuzz_config_SOURCES = tests/fuzz/fuzz_config.c $(FUZZ_REPLAY)
tests_fuzz_fuzz_env_SOURCES = tests/fuzz/fuzz_env.c $(FUZZ_REPLAY)
tests_fuzz_fuzz_record_CPPFLAGS = $(FUZZ_RUNTIME_CPPFLAGS)
tests_fuzz_fuzz_boot_CPPFLAGS = $(FUZZ_RUNTIME_CPPFLAGS)
tests_fuzz_fuzz_auth_CPPFLAGS = $(FUZZ_RUNTIME_CPPFLAGS)
tests_fuzz_fuzz_frame_CPPFLAGS = $(FUZZ_RUNTIME_CPPFLAGS)
tests_fuzz_fuzz_tcp_recv_CPPFLAGS = $(FUZZ_RUNTIME_CPPFLAGS)
tests_fuzz_fuzz_config_CPPFLAGS = $(FUZZ_RUNTIME_CPPFLAGS)
tests_fuzz_fuzz_env_CPPFLAGS = $(FUZZ_RUNTIME_CPPFLAGS)
tests_fuzz_fuzz_record_LDADD = libtp_internal.la
tests_fuzz_fuzz_boot_LDADD = libtp_internal.la
tests_fuzz_fuzz_auth_LDADD = libtp_internal.la
tests_fuzz_fuzz_frame_LDADD = libtp_internal.la
tests_fuzz_fuzz_tcp_recv_LDADD = libtp_internal.la
tests_fuzz_fuzz_config_LDADD = libtp_internal.la
tests_fuzz_fuzz_env_LDADD = libtp_internal.la
# Real executables: the replay finds its corpus from its own name.
tests_fuzz_fuzz_record_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
tests_fuzz_fuzz_boot_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
tests_fuzz_fuzz_auth_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
tests_fuzz_fuzz_frame_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
tests_fuzz_fuzz_tcp_recv_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
tests_fuzz_fuzz_config_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
tests_fuzz_fuzz_env_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)

check_PROGRAMS += tests/fuzz/fuzz_args tests/fuzz/fuzz_wire tests/fuzz/fuzz_fence tests/fuzz/fuzz_plan \
	tests/fuzz/fuzz_agent_line
tests_fuzz_fuzz_args_SOURCES = tests/fuzz/fuzz_args.c $(FUZZ_REPLAY)
tests_fuzz_fuzz_wire_SOURCES = tests/fuzz/fuzz_wire.c $(FUZZ_REPLAY)
tests_fuzz_fuzz_fence_SOURCES = tests/fuzz/fuzz_fence.c $(FUZZ_REPLAY)
tests_fuzz_fuzz_plan_SOURCES = tests/fuzz/fuzz_plan.c launcher/ssh/launch.c launcher/ssh/run.c launcher/ssh/tree.c \
	launcher/agent/agent_tree.c $(FUZZ_REPLAY)
tests_fuzz_fuzz_agent_line_SOURCES = tests/fuzz/fuzz_agent_line.c launcher/agent/agent.c launcher/agent/agent_tree.c \
	launcher/ssh/tree.c $(FUZZ_REPLAY)
tests_fuzz_fuzz_args_CPPFLAGS = $(FUZZ_LAUNCHER_CPPFLAGS)
tests_fuzz_fuzz_wire_CPPFLAGS = $(FUZZ_LAUNCHER_CPPFLAGS)
tests_fuzz_fuzz_fence_CPPFLAGS = $(FUZZ_LAUNCHER_CPPFLAGS)
tests_fuzz_fuzz_plan_CPPFLAGS = $(FUZZ_LAUNCHER_CPPFLAGS)
tests_fuzz_fuzz_agent_line_CPPFLAGS = $(FUZZ_LAUNCHER_CPPFLAGS)
tests_fuzz_fuzz_args_LDADD = $(FUZZ_LAUNCHER_LDADD)
tests_fuzz_fuzz_wire_LDADD = $(FUZZ_LAUNCHER_LDADD)
tests_fuzz_fuzz_fence_LDADD = $(FUZZ_LAUNCHER_LDADD)
tests_fuzz_fuzz_plan_LDADD = $(FUZZ_LAUNCHER_LDADD)
tests_fuzz_fuzz_agent_line_LDADD = $(FUZZ_LAUNCHER_LDADD)

FUZZ_REPLAYS = tests/fuzz/fuzz_record tests/fuzz/fuzz_boot tests/fuzz/fuzz_auth tests/fuzz/fuzz_frame \
	tests/fuzz/fuzz_tcp_recv tests/fuzz/fuzz_config tests/fuzz/fuzz_env tests/fuzz/fuzz_args tests/fuzz/fuzz_wire \
	tests/fuzz/fuzz_fence tests/fuzz/fuzz_plan tests/fuzz/fuzz_agent_line
TESTS += $(FUZZ_REPLAYS)
EXTRA_DIST += tests/fuzz/corpus tests/fuzz/dict tests/fuzz/fuzz.sh tests/lsan.supp

# make fuzz [FUZZ_SECONDS=N] [FUZZ_TARGETS="record plan"] [CC_FUZZ=clang]: N seconds of libFuzzer per harness on a
# copy of its corpus (new inputs stay in tests/fuzz/out); fails naming the input of any crash, leak or hang.
CC_FUZZ = clang
FUZZ_SECONDS = 30
FUZZ_TARGETS = $(FUZZ_RUNTIME_HARNESSES) $(FUZZ_LAUNCHER_HARNESSES)
fuzz:
	$(AM_V_GEN){ echo "cppflags -include $(abs_top_builddir)/config.h -I$(abs_top_srcdir)/include" \
	    "-I$(abs_top_srcdir)/runtime -I$(abs_top_srcdir)/transports/tcp -I$(abs_top_srcdir)/launcher" \
	    "-I$(abs_top_srcdir)/launcher/slurm -I$(abs_top_srcdir)/launcher/pmix $(TP_PMIX_CFLAGS)"; \
	  echo "lib libtp $(libtp_la_SOURCES)"; \
	  echo "lib tprun $(tests_fuzz_libfuzz_tprun_a_SOURCES)"; \
	  for h in $(FUZZ_RUNTIME_HARNESSES); do echo "harness $$h libtp tests/fuzz/fuzz_$$h.c tests/fuzz/fuzz_util.c"; done; \
	  for h in args wire fence; do echo "harness $$h tprun tests/fuzz/fuzz_$$h.c tests/fuzz/fuzz_util.c"; done; \
	  echo "harness plan tprun $(tests_fuzz_fuzz_plan_SOURCES)"; \
	  echo "harness agent_line tprun $(tests_fuzz_fuzz_agent_line_SOURCES)"; \
	} > tests/fuzz/fuzz.manifest
	$(AM_V_at)CC_FUZZ='$(CC_FUZZ)' FUZZ_SECONDS='$(FUZZ_SECONDS)' FUZZ_TARGETS='$(FUZZ_TARGETS)' \
	  $(SHELL) $(top_srcdir)/tests/fuzz/fuzz.sh $(top_srcdir) tests/fuzz/fuzz.manifest tests/fuzz/out
.PHONY: fuzz
CLEANFILES += tests/fuzz/fuzz.manifest
clean-local: clean-fuzz
clean-fuzz:
	rm -rf tests/fuzz/out
.PHONY: clean-fuzz
