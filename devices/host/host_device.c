/* host_device.c: the host device: every pointer is host memory, copies are memmove, reductions run on the CPU. */
#include <string.h>

#include "host_reduce.h"

static int host_mem_query(const void *ptr, tp_mem_type_t *type)
{
    (void)ptr;
    *type = TP_MEM_HOST;
    return 1;
}

/* Host work is done when the call returns: a stream has nothing to order. */
static tp_status_t host_copy(void *dst, const void *src, size_t len, tp_stream_t *stream)
{
    (void)stream;
    if (len > 0 && dst != src) memmove(dst, src, len);
    return TP_OK;
}

static tp_status_t host_reduce(tp_dtype_t dtype, tp_op_t op, void *dst, const void *const *srcs, int n, size_t count,
                               tp_stream_t *stream)
{
    (void)stream;
    tp_reduce_n(dtype, op, dst, srcs, n, count);
    return TP_OK;
}

const tp_device_ops_t tp_host_device_ops = {
    .abi_version = TP_DEVICE_ABI,
    .ops_size = sizeof(tp_device_ops_t),
    .name = "host",
    .mem_query = host_mem_query,
    .copy = host_copy,
    .reduce = host_reduce,
    .event_record = tp_device_unsupported_stream,
    .stream_wait = tp_device_unsupported_stream,
    .event_sync = tp_device_unsupported_stream,
    .event_release = tp_device_unsupported_stream,
};
