/* coll_api.c: the public collective and point-to-point calls: argument checks, one rank, then the algorithms. */
#include <stdint.h>
#include <string.h>

#include "coll_internal.h"
#include "coll_reduce.h"

size_t tp_dtype_size(tp_dtype_t dtype)
{
    switch (dtype) {
    case TP_BYTES: return 1;
    case TP_F32: return 4;
    case TP_F64: return 8;
    case TP_BF16: return 2;
    case TP_F16: return 2;
    case TP_I32: return 4;
    case TP_I64: return 8;
    }
    return 0;
}

/* Checks what every call shares; *es gets the element size. */
static tp_status_t enter(tp_comm_t *comm, const char *fn, tp_dtype_t dtype, size_t count, size_t slots,
                         const void *a, const void *b, tp_stream_t *stream, size_t *es)
{
    if (comm == NULL || comm->coll_state == NULL) {
        tp_log(TP_LOG_ERROR, "coll", "%s: comm is NULL or finalized", fn);
        return comm == NULL ? TP_ERR_INVALID : TP_ERR_STATE;
    }
    coll_state_t *cs = comm->coll_state;
    if (cs->failed != TP_OK) {
        tp_log(TP_LOG_ERROR, "coll", "%s: comm %u failed an earlier call (%s)", fn, comm->comm_id,
               tp_status_string(cs->failed));
        return cs->failed;
    }
    if (stream != NULL) {
        tp_log(TP_LOG_ERROR, "coll",
               "%s: stream must be NULL: this libtp has no device streams (buffers are host memory)", fn);
        return TP_ERR_UNSUPPORTED;
    }
    *es = tp_dtype_size(dtype);
    if (*es == 0) {
        tp_log(TP_LOG_ERROR, "coll", "%s: unknown type %d", fn, (int)dtype);
        return TP_ERR_INVALID;
    }
    if (slots == 0 || count > SIZE_MAX / 2 / *es / slots) {
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

static tp_status_t finish(coll_call_t *c, tp_status_t s) { return s == TP_OK ? s : coll_fail(c, s); }

tp_status_t tp_barrier(tp_comm_t *comm)
{
    size_t es;
    char dummy;
    tp_status_t s = enter(comm, "tp_barrier", TP_BYTES, 0, 1, &dummy, &dummy, NULL, &es);
    if (s != TP_OK || comm->size == 1) return s;
    coll_call_t c;
    coll_begin(&c, comm, TP_COLL_BARRIER, TP_BYTES, TP_SUM, 0, 0);
    return finish(&c, coll_barrier(&c));
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
    coll_call_t c;
    coll_begin(&c, comm, TP_COLL_BROADCAST, dtype, TP_SUM, count, root);
    return finish(&c, coll_broadcast(&c, buf, count * es, root));
}

/* all_gather and all_gatherv: own block into place (none when already there), then dissemination when what comes in
 * is small, else every peer at once. */
static tp_status_t gather_blocks(coll_call_t *c, const void *send, void *recv, const size_t *counts, size_t count,
                                 size_t es)
{
    int me = c->comm->rank, n = c->comm->size;
    coll_state_t *cs = c->cs;
    size_t off = 0;
    for (int p = 0; p < n; p++) {
        cs->rlen[p] = (counts != NULL ? counts[p] : count) * es;
        cs->rbuf[p] = (uint8_t *)recv + off;
        off += cs->rlen[p];
    }
    uint8_t *mine = cs->rbuf[me];
    if (cs->rlen[me] > 0 && mine != send) memmove(mine, send, cs->rlen[me]);
    if (n == 1) return TP_OK;
    if (off - off / (size_t)n <= COLL_SMALL_BYTES) { /* the same choice on every rank, whatever its own count */
        coll_dissem_t m = {.blocks = cs->rbuf, .lens = cs->rlen};
        return coll_dissem(c, &m);
    }
    for (int p = 0; p < n; p++) {
        cs->sbuf[p] = mine;
        cs->slen[p] = cs->rlen[me];
    }
    return coll_pairwise(c, -1, cs->sbuf, cs->slen, cs->rbuf, cs->rlen, 0);
}

tp_status_t tp_all_gather(tp_comm_t *comm, const void *send, void *recv, size_t count, tp_dtype_t dtype,
                          tp_stream_t *stream)
{
    size_t es;
    tp_status_t s = enter(comm, "tp_all_gather", dtype, count, (size_t)comm->size, send, recv, stream, &es);
    if (s != TP_OK) return s;
    coll_call_t c;
    coll_begin(&c, comm, TP_COLL_ALL_GATHER, dtype, TP_SUM, count, 0);
    return finish(&c, gather_blocks(&c, send, recv, NULL, count, es));
}

tp_status_t tp_all_gatherv(tp_comm_t *comm, const void *send, void *recv, const size_t *counts, tp_dtype_t dtype,
                           tp_stream_t *stream)
{
    size_t es, total = 0;
    uint32_t hash = 2166136261u; /* FNV-1a of the counts: ranks with other counts disagree on it */
    if (comm != NULL && counts == NULL) return TP_ERR_INVALID;
    for (int p = 0; comm != NULL && p < comm->size; p++) {
        if (counts[p] > SIZE_MAX / 4 - total) return TP_ERR_INVALID;
        total += counts[p];
        for (int b = 0; b < 8; b++) hash = (hash ^ (uint8_t)(counts[p] >> (8 * b))) * 16777619u;
    }
    tp_status_t s = enter(comm, "tp_all_gatherv", dtype, total, 1, total ? send : recv, recv, stream, &es);
    if (s != TP_OK) return s;
    if (counts[comm->rank] > 0 && send == NULL) return TP_ERR_INVALID;
    coll_call_t c;
    coll_begin(&c, comm, TP_COLL_ALL_GATHERV, dtype, TP_SUM, total, (int)(hash & 0x7fffffff));
    return finish(&c, gather_blocks(&c, send, recv, counts, 0, es));
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
    coll_call_t c;
    coll_begin(&c, comm, TP_COLL_ALL_REDUCE, dtype, op, count, 0);
    if (comm->size == 1) {
        c.cs->srcs[0] = send;
        tp_reduce_n(dtype, op, recv, c.cs->srcs, 1, count);
        return TP_OK;
    }
    return finish(&c, coll_all_reduce(&c, send, recv, count));
}

tp_status_t tp_reduce_scatter(tp_comm_t *comm, const void *send, void *recv, size_t count, tp_dtype_t dtype,
                              tp_op_t op, tp_stream_t *stream)
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
    coll_call_t c;
    coll_begin(&c, comm, TP_COLL_REDUCE_SCATTER, dtype, op, count, 0);
    if (comm->size == 1) {
        c.cs->srcs[0] = send;
        tp_reduce_n(dtype, op, recv, c.cs->srcs, 1, count);
        return TP_OK;
    }
    return finish(&c, coll_reduce_scatter(&c, send, recv, count));
}

tp_status_t tp_all_to_all(tp_comm_t *comm, const void *send, void *recv, size_t count, tp_dtype_t dtype,
                          tp_stream_t *stream)
{
    size_t es;
    tp_status_t s = enter(comm, "tp_all_to_all", dtype, count, (size_t)comm->size, send, recv, stream, &es);
    if (s != TP_OK) return s;
    size_t b = count * es, all = b * (size_t)comm->size;
    int in_place = send == recv;
    if (!in_place && coll_overlap(send, all, recv, all)) {
        tp_log(TP_LOG_ERROR, "coll", "tp_all_to_all: send and recv overlap without being the same buffer");
        return TP_ERR_INVALID;
    }
    coll_call_t c;
    coll_begin(&c, comm, TP_COLL_ALL_TO_ALL, dtype, TP_SUM, count, 0);
    coll_state_t *cs = comm->coll_state;
    for (int p = 0; p < comm->size; p++) {
        cs->sbuf[p] = (uint8_t *)send + (size_t)p * b;
        cs->rbuf[p] = (uint8_t *)recv + (size_t)p * b;
        cs->slen[p] = cs->rlen[p] = b;
    }
    if (!in_place && b > 0) memcpy(cs->rbuf[comm->rank], cs->sbuf[comm->rank], b);
    if (comm->size == 1) return TP_OK;
    return finish(&c, coll_pairwise(&c, -1, cs->sbuf, cs->slen, cs->rbuf, cs->rlen, in_place));
}
