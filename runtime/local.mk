# libtp: the runtime core, with the transports and devices linked in.
lib_LTLIBRARIES += libtp.la
libtp_la_SOURCES = \
	runtime/runtime_config.c runtime/runtime_config.h \
	runtime/runtime_log.c runtime/runtime_log.h \
	runtime/runtime_status.c
libtp_la_LIBADD = $(PTHREAD_LIBS) -lm
libtp_la_LDFLAGS = -version-info 0:0:0
