# Collectives and the TCP transport: unit tests of the pure parts, then multi-rank programs under tprun.
check_PROGRAMS += tests/coll_check
tests_coll_check_SOURCES = tests/coll_check.c
tests_coll_check_LDADD = libtp.la
TESTS += tests/coll_check.sh
EXTRA_DIST += tests/coll_check.sh
