/* hip_device.c: the HIP device through libamdhip64 (dlopen'd): async copies, coherent mapped host memory, streams,
 * 64-bit stream values (hipStreamWriteValue64/hipStreamWaitValue64, beta in HIP), capture status and events.
 * Reductions on HIP memory have no kernels here yet: reduce refuses by name. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp_provider.h"

typedef int hip_result_t;
typedef void *hip_stream_t;
typedef void *hip_event_t;

/* hip_runtime_api.h's values (ROCm 5 and 6 alike, but the memory type, which ROCm 6 renumbered). */
enum {
    HIP_SUCCESS = 0,
    HIP_ERROR_NO_DEVICE = 100,
    HIP_ATTR_CAN_USE_STREAM_WAIT_VALUE = 10013,
    HIP_HOST_MALLOC_PORTABLE = 0x1,
    HIP_HOST_MALLOC_MAPPED = 0x2,
    HIP_HOST_MALLOC_COHERENT = 0x40000000,
    HIP_STREAM_NON_BLOCKING = 1,
    HIP_WAIT_VALUE_GTE = 0,
    HIP_EVENT_DISABLE_TIMING = 2,
};

typedef struct hip_pointer_attr {
    int type; /* ROCm 6: 2 is device memory; ROCm 5: 1 */
    int device;
    void *device_pointer, *host_pointer;
    int is_managed;
    unsigned flags;
} hip_pointer_attr_t;

static struct {
    const char *(*GetErrorName)(hip_result_t);
    hip_result_t (*Init)(unsigned);
    hip_result_t (*RuntimeGetVersion)(int *);
    hip_result_t (*GetDeviceCount)(int *);
    hip_result_t (*GetDevice)(int *);
    hip_result_t (*SetDevice)(int);
    hip_result_t (*DeviceGetAttribute)(int *, int, int);
    hip_result_t (*PointerGetAttributes)(hip_pointer_attr_t *, const void *);
    hip_result_t (*HostMalloc)(void **, size_t, unsigned);
    hip_result_t (*HostFree)(void *);
    hip_result_t (*HostGetDevicePointer)(void **, void *, unsigned);
    hip_result_t (*MemcpyAsync)(void *, const void *, size_t, int, hip_stream_t);
    hip_result_t (*Memcpy)(void *, const void *, size_t, int);
    hip_result_t (*StreamCreateWithFlags)(hip_stream_t *, unsigned);
    hip_result_t (*StreamDestroy)(hip_stream_t);
    hip_result_t (*StreamSynchronize)(hip_stream_t);
    hip_result_t (*StreamGetDevice)(hip_stream_t, int *);
    hip_result_t (*DeviceGetPCIBusId)(char *, int, int);
    hip_result_t (*StreamWriteValue64)(hip_stream_t, void *, uint64_t, unsigned);
    hip_result_t (*StreamWaitValue64)(hip_stream_t, void *, uint64_t, unsigned, uint64_t);
    hip_result_t (*StreamIsCapturing)(hip_stream_t, int *);
    hip_result_t (*EventCreateWithFlags)(hip_event_t *, unsigned);
    hip_result_t (*EventRecord)(hip_event_t, hip_stream_t);
    hip_result_t (*EventSynchronize)(hip_event_t);
    hip_result_t (*EventDestroy)(hip_event_t);
    hip_result_t (*StreamWaitEvent)(hip_stream_t, hip_event_t, unsigned);
} hip;

#define ENTRY(name)                                                                                                    \
    {                                                                                                                  \
        "hip" #name, (void **)&hip.name                                                                                \
    }
static const struct {
    const char *symbol;
    void **slot;
} entries[] = {
    ENTRY(GetErrorName),
    ENTRY(Init),
    ENTRY(RuntimeGetVersion),
    ENTRY(GetDeviceCount),
    ENTRY(GetDevice),
    ENTRY(SetDevice),
    ENTRY(DeviceGetAttribute),
    ENTRY(PointerGetAttributes),
    ENTRY(HostMalloc),
    ENTRY(HostFree),
    ENTRY(HostGetDevicePointer),
    ENTRY(MemcpyAsync),
    ENTRY(Memcpy),
    ENTRY(StreamCreateWithFlags),
    ENTRY(StreamDestroy),
    ENTRY(StreamSynchronize),
    ENTRY(StreamGetDevice),
    ENTRY(DeviceGetPCIBusId),
    ENTRY(StreamWriteValue64),
    ENTRY(StreamWaitValue64),
    ENTRY(StreamIsCapturing),
    ENTRY(EventCreateWithFlags),
    ENTRY(EventRecord),
    ENTRY(EventSynchronize),
    ENTRY(EventDestroy),
    ENTRY(StreamWaitEvent),
};

static const char *const sonames[] = {"libamdhip64.so.7", "libamdhip64.so.6", "libamdhip64.so"};
enum { HIPMEMCPY_DEFAULT = 4 };

/* 1 loaded; 0 not tried; -1 not in the process when mem_query asked (init still loads it); -2 absent or unusable. */
static int loaded, device_type = 2;
static char why[320];
static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static tp_status_t init_status = TP_ERR_UNSUPPORTED;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* probe: only a runtime the process loaded already (RTLD_NOLOAD). */
static int load(int probe)
{
    pthread_mutex_lock(&load_lock);
    if (loaded == 1 || loaded == -2 || (probe && loaded == -1)) goto out;
    void *lib = NULL;
    int flags = RTLD_NOW | RTLD_LOCAL | (probe ? RTLD_NOLOAD : 0);
    for (size_t i = 0; i < sizeof(sonames) / sizeof(sonames[0]) && lib == NULL; i++) lib = dlopen(sonames[i], flags);
    if (lib == NULL) {
        loaded = probe ? -1 : -2;
        snprintf(why, sizeof(why), "no HIP runtime on this host (libamdhip64: %s)", dlerror());
        goto out;
    }
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
        if ((*entries[i].slot = dlsym(lib, entries[i].symbol)) == NULL) {
            snprintf(why, sizeof(why), "libamdhip64 lacks %s: ROCm older than 5.3, update it", entries[i].symbol);
            memset(&hip, 0, sizeof(hip));
            dlclose(lib);
            loaded = -2;
            goto out;
        }
    int version = 0;
    if (hip.RuntimeGetVersion(&version) == HIP_SUCCESS && version < 60000000) device_type = 1;
    __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
out:
    pthread_mutex_unlock(&load_lock);
    return loaded == 1;
}

static tp_status_t check(hip_result_t r, const char *what)
{
    if (r == HIP_SUCCESS) return TP_OK;
    const char *name = hip.GetErrorName != NULL ? hip.GetErrorName(r) : NULL;
    tp_log(TP_LOG_ERROR, "hip", "%s: %s (%d)", what, name != NULL ? name : "unknown", r);
    return r == 2 ? TP_ERR_NO_MEMORY : r == 1 ? TP_ERR_INVALID : TP_ERR_SYSTEM;
}

static void init_runtime(void)
{
    if (!load(0)) return;
    int count = 0;
    hip_result_t r = hip.Init(0);
    if (r == HIP_ERROR_NO_DEVICE || (r == HIP_SUCCESS && hip.GetDeviceCount(&count) == HIP_SUCCESS && count == 0)) {
        snprintf(why, sizeof(why), "no HIP device on this host (hipInit: error %d)", r);
        return;
    }
    if (r != HIP_SUCCESS) {
        snprintf(why, sizeof(why), "hipInit failed with error %d: the HIP runtime is not usable", r);
        return;
    }
    for (int d = 0; d < count; d++) {
        int wait = 0;
        if (hip.DeviceGetAttribute(&wait, HIP_ATTR_CAN_USE_STREAM_WAIT_VALUE, d) != HIP_SUCCESS || !wait) {
            snprintf(why, sizeof(why),
                     "HIP device %d cannot wait on a 64-bit stream value (hipDeviceAttributeCanUseStreamWaitValue is "
                     "0): libtp's device streams need it",
                     d);
            return;
        }
    }
    init_status = TP_OK;
}

static tp_status_t hip_init(void)
{
    pthread_once(&init_once, init_runtime);
    if (init_status != TP_OK) tp_log(TP_LOG_ERROR, "hip", "%s", why);
    return init_status;
}

/* HIP memory exists only where the process loaded the runtime itself: asked once, without loading it (a host-only
 * engine on an AMD host must not start the runtime); a HIP stream (init) loads it for good. */
static int hip_mem_query(const void *ptr, tp_mem_type_t *type)
{
    int l = __atomic_load_n(&loaded, __ATOMIC_ACQUIRE);
    if (l < 0 || (l == 0 && !load(1))) return 0;
    hip_pointer_attr_t a;
    memset(&a, 0, sizeof(a));
    if (hip.PointerGetAttributes(&a, ptr) != HIP_SUCCESS || a.type != device_type || a.is_managed) return 0;
    *type = TP_MEM_HIP;
    return 1;
}

extern const tp_device_ops_t tp_hip_device_ops;

/* A stream's device is priv - 1 (priv NULL would read as no device). */
#define DEVICE_OF(stream) ((int)(intptr_t)(stream)->priv - 1)

static int stream_ok(const tp_stream_t *stream, const char *what)
{
    if (stream != NULL && stream->kind == TP_DEVICE_HIP && stream->dev == &tp_hip_device_ops) return 1;
    tp_log(TP_LOG_ERROR, "hip", "%s: %s given to the HIP device: pass a HIP stream", what,
           stream == NULL ? "no stream" : "a stream of another device");
    return 0;
}

/* HIP's current device is per thread: one op runs on the stream's, then the thread's own comes back. */
static tp_status_t enter(int device, int *old)
{
    *old = -1;
    int cur = -1;
    if (hip.GetDevice(&cur) == HIP_SUCCESS && cur == device) return TP_OK;
    tp_status_t s = check(hip.SetDevice(device), "hipSetDevice");
    if (s == TP_OK) *old = cur;
    return s;
}

static void leave(int old)
{
    if (old >= 0) hip.SetDevice(old);
}

static tp_status_t new_stream(hip_stream_t native, int device, int owned, tp_stream_t **out)
{
    tp_stream_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        tp_log(TP_LOG_ERROR, "hip", "out of memory for a stream");
        return TP_ERR_NO_MEMORY;
    }
    s->kind = TP_DEVICE_HIP;
    s->dev = &tp_hip_device_ops;
    s->native = native;
    s->priv = (void *)(intptr_t)(device + 1);
    s->owned = owned;
    *out = s;
    return TP_OK;
}

static tp_status_t hip_stream_adopt(void *native, tp_stream_t **out)
{
    int device = 0;
    tp_status_t s = native != NULL ? check(hip.StreamGetDevice(native, &device), "tp_stream_create: hipStreamGetDevice")
                                   : check(hip.GetDevice(&device), "tp_stream_create: hipGetDevice");
    return s != TP_OK ? TP_ERR_INVALID : new_stream(native, device, 0, out);
}

static tp_status_t hip_stream_create(tp_stream_t *like, tp_stream_t **out)
{
    int device = 0, old;
    if (like != NULL && !stream_ok(like, "stream_create")) return TP_ERR_INVALID;
    if (like != NULL) device = DEVICE_OF(like);
    else if (check(hip.GetDevice(&device), "stream_create: hipGetDevice") != TP_OK) return TP_ERR_SYSTEM;
    hip_stream_t native = NULL;
    tp_status_t s = enter(device, &old);
    if (s == TP_OK) s = check(hip.StreamCreateWithFlags(&native, HIP_STREAM_NON_BLOCKING), "hipStreamCreateWithFlags");
    leave(old);
    if (s == TP_OK && (s = new_stream(native, device, 1, out)) != TP_OK) hip.StreamDestroy(native);
    return s;
}

static void hip_stream_destroy(tp_stream_t *stream)
{
    if (!stream_ok(stream, "stream_destroy")) return;
    if (stream->owned) check(hip.StreamDestroy(stream->native), "hipStreamDestroy");
    free(stream);
}

/* One runtime call on the stream's device. */
#define ON_DEVICE(stream, what, call)                                                                                  \
    do {                                                                                                               \
        if (!stream_ok(stream, what)) return TP_ERR_INVALID;                                                           \
        int old_;                                                                                                      \
        tp_status_t s_ = enter(DEVICE_OF(stream), &old_);                                                              \
        if (s_ == TP_OK) s_ = check(call, what);                                                                       \
        leave(old_);                                                                                                   \
        return s_;                                                                                                     \
    } while (0)

static tp_status_t hip_stream_sync(tp_stream_t *stream)
{
    if (stream == NULL) return TP_OK;
    ON_DEVICE(stream, "hipStreamSynchronize", hip.StreamSynchronize(stream->native));
}

static tp_status_t hip_copy(void *dst, const void *src, size_t len, tp_stream_t *stream)
{
    if (len == 0 || dst == src) return TP_OK;
    if (stream == NULL) return check(hip.Memcpy(dst, src, len, HIPMEMCPY_DEFAULT), "hipMemcpy");
    ON_DEVICE(stream, "hipMemcpyAsync", hip.MemcpyAsync(dst, src, len, HIPMEMCPY_DEFAULT, stream->native));
}

static tp_status_t hip_reduce(tp_dtype_t dtype, tp_op_t op, void *dst, const void *const *srcs, int n, size_t count,
                              tp_stream_t *stream)
{
    (void)dtype, (void)op, (void)dst, (void)srcs, (void)n, (void)count, (void)stream;
    tp_log(TP_LOG_ERROR, "hip", "reduce: this libtp has no reduce kernels for HIP memory (reduce on the host instead)");
    return TP_ERR_UNSUPPORTED;
}

static tp_status_t hip_write64(tp_stream_t *stream, void *dev_addr, uint64_t value)
{
    ON_DEVICE(stream, "hipStreamWriteValue64", hip.StreamWriteValue64(stream->native, dev_addr, value, 0));
}

static tp_status_t hip_wait64(tp_stream_t *stream, void *dev_addr, uint64_t value)
{
    ON_DEVICE(stream, "hipStreamWaitValue64",
              hip.StreamWaitValue64(stream->native, dev_addr, value, HIP_WAIT_VALUE_GTE, ~(uint64_t)0));
}

static int hip_capturing(tp_stream_t *stream)
{
    if (stream == NULL) return 0;
    if (!stream_ok(stream, "stream_capturing")) return TP_ERR_INVALID;
    int status = 0;
    tp_status_t s = check(hip.StreamIsCapturing(stream->native, &status), "hipStreamIsCapturing");
    return s != TP_OK ? (int)s : status != 0;
}

/* Coherent: the CPU sees the device's stream writes while kernels run (and the device the CPU's). */
static tp_status_t hip_host_alloc(size_t len, void **host, void **dev)
{
    void *h = NULL, *d = NULL;
    tp_status_t s = check(hip.HostMalloc(&h, len > 0 ? len : 1,
                                         HIP_HOST_MALLOC_PORTABLE | HIP_HOST_MALLOC_MAPPED | HIP_HOST_MALLOC_COHERENT),
                          "host_alloc: hipHostMalloc");
    if (s == TP_OK && (s = check(hip.HostGetDevicePointer(&d, h, 0), "hipHostGetDevicePointer")) != TP_OK)
        hip.HostFree(h);
    if (s != TP_OK) return s;
    memset(h, 0, len);
    *host = h;
    *dev = d;
    return TP_OK;
}

static void hip_host_free(void *host)
{
    if (host != NULL) check(hip.HostFree(host), "hipHostFree");
}

static tp_status_t hip_event_record(tp_stream_t *stream, tp_device_event_t **event)
{
    if (event == NULL || !stream_ok(stream, "event_record")) return TP_ERR_INVALID;
    hip_event_t ev = *event;
    if (ev == NULL &&
        check(hip.EventCreateWithFlags(&ev, HIP_EVENT_DISABLE_TIMING), "hipEventCreateWithFlags") != TP_OK)
        return TP_ERR_SYSTEM;
    *event = ev;
    ON_DEVICE(stream, "hipEventRecord", hip.EventRecord(ev, stream->native));
}

static tp_status_t hip_stream_wait_event(tp_stream_t *stream, tp_device_event_t **event)
{
    if (event == NULL || *event == NULL) {
        tp_log(TP_LOG_ERROR, "hip", "stream_wait: no event (record one first)");
        return TP_ERR_INVALID;
    }
    ON_DEVICE(stream, "hipStreamWaitEvent", hip.StreamWaitEvent(stream->native, *event, 0));
}

static tp_status_t hip_event_sync(tp_stream_t *stream, tp_device_event_t **event)
{
    (void)stream;
    if (event == NULL || *event == NULL) {
        tp_log(TP_LOG_ERROR, "hip", "event_sync: no event (record one first)");
        return TP_ERR_INVALID;
    }
    return check(hip.EventSynchronize(*event), "hipEventSynchronize");
}

static tp_status_t hip_event_release(tp_stream_t *stream, tp_device_event_t **event)
{
    (void)stream;
    if (event == NULL || *event == NULL) return TP_OK;
    tp_status_t s = check(hip.EventDestroy(*event), "hipEventDestroy");
    *event = NULL;
    return s;
}

static tp_status_t hip_bus_id(tp_stream_t *stream, char *out, size_t len)
{
    if (len > 0) out[0] = '\0';
    if (!stream_ok(stream, "stream_bus_id")) return TP_ERR_INVALID;
    return check(hip.DeviceGetPCIBusId(out, (int)len, DEVICE_OF(stream)), "hipDeviceGetPCIBusId");
}

const tp_device_ops_t tp_hip_device_ops = {
    .abi_version = TP_DEVICE_ABI,
    .ops_size = sizeof(tp_device_ops_t),
    .name = "hip",
    .kind = TP_DEVICE_HIP,
    .init = hip_init,
    .mem_query = hip_mem_query,
    .copy = hip_copy,
    .reduce = hip_reduce,
    .host_alloc = hip_host_alloc,
    .host_free = hip_host_free,
    .stream_create = hip_stream_create,
    .stream_adopt = hip_stream_adopt,
    .stream_destroy = hip_stream_destroy,
    .stream_sync = hip_stream_sync,
    .stream_write64 = hip_write64,
    .stream_wait64 = hip_wait64,
    .stream_capturing = hip_capturing,
    .event_record = hip_event_record,
    .stream_wait = hip_stream_wait_event,
    .event_sync = hip_event_sync,
    .event_release = hip_event_release,
    .stream_bus_id = hip_bus_id,
};
