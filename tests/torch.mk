# torch.distributed under tprun: a rank that does what torch's env:// rendezvous does (rank 0's TCPStore on
# MASTER_ADDR:MASTER_PORT, the others connect), with and without libtp in the same process, on one host, across
# namespace hosts (root only, else 77) and under --pmix; tests/gpu/torch_dist.py runs real torch (77 without it).
check_PROGRAMS += tests/torch_store_rank
tests_torch_store_rank_SOURCES = tests/torch_store_rank.c
tests_torch_store_rank_LDADD = libtp.la
tests_torch_store_rank_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
TORCH_SHELL_TESTS = tests/launcher_torch.sh tests/ssh_torch.sh
TESTS += $(TORCH_SHELL_TESTS)
EXTRA_DIST += $(TORCH_SHELL_TESTS) tests/gpu/torch_dist.py
