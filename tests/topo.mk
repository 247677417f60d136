# Topology: sysfs readers, RoCE HCA ports and their choice per peer, on generated fake sysfs trees.
check_PROGRAMS += tests/topo_unit
tests_topo_unit_SOURCES = tests/topo_unit.c
tests_topo_unit_LDADD = libtp_internal.la
tests_topo_unit_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TESTS += tests/topo_unit
TESTS += tests/topo_hca.sh tests/topo_gids.sh
EXTRA_DIST += tests/topo_hca.sh tests/topo_gids.sh tests/topo_lib.sh tests/topo_rank.sh
