# transports: linked into libtp; each one is a const ops table listed in runtime/runtime_transports.c.
libtp_la_SOURCES += \
	transports/tcp/tcp.h transports/tcp/tcp_connect.c transports/tcp/tcp_accept.c transports/tcp/tcp_progress.c
# shm: same-host peers through a sealed memfd per rank (transports/shm/shm.h has the layout).
libtp_la_SOURCES += \
	transports/shm/shm.h transports/shm/shm_connect.c transports/shm/shm_progress.c transports/shm/shm_cma.c \
	transports/shm/shm_map.c transports/shm/shm_write.c
TP_CONFIG_TABLES += transports/shm/shm_config.c
# nccl: a collective provider for CUDA buffers; libnccl.so.2 is dlopen'd when a CUDA buffer first reaches a call.
libtp_la_SOURCES += \
	transports/nccl/nccl_lib.c transports/nccl/nccl_lib.h transports/nccl/nccl_provider.h \
	transports/nccl/nccl_comm.c transports/nccl/nccl_coll.c
TP_CONFIG_TABLES += transports/nccl/nccl_config.c
