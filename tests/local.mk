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
include tests/docs.mk
include tests/torch.mk
include tests/topo.mk
include tests/fuzz/fuzz.mk
# The tests pass alike on hosts with and without GPUs: tprun gives their ranks no GPU (a 1-GPU machine would refuse
# their 2-8 ranks), unless a test asks for one (--gpus-per-rank 1) or its fake hosts bring their own (launcher_bind.sh
# and launcher_bind_real.sh unset this).
AM_TESTS_ENVIRONMENT += TP_GPUS_PER_RANK=0; export TP_GPUS_PER_RANK;
# Under ./configure --enable-sanitizers every report fails its test: ranks' deaths by signal stay signals (the
# launcher tests check them); leaks are checked at every exit (ASan's default; tests/launcher_rank.c opts out)
# except the known harmless ones, suppressed by name (tests/lsan.supp).
if TP_SANITIZERS
AM_TESTS_ENVIRONMENT += ASAN_OPTIONS=handle_segv=0:handle_sigbus=0:handle_sigfpe=0; \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1; \
	LSAN_OPTIONS=suppressions=$(abs_top_srcdir)/tests/lsan.supp; export ASAN_OPTIONS UBSAN_OPTIONS LSAN_OPTIONS;
endif
