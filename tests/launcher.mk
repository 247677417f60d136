# tests of launcher: a unit test of tprun's parsing, and scripts that run tprun on tests/launcher_rank.
# Scripts run from the build directory and find ./tprun and ./tests/launcher_rank there (tests/launcher_lib.sh).
check_PROGRAMS += tests/launcher_rank tests/launcher_args_test tests/launcher_pmix_unit tests/launcher_loop_unit \
	tests/launcher_link_unit
tests_launcher_rank_SOURCES = tests/launcher_rank.c
tests_launcher_args_test_SOURCES = tests/launcher_args_test.c \
	launcher/tprun_args.c launcher/tprun_hosts.c launcher/tprun_exit.c \
	runtime/runtime_config.c runtime/runtime_log.c runtime/runtime_status.c \
	$(TP_CONFIG_TABLES)
tests_launcher_args_test_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/launcher
tests_launcher_args_test_LDADD = -lm
tests_launcher_pmix_unit_SOURCES = tests/launcher_pmix_unit.c launcher/pmix/tprun_pmix_fence.c launcher/tprun_wire.c
tests_launcher_pmix_unit_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/launcher -I$(top_srcdir)/launcher/pmix
tests_launcher_loop_unit_SOURCES = tests/launcher_loop_unit.c launcher/core/loop.c launcher/core/loop.h
tests_launcher_loop_unit_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/launcher
tests_launcher_loop_unit_LDADD = -lm
tests_launcher_link_unit_SOURCES = tests/launcher_link_unit.c launcher/link/link.c launcher/link/link.h \
	launcher/core/loop.c runtime/runtime_log.c
tests_launcher_link_unit_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/launcher
tests_launcher_link_unit_LDADD = -lm
LAUNCHER_SHELL_TESTS = \
	tests/launcher_cmdline.sh \
	tests/launcher_env.sh \
	tests/launcher_exit.sh \
	tests/launcher_output.sh \
	tests/launcher_agent_input.sh \
	tests/launcher_stdin.sh \
	tests/launcher_signals.sh \
	tests/launcher_keeper.sh \
	tests/launcher_timeout.sh \
	tests/launcher_concurrent.sh \
	tests/launcher_oom.sh \
	tests/launcher_summary.sh \
	tests/launcher_fate.sh \
	tests/launcher_bind.sh tests/launcher_bind_real.sh
TESTS += tests/launcher_args_test tests/launcher_pmix_unit tests/launcher_loop_unit tests/launcher_link_unit \
	$(LAUNCHER_SHELL_TESTS)
EXTRA_DIST += $(LAUNCHER_SHELL_TESTS) tests/launcher_lib.sh tests/fake_ssh.sh
# hwloc topologies the binding tests replay (lstopo --input "pack:2 [numa] core:4 pu:2(indexes=...)" --of xml).
EXTRA_DIST += tests/bind/two_numa_smt.xml tests/bind/four_numa.xml

# The Slurm backend's reading of an allocation (launcher/slurm/slurm.c).
check_PROGRAMS += tests/launcher_slurm_unit
tests_launcher_slurm_unit_SOURCES = tests/launcher_slurm_unit.c launcher/slurm/slurm.c \
	launcher/tprun_args.c launcher/tprun_hosts.c launcher/tprun_exit.c \
	runtime/runtime_config.c runtime/runtime_log.c runtime/runtime_status.c runtime/runtime_iface.c \
	$(TP_CONFIG_TABLES)
tests_launcher_slurm_unit_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/launcher -I$(top_srcdir)/launcher/slurm
tests_launcher_slurm_unit_LDADD = -lm
TESTS += tests/launcher_slurm_unit
