/* cuda_device.c: the CUDA device: async copies, pinned mapped host memory, streams (the engine's, adopted with their
 * context; libtp's own, non-blocking), 64-bit stream values, capture status and events, through the driver API. */
#include <stdlib.h>
#include <string.h>

#include "cuda_device.h"

#define PTR(p) ((cu_ptr_t)(uintptr_t)(p))

/* The context of host_alloc when the calling thread has none: the first stream's (a proxy thread has none). */
static cu_ctx_t first_ctx;

static tp_status_t new_stream(cu_stream_t native, cu_ctx_t ctx, int owned, tp_stream_t **out)
{
    tp_stream_t *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        tp_log(TP_LOG_ERROR, "cuda", "out of memory for a stream");
        return TP_ERR_NO_MEMORY;
    }
    s->kind = TP_DEVICE_CUDA;
    s->dev = &tp_cuda_device_ops;
    s->native = native;
    s->priv = ctx;
    s->owned = owned;
    cu_ctx_t none = NULL;
    __atomic_compare_exchange_n(&first_ctx, &none, ctx, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    *out = s;
    return TP_OK;
}

static tp_status_t cuda_stream_adopt(void *native, tp_stream_t **out)
{
    cu_ctx_t ctx = NULL;
    if (native != NULL) {
        if (tp_cuda_check(tp_cu.StreamGetCtx(native, &ctx), "tp_stream_create: cuStreamGetCtx of the native stream") !=
            TP_OK)
            return TP_ERR_INVALID;
    } else if (tp_cu.CtxGetCurrent(&ctx) != CU_SUCCESS || ctx == NULL) {
        tp_log(TP_LOG_ERROR, "cuda",
               "tp_stream_create: the default stream (native NULL) needs a current CUDA context on this thread: set "
               "the device first (cudaSetDevice), or pass a stream");
        return TP_ERR_INVALID;
    }
    return new_stream(native, ctx, 0, out);
}

static tp_status_t cuda_stream_create(tp_stream_t *like, tp_stream_t **out)
{
    cu_ctx_t ctx = NULL;
    if (like != NULL && !tp_cuda_stream_ok(like, "stream_create")) return TP_ERR_INVALID;
    if (like != NULL) ctx = like->priv;
    else if (tp_cu.CtxGetCurrent(&ctx) != CU_SUCCESS || ctx == NULL) ctx = first_ctx;
    if (ctx == NULL) {
        tp_log(TP_LOG_ERROR, "cuda",
               "stream_create: no CUDA context to make the stream in (no current one, no stream)");
        return TP_ERR_INVALID;
    }
    int pushed;
    cu_stream_t native = NULL;
    tp_status_t s = tp_cuda_enter(ctx, &pushed);
    if (s == TP_OK) s = tp_cuda_check(tp_cu.StreamCreate(&native, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    tp_cuda_leave(pushed);
    if (s == TP_OK && (s = new_stream(native, ctx, 1, out)) != TP_OK) tp_cu.StreamDestroy(native);
    return s;
}

static void cuda_stream_destroy(tp_stream_t *stream)
{
    if (!tp_cuda_stream_ok(stream, "stream_destroy")) return;
    if (stream->owned) {
        int pushed;
        if (tp_cuda_enter(stream->priv, &pushed) == TP_OK) {
            tp_cuda_check(tp_cu.StreamDestroy(stream->native), "cuStreamDestroy");
            tp_cuda_leave(pushed);
        }
    }
    free(stream);
}

/* Runs one driver call in the stream's context: the engine's thread keeps its own current context. */
#define IN_CTX(stream, what, call)                                                                                     \
    do {                                                                                                               \
        if (!tp_cuda_stream_ok(stream, what)) return TP_ERR_INVALID;                                                   \
        int pushed_;                                                                                                   \
        tp_status_t s_ = tp_cuda_enter((stream)->priv, &pushed_);                                                      \
        if (s_ == TP_OK) s_ = tp_cuda_check(call, what);                                                               \
        tp_cuda_leave(pushed_);                                                                                        \
        return s_;                                                                                                     \
    } while (0)

static tp_status_t cuda_stream_sync(tp_stream_t *stream)
{
    if (stream == NULL) return TP_OK;
    IN_CTX(stream, "cuStreamSynchronize", tp_cu.StreamSynchronize(stream->native));
}

static tp_status_t cuda_copy(void *dst, const void *src, size_t len, tp_stream_t *stream)
{
    if (len == 0 || dst == src) return TP_OK;
    if (stream == NULL) {
        const char *d = dst, *s = src;
        if (d < s + len && s < d + len) {
            tp_log(TP_LOG_ERROR, "cuda",
                   "copy: %zu bytes between overlapping regions %p and %p: give a stream or "
                   "separate buffers",
                   len, dst, src);
            return TP_ERR_INVALID;
        }
        return tp_cuda_check(tp_cu.Memcpy(PTR(dst), PTR(src), len), "cuMemcpy");
    }
    IN_CTX(stream, "cuMemcpyAsync", tp_cu.MemcpyAsync(PTR(dst), PTR(src), len, stream->native));
}

static tp_status_t cuda_write64(tp_stream_t *stream, void *dev_addr, uint64_t value)
{
    if (stream == NULL) {
        tp_log(TP_LOG_ERROR, "cuda", "stream_write64: no stream: the host writes its words itself (host address)");
        return TP_ERR_INVALID;
    }
    IN_CTX(stream, "cuStreamWriteValue64",
           tp_cu.StreamWriteValue64(stream->native, PTR(dev_addr), value, CU_WRITE_VALUE_DEFAULT));
}

static tp_status_t cuda_wait64(tp_stream_t *stream, void *dev_addr, uint64_t value)
{
    if (stream == NULL) {
        tp_log(TP_LOG_ERROR, "cuda", "stream_wait64: no stream: the host does not wait on a device word");
        return TP_ERR_INVALID;
    }
    IN_CTX(stream, "cuStreamWaitValue64",
           tp_cu.StreamWaitValue64(stream->native, PTR(dev_addr), value, CU_WAIT_VALUE_GEQ));
}

static int cuda_capturing(tp_stream_t *stream)
{
    if (stream == NULL) return 0;
    if (!tp_cuda_stream_ok(stream, "stream_capturing")) return TP_ERR_INVALID;
    int status = CU_CAPTURE_STATUS_NONE, pushed;
    tp_status_t s = tp_cuda_enter(stream->priv, &pushed);
    if (s == TP_OK) s = tp_cuda_check(tp_cu.StreamIsCapturing(stream->native, &status), "cuStreamIsCapturing");
    tp_cuda_leave(pushed);
    return s != TP_OK ? (int)s : status != CU_CAPTURE_STATUS_NONE;
}

static tp_status_t cuda_host_alloc(size_t len, void **host, void **dev)
{
    cu_ctx_t ctx = NULL;
    if (tp_cu.CtxGetCurrent(&ctx) != CU_SUCCESS || ctx == NULL) ctx = first_ctx;
    if (ctx == NULL) {
        tp_log(TP_LOG_ERROR, "cuda", "host_alloc: no CUDA context (no current one, no stream made yet)");
        return TP_ERR_INVALID;
    }
    int pushed;
    void *h = NULL;
    cu_ptr_t d = 0;
    tp_status_t s = tp_cuda_enter(ctx, &pushed);
    if (s == TP_OK)
        s = tp_cuda_check(
            tp_cu.MemHostAlloc(&h, len > 0 ? len : 1, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
            "host_alloc: cuMemHostAlloc");
    if (s == TP_OK &&
        (s = tp_cuda_check(tp_cu.MemHostGetDevicePointer(&d, h, 0), "cuMemHostGetDevicePointer")) != TP_OK)
        tp_cu.MemFreeHost(h);
    tp_cuda_leave(pushed);
    if (s != TP_OK) return s;
    memset(h, 0, len);
    *host = h;
    *dev = (void *)(uintptr_t)d;
    return TP_OK;
}

static void cuda_host_free(void *host)
{
    if (host != NULL) tp_cuda_check(tp_cu.MemFreeHost(host), "cuMemFreeHost");
}

static tp_status_t cuda_event_record(tp_stream_t *stream, tp_device_event_t **event)
{
    if (stream == NULL || event == NULL) {
        tp_log(TP_LOG_ERROR, "cuda", "event_record: needs a CUDA stream and an event slot");
        return TP_ERR_INVALID;
    }
    if (!tp_cuda_stream_ok(stream, "event_record")) return TP_ERR_INVALID;
    int pushed;
    tp_status_t s = tp_cuda_enter(stream->priv, &pushed);
    cu_event_t ev = (cu_event_t)*event;
    if (s == TP_OK && ev == NULL) s = tp_cuda_check(tp_cu.EventCreate(&ev, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    if (s == TP_OK) {
        *event = (tp_device_event_t *)ev;
        s = tp_cuda_check(tp_cu.EventRecord(ev, stream->native), "cuEventRecord");
    }
    tp_cuda_leave(pushed);
    return s;
}

static tp_status_t cuda_stream_wait_event(tp_stream_t *stream, tp_device_event_t **event)
{
    if (stream == NULL || event == NULL || *event == NULL) {
        tp_log(TP_LOG_ERROR, "cuda", "stream_wait: needs a CUDA stream and a recorded event");
        return TP_ERR_INVALID;
    }
    IN_CTX(stream, "cuStreamWaitEvent", tp_cu.StreamWaitEvent(stream->native, (cu_event_t)*event, 0));
}

static tp_status_t cuda_event_sync(tp_stream_t *stream, tp_device_event_t **event)
{
    (void)stream;
    if (event == NULL || *event == NULL) {
        tp_log(TP_LOG_ERROR, "cuda", "event_sync: no event (record one first)");
        return TP_ERR_INVALID;
    }
    return tp_cuda_check(tp_cu.EventSynchronize((cu_event_t)*event), "cuEventSynchronize");
}

static tp_status_t cuda_event_release(tp_stream_t *stream, tp_device_event_t **event)
{
    (void)stream;
    if (event == NULL || *event == NULL) return TP_OK;
    tp_status_t s = tp_cuda_check(tp_cu.EventDestroy((cu_event_t)*event), "cuEventDestroy");
    *event = NULL;
    return s;
}

static tp_status_t cuda_bus_id(tp_stream_t *stream, char *out, size_t len)
{
    if (len > 0) out[0] = '\0';
    if (!tp_cuda_stream_ok(stream, "stream_bus_id")) return TP_ERR_INVALID;
    int pushed, device = 0;
    tp_status_t s = tp_cuda_enter(stream->priv, &pushed);
    if (s == TP_OK) s = tp_cuda_check(tp_cu.CtxGetDevice(&device), "cuCtxGetDevice");
    if (s == TP_OK) s = tp_cuda_check(tp_cu.DeviceGetPCIBusId(out, (int)len, device), "cuDeviceGetPCIBusId");
    tp_cuda_leave(pushed);
    return s;
}

const tp_device_ops_t tp_cuda_device_ops = {
    .abi_version = TP_DEVICE_ABI,
    .ops_size = sizeof(tp_device_ops_t),
    .name = "cuda",
    .kind = TP_DEVICE_CUDA,
    .init = tp_cuda_init,
    .mem_query = tp_cuda_mem_query,
    .copy = cuda_copy,
    .reduce = tp_cuda_reduce,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .stream_create = cuda_stream_create,
    .stream_adopt = cuda_stream_adopt,
    .stream_destroy = cuda_stream_destroy,
    .stream_sync = cuda_stream_sync,
    .stream_write64 = cuda_write64,
    .stream_wait64 = cuda_wait64,
    .stream_capturing = cuda_capturing,
    .event_record = cuda_event_record,
    .stream_wait = cuda_stream_wait_event,
    .event_sync = cuda_event_sync,
    .event_release = cuda_event_release,
    .stream_bus_id = cuda_bus_id,
};
