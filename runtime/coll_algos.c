/* coll_algos.c: barrier and broadcast (the calls that move no reduced data). */
#include "coll_internal.h"

tp_status_t coll_barrier(coll_call_t *c)
{
    tp_status_t s = TP_OK;
    for (int p = 0; p < c->comm->size && s == TP_OK; p++) {
        if (p == c->comm->rank) continue;
        s = coll_post(c, coll_xfer(c, p, 0, 0, NULL, 0, 0, 0));
        if (s == TP_OK) s = coll_post(c, coll_xfer(c, p, 1, 0, NULL, 0, 0, 0));
    }
    return s == TP_OK ? coll_wait_all(c) : s;
}

/*
 * Every pair of ranks first trades an empty frame, so ranks that disagree on the root (or anything else) see each
 * other's headers and fail instead of waiting. Then, small or two ranks: the root sends to each rank directly;
 * larger: a chain from the root, each rank forwarding the bytes of a part as soon as they arrive.
 */
tp_status_t coll_broadcast(coll_call_t *c, void *buf, size_t bytes, int root)
{
    int me = c->comm->rank, n = c->comm->size;
    tp_status_t s = TP_OK;
    for (int p = 0; p < n && s == TP_OK; p++) {
        if (p == me) continue;
        s = coll_post(c, coll_xfer(c, p, 0, 1, NULL, 0, 0, 0));
        if (s == TP_OK) s = coll_post(c, coll_xfer(c, p, 1, 1, NULL, 0, 0, 0));
    }
    if (s == TP_OK && (bytes <= COLL_SMALL_BYTES || n == 2)) {
        for (int p = 0; p < n && s == TP_OK; p++) {
            if (p == me) continue;
            if (me == root) s = coll_post(c, coll_xfer(c, p, 1, 0, buf, bytes, 0, 0));
            else if (p == root) s = coll_post(c, coll_xfer(c, p, 0, 0, buf, bytes, 0, 0));
        }
        return s == TP_OK ? coll_wait_all(c) : s;
    }
    int rel = (me - root + n) % n, prev = (me - 1 + n) % n, next = (me + 1) % n;
    tp_xfer_t *in = NULL, *out = NULL;
    if (s == TP_OK && me != root) s = coll_post(c, in = coll_xfer(c, prev, 0, 0, buf, bytes, 0, 0));
    if (s == TP_OK && rel != n - 1) {
        out = coll_xfer(c, next, 1, 0, buf, bytes, 0, 0);
        if (out != NULL && in != NULL) out->ready = 0; /* forwarded as it arrives */
        s = coll_post(c, out);
    }
    while (s == TP_OK && in != NULL && out != NULL && !(in->complete && out->ready == bytes)) {
        out->ready = in->complete ? bytes : in->done;
        if (!in->complete) s = coll_progress(c);
    }
    return s == TP_OK ? coll_wait_all(c) : s;
}
