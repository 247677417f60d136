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
 * Small or two ranks: the root sends to each rank directly. Larger: a chain from the root, each rank forwarding a
 * part as soon as it has it. The receivers (direct) or the chain's tail send the root an empty acknowledgement
 * at once, so ranks that disagree on the root see each other's frames and fail instead of waiting.
 */
tp_status_t coll_broadcast(coll_call_t *c, void *buf, size_t bytes, int root)
{
    int me = c->comm->rank, n = c->comm->size;
    tp_status_t s = TP_OK;
    if (bytes <= COLL_SMALL_BYTES || n == 2) {
        for (int p = 0; p < n && s == TP_OK; p++) {
            if (p == me) continue;
            if (me == root) {
                s = coll_post(c, coll_xfer(c, p, 0, 1, NULL, 0, 0, 0));
                if (s == TP_OK) s = coll_post(c, coll_xfer(c, p, 1, 0, buf, bytes, 0, 0));
            } else if (p == root) {
                s = coll_post(c, coll_xfer(c, p, 0, 0, buf, bytes, 0, 0));
                if (s == TP_OK) s = coll_post(c, coll_xfer(c, p, 1, 1, NULL, 0, 0, 0));
            }
        }
        return s == TP_OK ? coll_wait_all(c) : s;
    }
    int rel = (me - root + n) % n, prev = (me - 1 + n) % n, next = (me + 1) % n, tail = (root - 1 + n) % n;
    tp_xfer_t *in = NULL, *out = NULL;
    if (me == root) {
        s = coll_post(c, coll_xfer(c, tail, 0, 1, NULL, 0, 0, 0));
    } else {
        s = coll_post(c, in = coll_xfer(c, prev, 0, 0, buf, bytes, 0, 0));
        if (s == TP_OK && me == tail) s = coll_post(c, coll_xfer(c, root, 1, 1, NULL, 0, 0, 0));
    }
    if (s == TP_OK && rel != n - 1) {
        out = coll_xfer(c, next, 1, 0, buf, bytes, 0, 0);
        if (out != NULL && in != NULL) out->ready = 0; /* forwarded part by part as it arrives */
        s = coll_post(c, out);
    }
    if (s != TP_OK || in == NULL || out == NULL) return s == TP_OK ? coll_wait_all(c) : s;
    while (s == TP_OK && !(in->complete && out->complete)) {
        if (out->ready < in->done) out->ready = in->done;
        if (out->ready == bytes && in->complete) break;
        s = coll_progress(c);
    }
    return s == TP_OK ? coll_wait_all(c) : s;
}
