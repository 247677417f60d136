/*
 * coll_hier_reduce.c: all_reduce over hosts, still the left fold ((r0 + r1) + r2) + ... in rank order. A host's
 * ranks can only be added up front when they continue the fold, so:
 * - small calls: each host's first rank (its leader) gathers its ranks' vectors, the leaders trade them raw, each
 *   leader folds all N in rank order and hands the result to its ranks (any placement);
 * - large calls (each host holds as many consecutive ranks): rank (h, i) owns slice i of its host; it folds the
 *   running partial of hosts 0..h-1 (from (h - 1, i)) and its host's pieces in rank order, and passes it on; host
 *   m - 1's result goes round to host 0, then on to m - 2; every owner hands its slice to its host's ranks. Parts
 *   move as their prefixes are reduced, so the chain keeps the bandwidth.
 */
#include "coll_hier.h"

static tp_status_t small_reduce(coll_call_t *c, const coll_hier_t *h, const void *send, void *recv, size_t count)
{
    int me = c->comm->rank, n = c->comm->size, g0 = h->host_of[me], lead = h->first[g0], m = h->hosts;
    size_t bytes = count * tp_dtype_size(c->id.dtype);
    coll_state_t *cs = c->cs;
    uint8_t *blk = cs->scratch; /* rank p's vector at blk + p * bytes (this rank's stays unused) */
    tp_status_t s = TP_OK;
    if (me != lead) {
        s = coll_post(c, coll_xfer(c, lead, 1, STEP_PIECE, (void *)send, bytes, 0, 0));
        if (s == TP_OK) s = coll_post(c, coll_xfer(c, lead, 0, STEP_RESULT, recv, bytes, 0, 0));
        return s == TP_OK ? coll_wait_all(c) : s;
    }
    tp_xfer_t **in = cs->xb, **out = cs->xa; /* in[p]: rank p's vector here; out: them to the other leaders */
    const int *mine = h->members + h->start_of[g0];
    int w = h->count[g0], nout = 0;
    for (int j = 1; j < w && s == TP_OK; j++) {
        int p = mine[j];
        s = coll_post(c, in[p] = coll_xfer(c, p, 0, STEP_PIECE, blk + (size_t)p * bytes, bytes, 0, 0));
    }
    for (int g = 0; g < m && s == TP_OK; g++) {
        if (g == g0) continue;
        for (int j = 0; j < h->count[g] && s == TP_OK; j++) { /* leader g's ranks, a step per local index */
            int r = h->members[h->start_of[g] + j];
            s = coll_post(c,
                          coll_xfer(c, h->first[g], 0, (uint8_t)(STEP_RAW + j), blk + (size_t)r * bytes, bytes, 0, 0));
        }
        for (int j = 0; j < w && s == TP_OK; j++) { /* own vector first, then the others as they arrive */
            void *v = j == 0 ? (void *)send : blk + (size_t)mine[j] * bytes;
            tp_xfer_t *x = coll_xfer(c, h->first[g], 1, (uint8_t)(STEP_RAW + j), v, bytes, 0, 0);
            if (x != NULL && j > 0) x->ready = 0;
            s = coll_post(c, out[nout++] = x);
        }
    }
    for (int busy = 1; busy && s == TP_OK;) {
        busy = 0;
        for (int o = 0; o < nout; o++) {
            int j = o % w;
            if (j == 0) continue;
            tp_xfer_t *x = in[mine[j]];
            busy |= !x->complete;
            out[o]->ready = x->complete ? bytes : x->done;
        }
        if (busy) s = coll_progress(c);
    }
    if (s == TP_OK) s = coll_wait_all(c); /* in place, this rank's vector has left before recv is written */
    if (s != TP_OK) return s;
    for (int p = 0; p < n; p++) cs->srcs[p] = p == me ? send : blk + (size_t)p * bytes;
    if ((s = c->dev->reduce(c->id.dtype, c->id.op, recv, cs->srcs, n, count, NULL)) != TP_OK) return s;
    for (int j = 1; j < h->count[g0] && s == TP_OK; j++)
        s = coll_post(c, coll_xfer(c, mine[j], 1, STEP_RESULT, recv, bytes, 0, 0));
    return s == TP_OK ? coll_wait_all(c) : s;
}

/* Slot of source j (this host's ranks, then prev) for part k, NULL for this rank and a missing prev. */
static tp_xfer_t **chain_rx(coll_call_t *c, const chain_t *ch, int j, size_t k)
{
    int p = j < ch->w ? ch->base + j : ch->prev;
    if ((j < ch->w && j == ch->i) || p < 0) return NULL;
    return &c->cs->xa[p * COLL_WINDOW + k % COLL_WINDOW];
}

tp_status_t coll_hier_chain_slots(coll_call_t *c, const chain_t *ch, size_t parts)
{
    size_t es = ch->sl.es, pbytes = ch->sl.pe * es;
    tp_status_t s = TP_OK;
    for (int j = 0; j <= ch->w && s == TP_OK; j++) {
        int p = j < ch->w ? ch->base + j : ch->prev;
        if (chain_rx(c, ch, j, 0) == NULL) continue;
        for (size_t k = 0; k < parts && k < COLL_WINDOW && s == TP_OK; k++) {
            tp_xfer_t **x = chain_rx(c, ch, j, k);
            *x = coll_xfer(c, p, 0, j < ch->w ? STEP_PIECE : STEP_PARTIAL, coll_slot(c, p, (int)k),
                           slice_part_elems(ch->block, ch->sl.pe, k % ch->ppb) * es, (uint32_t)k, pbytes);
            s = coll_post(c, *x);
        }
    }
    return s;
}

size_t coll_hier_chain_have(coll_call_t *c, const chain_t *ch, size_t k, size_t m)
{
    size_t have = m;
    for (int j = 0; j <= ch->w; j++) {
        tp_xfer_t **x = chain_rx(c, ch, j, k);
        if (x == NULL) continue;
        size_t got = (*x)->complete ? m : (*x)->done / ch->sl.es;
        if (got < have) have = got;
    }
    return have;
}

tp_status_t coll_hier_chain_repost(coll_call_t *c, const chain_t *ch, size_t k, size_t parts)
{
    tp_status_t s = TP_OK;
    for (int j = 0; j <= ch->w && s == TP_OK; j++) {
        tp_xfer_t **rx = chain_rx(c, ch, j, k), *x = rx != NULL ? *rx : NULL;
        if (x == NULL) continue;
        if (!x->complete) {
            s = coll_progress(c), j--;
        } else if (k + COLL_WINDOW < parts) {
            size_t k2 = k + COLL_WINDOW;
            x->len = slice_part_elems(ch->block, ch->sl.pe, k2 % ch->ppb) * ch->sl.es;
            x->first_part = (uint32_t)k2;
            s = coll_post(c, x);
        }
    }
    return s;
}

/* Posts every transfer of the chain: pieces and results within the host, partials and finals between hosts. */
static tp_status_t chain_post(coll_call_t *c, const chain_t *ch, uint8_t *recv, tp_xfer_t **out, tp_xfer_t **fin,
                              tp_xfer_t **fwd)
{
    coll_state_t *cs = c->cs;
    const slices_t *sl = &ch->sl;
    size_t es = sl->es, pbytes = sl->pe * es, mine = slice_count(sl, ch->i), parts = slice_parts(mine, sl->pe);
    uint8_t *dst = recv + slice_first(sl, ch->i) * es;
    tp_xfer_t **res = cs->xb;
    tp_status_t s = coll_hier_chain_slots(c, ch, parts); /* the host's pieces, and the partial from prev */
    for (int j = 0; j < ch->w && s == TP_OK; j++) {      /* this host: pieces out, results in and out */
        if (j == ch->i) continue;
        int p = ch->base + j;
        size_t theirs = slice_count(sl, j);
        s = coll_post(c, coll_xfer(c, p, 1, STEP_PIECE, (void *)cs->pieces[j], theirs * es, 0, pbytes));
        if (s == TP_OK)
            s = coll_post(c, coll_xfer(c, p, 0, STEP_RESULT, recv + slice_first(sl, j) * es, theirs * es, 0, pbytes));
        res[p] = coll_xfer(c, p, 1, STEP_RESULT, dst, mine * es, 0, pbytes);
        if (res[p] != NULL) res[p]->ready = 0; /* raised as the final slice is known */
        if (s == TP_OK) s = coll_post(c, res[p]);
    }
    int last = ch->g == ch->m - 1;
    if (s == TP_OK) { /* the partial on to next, or (last host) the final round to host 0 */
        *out = coll_xfer(c, last ? ch->fin_from : ch->next, 1, last ? STEP_FINAL : STEP_PARTIAL, dst, mine * es, 0,
                         pbytes);
        if (*out != NULL) (*out)->ready = 0;
        s = coll_post(c, *out);
    }
    if (s == TP_OK && !last) { /* the final slice comes round into dst, where the partial was */
        s = coll_post(c, *fin = coll_xfer(c, ch->fin_from, 0, STEP_FINAL, dst, mine * es, 0, pbytes));
        if (s == TP_OK && ch->g < ch->m - 2) {
            *fwd = coll_xfer(c, ch->next, 1, STEP_FINAL, dst, mine * es, 0, pbytes);
            if (*fwd != NULL) (*fwd)->ready = 0;
            s = coll_post(c, *fwd);
        }
    }
    return s;
}

static void chain_results_ready(coll_call_t *c, const chain_t *ch, size_t ready)
{
    for (int j = 0; j < ch->w; j++)
        if (j != ch->i) c->cs->xb[ch->base + j]->ready = ready;
}

static tp_status_t chain_reduce(coll_call_t *c, const coll_hier_t *h, const void *send, void *recv, size_t count)
{
    coll_state_t *cs = c->cs;
    int me = c->comm->rank;
    chain_t ch = {.g = h->host_of[me], .i = h->local_of[me], .w = h->width, .m = h->hosts};
    ch.base = h->first[ch.g];
    ch.prev = ch.g > 0 ? h->first[ch.g - 1] + ch.i : -1;
    ch.next = ch.g < ch.m - 1 ? h->first[ch.g + 1] + ch.i : -1;
    ch.fin_from = ch.g == 0 || ch.g == ch.m - 1 ? h->first[ch.g == 0 ? ch.m - 1 : 0] + ch.i : ch.prev;
    size_t es = tp_dtype_size(c->id.dtype);
    coll_slices_init(&ch.sl, count, ch.w, es, c->part_bytes);
    size_t pe = ch.sl.pe, pbytes = pe * es, mine = slice_count(&ch.sl, ch.i), parts = slice_parts(mine, pe);
    ch.block = mine;
    ch.ppb = parts;
    for (int j = 0; j < ch.w; j++) cs->pieces[j] = (const uint8_t *)send + slice_first(&ch.sl, j) * es;
    uint8_t *dst = (uint8_t *)recv + slice_first(&ch.sl, ch.i) * es;
    tp_xfer_t *out = NULL, *fin = NULL, *fwd = NULL;
    tp_status_t s = chain_post(c, &ch, recv, &out, &fin, &fwd);
    int last = ch.g == ch.m - 1, nsrc = ch.w + (ch.prev >= 0);
    size_t red = 0;
    for (size_t k = 0; k < parts && s == TP_OK;) {
        size_t m = slice_part_elems(mine, pe, k), have = coll_hier_chain_have(c, &ch, k, m);
        if (have < m && have - red < COLL_REDUCE_CHUNK) {
            s = coll_progress(c);
            continue;
        }
        int q = 0; /* the fold's sources in rank order: hosts before this one, then this host's ranks */
        if (ch.prev >= 0) cs->srcs[q++] = coll_slot(c, ch.prev, (int)k) + red * es;
        for (int j = 0; j < ch.w; j++)
            cs->srcs[q++] = (j == ch.i ? cs->pieces[j] + k * pbytes : coll_slot(c, ch.base + j, (int)k)) + red * es;
        s = c->dev->reduce(c->id.dtype, c->id.op, dst + k * pbytes + red * es, cs->srcs, nsrc, have - red, NULL);
        if (s != TP_OK) break;
        red = have;
        out->ready = k * pbytes + red * es;
        if (last) chain_results_ready(c, &ch, out->ready);
        if (red < m) continue;
        s = coll_hier_chain_repost(c, &ch, k, parts);
        red = 0;
        k++;
    }
    while (s == TP_OK && fin != NULL) { /* the final slice: on to the next host and to this host's ranks */
        size_t got = fin->complete ? mine * es : fin->done;
        if (fwd != NULL) fwd->ready = got;
        chain_results_ready(c, &ch, got);
        if (fin->complete) break;
        s = coll_progress(c);
    }
    return s == TP_OK ? coll_wait_all(c) : s;
}

tp_status_t coll_hier_all_reduce(coll_call_t *c, const void *send, void *recv, size_t count)
{
    const coll_hier_t *h = coll_hier_of(c);
    if (coll_all_reduce_is_small(c, count)) return small_reduce(c, h, send, recv, count);
    return chain_reduce(c, h, send, recv, count);
}
