/* coll_p2p.c: send, recv and exchange (argument checks, then the provider), and splitting and destroying a comm. */
#include <stdlib.h>

#include "coll_dispatch.h"
#include "coll_internal.h"

/* Checks what every point-to-point call shares and fills what args it can. */
static tp_status_t p2p_enter(tp_comm_t *comm, const char *fn, tp_dtype_t dtype, size_t count, const void *buf, int peer,
                             tp_stream_t *stream, tp_coll_args_t *args)
{
    if (comm == NULL || comm->coll_state == NULL) return TP_ERR_INVALID;
    tp_status_t s = tp_coll_usable(comm, fn, stream);
    if (s != TP_OK) return s;
    size_t es = tp_dtype_size(dtype);
    if (es == 0 || count > SIZE_MAX / 2 / es || (count > 0 && buf == NULL)) {
        tp_log(TP_LOG_ERROR, "coll", "%s: bad type %d, count %zu or buffer", fn, (int)dtype, count);
        return TP_ERR_INVALID;
    }
    if (peer < 0 || peer >= comm->size) {
        tp_log(TP_LOG_ERROR, "coll", "%s: peer %d is not a rank of this comm (size %d)", fn, peer, comm->size);
        return TP_ERR_INVALID;
    }
    *args = (tp_coll_args_t){.count = count, .dtype = dtype, .peer = peer, .stream = stream};
    return TP_OK;
}

tp_status_t tp_send(tp_comm_t *comm, const void *buf, size_t count, tp_dtype_t dtype, int peer, tp_stream_t *stream)
{
    tp_coll_args_t a;
    tp_status_t s = p2p_enter(comm, "tp_send", dtype, count, buf, peer, stream, &a);
    if (s != TP_OK) return s;
    if (peer == comm->rank) {
        tp_log(TP_LOG_ERROR, "coll", "tp_send: a rank cannot send to itself (use tp_exchange)");
        return TP_ERR_INVALID;
    }
    a.call = TP_CALL_SEND;
    a.send = buf;
    return tp_coll_dispatch(comm, "tp_send", &a, buf, NULL);
}

tp_status_t tp_recv(tp_comm_t *comm, void *buf, size_t count, tp_dtype_t dtype, int peer, tp_stream_t *stream)
{
    tp_coll_args_t a;
    tp_status_t s = p2p_enter(comm, "tp_recv", dtype, count, buf, peer, stream, &a);
    if (s != TP_OK) return s;
    if (peer == comm->rank) {
        tp_log(TP_LOG_ERROR, "coll", "tp_recv: a rank cannot receive from itself (use tp_exchange)");
        return TP_ERR_INVALID;
    }
    a.call = TP_CALL_RECV;
    a.recv = buf;
    return tp_coll_dispatch(comm, "tp_recv", &a, NULL, buf);
}

tp_status_t tp_exchange(tp_comm_t *comm, const void *send, void *recv, size_t count, tp_dtype_t dtype, int peer,
                        tp_stream_t *stream)
{
    tp_coll_args_t a;
    tp_status_t s = p2p_enter(comm, "tp_exchange", dtype, count, send, peer, stream, &a);
    if (s != TP_OK) return s;
    size_t b = count * tp_dtype_size(dtype);
    if (b > 0 && recv == NULL) return TP_ERR_INVALID;
    if (send != recv && coll_overlap(send, b, recv, b)) {
        tp_log(TP_LOG_ERROR, "coll", "tp_exchange: send and recv overlap without being the same buffer");
        return TP_ERR_INVALID;
    }
    a.call = TP_CALL_EXCHANGE;
    a.send = send;
    a.recv = recv;
    return tp_coll_dispatch(comm, "tp_exchange", &a, send, recv);
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
    coll_comm_t *cc = comm->coll_state;
    if (cc->failed != TP_OK) return cc->failed;
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
    uint64_t seq;
    if ((s = tp_coll_finish(cc, coll_split_exchange(tp_coll_host_state(cc), all, &seq), "tp_comm_split")) != TP_OK) goto out;
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
    ((coll_comm_t *)nc->coll_state)->from_split = 1;
    *out = nc;
out:
    free(all);
    free(members);
    return s;
}

tp_status_t tp_comm_destroy(tp_comm_t *comm)
{
    if (comm == NULL) return TP_OK;
    if (comm->coll_state == NULL || !((coll_comm_t *)comm->coll_state)->from_split) {
        tp_log(TP_LOG_ERROR, "coll", "tp_comm_destroy: only comms made by tp_comm_split (tp_finalize frees the world)");
        return TP_ERR_INVALID;
    }
    tp_coll_comm_fini(comm);
    free(comm->world_ranks);
    free(comm);
    return TP_OK;
}
