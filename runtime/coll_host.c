/*
 * coll_host.c: the built-in host engine as a collective provider: per-comm state, and each call of tp.h from
 * checked arguments to the algorithms, copying and reducing only through the call's device.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_internal.h"

static void host_comm_destroy(void *state)
{
    coll_state_t *cs = state;
    if (cs == NULL) return;
    free(cs->pool);
    free(cs->send_seq);
    free(cs->recv_seq);
    free(cs->srcs);
    free(cs->xa);
    free(cs->xb);
    free(cs->next);
    free(cs->pieces);
    free(cs->sbuf);
    free(cs->rbuf);
    free(cs->slen);
    free(cs->rlen);
    free(cs->scratch);
    coll_hier_free(cs->hier);
    free(cs->order);
    free(cs->place);
    coll_pair_report(cs, cs->comm->rank);
    free(cs->pair_ways);
    free(cs);
}

static tp_status_t host_comm_create(tp_comm_t *comm, void **state)
{
    coll_state_t *cs = calloc(1, sizeof(*cs));
    if (cs == NULL) return TP_ERR_NO_MEMORY;
    size_t n = (size_t)comm->size;
    cs->comm = comm;
    cs->pool_len = (int)(n * COLL_XFERS_PER_PEER + 4);
    cs->slot_bytes = comm->world->part_bytes;
    cs->pool = calloc((size_t)cs->pool_len, sizeof(tp_xfer_t));
    cs->send_seq = calloc(n, sizeof(uint64_t));
    cs->recv_seq = calloc(n, sizeof(uint64_t));
    cs->srcs = calloc(n, sizeof(void *));
    cs->xa = calloc(n * COLL_WINDOW, sizeof(tp_xfer_t *));
    cs->xb = calloc(n, sizeof(tp_xfer_t *));
    cs->next = calloc(n, sizeof(size_t));
    cs->pieces = calloc(n, sizeof(uint8_t *));
    cs->sbuf = calloc(n, sizeof(void *));
    cs->rbuf = calloc(n, sizeof(void *));
    cs->slen = calloc(n, sizeof(size_t));
    cs->rlen = calloc(n, sizeof(size_t));
    /* malloc'd, not touched: pages are only committed when a large call uses them */
    cs->scratch = n > 1 ? malloc(coll_scratch_bytes(cs)) : NULL;
    cs->hier = coll_hier_find(comm);
    tp_status_t ring = coll_dissem_ring(comm, &cs->order, &cs->place);
    if (ring != TP_OK || cs->hier == NULL || cs->pool == NULL || cs->send_seq == NULL || cs->recv_seq == NULL ||
        cs->srcs == NULL || cs->xa == NULL || cs->xb == NULL || cs->next == NULL || cs->pieces == NULL ||
        cs->sbuf == NULL || cs->rbuf == NULL || cs->slen == NULL || cs->rlen == NULL ||
        (n > 1 && cs->scratch == NULL)) {
        host_comm_destroy(cs);
        return TP_ERR_NO_MEMORY;
    }
    *state = cs;
    return TP_OK;
}

static tp_status_t finish(coll_call_t *c, tp_status_t s) { return s == TP_OK ? s : coll_fail(c, s); }

static tp_status_t host_barrier(void *state, const tp_coll_args_t *a)
{
    coll_call_t c;
    coll_begin(&c, state, a->device, TP_COLL_BARRIER, TP_BYTES, TP_SUM, 0, 0);
    return finish(&c, coll_barrier(&c));
}

static tp_status_t host_broadcast(void *state, const tp_coll_args_t *a)
{
    coll_call_t c;
    coll_begin(&c, state, a->device, TP_COLL_BROADCAST, a->dtype, TP_SUM, a->count, a->peer);
    size_t bytes = a->count * tp_dtype_size(a->dtype);
    if (coll_hier_wanted(&c, bytes)) return finish(&c, coll_hier_broadcast(&c, a->recv, bytes, a->peer));
    return finish(&c, coll_broadcast(&c, a->recv, bytes, a->peer));
}

/* The small all_gather round the shared-CPU ring (coll_dissem_ring): the blocks land in scratch by place, this rank's
 * own goes from own, then each moves into its rank's place in rbuf. */
static tp_status_t gather_small_ring(coll_call_t *c, const void *own)
{
    coll_state_t *cs = c->cs;
    int me = c->comm->rank, n = c->comm->size;
    size_t at = 0;
    for (int v = 0; v < n; v++) {
        cs->sbuf[v] = cs->scratch + at;
        cs->slen[v] = cs->rlen[cs->order[v]];
        at += cs->slen[v];
    }
    coll_dissem_t m = {.blocks = cs->sbuf, .lens = cs->slen, .own = own, .order = cs->order, .place = cs->place};
    tp_status_t s = coll_dissem(c, &m);
    for (int p = 0; p < n && s == TP_OK; p++)
        if (p != me && cs->rlen[p] > 0) s = c->dev->copy(cs->rbuf[p], cs->sbuf[cs->place[p]], cs->rlen[p], NULL);
    return s;
}

/* all_gather and all_gatherv: own block into place (none when already there), then dissemination when what comes in
 * is small (round the shared-CPU ring where there is one and the blocks fit in scratch), else every peer at once:
 * there a transport that mirrors what it sends puts the own block into place as it sends it (the source is read
 * once). */
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
    /* a send overlapping recv away from this rank's block goes into place first and out from there: a peer may read
     * it where it lies (CMA) after other blocks have landed on it */
    int moved = mine != send && coll_overlap(send, cs->rlen[me], recv, off);
    int hier = n > 1 && coll_hier_wanted(c, off), small = off - off / (size_t)n <= COLL_SMALL_BYTES;
    int mirror = n > 1 && !hier && !small && cs->rlen[me] > 0 && mine != send && !moved && coll_mirror_peer(c) >= 0;
    tp_status_t s = TP_OK;
    if (cs->rlen[me] > 0 && mine != send && !mirror) s = c->dev->copy(mine, send, cs->rlen[me], NULL);
    if (s != TP_OK || n == 1) return s;
    if (hier) return coll_hier_gather(c, cs->rbuf, cs->rlen);
    if (small) { /* the same choice on every rank, whatever its own count */
        if (cs->order != NULL && off <= coll_scratch_bytes(cs)) return gather_small_ring(c, mine);
        coll_dissem_t m = {.blocks = cs->rbuf, .lens = cs->rlen};
        return coll_dissem(c, &m);
    }
    for (int p = 0; p < n; p++) {
        cs->sbuf[p] = mirror ? (void *)send : mine;
        cs->slen[p] = cs->rlen[me];
    }
    return coll_pairwise(c, -1, cs->sbuf, cs->slen, cs->rbuf, cs->rlen, 0, mirror ? mine : NULL);
}

static tp_status_t host_all_gather(void *state, const tp_coll_args_t *a)
{
    coll_call_t c;
    coll_begin(&c, state, a->device, TP_COLL_ALL_GATHER, a->dtype, TP_SUM, a->count, 0);
    return finish(&c, gather_blocks(&c, a->send, a->recv, NULL, a->count, tp_dtype_size(a->dtype)));
}

static tp_status_t host_all_gatherv(void *state, const tp_coll_args_t *a)
{
    coll_state_t *cs = state;
    uint32_t hash = 2166136261u; /* FNV-1a of the counts: ranks with other counts disagree on it */
    for (int p = 0; p < cs->comm->size; p++)
        for (int b = 0; b < 8; b++) hash = (hash ^ (uint8_t)(a->counts[p] >> (8 * b))) * 16777619u;
    coll_call_t c;
    coll_begin(&c, cs, a->device, TP_COLL_ALL_GATHERV, a->dtype, TP_SUM, a->count, (int)(hash & 0x7fffffff));
    return finish(&c, gather_blocks(&c, a->send, a->recv, a->counts, 0, tp_dtype_size(a->dtype)));
}

static tp_status_t host_all_reduce(void *state, const tp_coll_args_t *a)
{
    coll_call_t c;
    coll_begin(&c, state, a->device, TP_COLL_ALL_REDUCE, a->dtype, a->op, a->count, 0);
    if (c.comm->size == 1) {
        c.cs->srcs[0] = a->send;
        return c.dev->reduce(a->dtype, a->op, a->recv, c.cs->srcs, 1, a->count, NULL);
    }
    return finish(&c, coll_all_reduce(&c, a->send, a->recv, a->count));
}

static tp_status_t host_reduce_scatter(void *state, const tp_coll_args_t *a)
{
    coll_call_t c;
    coll_begin(&c, state, a->device, TP_COLL_REDUCE_SCATTER, a->dtype, a->op, a->count, 0);
    if (c.comm->size == 1) {
        c.cs->srcs[0] = a->send;
        return c.dev->reduce(a->dtype, a->op, a->recv, c.cs->srcs, 1, a->count, NULL);
    }
    if (coll_hier_wanted(&c, a->count * tp_dtype_size(a->dtype)))
        return finish(&c, coll_hier_reduce_scatter(&c, a->send, a->recv, a->count));
    return finish(&c, coll_reduce_scatter(&c, a->send, a->recv, a->count));
}

static tp_status_t host_all_to_all(void *state, const tp_coll_args_t *a)
{
    coll_call_t c;
    coll_begin(&c, state, a->device, TP_COLL_ALL_TO_ALL, a->dtype, TP_SUM, a->count, 0);
    coll_state_t *cs = c.cs;
    int me = c.comm->rank, n = c.comm->size, in_place = a->send == a->recv;
    size_t b = a->count * tp_dtype_size(a->dtype);
    for (int p = 0; p < n; p++) {
        cs->sbuf[p] = (uint8_t *)a->send + (size_t)p * b;
        cs->rbuf[p] = (uint8_t *)a->recv + (size_t)p * b;
        cs->slen[p] = cs->rlen[p] = b;
    }
    tp_status_t s = TP_OK;
    if (!in_place && b > 0) s = c.dev->copy(cs->rbuf[me], cs->sbuf[me], b, NULL);
    if (s != TP_OK || n == 1) return s;
    return finish(&c, coll_pairwise(&c, -1, cs->sbuf, cs->slen, cs->rbuf, cs->rlen, in_place, NULL));
}

/* Point-to-point frames carry the pair's own count of messages in each direction, not the comm's call count. */
static void p2p_begin(coll_call_t *c, coll_state_t *cs, const tp_coll_args_t *a, tp_coll_kind_t coll)
{
    c->comm = cs->comm;
    c->cs = cs;
    c->dev = a->device;
    cs->pool_used = 0;
    c->part_bytes = cs->comm->world->part_bytes;
    c->id =
        (tp_frame_id_t){.coll = coll, .dtype = a->dtype, .op = TP_SUM, .comm_id = cs->comm->comm_id, .count = a->count};
    c->stop_gen = 0;
}

/* Where a point-to-point call waits, for the stop word: its index in each direction it moves. */
static void p2p_stop(coll_call_t *c, const char *name, int peer, int sends, int recvs)
{
    coll_state_t *cs = c->cs;
    c->stop = (tp_stop_call_t){.name = name,
                               .index = sends ? cs->send_seq[peer] : cs->recv_seq[peer],
                               .peer = peer,
                               .sends = sends,
                               .recvs = recvs,
                               .send_index = cs->send_seq[peer],
                               .recv_index = cs->recv_seq[peer]};
}

static tp_status_t host_send(void *state, const tp_coll_args_t *a)
{
    coll_call_t c;
    p2p_begin(&c, state, a, TP_COLL_SEND);
    p2p_stop(&c, "send", a->peer, 1, 0);
    c.id.seq = c.cs->send_seq[a->peer]++;
    tp_status_t s =
        coll_post(&c, coll_xfer(&c, a->peer, 1, 0, (void *)a->send, a->count * tp_dtype_size(a->dtype), 0, 0));
    return finish(&c, s == TP_OK ? coll_wait_all(&c) : s);
}

static tp_status_t host_recv(void *state, const tp_coll_args_t *a)
{
    coll_call_t c;
    p2p_begin(&c, state, a, TP_COLL_SEND);
    p2p_stop(&c, "recv", a->peer, 0, 1);
    c.id.seq = c.cs->recv_seq[a->peer]++;
    tp_status_t s = coll_post(&c, coll_xfer(&c, a->peer, 0, 0, a->recv, a->count * tp_dtype_size(a->dtype), 0, 0));
    return finish(&c, s == TP_OK ? coll_wait_all(&c) : s);
}

static tp_status_t host_exchange(void *state, const tp_coll_args_t *a)
{
    coll_call_t c;
    coll_state_t *cs = state;
    int peer = a->peer;
    size_t b = a->count * tp_dtype_size(a->dtype);
    p2p_begin(&c, cs, a, TP_COLL_EXCHANGE);
    if (peer != c.comm->rank) p2p_stop(&c, "exchange", peer, 1, 1);
    if (peer == c.comm->rank) return a->send != a->recv && b > 0 ? c.dev->copy(a->recv, a->send, b, NULL) : TP_OK;
    if (a->send == a->recv) { /* in place: received parts wait in scratch until the same part has gone out */
        uint64_t sseq = cs->send_seq[peer]++, rseq = cs->recv_seq[peer]++;
        if (sseq != rseq) {
            tp_log(TP_LOG_ERROR, "coll",
                   "tp_exchange in place with rank %d: sends and receives with it are out of "
                   "step (%llu sent, %llu received)",
                   peer, (unsigned long long)sseq, (unsigned long long)rseq);
            return TP_ERR_INVALID;
        }
        c.id.seq = sseq;
        cs->sbuf[peer] = cs->rbuf[peer] = a->recv;
        cs->slen[peer] = cs->rlen[peer] = b;
        return finish(&c, coll_pairwise(&c, peer, cs->sbuf, cs->slen, cs->rbuf, cs->rlen, 1, NULL));
    }
    c.id.seq = cs->recv_seq[peer]++;
    tp_status_t s = coll_post(&c, coll_xfer(&c, peer, 0, 0, a->recv, b, 0, 0));
    c.id.seq = cs->send_seq[peer]++;
    if (s == TP_OK) s = coll_post(&c, coll_xfer(&c, peer, 1, 0, (void *)a->send, b, 0, 0));
    return finish(&c, s == TP_OK ? coll_wait_all(&c) : s);
}

tp_status_t coll_split_exchange(coll_state_t *cs, int32_t *all, uint64_t *seq)
{
    coll_call_t c;
    coll_begin(&c, cs, &tp_host_device_ops, TP_COLL_SPLIT, TP_I32, TP_SUM, 2, 0);
    *seq = c.id.seq;
    int me = c.comm->rank, n = c.comm->size;
    if (n == 1) return TP_OK;
    for (int p = 0; p < n; p++) {
        cs->sbuf[p] = &all[2 * me];
        cs->slen[p] = cs->rlen[p] = 2 * sizeof(int32_t);
        cs->rbuf[p] = &all[2 * p];
    }
    return finish(&c, coll_pairwise(&c, -1, cs->sbuf, cs->slen, cs->rbuf, cs->rlen, 0, NULL));
}

const tp_coll_ops_t tp_host_coll_ops = {
    .abi_version = TP_COLL_ABI,
    .ops_size = sizeof(tp_coll_ops_t),
    .name = "host",
    .mem_types = TP_MEM_BIT(TP_MEM_HOST),
    .calls = TP_CALLS_ALL,
    .streams = 0,
    .comm_create = host_comm_create,
    .comm_destroy = host_comm_destroy,
    .barrier = host_barrier,
    .broadcast = host_broadcast,
    .all_gather = host_all_gather,
    .all_gatherv = host_all_gatherv,
    .all_reduce = host_all_reduce,
    .reduce_scatter = host_reduce_scatter,
    .all_to_all = host_all_to_all,
    .send = host_send,
    .recv = host_recv,
    .exchange = host_exchange,
};
