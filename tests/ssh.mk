# The ssh launcher (and tprun --pmix) across test hosts made of network namespaces (tests/netns_lib.sh; root only,
# else 77).
SSH_SHELL_TESTS = tests/ssh_launch.sh tests/ssh_iface.sh tests/ssh_fate.sh tests/pmix_ssh.sh tests/ssh_topo.sh tests/ssh_tree.sh \
	tests/ssh_tree_forged.sh
TESTS += $(SSH_SHELL_TESTS)
EXTRA_DIST += $(SSH_SHELL_TESTS) tests/netns_lib.sh tests/netns_base.sh tests/ssh_tree_lib.sh tests/bench/tree_launch.sh tests/bench/fate_cpu.py \
	tests/bench/scale_fit.py
