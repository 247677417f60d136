/* host_device.c: the host device: every pointer is host memory, copies are memmove, reductions run on the CPU; with a
 * host stream they are queued there (host_stream.c). */
#include <stdlib.h>
#include <string.h>

#include "host_reduce.h"
#include "host_stream.h"

static int host_mem_query(const void *ptr, tp_mem_type_t *type)
{
    (void)ptr;
    *type = TP_MEM_HOST;
    return 1;
}

static tp_status_t host_copy(void *dst, const void *src, size_t len, tp_stream_t *stream)
{
    if (stream != NULL) return tp_host_stream_copy(stream, dst, src, len);
    if (len > 0 && dst != src) memmove(dst, src, len);
    return TP_OK;
}

static tp_status_t host_reduce(tp_dtype_t dtype, tp_op_t op, void *dst, const void *const *srcs, int n, size_t count,
                               tp_stream_t *stream)
{
    if (stream != NULL) return tp_host_stream_reduce(stream, dtype, op, dst, srcs, n, count);
    tp_reduce_n(dtype, op, dst, srcs, n, count);
    return TP_OK;
}

/* Host memory is its own device address: *dev is *host. */
static tp_status_t host_alloc(size_t len, void **host, void **dev)
{
    size_t rounded = (len + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded > 0 ? rounded : 64);
    if (p == NULL) {
        tp_log(TP_LOG_ERROR, "host", "host_alloc: out of memory for %zu bytes", len);
        return TP_ERR_NO_MEMORY;
    }
    memset(p, 0, rounded);
    *host = *dev = p;
    return TP_OK;
}

static void host_free(void *host) { free(host); }

const tp_device_ops_t tp_host_device_ops = {
    .abi_version = TP_DEVICE_ABI,
    .ops_size = sizeof(tp_device_ops_t),
    .name = "host",
    .kind = TP_DEVICE_HOST,
    .init = tp_device_init_none,
    .mem_query = host_mem_query,
    .copy = host_copy,
    .reduce = host_reduce,
    .host_alloc = host_alloc,
    .host_free = host_free,
    .stream_create = tp_host_stream_create,
    .stream_adopt = tp_host_stream_adopt,
    .stream_destroy = tp_host_stream_destroy,
    .stream_sync = tp_host_stream_sync,
    .stream_write64 = tp_host_stream_write64,
    .stream_wait64 = tp_host_stream_wait64,
    .stream_capturing = tp_host_stream_capturing,
    .event_record = tp_host_event_record,
    .stream_wait = tp_host_stream_wait_event,
    .event_sync = tp_host_event_sync,
    .event_release = tp_host_event_release,
    .stream_bus_id = tp_device_unsupported_bus_id,
};
