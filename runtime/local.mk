# Every registered component's TP_* table (data): libtp and tprun both link them, so tprun --info and the unknown-
# variable check know every variable without the components' code.
TP_CONFIG_TABLES = runtime/runtime_components.c runtime/runtime_components.h runtime/runtime_config_entry.h runtime/core_config.c \
	launcher/tprun_config.c launcher/tprun_config.h runtime/coll_staged_config.c runtime/coll_hier_config.c
# libtp: the runtime core, with the transports and devices linked in.
lib_LTLIBRARIES += libtp.la
libtp_la_SOURCES = \
	runtime/runtime_config.c runtime/runtime_config.h \
	$(TP_CONFIG_TABLES) \
	runtime/runtime_dl.c runtime/runtime_dl.h \
	runtime/runtime_log.c runtime/runtime_log.h \
	runtime/runtime_status.c \
	runtime/runtime_mem.c \
	runtime/runtime_proc.c runtime/runtime_proc.h
# Topology readers (sysfs under TP_SYSFS_ROOT), shared with tprun: the core table checks TP_HCA with their grammar.
TP_CONFIG_TABLES += runtime/topo_sysfs.c runtime/topo_sysfs.h runtime/topo_hca.c runtime/topo_hca.h
libtp_la_SOURCES += runtime/topo_report.c runtime/topo_report.h
# Each local rank's GPU when no tprun gave it one (tp_gpu_of_local_rank), shared with tprun.
libtp_la_SOURCES += runtime/topo_gpu.c runtime/topo_gpu.h
libtp_la_LIBADD = $(PTHREAD_LIBS) -lm
libtp_la_LDFLAGS = -version-info 0:0:0 $(TP_LTO_LDFLAGS)
# Only the API is exported: what include/tp.h and include/tp_provider.h declare with TP_API (tests/api_symbols.sh).
libtp_la_CFLAGS = $(AM_CFLAGS) -fvisibility=hidden $(TP_LTO_CFLAGS)
# Tests of internals link libtp's own objects statically (hidden symbols still resolve in a static link), never
# a second build of them: check_LTLIBRARIES is built by make check only.
check_LTLIBRARIES = libtp_internal.la
libtp_internal_la_SOURCES =
libtp_internal_la_LIBADD = $(libtp_la_OBJECTS) $(libtp_la_LIBADD)
EXTRA_libtp_internal_la_DEPENDENCIES = $(libtp_la_OBJECTS)
libtp_la_SOURCES += \
	runtime/runtime_auth.c \
	runtime/runtime_bootstrap.c runtime/runtime_bootstrap.h \
	runtime/runtime_env.c runtime/runtime_env.h \
	runtime/runtime_fate.c runtime/runtime_fate.h runtime/runtime_fate_internal.h \
	runtime/runtime_fate_thread.c runtime/runtime_fate_verdict.c runtime/runtime_fate_silence.c \
	runtime/runtime_stop.c runtime/runtime_stop.h \
	runtime/runtime_iface.c runtime/runtime_iface.h \
	runtime/runtime_init.c \
	runtime/runtime_pairs.c runtime/runtime_pairs.h \
	runtime/runtime_pmix.c runtime/runtime_pmix.h runtime/runtime_pmix_compat.h \
	runtime/runtime_record.c runtime/runtime_record.h \
	runtime/runtime_wire.c runtime/runtime_wire.h \
	runtime/runtime_world.h
libtp_la_SOURCES += \
	runtime/runtime_transports.c runtime/runtime_transports.h \
	runtime/runtime_devices.c runtime/runtime_devices.h \
	runtime/runtime_stream.c runtime/runtime_stream.h \
	runtime/runtime_dtype.c runtime/runtime_dtype.h \
	runtime/coll_api.c runtime/coll_p2p.c runtime/coll_dispatch.c runtime/coll_dispatch.h \
	runtime/coll_host.c runtime/coll_engine.c runtime/coll_internal.h \
	runtime/coll_algos.c runtime/coll_allreduce.c runtime/coll_pair_way.c \
	runtime/coll_hier.c runtime/coll_hier.h runtime/coll_hier_reduce.c runtime/coll_hier_scatter.c \
	runtime/coll_frame.c runtime/coll_frame.h
# The staging provider: device memory (and host memory on a host stream) through pinned slabs and the host engine.
libtp_la_SOURCES += runtime/coll_staged.c runtime/coll_staged.h runtime/coll_staged_proxy.c
# PMIx: built against its headers, dlopen'd only by ranks a PMIx server started (linking it would load it in
# every rank and slow tprun's launch).
libtp_la_CPPFLAGS = $(AM_CPPFLAGS) $(TP_PMIX_CFLAGS)
# The registration list with each component's ops (tprun builds it without: tables only).
libtp_la_CPPFLAGS += -DTP_COMPONENT_OPS
