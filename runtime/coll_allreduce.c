/*
 * coll_allreduce.c: all_reduce and reduce_scatter in rank order. Each rank owns a slice; every rank sends its
 * piece of slice j to owner j, the owner adds the contributions 0..N-1 part by part as they land (one peer's in the
 * owner's own output where it may, the others' in scratch), and (all_reduce) sends each reduced part to every rank
 * as soon as it is done.
 */
#include <string.h>

#include "coll_internal.h"
#include "runtime_transports.h"

/* Small calls: every rank gathers every vector by dissemination, then folds all N in rank order. */
static tp_status_t all_reduce_small(coll_call_t *c, const void *send, void *recv, size_t count, size_t es)
{
    int me = c->comm->rank, n = c->comm->size;
    coll_state_t *cs = c->cs;
    size_t bytes = count * es;
    for (int v = 0; v < n; v++) { /* one block per place on the ring, consecutive in scratch (this rank's unused) */
        cs->rbuf[v] = cs->scratch + (size_t)v * bytes;
        cs->rlen[v] = bytes;
    }
    coll_dissem_t m = {.blocks = cs->rbuf, .lens = cs->rlen, .own = send, .order = cs->order, .place = cs->place};
    tp_status_t s = coll_dissem(c, &m);
    if (s != TP_OK) return s;
    for (int p = 0; p < n; p++) cs->srcs[p] = p == me ? send : cs->rbuf[cs->place != NULL ? cs->place[p] : p];
    return c->dev->reduce(c->id.dtype, c->id.op, recv, cs->srcs, n, count, NULL);
}

/* Whether this rank's output slice dst lies apart from every piece: a peer's bytes may land there while each piece is
 * still read or sent. */
static int dst_apart(const coll_call_t *c, const uint8_t *const *pieces, const slices_t *sl, const uint8_t *dst)
{
    size_t bytes = slice_count(sl, c->comm->rank) * sl->es;
    for (int j = 0; j < c->comm->size; j++)
        if (coll_overlap(dst, bytes, pieces[j], slice_count(sl, j) * sl->es)) return 0;
    return 1;
}

/*
 * The peer whose contributions to this rank's slice land in dst itself, reduced where they lie (the host's reduce may
 * write a source it reads), or -1: the first peer, where the buffers are the host's and dst lies apart from every
 * piece (each is read, or sent, while the peer's bytes land). Its part slots in scratch are then never touched: a
 * 2-rank all_reduce of 4 MiB over TCP took 0.75-0.91 of Open MPI's time against 0.87-1.15 landing in scratch, whose
 * lines a rank otherwise fetches and writes back on every call (BENCHMARKS.md, "Twenty-fourth pass").
 */
static int land_peer(const coll_call_t *c, const uint8_t *const *pieces, const slices_t *sl, const uint8_t *dst)
{
    int me = c->comm->rank, n = c->comm->size;
    if (c->dev->kind != TP_DEVICE_HOST || n < 2 || slice_count(sl, me) == 0 || !dst_apart(c, pieces, sl, dst))
        return -1;
    return me == 0 ? 1 : 0;
}

/* Where part k of peer p's contribution lands: dst's part k for the landing peer lp, else a slot of scratch. */
static uint8_t *part_at(coll_call_t *c, uint8_t *dst, int lp, int p, size_t k, size_t pbytes)
{
    return p == lp ? dst + k * pbytes : coll_slot(c, p, (int)(k % COLL_WINDOW));
}

/*
 * The scatter-reduce core: pieces[j] is this rank's contribution to slice j, dst where this rank's reduced slice
 * goes. With gather set, each reduced part also goes to every rank, and the other slices land in dst_all.
 */
static tp_status_t scatter_reduce(coll_call_t *c, const uint8_t *const *pieces, const slices_t *sl, uint8_t *dst,
                                  int gather, uint8_t *dst_all)
{
    int me = c->comm->rank, n = c->comm->size, lp = land_peer(c, pieces, sl, dst);
    coll_state_t *cs = c->cs;
    size_t es = sl->es, pe = sl->pe, pbytes = pe * es;
    size_t mine = slice_count(sl, me), parts = slice_parts(mine, pe);
    tp_xfer_t **rx = cs->xa, **gx = cs->xb;
    tp_status_t s = TP_OK;
    for (int p = 0; p < n && s == TP_OK; p++) {
        if (p == me) continue;
        for (size_t k = 0; k < parts && k < COLL_WINDOW && s == TP_OK; k++) {
            rx[p * COLL_WINDOW + k] = coll_xfer(c, p, 0, 0, part_at(c, dst, lp, p, k, pbytes),
                                                slice_part_elems(mine, pe, k) * es, (uint32_t)k, pbytes);
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
            cs->srcs[p] = (p == me ? pieces[me] + k * pbytes : part_at(c, dst, lp, p, k, pbytes)) + red * es;
        s = c->dev->reduce(c->id.dtype, c->id.op, dst + k * pbytes + red * es, cs->srcs, n, have - red, NULL);
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
                x->buf = part_at(c, dst, lp, p, k2, pbytes);
                x->first_part = (uint32_t)k2;
                s = coll_post(c, x);
            }
        }
        red = 0;
        k++;
    }
    return s == TP_OK ? coll_wait_all(c) : s;
}

/* Two ranks whose peer's bytes are lent where they land: each span is reduced with this rank's piece into dst at
 * once, in rank order, with no copy into scratch; an element split across spans waits in carry. */
typedef struct pair_reduce {
    coll_call_t *c;
    const uint8_t *own;
    uint8_t *dst;
    int own_first; /* this rank is the lower one: its piece is the left operand */
    size_t es, carry_n;
    uint8_t carry[16];
    tp_xfer_t *gx; /* all_reduce: the reduced prefix goes to the peer as it grows */
} pair_reduce_t;

static tp_status_t pair_reduce_elems(pair_reduce_t *pr, size_t first, const void *theirs, size_t count)
{
    const void *srcs[2] = {pr->own + first * pr->es, theirs};
    if (!pr->own_first) srcs[0] = theirs, srcs[1] = pr->own + first * pr->es;
    tp_status_t s = pr->c->dev->reduce(pr->c->id.dtype, pr->c->id.op, pr->dst + first * pr->es, srcs, 2, count, NULL);
    if (s == TP_OK && pr->gx != NULL) pr->gx->ready = (first + count) * pr->es;
    return s;
}

static tp_status_t pair_reduce_deliver(void *arg, size_t off, const void *bytes, size_t n)
{
    pair_reduce_t *pr = arg;
    const uint8_t *b = bytes;
    size_t es = pr->es;
    tp_status_t s = TP_OK;
    if (pr->carry_n > 0) { /* complete the element the last span split */
        size_t k = es - pr->carry_n < n ? es - pr->carry_n : n;
        memcpy(pr->carry + pr->carry_n, b, k);
        pr->carry_n += k, b += k, off += k, n -= k;
        if (pr->carry_n < es) return TP_OK;
        pr->carry_n = 0;
        if ((s = pair_reduce_elems(pr, off / es - 1, pr->carry, 1)) != TP_OK) return s;
    }
    if (n / es > 0) s = pair_reduce_elems(pr, off / es, b, n / es);
    memcpy(pr->carry, b + n / es * es, n % es);
    pr->carry_n = n % es;
    return s;
}

/* Where a piece the peer lends lands before it is reduced: dst itself, unless it overlaps a piece this rank still
 * needs (its own, in place) or lends (the peer's); else the scratch where it fits; else NULL (the transport's own
 * pieces). */
static void *pair_land(coll_call_t *c, uint8_t *dst, const uint8_t *const *pieces, const slices_t *sl)
{
    if (dst_apart(c, pieces, sl, dst)) return dst;
    return slice_count(sl, c->comm->rank) * sl->es <= coll_scratch_bytes(c->cs) ? c->cs->scratch : NULL;
}

/* scatter_reduce for two ranks over a transport that lends what it receives (shared memory): one receive for the
 * slice, reduced span by span as it arrives; the frames are the same parts the windowed path exchanges. The pieces
 * go streamed or lent (coll_pair_way.c). */
static tp_status_t scatter_reduce_pair(coll_call_t *c, const uint8_t *const *pieces, const slices_t *sl, void *dst,
                                       int gather, uint8_t *dst_all)
{
    int me = c->comm->rank, p = 1 - me, sample = 0;
    size_t es = sl->es, pbytes = sl->pe * es, mine = slice_count(sl, me), theirs = slice_count(sl, p);
    coll_pair_class_t *cls = coll_pair_class(c->cs, !gather, (mine + theirs) * es);
    int way = coll_pair_way(cls, me == 0, &sample), lend = way == COLL_PAIR_LENT;
    int64_t t0 = sample ? tp_now_ns() : 0; /* only the calls the leader times */
    pair_reduce_t pr = {.c = c, .own = pieces[me], .dst = dst, .own_first = me == 0, .es = es};
    tp_xfer_t *rx = coll_xfer(c, p, 0, 0, NULL, mine * es, 0, pbytes);
    if (rx == NULL) return TP_ERR_NO_MEMORY;
    rx->deliver = pair_reduce_deliver;
    rx->deliver_arg = &pr;
    if (cls != NULL) rx->land = pair_land(c, dst, pieces, sl);
    tp_status_t s = coll_post(c, rx);
    if (s == TP_OK && gather)
        s = coll_post(c, coll_xfer(c, p, 0, 1, dst_all + slice_first(sl, p) * es, theirs * es, 0, pbytes));
    tp_xfer_t *tx = coll_xfer(c, p, 1, 0, (void *)pieces[p], theirs * es, 0, pbytes);
    if (tx != NULL) tx->streamed = !lend, tx->lend = lend; /* streamed: the peer reduces it as it comes */
    if (s == TP_OK) s = coll_post(c, tx);
    if (s == TP_OK && gather) {
        pr.gx = coll_xfer(c, p, 1, 1, dst, mine * es, 0, pbytes);
        if (pr.gx != NULL) pr.gx->ready = 0, pr.gx->streamed = !lend, pr.gx->lend = lend; /* raised as reduced */
        s = coll_post(c, pr.gx);
    }
    if (s == TP_OK) s = coll_wait_all(c);
    if (s == TP_OK)
        coll_pair_done(cls, me == 0, way, sample, sample ? tp_now_ns() - t0 : 0, (mine + theirs) * es, tx, rx);
    return s;
}

/* Whether the two-rank path applies: the peer's transport lends its bytes and the buffers are the host's. */
static int pair_lends(coll_call_t *c, size_t es)
{
    return c->comm->size == 2 && es <= sizeof(((pair_reduce_t *)0)->carry) && c->dev->kind == TP_DEVICE_HOST &&
           (tp_transports_flags(c->comm->world, c->comm->world_ranks[1 - c->comm->rank]) & TP_TRANSPORT_DELIVER);
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
    uint8_t *dst = (uint8_t *)recv + slice_first(&sl, c->comm->rank) * es;
    if (pair_lends(c, es)) return scatter_reduce_pair(c, pc, &sl, dst, 1, recv);
    return scatter_reduce(c, pc, &sl, dst, 1, recv);
}

tp_status_t coll_reduce_scatter(coll_call_t *c, const void *send, void *recv, size_t count)
{
    int n = c->comm->size;
    size_t es = tp_dtype_size(c->id.dtype);
    slices_t sl = {.base = count, .rem = 0, .es = es, .pe = c->part_bytes / es > 0 ? c->part_bytes / es : 1};
    const uint8_t **pc = c->cs->pieces;
    for (int j = 0; j < n; j++) pc[j] = (const uint8_t *)send + (size_t)j * count * es;
    if (pair_lends(c, es)) return scatter_reduce_pair(c, pc, &sl, recv, 0, NULL);
    return scatter_reduce(c, pc, &sl, recv, 0, NULL);
}
