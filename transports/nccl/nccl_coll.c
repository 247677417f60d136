/*
 * nccl_coll.c: tp.h's calls on CUDA buffers as NCCL calls queued on the caller's stream: NCCL's own collectives
 * where they give libtp's result, grouped send/recv where NCCL has no call, and rank-order sums (exact mode) as a
 * reduce-scatter by send/recv, the CUDA device's rank-order reduce, then an all-gather.
 */
#include <stdint.h>
#include <stdlib.h>

#include "nccl_provider.h"

void *nccl_native_stream(const tp_coll_args_t *a) { return a->stream->native; }

static nccl_dtype_t dtype_of(tp_dtype_t t)
{
    static const nccl_dtype_t map[] = {
        [TP_BYTES] = NCCL_UINT8, [TP_F32] = NCCL_F32,   [TP_F64] = NCCL_F64,  [TP_BF16] = NCCL_BF16,
        [TP_F16] = NCCL_F16,     [TP_I32] = NCCL_INT32, [TP_I64] = NCCL_INT64};
    return map[t];
}

static nccl_redop_t op_of(tp_op_t op) { return op == TP_MAX ? NCCL_MAX : op == TP_MIN ? NCCL_MIN : NCCL_SUM; }

/*
 * Where libtp folds the terms itself: a float sum at 3+ ranks (NCCL's order is not the rank order), and float max
 * and min at 2+ (NCCL's take a number over a NaN and either zero; libtp's the NaN and the first). Integer sums wrap
 * the same way in any order.
 */
static int needs_exact(const nccl_state_t *st, const tp_coll_args_t *a)
{
    int fl = a->dtype == TP_F32 || a->dtype == TP_F64 || a->dtype == TP_BF16 || a->dtype == TP_F16;
    if (!fl || st->nccl_order || st->size < 2) return 0;
    return a->op != TP_SUM || st->size >= 3;
}

static int overlap(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return alen > 0 && blen > 0 && x < y + blen && y < x + alen;
}

/* What every call checks first: the comm's communicator (a CUDA stream the dispatcher has checked). */
static tp_status_t begin(nccl_state_t *st, const char *fn, const tp_coll_args_t *a, int collective)
{
    return collective ? nccl_ready(st, fn, a) : TP_OK;
}

/* Runs one NCCL call (or a group) under the calls lock, then checks the communicator's state: a tp_status_t. */
#define NCCL_RUN(st, fn, nc, expr) (nccl_lock_calls(), nccl_check((st), (fn), (nc), unlocked(expr)))

static nccl_result_t unlocked(nccl_result_t r)
{
    nccl_unlock_calls();
    return r;
}

/* A rank's part of count elements split n ways: the first count % n parts have one more. */
static void part(size_t count, int n, int p, size_t *off, size_t *len)
{
    size_t base = count / (size_t)n, rem = count % (size_t)n, q = (size_t)p;
    *off = q * base + (q < rem ? q : rem);
    *len = base + (q < rem);
}

/* Sends sends[p] (slen[p] bytes) to and receives into recvs[p] (rlen[p] bytes) from every other rank, as one group. */
static nccl_result_t exchange_all(const nccl_state_t *st, nccl_comm_t nc, void *stream, const uint8_t *const *sends,
                                  const size_t *slen, uint8_t *const *recvs, const size_t *rlen)
{
    const nccl_lib_t *l = st->lib;
    nccl_result_t r = l->group_start();
    for (int p = 0; r == NCCL_OK && p < st->size; p++) {
        if (p == st->rank) continue;
        if (slen[p] > 0) r = l->send(sends[p], slen[p], NCCL_UINT8, p, nc, stream);
        if (r == NCCL_OK && rlen[p] > 0) r = l->recv(recvs[p], rlen[p], NCCL_UINT8, p, nc, stream);
    }
    nccl_result_t e = l->group_end();
    return r != NCCL_OK ? r : e;
}

typedef struct plan {
    const uint8_t **sends;
    uint8_t **recvs;
    size_t *slen, *rlen;
    const void **srcs;
} plan_t;

static tp_status_t plan_alloc(plan_t *p, int n)
{
    p->sends = calloc((size_t)n, sizeof(*p->sends));
    p->recvs = calloc((size_t)n, sizeof(*p->recvs));
    p->slen = calloc((size_t)n, sizeof(size_t));
    p->rlen = calloc((size_t)n, sizeof(size_t));
    p->srcs = calloc((size_t)n, sizeof(*p->srcs));
    return p->sends && p->recvs && p->slen && p->rlen && p->srcs ? TP_OK : TP_ERR_NO_MEMORY;
}

static tp_status_t plan_free(plan_t *p, tp_status_t s)
{
    free(p->sends);
    free(p->recvs);
    free(p->slen);
    free(p->rlen);
    free(p->srcs);
    return s;
}

/*
 * Rank-order reduce-scatter of blocks: block q of send (blen[q] bytes at boff[q]) goes to rank q; this rank's
 * terms land in scratch, then the device folds them rank 0 first into dst on the call's stream.
 */
static tp_status_t exact_scatter(nccl_state_t *st, const char *fn, const tp_coll_args_t *a, plan_t *pl,
                                 const size_t *boff, const size_t *blen, void *dst)
{
    int me = st->rank, n = st->size;
    size_t es = tp_dtype_size(a->dtype), mine = blen[me];
    uint8_t *scratch = NULL;
    tp_status_t s = nccl_scratch(st, fn, a, (size_t)n * mine, (void **)&scratch);
    if (s != TP_OK) return s;
    void *stream = nccl_native_stream(a);
    for (int p = 0; p < n; p++) {
        pl->sends[p] = (const uint8_t *)a->send + boff[p];
        pl->slen[p] = blen[p];
        pl->recvs[p] = scratch + (size_t)p * mine;
        pl->rlen[p] = mine;
        pl->srcs[p] = p == me ? (const void *)pl->sends[me] : (const void *)pl->recvs[p];
    }
    s = NCCL_RUN(st, fn, st->nc, exchange_all(st, st->nc, stream, pl->sends, pl->slen, pl->recvs, pl->rlen));
    if (s == TP_OK && mine > 0) s = a->device->reduce(a->dtype, a->op, dst, pl->srcs, n, mine / es, a->stream);
    if (s != TP_OK) return s;
    return nccl_scratch_done(st, a);
}

static tp_status_t exact_all_reduce(nccl_state_t *st, const char *fn, const tp_coll_args_t *a)
{
    int me = st->rank, n = st->size;
    size_t es = tp_dtype_size(a->dtype);
    plan_t pl = {0};
    size_t *boff = calloc((size_t)n, sizeof(size_t)), *blen = calloc((size_t)n, sizeof(size_t));
    tp_status_t s = boff && blen ? plan_alloc(&pl, n) : TP_ERR_NO_MEMORY;
    for (int p = 0; s == TP_OK && p < n; p++) {
        part(a->count, n, p, &boff[p], &blen[p]);
        boff[p] *= es;
        blen[p] *= es;
    }
    uint8_t *recv = a->recv;
    if (s == TP_OK) s = exact_scatter(st, fn, a, &pl, boff, blen, recv + boff[me]);
    if (s == TP_OK && a->count % (size_t)n == 0) { /* equal parts: NCCL's in-place all-gather */
        void *stream = nccl_native_stream(a);
        s = NCCL_RUN(st, fn, st->nc, st->lib->all_gather(recv + boff[me], recv, blen[me], NCCL_UINT8, st->nc, stream));
    } else if (s == TP_OK) {
        for (int p = 0; p < n; p++) {
            pl.sends[p] = recv + boff[me];
            pl.slen[p] = blen[me];
            pl.recvs[p] = recv + boff[p];
            pl.rlen[p] = blen[p];
        }
        s = NCCL_RUN(st, fn, st->nc,
                     exchange_all(st, st->nc, nccl_native_stream(a), pl.sends, pl.slen, pl.recvs, pl.rlen));
    }
    free(boff);
    free(blen);
    return plan_free(&pl, s);
}

static tp_status_t nccl_all_reduce(void *state, const tp_coll_args_t *a)
{
    nccl_state_t *st = state;
    const char *fn = "tp_all_reduce";
    tp_status_t s = begin(st, fn, a, 1);
    if (s != TP_OK || a->count == 0) return s;
    if (needs_exact(st, a)) return exact_all_reduce(st, fn, a);
    return NCCL_RUN(st, fn, st->nc,
                    st->lib->all_reduce(a->send, a->recv, a->count, dtype_of(a->dtype), op_of(a->op), st->nc,
                                        nccl_native_stream(a)));
}

static tp_status_t nccl_reduce_scatter(void *state, const tp_coll_args_t *a)
{
    nccl_state_t *st = state;
    const char *fn = "tp_reduce_scatter";
    tp_status_t s = begin(st, fn, a, 1);
    if (s != TP_OK || a->count == 0) return s;
    if (!needs_exact(st, a)) {
        return NCCL_RUN(st, fn, st->nc,
                        st->lib->reduce_scatter(a->send, a->recv, a->count, dtype_of(a->dtype), op_of(a->op), st->nc,
                                                nccl_native_stream(a)));
    }
    int n = st->size;
    size_t b = a->count * tp_dtype_size(a->dtype);
    plan_t pl = {0};
    size_t *boff = calloc((size_t)n, sizeof(size_t)), *blen = calloc((size_t)n, sizeof(size_t));
    s = boff && blen ? plan_alloc(&pl, n) : TP_ERR_NO_MEMORY;
    for (int p = 0; s == TP_OK && p < n; p++) {
        boff[p] = (size_t)p * b;
        blen[p] = b;
    }
    if (s == TP_OK) s = exact_scatter(st, fn, a, &pl, boff, blen, a->recv);
    free(boff);
    free(blen);
    return plan_free(&pl, s);
}

static tp_status_t nccl_broadcast(void *state, const tp_coll_args_t *a)
{
    nccl_state_t *st = state;
    const char *fn = "tp_broadcast";
    tp_status_t s = begin(st, fn, a, 1);
    size_t b = a->count * tp_dtype_size(a->dtype);
    if (s != TP_OK || b == 0) return s;
    return NCCL_RUN(st, fn, st->nc,
                    st->lib->broadcast(a->recv, a->recv, b, NCCL_UINT8, a->peer, st->nc, nccl_native_stream(a)));
}

/* The call's send block where NCCL may read it while recv is written: in scratch when it overlaps recv elsewhere. */
static tp_status_t own_block(nccl_state_t *st, const char *fn, const tp_coll_args_t *a, size_t b, const void *at,
                             size_t recv_len, const void **src)
{
    *src = a->send;
    if (a->send == at || !overlap(a->send, b, a->recv, recv_len)) return TP_OK;
    void *scratch;
    tp_status_t s = nccl_scratch(st, fn, a, b, &scratch);
    if (s == TP_OK) s = a->device->copy(scratch, a->send, b, a->stream);
    *src = scratch;
    return s;
}

static tp_status_t nccl_all_gather(void *state, const tp_coll_args_t *a)
{
    nccl_state_t *st = state;
    const char *fn = "tp_all_gather";
    tp_status_t s = begin(st, fn, a, 1);
    size_t b = a->count * tp_dtype_size(a->dtype);
    if (s != TP_OK || b == 0) return s;
    const void *src;
    uint8_t *mine = (uint8_t *)a->recv + (size_t)st->rank * b;
    s = own_block(st, fn, a, b, mine, b * (size_t)st->size, &src);
    if (s != TP_OK) return s;
    s = NCCL_RUN(st, fn, st->nc, st->lib->all_gather(src, a->recv, b, NCCL_UINT8, st->nc, nccl_native_stream(a)));
    return s == TP_OK && src != a->send ? nccl_scratch_done(st, a) : s;
}

static tp_status_t nccl_all_gatherv(void *state, const tp_coll_args_t *a)
{
    nccl_state_t *st = state;
    const char *fn = "tp_all_gatherv";
    tp_status_t s = begin(st, fn, a, 1);
    if (s != TP_OK || a->count == 0) return s;
    int me = st->rank, n = st->size;
    size_t es = tp_dtype_size(a->dtype), off = 0;
    plan_t pl = {0};
    if ((s = plan_alloc(&pl, n)) != TP_OK) return plan_free(&pl, s);
    for (int p = 0; p < n; p++) {
        pl.recvs[p] = (uint8_t *)a->recv + off;
        pl.rlen[p] = a->counts[p] * es;
        off += pl.rlen[p];
    }
    const void *src = a->send;
    size_t b = pl.rlen[me];
    if (b > 0) s = own_block(st, fn, a, b, pl.recvs[me], off, &src);
    if (s == TP_OK && b > 0 && src != pl.recvs[me]) s = a->device->copy(pl.recvs[me], src, b, a->stream);
    for (int p = 0; p < n; p++) {
        pl.sends[p] = src;
        pl.slen[p] = b;
    }
    if (s == TP_OK)
        s = NCCL_RUN(st, fn, st->nc,
                     exchange_all(st, st->nc, nccl_native_stream(a), pl.sends, pl.slen, pl.recvs, pl.rlen));
    if (s == TP_OK && b > 0 && src != a->send) s = nccl_scratch_done(st, a);
    return plan_free(&pl, s);
}

static tp_status_t nccl_all_to_all(void *state, const tp_coll_args_t *a)
{
    nccl_state_t *st = state;
    const char *fn = "tp_all_to_all";
    tp_status_t s = begin(st, fn, a, 1);
    size_t b = a->count * tp_dtype_size(a->dtype), all = b * (size_t)st->size;
    if (s != TP_OK || b == 0) return s;
    const uint8_t *src = a->send;
    if (a->send == a->recv) { /* in place: every block is read and written, so the sends go from a copy */
        void *scratch;
        s = nccl_scratch(st, fn, a, all, &scratch);
        if (s == TP_OK) s = a->device->copy(scratch, a->send, all, a->stream);
        if (s != TP_OK) return s;
        src = scratch;
    }
    plan_t pl = {0};
    if (s == TP_OK) s = plan_alloc(&pl, st->size);
    for (int p = 0; s == TP_OK && p < st->size; p++) {
        pl.sends[p] = src + (size_t)p * b;
        pl.recvs[p] = (uint8_t *)a->recv + (size_t)p * b;
        pl.slen[p] = pl.rlen[p] = b;
    }
    int me = st->rank;
    if (s == TP_OK && pl.sends[me] != pl.recvs[me]) s = a->device->copy(pl.recvs[me], pl.sends[me], b, a->stream);
    if (s == TP_OK)
        s = NCCL_RUN(st, fn, st->nc,
                     exchange_all(st, st->nc, nccl_native_stream(a), pl.sends, pl.slen, pl.recvs, pl.rlen));
    if (s == TP_OK && src != a->send) s = nccl_scratch_done(st, a);
    return plan_free(&pl, s);
}

/* send, recv and exchange: the pair's communicator (the comm's once it has one); both sides of the call come here. */
static tp_status_t p2p(nccl_state_t *st, const char *fn, const tp_coll_args_t *a, int sends, int recvs)
{
    size_t b = a->count * tp_dtype_size(a->dtype);
    tp_status_t s = begin(st, fn, a, 0);
    if (s != TP_OK || b == 0) return s;
    if (a->peer == st->rank) /* only tp_exchange may name itself */
        return a->send != a->recv ? a->device->copy(a->recv, a->send, b, a->stream) : TP_OK;
    nccl_comm_t nc;
    int peer;
    if ((s = nccl_pair(st, fn, a, &nc, &peer)) != TP_OK) return s;
    const void *src = a->send;
    if (sends && recvs && a->send == a->recv) { /* in place: what goes out is copied before it is overwritten */
        void *scratch;
        s = nccl_scratch(st, fn, a, b, &scratch);
        if (s == TP_OK) s = a->device->copy(scratch, a->send, b, a->stream);
        if (s != TP_OK) return s;
        src = scratch;
    }
    void *stream = nccl_native_stream(a);
    const nccl_lib_t *l = st->lib;
    nccl_lock_calls();
    nccl_result_t r = l->group_start();
    if (r == NCCL_OK && sends) r = l->send(src, b, NCCL_UINT8, peer, nc, stream);
    if (r == NCCL_OK && recvs) r = l->recv(a->recv, b, NCCL_UINT8, peer, nc, stream);
    nccl_result_t e = l->group_end();
    nccl_unlock_calls();
    s = nccl_check(st, fn, nc, r != NCCL_OK ? r : e);
    if (s == TP_OK && src != a->send) s = nccl_scratch_done(st, a);
    return s;
}

static tp_status_t nccl_send(void *state, const tp_coll_args_t *a) { return p2p(state, "tp_send", a, 1, 0); }
static tp_status_t nccl_recv(void *state, const tp_coll_args_t *a) { return p2p(state, "tp_recv", a, 0, 1); }
static tp_status_t nccl_exchange(void *state, const tp_coll_args_t *a) { return p2p(state, "tp_exchange", a, 1, 1); }

const tp_coll_ops_t tp_nccl_coll_ops = {
    .abi_version = TP_COLL_ABI,
    .ops_size = sizeof(tp_coll_ops_t),
    .name = "nccl",
    .mem_types = TP_MEM_BIT(TP_MEM_CUDA),
    .calls = TP_CALLS_ALL & ~TP_CALL_BIT(TP_CALL_BARRIER), /* a barrier has no buffers: the host engine's */
    .streams = 1,
    .comm_create = nccl_comm_create,
    .comm_destroy = nccl_comm_destroy,
    .barrier = tp_coll_unsupported,
    .broadcast = nccl_broadcast,
    .all_gather = nccl_all_gather,
    .all_gatherv = nccl_all_gatherv,
    .all_reduce = nccl_all_reduce,
    .reduce_scatter = nccl_reduce_scatter,
    .all_to_all = nccl_all_to_all,
    .send = nccl_send,
    .recv = nccl_recv,
    .exchange = nccl_exchange,
};
