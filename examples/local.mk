include examples/hello.mk
include examples/mlp.mk
