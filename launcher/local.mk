# launcher: tprun. It takes the config table, logger and status strings from the runtime as objects rather
# than linking libtp.so: the launcher starts faster without the shared library and builds on its own.
bin_PROGRAMS += tprun
tprun_SOURCES = \
	launcher/main.c \
	launcher/core/loop.c launcher/core/loop.h launcher/core/job.c launcher/core/job.h \
	launcher/core/state.h launcher/core/backend.h \
	launcher/local/local.c launcher/local/local.h launcher/local/backend.c \
	launcher/link/link.c launcher/link/link.h \
	launcher/ssh/launch.c launcher/ssh/run.c launcher/ssh/tree.c launcher/ssh/ssh.h \
	launcher/agent/agent.c launcher/agent/agent.h launcher/agent/agent_tree.c launcher/agent/agent_tree.h \
	launcher/tprun_args.c launcher/tprun_args.h launcher/tprun_hosts.c \
	launcher/tprun_spawn.c launcher/tprun_spawn.h \
	launcher/tprun_output.c launcher/tprun_output.h \
	launcher/tprun_exit.c launcher/tprun_exit.h \
	launcher/tprun_summary.c launcher/tprun_summary.h \
	launcher/tprun_wire.c launcher/tprun_wire.h \
	launcher/slurm/slurm.c launcher/slurm/slurm.h launcher/slurm/slurm_service.c \
	launcher/services.c launcher/services.h \
	launcher/pmix/pmix_service.c \
	launcher/pmix/tprun_pmix.c launcher/pmix/tprun_pmix.h launcher/pmix/tprun_pmix_lib.h runtime/runtime_pmix_compat.h launcher/pmix/tprun_pmix_ops.c \
	launcher/pmix/tprun_pmix_fence.c launcher/pmix/tprun_pmix_fence.h launcher/pmix/tprun_pmix_loop.c launcher/pmix/tprun_agent_pmix.c launcher/pmix/tprun_agent_pmix.h \
	runtime/runtime_config.c runtime/runtime_log.c runtime/runtime_status.c runtime/runtime_iface.c \
	runtime/runtime_proc.c runtime/runtime_proc.h \
	$(TP_CONFIG_TABLES) \
	runtime/runtime_dl.c runtime/runtime_dl.h
# The binding service: GPUs by local rank (runtime/topo_gpu.c, shared with libtp), CPUs and memory with hwloc.
tprun_SOURCES += launcher/bind/bind.h launcher/bind/bind_plan.c launcher/bind/bind_service.c \
	runtime/topo_gpu.c runtime/topo_gpu.h
tprun_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/launcher -I$(top_srcdir)/launcher/slurm -I$(top_srcdir)/launcher/pmix $(TP_PMIX_CFLAGS) $(HWLOC_CFLAGS)
# libpmix is dlopen'd by tprun --pmix only (launcher/pmix/tprun_pmix.c), never linked.
tprun_LDADD = -lm -ldl $(HWLOC_LIBS)
