# devices: linked into libtp; each one is a const ops table listed in runtime/runtime_components.c.
libtp_la_SOURCES += \
	devices/host/host_device.c devices/host/host_reduce.c devices/host/host_reduce.h \
	devices/host/host_stream.c devices/host/host_stream.h \
	devices/cuda/cuda_device.c devices/cuda/cuda_device.h devices/cuda/cuda_load.c \
	devices/cuda/cuda_reduce.c devices/cuda/cuda_reduce_args.h devices/cuda/cuda_reduce_ptx.c \
	devices/hip/hip_device.c
# The kernels' source and the script that turns it into cuda_reduce_ptx.c (committed: building needs no nvcc).
EXTRA_DIST += devices/cuda/cuda_reduce.cu scripts/gen-cuda-ptx.sh
