/* cuda_load.c: libcuda.so.1 loaded once, every entry point resolved by name and version through cuGetProcAddress
 * (never dlsym of bare names: the driver exports old and new ABIs under them), and the driver's checks at init. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda_device.h"

cuda_api_t tp_cu;

typedef cu_result_t (*get_proc_fn)(const char *, void **, int, uint64_t, int *);

#define ENTRY(name)                                                                                                    \
    {                                                                                                                  \
        "cu" #name, (void **)&tp_cu.name                                                                               \
    }
static const struct {
    const char *symbol;
    void **slot;
} entries[] = {
    ENTRY(GetErrorName),
    ENTRY(Init),
    ENTRY(DriverGetVersion),
    ENTRY(DeviceGetCount),
    ENTRY(DeviceGet),
    ENTRY(DeviceGetName),
    ENTRY(DeviceGetAttribute),
    ENTRY(DevicePrimaryCtxRetain),
    ENTRY(CtxGetCurrent),
    ENTRY(CtxPushCurrent),
    ENTRY(CtxPopCurrent),
    ENTRY(CtxGetDevice),
    ENTRY(DeviceGetPCIBusId),
    ENTRY(PointerGetAttributes),
    ENTRY(MemHostAlloc),
    ENTRY(MemFreeHost),
    ENTRY(MemHostGetDevicePointer),
    ENTRY(Memcpy),
    ENTRY(MemcpyAsync),
    ENTRY(StreamCreate),
    ENTRY(StreamDestroy),
    ENTRY(StreamSynchronize),
    ENTRY(StreamGetCtx),
    ENTRY(StreamWriteValue64),
    ENTRY(StreamWaitValue64),
    ENTRY(StreamIsCapturing),
    ENTRY(EventCreate),
    ENTRY(EventRecord),
    ENTRY(EventSynchronize),
    ENTRY(EventDestroy),
    ENTRY(StreamWaitEvent),
    ENTRY(ModuleLoadData),
    ENTRY(ModuleGetFunction),
    ENTRY(LaunchKernel),
};

/* 0 not tried, 1 loaded, -1 absent or unusable (why says so); set once under pthread_once. */
static int loaded;
static char load_why[256];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void)
{
    loaded = -1;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        snprintf(load_why, sizeof(load_why), "no CUDA driver on this host (libcuda.so.1: %s)", dlerror());
        return;
    }
    get_proc_fn get_proc = (get_proc_fn)dlsym(lib, "cuGetProcAddress_v2");
    if (get_proc == NULL) {
        snprintf(load_why, sizeof(load_why),
                 "libcuda.so.1 has no cuGetProcAddress_v2: the CUDA driver is older than 12.0, update it");
        goto err_close;
    }
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
        int status = -1;
        cu_result_t r =
            get_proc(entries[i].symbol, entries[i].slot, TP_CUDA_API_VERSION, CU_PROC_LEGACY_STREAM, &status);
        if (r != CU_SUCCESS || status != 0 || *entries[i].slot == NULL) {
            snprintf(load_why, sizeof(load_why),
                     "libcuda.so.1 gives no %s for CUDA %d.%d (error %d, status %d): the CUDA driver is too old or "
                     "not a CUDA driver",
                     entries[i].symbol, TP_CUDA_API_VERSION / 1000, TP_CUDA_API_VERSION % 1000 / 10, r, status);
            memset(&tp_cu, 0, sizeof(tp_cu));
            goto err_close;
        }
    }
    loaded = 1;
    return;
err_close:
    dlclose(lib);
}

/* Loads the library without initialising the driver: mem_query needs only that (before cuInit every pointer
 * query answers "not initialised", and an engine that never initialised CUDA has no device memory). */
static int cuda_loaded(void)
{
    int l = __atomic_load_n(&loaded, __ATOMIC_ACQUIRE);
    if (l != 0) return l > 0;
    pthread_once(&load_once, load);
    if (loaded < 0) tp_log(TP_LOG_DEBUG, "cuda", "%s", load_why);
    return loaded > 0;
}

tp_status_t tp_cuda_check(cu_result_t r, const char *what)
{
    if (r == CU_SUCCESS) return TP_OK;
    const char *name = NULL;
    if (tp_cu.GetErrorName == NULL || tp_cu.GetErrorName(r, &name) != CU_SUCCESS || name == NULL) name = "unknown";
    tp_log(TP_LOG_ERROR, "cuda", "%s: %s (%d)", what, name, r);
    return r == CU_ERROR_OUT_OF_MEMORY   ? TP_ERR_NO_MEMORY
           : r == CU_ERROR_INVALID_VALUE ? TP_ERR_INVALID
                                         : TP_ERR_SYSTEM;
}

/* The answer of the one init, and its message for every later caller. */
static tp_status_t init_status = TP_ERR_UNSUPPORTED;
static char init_why[320];
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* Every device must map host memory, share the host's address space and wait on 64-bit stream values. */
static void init_driver(void)
{
    if (!cuda_loaded()) {
        snprintf(init_why, sizeof(init_why), "%s", load_why);
        return;
    }
    int version = 0, count = 0;
    cu_result_t r = tp_cu.Init(0);
    if (r == CU_ERROR_NO_DEVICE || (r == CU_SUCCESS && tp_cu.DeviceGetCount(&count) == CU_SUCCESS && count == 0)) {
        snprintf(init_why, sizeof(init_why), "no CUDA device on this host (cuInit: error %d)", r);
        return;
    }
    if (r != CU_SUCCESS || tp_cu.DriverGetVersion(&version) != CU_SUCCESS) {
        snprintf(init_why, sizeof(init_why), "cuInit failed with error %d: the CUDA driver is not usable", r);
        return;
    }
    for (int d = 0; d < count; d++) {
        int dev = 0, memops = 0, map = 0, uva = 0;
        char name[128] = "?";
        tp_cu.DeviceGet(&dev, d);
        tp_cu.DeviceGetName(name, sizeof(name), dev);
        tp_cu.DeviceGetAttribute(&memops, CU_ATTR_64_BIT_STREAM_MEM_OPS, dev);
        tp_cu.DeviceGetAttribute(&map, CU_ATTR_CAN_MAP_HOST_MEMORY, dev);
        tp_cu.DeviceGetAttribute(&uva, CU_ATTR_UNIFIED_ADDRESSING, dev);
        if (!memops || !map || !uva) {
            snprintf(init_why, sizeof(init_why),
                     "CUDA device %d (%s, driver %d.%d) cannot %s: libtp's device streams need it", d, name,
                     version / 1000, version % 1000 / 10,
                     !memops ? "wait on a 64-bit stream value (CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS is 0)"
                     : !map  ? "map host memory (CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY is 0)"
                             : "share the host's address space (no unified addressing)");
            return;
        }
    }
    init_status = TP_OK;
    tp_log(TP_LOG_DEBUG, "cuda", "driver %d.%d, %d device(s)", version / 1000, version % 1000 / 10, count);
}

tp_status_t tp_cuda_init(void)
{
    pthread_once(&init_once, init_driver);
    if (init_status != TP_OK) tp_log(TP_LOG_ERROR, "cuda", "%s", init_why);
    return init_status;
}

int tp_cuda_mem_query(const void *ptr, tp_mem_type_t *type)
{
    if (!cuda_loaded()) return 0;
    /* The plural query: for memory CUDA does not know (every host buffer) the singular one fails through the
     * driver's error path, 470-540 ns a query on the GPU host against 85-92 (docs/BENCHMARKS.md, ninth pass) */
    int attr = CU_POINTER_MEMORY_TYPE;
    unsigned mem = 0;
    void *data = &mem;
    if (tp_cu.PointerGetAttributes(1, &attr, &data, (cu_ptr_t)(uintptr_t)ptr) != CU_SUCCESS ||
        mem != CU_MEMORYTYPE_DEVICE)
        return 0;
    *type = TP_MEM_CUDA;
    return 1;
}

tp_status_t tp_cuda_enter(cu_ctx_t ctx, int *pushed)
{
    cu_ctx_t cur = NULL;
    *pushed = 0;
    if (tp_cu.CtxGetCurrent(&cur) == CU_SUCCESS && cur == ctx) return TP_OK;
    tp_status_t s = tp_cuda_check(tp_cu.CtxPushCurrent(ctx), "cuCtxPushCurrent");
    *pushed = s == TP_OK;
    return s;
}

void tp_cuda_leave(int pushed)
{
    cu_ctx_t old;
    if (pushed) tp_cu.CtxPopCurrent(&old);
}

int tp_cuda_stream_ok(const tp_stream_t *stream, const char *what)
{
    if (stream->kind == TP_DEVICE_CUDA && stream->dev == &tp_cuda_device_ops) return 1;
    tp_log(TP_LOG_ERROR, "cuda", "%s: a stream of device %s given to the CUDA device: pass a CUDA stream", what,
           stream->dev != NULL ? stream->dev->name : "(none)");
    return 0;
}
