# Bootstrap, settings agreement and fate: rank programs and the scripts that launch them.
check_PROGRAMS += tests/runtime_rank tests/runtime_unit
tests_runtime_rank_SOURCES = tests/runtime_rank.c
tests_runtime_rank_LDADD = libtp.la
tests_runtime_unit_SOURCES = tests/runtime_unit.c
tests_runtime_unit_LDADD = libtp.la
TESTS += tests/runtime_unit
check_PROGRAMS += tests/runtime_intruder
tests_runtime_intruder_SOURCES = tests/runtime_intruder.c
tests_runtime_intruder_LDADD = libtp.la
TESTS += tests/runtime_boot.sh tests/runtime_boot_timeout.sh tests/runtime_mismatch.sh \
	tests/runtime_intruders.sh tests/runtime_fate.sh
EXTRA_DIST += tests/runtime_lib.sh tests/runtime_boot.sh tests/runtime_boot_timeout.sh tests/runtime_mismatch.sh \
	tests/runtime_intruders.sh tests/runtime_fate.sh
# Real executables, not libtool wrapper scripts: a wrapper adds a shell start to every rank.
tests_runtime_rank_LDFLAGS = -no-install
tests_runtime_unit_LDFLAGS = -no-install
tests_runtime_intruder_LDFLAGS = -no-install
check_PROGRAMS += tests/config_doc
tests_config_doc_SOURCES = tests/config_doc.c
tests_config_doc_LDADD = libtp.la
tests_config_doc_LDFLAGS = -no-install
TESTS += tests/config_doc.sh
EXTRA_DIST += tests/config_doc.sh

# Rewrites the table in docs/ENVIRONMENT.md from the configuration table in the code.
update-env-doc: tests/config_doc
	$(AM_V_GEN)doc=$(top_srcdir)/docs/ENVIRONMENT.md; \
	{ sed -n '1,/<!-- env-table:begin -->/p' $$doc; ./tests/config_doc; \
	  sed -n '/<!-- env-table:end -->/,$$p' $$doc; } > $$doc.tmp && mv $$doc.tmp $$doc
.PHONY: update-env-doc
