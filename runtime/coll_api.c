/* coll_api.c: the public collective calls: argument checks, then the provider that takes the buffers' memory. */
#include <stdint.h>

#include "coll_dispatch.h"
#include "coll_internal.h"

/* Checks what every call shares; *es gets the element size. */
static tp_status_t enter(tp_comm_t *comm, const char *fn, tp_dtype_t dtype, size_t count, size_t slots, const void *a,
                         const void *b, tp_stream_t *stream, size_t *es)
{
    if (comm == NULL || comm->coll_state == NULL) {
        tp_log(TP_LOG_ERROR, "coll", "%s: comm is NULL or finalized", fn);
        return comm == NULL ? TP_ERR_INVALID : TP_ERR_STATE;
    }
    tp_status_t s = tp_coll_usable(comm, fn, stream);
    if (s != TP_OK) return s;
    *es = tp_dtype_size(dtype);
    if (*es == 0) {
        tp_log(TP_LOG_ERROR, "coll", "%s: unknown type %d", fn, (int)dtype);
        return TP_ERR_INVALID;
    }
    size_t bytes;
    if (slots == 0 || __builtin_mul_overflow(count, *es, &bytes) || __builtin_mul_overflow(bytes, slots, &bytes) ||
        bytes > SIZE_MAX / 2) { /* no division: a small call passes here every time */
        tp_log(TP_LOG_ERROR, "coll", "%s: count %zu is too large", fn, count);
        return TP_ERR_INVALID;
    }
    if (count > 0 && (a == NULL || b == NULL)) {
        tp_log(TP_LOG_ERROR, "coll", "%s: a buffer is NULL with count %zu", fn, count);
        return TP_ERR_INVALID;
    }
    return TP_OK;
}

static tp_status_t check_op(const char *fn, tp_dtype_t dtype, tp_op_t op)
{
    if (tp_reduce_supported(dtype, op)) return TP_OK;
    tp_log(TP_LOG_ERROR, "coll", "%s: %s cannot reduce %s", fn, tp_dtype_name(dtype), tp_op_name(op));
    return TP_ERR_INVALID;
}

tp_status_t tp_barrier(tp_comm_t *comm)
{
    size_t es;
    char dummy;
    tp_status_t s = enter(comm, "tp_barrier", TP_BYTES, 0, 1, &dummy, &dummy, NULL, &es);
    if (s != TP_OK || comm->size == 1) return s;
    tp_coll_args_t a = {.call = TP_CALL_BARRIER, .dtype = TP_BYTES};
    return tp_coll_dispatch(comm, "tp_barrier", &a, NULL, NULL);
}

tp_status_t tp_broadcast(tp_comm_t *comm, void *buf, size_t count, tp_dtype_t dtype, int root, tp_stream_t *stream)
{
    size_t es;
    tp_status_t s = enter(comm, "tp_broadcast", dtype, count, 1, buf, buf, stream, &es);
    if (s != TP_OK) return s;
    if (root < 0 || root >= comm->size) {
        tp_log(TP_LOG_ERROR, "coll", "tp_broadcast: root %d is not a rank of this comm (size %d)", root, comm->size);
        return TP_ERR_INVALID;
    }
    if (comm->size == 1) return TP_OK;
    tp_coll_args_t a = {
        .call = TP_CALL_BROADCAST, .recv = buf, .count = count, .dtype = dtype, .peer = root, .stream = stream};
    return tp_coll_dispatch(comm, "tp_broadcast", &a, buf, NULL);
}

tp_status_t tp_all_gather(tp_comm_t *comm, const void *send, void *recv, size_t count, tp_dtype_t dtype,
                          tp_stream_t *stream)
{
    size_t es;
    tp_status_t s = enter(comm, "tp_all_gather", dtype, count, (size_t)comm->size, send, recv, stream, &es);
    if (s != TP_OK) return s;
    tp_coll_args_t a = {
        .call = TP_CALL_ALL_GATHER, .send = send, .recv = recv, .count = count, .dtype = dtype, .stream = stream};
    return tp_coll_dispatch(comm, "tp_all_gather", &a, send, recv);
}

tp_status_t tp_all_gatherv(tp_comm_t *comm, const void *send, void *recv, const size_t *counts, tp_dtype_t dtype,
                           tp_stream_t *stream)
{
    size_t es, total = 0;
    if (comm != NULL && counts == NULL) return TP_ERR_INVALID;
    for (int p = 0; comm != NULL && p < comm->size; p++) {
        if (counts[p] > SIZE_MAX / 4 - total) return TP_ERR_INVALID;
        total += counts[p];
    }
    tp_status_t s = enter(comm, "tp_all_gatherv", dtype, total, 1, total ? send : recv, recv, stream, &es);
    if (s != TP_OK) return s;
    if (counts[comm->rank] > 0 && send == NULL) return TP_ERR_INVALID;
    tp_coll_args_t a = {.call = TP_CALL_ALL_GATHERV,
                        .send = send,
                        .recv = recv,
                        .count = total,
                        .counts = counts,
                        .dtype = dtype,
                        .stream = stream};
    return tp_coll_dispatch(comm, "tp_all_gatherv", &a, counts[comm->rank] > 0 ? send : NULL, total ? recv : NULL);
}

tp_status_t tp_all_reduce(tp_comm_t *comm, const void *send, void *recv, size_t count, tp_dtype_t dtype, tp_op_t op,
                          tp_stream_t *stream)
{
    size_t es;
    tp_status_t s = enter(comm, "tp_all_reduce", dtype, count, 1, send, recv, stream, &es);
    if (s == TP_OK) s = check_op("tp_all_reduce", dtype, op);
    if (s != TP_OK) return s;
    if (send != recv && coll_overlap(send, count * es, recv, count * es)) {
        tp_log(TP_LOG_ERROR, "coll", "tp_all_reduce: send and recv overlap without being the same buffer");
        return TP_ERR_INVALID;
    }
    tp_coll_args_t a = {.call = TP_CALL_ALL_REDUCE,
                        .send = send,
                        .recv = recv,
                        .count = count,
                        .dtype = dtype,
                        .op = op,
                        .stream = stream};
    return tp_coll_dispatch(comm, "tp_all_reduce", &a, send, recv);
}

tp_status_t tp_reduce_scatter(tp_comm_t *comm, const void *send, void *recv, size_t count, tp_dtype_t dtype, tp_op_t op,
                              tp_stream_t *stream)
{
    size_t es;
    tp_status_t s = enter(comm, "tp_reduce_scatter", dtype, count, (size_t)comm->size, send, recv, stream, &es);
    if (s == TP_OK) s = check_op("tp_reduce_scatter", dtype, op);
    if (s != TP_OK) return s;
    const uint8_t *own = (const uint8_t *)send + (size_t)comm->rank * count * es;
    if ((const void *)own != recv && coll_overlap(send, (size_t)comm->size * count * es, recv, count * es)) {
        tp_log(TP_LOG_ERROR, "coll", "tp_reduce_scatter: recv overlaps send other than at this rank's block");
        return TP_ERR_INVALID;
    }
    tp_coll_args_t a = {.call = TP_CALL_REDUCE_SCATTER,
                        .send = send,
                        .recv = recv,
                        .count = count,
                        .dtype = dtype,
                        .op = op,
                        .stream = stream};
    return tp_coll_dispatch(comm, "tp_reduce_scatter", &a, send, recv);
}

tp_status_t tp_all_to_all(tp_comm_t *comm, const void *send, void *recv, size_t count, tp_dtype_t dtype,
                          tp_stream_t *stream)
{
    size_t es;
    tp_status_t s = enter(comm, "tp_all_to_all", dtype, count, (size_t)comm->size, send, recv, stream, &es);
    if (s != TP_OK) return s;
    size_t all = count * es * (size_t)comm->size;
    if (send != recv && coll_overlap(send, all, recv, all)) {
        tp_log(TP_LOG_ERROR, "coll", "tp_all_to_all: send and recv overlap without being the same buffer");
        return TP_ERR_INVALID;
    }
    tp_coll_args_t a = {
        .call = TP_CALL_ALL_TO_ALL, .send = send, .recv = recv, .count = count, .dtype = dtype, .stream = stream};
    return tp_coll_dispatch(comm, "tp_all_to_all", &a, send, recv);
}
