/* cuda_device.h: the CUDA device's private parts: the driver entry points it resolves from libcuda.so.1 by version
 * (the few types and constants of cuda.h they need, restated: libtp builds without CUDA's headers). */
#ifndef CUDA_DEVICE_H
#define CUDA_DEVICE_H

#include <stddef.h>
#include <stdint.h>

#include "tp_provider.h"

typedef int cu_result_t;
typedef unsigned long long cu_ptr_t;
typedef struct cu_ctx *cu_ctx_t;
typedef struct cu_stream *cu_stream_t;
typedef struct cu_event *cu_event_t;
typedef struct cu_module *cu_module_t;
typedef struct cu_function *cu_function_t;

/* cuda.h's values (CUDA 12 and 13 alike). */
enum {
    CU_SUCCESS = 0,
    CU_ERROR_INVALID_VALUE = 1,
    CU_ERROR_OUT_OF_MEMORY = 2,
    CU_ERROR_NOT_INITIALIZED = 3,
    CU_ERROR_NO_DEVICE = 100,
    CU_ATTR_CAN_MAP_HOST_MEMORY = 19,
    CU_ATTR_UNIFIED_ADDRESSING = 41,
    CU_ATTR_64_BIT_STREAM_MEM_OPS = 122,
    CU_ATTR_MULTIPROCESSOR_COUNT = 16,
    CU_POINTER_MEMORY_TYPE = 2,
    CU_MEMORYTYPE_DEVICE = 2,
    CU_MEMHOSTALLOC_PORTABLE = 1,
    CU_MEMHOSTALLOC_DEVICEMAP = 2,
    CU_STREAM_NON_BLOCKING = 1,
    CU_WAIT_VALUE_GEQ = 0,
    CU_WRITE_VALUE_DEFAULT = 0,
    CU_EVENT_DISABLE_TIMING = 2,
    CU_CAPTURE_STATUS_NONE = 0,
    CU_PROC_LEGACY_STREAM = 1,
};

/* The driver API version the entry points are asked for (their signatures as of CUDA 12.0). */
#define TP_CUDA_API_VERSION 12000

typedef struct cuda_api {
    cu_result_t (*GetErrorName)(cu_result_t, const char **);
    cu_result_t (*Init)(unsigned);
    cu_result_t (*DriverGetVersion)(int *);
    cu_result_t (*DeviceGetCount)(int *);
    cu_result_t (*DeviceGet)(int *, int);
    cu_result_t (*DeviceGetName)(char *, int, int);
    cu_result_t (*DeviceGetAttribute)(int *, int, int);
    cu_result_t (*DevicePrimaryCtxRetain)(cu_ctx_t *, int);
    cu_result_t (*CtxGetCurrent)(cu_ctx_t *);
    cu_result_t (*CtxPushCurrent)(cu_ctx_t);
    cu_result_t (*CtxPopCurrent)(cu_ctx_t *);
    cu_result_t (*CtxGetDevice)(int *);
    cu_result_t (*DeviceGetPCIBusId)(char *, int, int);
    cu_result_t (*PointerGetAttributes)(unsigned, int *, void **, cu_ptr_t);
    cu_result_t (*MemHostAlloc)(void **, size_t, unsigned);
    cu_result_t (*MemFreeHost)(void *);
    cu_result_t (*MemHostGetDevicePointer)(cu_ptr_t *, void *, unsigned);
    cu_result_t (*Memcpy)(cu_ptr_t, cu_ptr_t, size_t);
    cu_result_t (*MemcpyAsync)(cu_ptr_t, cu_ptr_t, size_t, cu_stream_t);
    cu_result_t (*StreamCreate)(cu_stream_t *, unsigned);
    cu_result_t (*StreamDestroy)(cu_stream_t);
    cu_result_t (*StreamSynchronize)(cu_stream_t);
    cu_result_t (*StreamGetCtx)(cu_stream_t, cu_ctx_t *);
    cu_result_t (*StreamWriteValue64)(cu_stream_t, cu_ptr_t, uint64_t, unsigned);
    cu_result_t (*StreamWaitValue64)(cu_stream_t, cu_ptr_t, uint64_t, unsigned);
    cu_result_t (*StreamIsCapturing)(cu_stream_t, int *);
    cu_result_t (*EventCreate)(cu_event_t *, unsigned);
    cu_result_t (*EventRecord)(cu_event_t, cu_stream_t);
    cu_result_t (*EventSynchronize)(cu_event_t);
    cu_result_t (*EventDestroy)(cu_event_t);
    cu_result_t (*StreamWaitEvent)(cu_stream_t, cu_event_t, unsigned);
    cu_result_t (*ModuleLoadData)(cu_module_t *, const void *);
    cu_result_t (*ModuleGetFunction)(cu_function_t *, cu_module_t, const char *);
    cu_result_t (*LaunchKernel)(cu_function_t, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                                cu_stream_t, void **, void **);
} cuda_api_t;

/* Resolved once libcuda.so.1 is loaded (mem_query loads it, init initialises the driver). */
extern cuda_api_t tp_cu;

/* Logs "cuda: what: CUDA_ERROR_..." and maps r to a status (TP_OK for CU_SUCCESS). */
tp_status_t tp_cuda_check(cu_result_t r, const char *what);
/* Makes ctx current on this thread for one op; *pushed says whether tp_cuda_leave must pop it. */
tp_status_t tp_cuda_enter(cu_ctx_t ctx, int *pushed);
void tp_cuda_leave(int pushed);
/* The stream's CUstream when it is a CUDA stream, else logs that what got a foreign stream. */
int tp_cuda_stream_ok(const tp_stream_t *stream, const char *what);

tp_status_t tp_cuda_init(void);
int tp_cuda_mem_query(const void *ptr, tp_mem_type_t *type);
tp_status_t tp_cuda_reduce(tp_dtype_t dtype, tp_op_t op, void *dst, const void *const *srcs, int n, size_t count,
                           tp_stream_t *stream);
extern const char tp_cuda_reduce_ptx[];
extern const tp_device_ops_t tp_cuda_device_ops;

#endif
