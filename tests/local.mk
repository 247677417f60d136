# Tests: each part of the tree keeps its own list. Every test runs under a timeout, so a hang fails it.
TEST_EXTENSIONS = .sh
# The C unit tests share one CHECK.
EXTRA_DIST += tests/unit_check.h
SH_LOG_COMPILER = timeout -k 5 300 bash
LOG_COMPILER = timeout -k 5 300
include tests/launcher.mk
include tests/runtime.mk
include tests/coll.mk
include tests/pmix.mk
include tests/bench.mk
include tests/ssh.mk
include tests/fuzz/fuzz.mk
