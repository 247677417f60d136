# Tests: each part of the tree keeps its own list.
include tests/launcher.mk
include tests/runtime.mk
include tests/coll.mk
include tests/bench.mk
