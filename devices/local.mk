# devices: linked into libtp; each one is a const ops table listed in runtime/runtime_components.c.
libtp_la_SOURCES += \
	devices/host/host_device.c devices/host/host_reduce.c devices/host/host_reduce.h \
	devices/host/host_stream.c devices/host/host_stream.h
