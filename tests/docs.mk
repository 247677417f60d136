# Docs checked against the code: docs/ENGINE.md's C blocks compile and its programs run under tprun;
# docs/tprun.1 and docs/tp.3 match tprun --help and tp.h. The snippets are built with the configured compiler (and
# its sanitizers under --enable-sanitizers: an instrumented libtp needs the ASan runtime first).
DOCS_SHELL_TESTS = tests/docs_engine.sh tests/docs_man.sh
TESTS += $(DOCS_SHELL_TESTS)
EXTRA_DIST += $(DOCS_SHELL_TESTS)
AM_TESTS_ENVIRONMENT += CC='$(CC) $(TP_SANITIZER_FLAGS)'; export CC;
# docs/ARCHITECTURE.md's layering rules hold in the tree: no include circles, components see only the public headers.
TESTS += tests/layers.sh
EXTRA_DIST += tests/layers.sh tests/layers.py
