# tp_hello: the smallest engine (bootstrap, settings agreement, rank table).
noinst_PROGRAMS += examples/tp_hello
examples_tp_hello_SOURCES = examples/tp_hello.c
examples_tp_hello_LDADD = libtp.la
examples_tp_hello_LDFLAGS = $(TP_PROGRAM_LINK_FLAGS)
