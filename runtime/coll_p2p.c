/* coll_p2p.c: send, recv and exchange (ordered per pair of ranks), and splitting a comm. */
#include <stdlib.h>
#include <string.h>

#include "coll_internal.h"

/* Point-to-point frames carry the pair's own count of messages in each direction, not the comm's call count. */
static tp_status_t p2p_enter(tp_comm_t *comm, const char *fn, tp_dtype_t dtype, size_t count, const void *buf,
                             int peer, tp_stream_t *stream, coll_call_t *c, size_t *es)
{
    if (comm == NULL || comm->coll_state == NULL) return TP_ERR_INVALID;
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
    if (*es == 0 || count > SIZE_MAX / 2 / *es || (count > 0 && buf == NULL)) {
        tp_log(TP_LOG_ERROR, "coll", "%s: bad type %d, count %zu or buffer", fn, (int)dtype, count);
        return TP_ERR_INVALID;
    }
    if (peer < 0 || peer >= comm->size) {
        tp_log(TP_LOG_ERROR, "coll", "%s: peer %d is not a rank of this comm (size %d)", fn, peer, comm->size);
        return TP_ERR_INVALID;
    }
    c->comm = comm;
    c->cs = cs;
    cs->pool_used = 0;
    c->part_bytes = comm->world->part_bytes;
    c->id = (tp_frame_id_t){.dtype = dtype, .op = TP_SUM, .comm_id = comm->comm_id, .count = count};
    return TP_OK;
}

static tp_status_t finish(coll_call_t *c, tp_status_t s) { return s == TP_OK ? s : coll_fail(c, s); }

tp_status_t tp_send(tp_comm_t *comm, const void *buf, size_t count, tp_dtype_t dtype, int peer, tp_stream_t *stream)
{
    coll_call_t c;
    size_t es;
    tp_status_t s = p2p_enter(comm, "tp_send", dtype, count, buf, peer, stream, &c, &es);
    if (s != TP_OK) return s;
    if (peer == comm->rank) {
        tp_log(TP_LOG_ERROR, "coll", "tp_send: a rank cannot send to itself (use tp_exchange)");
        return TP_ERR_INVALID;
    }
    c.id.coll = TP_COLL_SEND;
    c.id.seq = c.cs->send_seq[peer]++;
    s = coll_post(&c, coll_xfer(&c, peer, 1, 0, (void *)buf, count * es, 0, 0));
    return finish(&c, s == TP_OK ? coll_wait_all(&c) : s);
}

tp_status_t tp_recv(tp_comm_t *comm, void *buf, size_t count, tp_dtype_t dtype, int peer, tp_stream_t *stream)
{
    coll_call_t c;
    size_t es;
    tp_status_t s = p2p_enter(comm, "tp_recv", dtype, count, buf, peer, stream, &c, &es);
    if (s != TP_OK) return s;
    if (peer == comm->rank) {
        tp_log(TP_LOG_ERROR, "coll", "tp_recv: a rank cannot receive from itself (use tp_exchange)");
        return TP_ERR_INVALID;
    }
    c.id.coll = TP_COLL_SEND;
    c.id.seq = c.cs->recv_seq[peer]++;
    s = coll_post(&c, coll_xfer(&c, peer, 0, 0, buf, count * es, 0, 0));
    return finish(&c, s == TP_OK ? coll_wait_all(&c) : s);
}

tp_status_t tp_exchange(tp_comm_t *comm, const void *send, void *recv, size_t count, tp_dtype_t dtype, int peer,
                        tp_stream_t *stream)
{
    coll_call_t c;
    size_t es;
    tp_status_t s = p2p_enter(comm, "tp_exchange", dtype, count, send, peer, stream, &c, &es);
    if (s != TP_OK) return s;
    size_t b = count * es;
    if (b > 0 && recv == NULL) return TP_ERR_INVALID;
    if (send != recv && coll_overlap(send, b, recv, b)) {
        tp_log(TP_LOG_ERROR, "coll", "tp_exchange: send and recv overlap without being the same buffer");
        return TP_ERR_INVALID;
    }
    if (peer == comm->rank) {
        if (send != recv && b > 0) memcpy(recv, send, b);
        return TP_OK;
    }
    coll_state_t *cs = c.cs;
    c.id.coll = TP_COLL_EXCHANGE;
    if (send == recv) { /* in place: received parts wait in scratch until the same part has gone out */
        uint64_t sseq = cs->send_seq[peer]++, rseq = cs->recv_seq[peer]++;
        if (sseq != rseq) {
            tp_log(TP_LOG_ERROR, "coll", "tp_exchange in place with rank %d: sends and receives with it are out of "
                   "step (%llu sent, %llu received)", peer, (unsigned long long)sseq, (unsigned long long)rseq);
            return TP_ERR_INVALID;
        }
        c.id.seq = sseq;
        cs->sbuf[peer] = cs->rbuf[peer] = recv;
        cs->slen[peer] = cs->rlen[peer] = b;
        return finish(&c, coll_pairwise(&c, peer, cs->sbuf, cs->slen, cs->rbuf, cs->rlen, 1));
    }
    c.id.seq = cs->recv_seq[peer]++;
    s = coll_post(&c, coll_xfer(&c, peer, 0, 0, recv, b, 0, 0));
    c.id.seq = cs->send_seq[peer]++;
    if (s == TP_OK) s = coll_post(&c, coll_xfer(&c, peer, 1, 0, (void *)send, b, 0, 0));
    return finish(&c, s == TP_OK ? coll_wait_all(&c) : s);
}

/* The new comm's id: the same on every member, different for each color and each split. */
static uint32_t split_id(uint32_t parent, uint64_t seq, int color)
{
    uint64_t h = 1469598103934665603ull;
    uint64_t v[3] = {parent, seq, (uint64_t)(uint32_t)color};
    for (int i = 0; i < 3; i++) h = (h ^ v[i]) * 1099511628211ull;
    uint32_t id = (uint32_t)(h ^ (h >> 32));
    return id == 0 ? 1 : id;
}

tp_status_t tp_comm_split(tp_comm_t *comm, int color, int key, tp_comm_t **out)
{
    if (out == NULL || comm == NULL || comm->coll_state == NULL) return TP_ERR_INVALID;
    if (((coll_state_t *)comm->coll_state)->failed != TP_OK) return ((coll_state_t *)comm->coll_state)->failed;
    tp_status_t s = TP_OK;
    int n = comm->size, me = comm->rank;
    int32_t *all = malloc((size_t)n * 2 * sizeof(int32_t));
    int *members = malloc((size_t)n * sizeof(int));
    if (all == NULL || members == NULL) {
        s = TP_ERR_NO_MEMORY;
        goto out;
    }
    all[2 * me] = color;
    all[2 * me + 1] = key;
    coll_call_t c;
    coll_begin(&c, comm, TP_COLL_SPLIT, TP_I32, TP_SUM, 2, 0);
    uint64_t seq = c.id.seq;
    if (n > 1) {
        coll_state_t *cs = c.cs;
        for (int p = 0; p < n; p++) {
            cs->sbuf[p] = &all[2 * me];
            cs->slen[p] = cs->rlen[p] = 2 * sizeof(int32_t);
            cs->rbuf[p] = &all[2 * p];
        }
        if ((s = coll_pairwise(&c, -1, cs->sbuf, cs->slen, cs->rbuf, cs->rlen, 0)) != TP_OK) {
            s = coll_fail(&c, s);
            goto out;
        }
    }
    if (color < 0) {
        *out = NULL;
        goto out;
    }
    int m = 0;
    for (int p = 0; p < n; p++) /* insertion by (key, rank) */
        if (all[2 * p] == color) {
            int i = m++;
            while (i > 0 && all[2 * members[i - 1] + 1] > all[2 * p + 1]) members[i] = members[i - 1], i--;
            members[i] = p;
        }
    tp_comm_t *nc = calloc(1, sizeof(*nc));
    if (nc == NULL || (nc->world_ranks = malloc((size_t)m * sizeof(int))) == NULL) {
        free(nc);
        s = TP_ERR_NO_MEMORY;
        goto out;
    }
    nc->world = comm->world;
    nc->size = m;
    nc->comm_id = split_id(comm->comm_id, seq, color);
    int my_node = comm->world->peers != NULL ? comm->world->peers[comm->world_ranks[me]].node_rank : 0;
    for (int i = 0; i < m; i++) {
        int wr = comm->world_ranks[members[i]];
        nc->world_ranks[i] = wr;
        if (members[i] == me) nc->rank = i;
        int node = comm->world->peers != NULL ? comm->world->peers[wr].node_rank : 0, first = 1;
        for (int j = 0; j < i; j++)
            if ((comm->world->peers != NULL ? comm->world->peers[nc->world_ranks[j]].node_rank : 0) == node) first = 0;
        if (node == my_node) {
            if (members[i] == me) nc->local_rank = nc->local_size;
            nc->local_size++;
        }
        if (first && node < my_node) nc->node_rank++;
    }
    if ((s = tp_coll_comm_init(nc)) != TP_OK) {
        free(nc->world_ranks);
        free(nc);
        goto out;
    }
    ((coll_state_t *)nc->coll_state)->from_split = 1;
    *out = nc;
out:
    free(all);
    free(members);
    return s;
}

tp_status_t tp_comm_destroy(tp_comm_t *comm)
{
    if (comm == NULL) return TP_OK;
    if (comm->coll_state == NULL || !((coll_state_t *)comm->coll_state)->from_split) {
        tp_log(TP_LOG_ERROR, "coll", "tp_comm_destroy: only comms made by tp_comm_split (tp_finalize frees the world)");
        return TP_ERR_INVALID;
    }
    tp_coll_comm_fini(comm);
    free(comm->world_ranks);
    free(comm);
    return TP_OK;
}
