# transports: linked into libtp; each one is a const ops table listed in runtime/runtime_transports.c.
libtp_la_SOURCES += \
	transports/tcp/tcp.h transports/tcp/tcp_connect.c transports/tcp/tcp_progress.c
