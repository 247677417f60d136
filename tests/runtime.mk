# Bootstrap, settings agreement and fate: rank programs and the scripts that launch them.
check_PROGRAMS += tests/runtime_rank tests/runtime_unit
tests_runtime_rank_SOURCES = tests/runtime_rank.c
tests_runtime_rank_LDADD = libtp.la
tests_runtime_unit_SOURCES = tests/runtime_unit.c
tests_runtime_unit_LDADD = libtp_internal.la
TESTS += tests/runtime_unit
check_PROGRAMS += tests/runtime_intruder
tests_runtime_intruder_SOURCES = tests/runtime_intruder.c
tests_runtime_intruder_LDADD = libtp_internal.la
TESTS += tests/runtime_boot.sh tests/runtime_boot_timeout.sh tests/runtime_mismatch.sh \
	tests/runtime_intruders.sh tests/runtime_fate.sh tests/runtime_spin.sh
EXTRA_DIST += tests/runtime_lib.sh tests/proc_lib.sh tests/runtime_boot.sh tests/runtime_boot_timeout.sh tests/runtime_mismatch.sh \
	tests/runtime_intruders.sh tests/runtime_fate.sh tests/runtime_spin.sh
# Real executables, not libtool wrapper scripts: a wrapper adds a shell start to every rank.
tests_runtime_rank_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
tests_runtime_unit_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
tests_runtime_intruder_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
check_PROGRAMS += tests/config_doc
tests_config_doc_SOURCES = tests/config_doc.c
tests_config_doc_LDADD = libtp_internal.la
tests_config_doc_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/config_doc.sh tests/runtime_unknown_env.sh
# A planted component's table in a list of the test's own: the walks over the list see it.
check_PROGRAMS += tests/config_components
tests_config_components_SOURCES = tests/config_components.c tests/unit_check.h runtime/core_config.c \
	runtime/topo_sysfs.c runtime/topo_hca.c \
	runtime/runtime_config.c runtime/runtime_log.c runtime/runtime_status.c
tests_config_components_LDADD = -lm
TESTS += tests/config_components tests/config_info.sh
EXTRA_DIST += tests/config_info.sh
EXTRA_DIST += tests/config_doc.sh tests/runtime_unknown_env.sh

# Rewrites the table in docs/ENVIRONMENT.md from the configuration table in the code.
update-env-doc: tests/config_doc
	$(AM_V_GEN)doc=$(top_srcdir)/docs/ENVIRONMENT.md; \
	{ sed -n '1,/<!-- env-table:begin -->/p' $$doc; ./tests/config_doc; \
	  sed -n '/<!-- env-table:end -->/,$$p' $$doc; } > $$doc.tmp && mv $$doc.tmp $$doc
.PHONY: update-env-doc

# The public header alone, as C and as C++.
check_PROGRAMS += tests/api_header_c tests/api_header_cxx
tests_api_header_c_SOURCES = tests/api_header_c.c
tests_api_header_c_CPPFLAGS = -I$(top_srcdir)/include
tests_api_header_c_CFLAGS = -std=c11 -Wall -Wextra -Wpedantic $(TP_WARN_CFLAGS)
tests_api_header_c_LDADD = libtp.la
tests_api_header_c_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
tests_api_header_cxx_SOURCES = tests/api_header_cxx.cc
tests_api_header_cxx_CPPFLAGS = -I$(top_srcdir)/include
tests_api_header_cxx_CXXFLAGS = -std=c++11 -Wall -Wextra -Wpedantic $(TP_WARN_CFLAGS)
tests_api_header_cxx_LDADD = libtp.la
tests_api_header_cxx_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/api_header_c tests/api_header_cxx
# Per-pair connection data through the bootstrap and reach priorities, with a second transport beside TCP.
check_PROGRAMS += tests/transport_pairs
tests_transport_pairs_SOURCES = tests/transport_pairs.c
tests_transport_pairs_LDADD = libtp.la
tests_transport_pairs_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/transport_pairs.sh
EXTRA_DIST += tests/transport_pairs.sh
check_PROGRAMS += tests/transport_unit
tests_transport_unit_SOURCES = tests/transport_unit.c
tests_transport_unit_LDADD = libtp_internal.la
tests_transport_unit_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/transport_unit
# libtp.so exports exactly the functions of tp.h and tp_provider.h.
TESTS += tests/api_symbols.sh
EXTRA_DIST += tests/api_symbols.sh
# Issue 12: an engine of tp.h alone that ends on a failed call or a stop; the victim named, the stop word.
check_PROGRAMS += tests/fate_engine
tests_fate_engine_SOURCES = tests/fate_engine.c
tests_fate_engine_CPPFLAGS = -I$(top_srcdir)/include
tests_fate_engine_LDADD = libtp.la
tests_fate_engine_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/fate_cause.sh tests/stop_word.sh tests/fate_boot_beat.sh tests/fate_starved.sh
EXTRA_DIST += tests/fate_cause.sh tests/stop_word.sh tests/fate_boot_beat.sh tests/fate_starved.sh
TESTS += tests/fate_init_fail.sh
EXTRA_DIST += tests/fate_init_fail.sh
# Each local rank's GPU when no tprun gave one (runtime/topo_gpu.c), on a fake sysfs tree it makes.
check_PROGRAMS += tests/topo_gpu_unit
tests_topo_gpu_unit_SOURCES = tests/topo_gpu_unit.c
tests_topo_gpu_unit_LDADD = libtp_internal.la
tests_topo_gpu_unit_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/topo_gpu_unit
# The TCP transport's data connections use reno congestion control.
check_PROGRAMS += tests/tcp_congestion
tests_tcp_congestion_SOURCES = tests/tcp_congestion.c
tests_tcp_congestion_LDADD = libtp.la
tests_tcp_congestion_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/tcp_congestion.sh
EXTRA_DIST += tests/tcp_congestion.sh
