/*
 * coll_allreduce.c: all_reduce and reduce_scatter in rank order. Each rank owns a slice; every rank sends its
 * piece of slice j to owner j, the owner adds the contributions 0..N-1 part by part as they land in scratch, and
 * (all_reduce) sends each reduced part to every rank as soon as it is done.
 */
#include "coll_internal.h"

/* Small calls: every rank gathers every vector by dissemination, then folds all N in rank order. */
static tp_status_t all_reduce_small(coll_call_t *c, const void *send, void *recv, size_t count, size_t es)
{
    int me = c->comm->rank, n = c->comm->size;
    coll_state_t *cs = c->cs;
    size_t bytes = count * es;
    for (int p = 0; p < n; p++) { /* one block per rank, consecutive in scratch (this rank's stays unused) */
        cs->rbuf[p] = cs->scratch + (size_t)p * bytes;
        cs->rlen[p] = bytes;
    }
    coll_dissem_t m = {.blocks = cs->rbuf, .lens = cs->rlen, .own = send};
    tp_status_t s = coll_dissem(c, &m);
    if (s != TP_OK) return s;
    for (int p = 0; p < n; p++) cs->srcs[p] = p == me ? send : cs->rbuf[p];
    return c->dev->reduce(c->id.dtype, c->id.op, recv, cs->srcs, n, count, NULL);
}

/*
 * The scatter-reduce core: pieces[j] is this rank's contribution to slice j, dst where this rank's reduced slice
 * goes. With gather set, each reduced part also goes to every rank, and the other slices land in dst_all.
 */
static tp_status_t scatter_reduce(coll_call_t *c, const uint8_t *const *pieces, const slices_t *sl, void *dst,
                                  int gather, uint8_t *dst_all)
{
    int me = c->comm->rank, n = c->comm->size;
    coll_state_t *cs = c->cs;
    size_t es = sl->es, pe = sl->pe, pbytes = pe * es;
    size_t mine = slice_count(sl, me), parts = slice_parts(mine, pe);
    tp_xfer_t **rx = cs->xa, **gx = cs->xb;
    tp_status_t s = TP_OK;
    for (int p = 0; p < n && s == TP_OK; p++) {
        if (p == me) continue;
        for (size_t k = 0; k < parts && k < COLL_WINDOW && s == TP_OK; k++) {
            rx[p * COLL_WINDOW + k] = coll_xfer(c, p, 0, 0, coll_slot(c, p, (int)k), slice_part_elems(mine, pe, k) * es,
                                                (uint32_t)k, pbytes);
            s = coll_post(c, rx[p * COLL_WINDOW + k]);
        }
        size_t theirs = slice_count(sl, p);
        if (s == TP_OK && gather)
            s = coll_post(c, coll_xfer(c, p, 0, 1, dst_all + slice_first(sl, p) * es, theirs * es, 0, pbytes));
        if (s == TP_OK) s = coll_post(c, coll_xfer(c, p, 1, 0, (void *)pieces[p], theirs * es, 0, pbytes));
        if (s == TP_OK && gather) {
            gx[p] = coll_xfer(c, p, 1, 1, dst, mine * es, 0, pbytes);
            if (gx[p] != NULL) gx[p]->ready = 0; /* raised as parts are reduced */
            s = coll_post(c, gx[p]);
        }
    }
    /* reduce each part as its bytes arrive from every rank, and let the reduced prefix go out at once */
    size_t red = 0;
    for (size_t k = 0; k < parts && s == TP_OK;) {
        size_t m = slice_part_elems(mine, pe, k), have = m;
        for (int p = 0; p < n; p++)
            if (p != me) {
                tp_xfer_t *x = rx[p * COLL_WINDOW + k % COLL_WINDOW];
                size_t got = x->complete ? m : x->done / es;
                if (got < have) have = got;
            }
        if (have < m && have - red < COLL_REDUCE_CHUNK) {
            s = coll_progress(c);
            continue;
        }
        for (int p = 0; p < n; p++)
            cs->srcs[p] = (p == me ? pieces[me] + k * pbytes : coll_slot(c, p, (int)k)) + red * es;
        s = c->dev->reduce(c->id.dtype, c->id.op, (uint8_t *)dst + k * pbytes + red * es, cs->srcs, n, have - red,
                           NULL);
        if (s != TP_OK) break;
        red = have;
        for (int p = 0; p < n && gather; p++)
            if (p != me) gx[p]->ready = k * pbytes + red * es;
        if (red < m) continue;
        for (int p = 0; p < n && s == TP_OK; p++) { /* part k is reduced: its slot may take part k + window */
            if (p == me) continue;
            tp_xfer_t *x = rx[p * COLL_WINDOW + k % COLL_WINDOW];
            if (!x->complete) s = coll_progress(c), p--;
            else if (k + COLL_WINDOW < parts) {
                size_t k2 = k + COLL_WINDOW;
                x->len = slice_part_elems(mine, pe, k2) * es;
                x->first_part = (uint32_t)k2;
                s = coll_post(c, x);
            }
        }
        red = 0;
        k++;
    }
    return s == TP_OK ? coll_wait_all(c) : s;
}

void coll_slices_init(slices_t *sl, size_t count, int n, size_t es, size_t part_bytes)
{
    sl->base = count / (size_t)n;
    sl->rem = count % (size_t)n;
    sl->es = es;
    sl->pe = part_bytes / es > 0 ? part_bytes / es : 1;
}

int coll_all_reduce_is_small(coll_call_t *c, size_t count)
{
    size_t n = (size_t)c->comm->size, es = tp_dtype_size(c->id.dtype);
    return (count < n || count * es * (n - 1) <= COLL_SMALL_BYTES) && count * es <= c->cs->slot_bytes;
}

tp_status_t coll_all_reduce(coll_call_t *c, const void *send, void *recv, size_t count)
{
    int n = c->comm->size;
    size_t es = tp_dtype_size(c->id.dtype);
    if (coll_hier_wanted(c, count * es)) return coll_hier_all_reduce(c, send, recv, count);
    if (coll_all_reduce_is_small(c, count)) return all_reduce_small(c, send, recv, count, es);
    slices_t sl;
    coll_slices_init(&sl, count, n, es, c->part_bytes);
    const uint8_t **pc = c->cs->pieces;
    for (int j = 0; j < n; j++) pc[j] = (const uint8_t *)send + slice_first(&sl, j) * es;
    return scatter_reduce(c, pc, &sl, (uint8_t *)recv + slice_first(&sl, c->comm->rank) * es, 1, recv);
}

tp_status_t coll_reduce_scatter(coll_call_t *c, const void *send, void *recv, size_t count)
{
    int n = c->comm->size;
    size_t es = tp_dtype_size(c->id.dtype);
    slices_t sl = {.base = count, .rem = 0, .es = es, .pe = c->part_bytes / es > 0 ? c->part_bytes / es : 1};
    const uint8_t **pc = c->cs->pieces;
    for (int j = 0; j < n; j++) pc[j] = (const uint8_t *)send + (size_t)j * count * es;
    return scatter_reduce(c, pc, &sl, recv, 0, NULL);
}
