/*
 * coll_hier_scatter.c: reduce_scatter over hosts (each holding as many consecutive ranks), still the left fold
 * ((r0 + r1) + r2) + ... in rank order. Rank (h, i) folds column i, the blocks of the ranks (g, i) of every host g,
 * one after the other: the running partial of hosts 0..h-1 (from (h - 1, i)), then its host's pieces in rank order,
 * and passes each part on to (h + 1, i) as soon as it is reduced; host m - 1 holds the finals and sends each to its
 * owner. A block crosses between hosts once per host instead of once per rank, and parts keep the chain's bandwidth.
 */
#include <stdlib.h>

#include "coll_hier.h"

/* Posts every transfer: the windows in, this rank's pieces to its host's ranks, the folds out, the final in. */
static tp_status_t column_post(coll_call_t *c, const chain_t *ch, const coll_hier_t *h, const uint8_t *send,
                               uint8_t *recv, tp_xfer_t **out)
{
    size_t es = ch->sl.es, bytes = ch->block * es, pbytes = ch->sl.pe * es;
    int last = ch->g == ch->m - 1;
    tp_status_t s = coll_hier_chain_slots(c, ch, ch->ppb * (size_t)ch->m);
    for (int j = 0; j < ch->w && s == TP_OK; j++) { /* rank (g0, j) folds the blocks of (g, j), in host order */
        for (int g = 0; g < ch->m && s == TP_OK && j != ch->i; g++)
            s = coll_post(c,
                          coll_xfer(c, ch->base + j, 1, STEP_PIECE, (void *)(send + (size_t)(h->first[g] + j) * bytes),
                                    bytes, (uint32_t)(g * ch->ppb), pbytes));
    }
    for (int g = 0; g < ch->m && s == TP_OK; g++) { /* partials on to next, or (last host) finals to their owners */
        out[g] = NULL;
        if (last && g == ch->m - 1) break;
        out[g] = coll_xfer(c, last ? h->first[g] + ch->i : ch->next, 1, last ? STEP_FINAL : STEP_PARTIAL,
                           h->fold + (size_t)g * bytes, bytes, last ? 0 : (uint32_t)(g * ch->ppb), pbytes);
        if (out[g] != NULL) out[g]->ready = 0; /* raised as parts are reduced */
        s = coll_post(c, out[g]);
    }
    if (s == TP_OK && !last) /* this rank's block comes back from host m - 1 once every host has added to it */
        s = coll_post(c, coll_xfer(c, h->first[ch->m - 1] + ch->i, 0, STEP_FINAL, recv, bytes, 0, pbytes));
    return s;
}

tp_status_t coll_hier_reduce_scatter(coll_call_t *c, const void *send, void *recv, size_t count)
{
    coll_state_t *cs = c->cs;
    coll_hier_t *h = cs->hier;
    int me = c->comm->rank;
    size_t es = tp_dtype_size(c->id.dtype), bytes = count * es;
    chain_t ch = {.g = h->host_of[me], .i = h->local_of[me], .w = h->width, .m = h->hosts, .block = count};
    ch.base = h->first[ch.g];
    ch.prev = ch.g > 0 ? h->first[ch.g - 1] + ch.i : -1;
    ch.next = ch.g < ch.m - 1 ? h->first[ch.g + 1] + ch.i : -1;
    ch.fin_from = -1;
    ch.sl = (slices_t){.base = count, .es = es, .pe = c->part_bytes / es > 0 ? c->part_bytes / es : 1};
    ch.ppb = slice_parts(count, ch.sl.pe);
    size_t pe = ch.sl.pe, pbytes = pe * es, parts = ch.ppb * (size_t)ch.m, need = (size_t)ch.m * bytes;
    if (h->fold_bytes < need) { /* kept for the next call: a large buffer's pages are not faulted in every time */
        uint8_t *f = realloc(h->fold, need);
        if (f == NULL) return TP_ERR_NO_MEMORY;
        h->fold = f;
        h->fold_bytes = need;
    }
    int last = ch.g == ch.m - 1, nsrc = ch.w + (ch.prev >= 0);
    tp_xfer_t **out = cs->xb; /* out[g]: the fold of block (g, i) on its way */
    tp_status_t s = column_post(c, &ch, h, send, recv, out);
    size_t red = 0;
    for (size_t k = 0; k < parts && s == TP_OK;) {
        size_t g = k / ch.ppb, kk = k % ch.ppb, m = slice_part_elems(count, pe, kk);
        size_t have = coll_hier_chain_have(c, &ch, k, m);
        if (have < m && have - red < COLL_REDUCE_CHUNK) {
            s = coll_progress(c);
            continue;
        }
        /* the fold's sources in rank order: hosts before this one, then this host's ranks */
        const uint8_t *own = (const uint8_t *)send + (size_t)(h->first[g] + ch.i) * bytes + kk * pbytes;
        int q = 0;
        if (ch.prev >= 0) cs->srcs[q++] = coll_slot(c, ch.prev, (int)k) + red * es;
        for (int j = 0; j < ch.w; j++) cs->srcs[q++] = (j == ch.i ? own : coll_slot(c, ch.base + j, (int)k)) + red * es;
        uint8_t *dst = last && g == (size_t)ch.m - 1 ? (uint8_t *)recv : h->fold + g * bytes;
        s = c->dev->reduce(c->id.dtype, c->id.op, dst + kk * pbytes + red * es, cs->srcs, nsrc, have - red, NULL);
        if (s != TP_OK) break;
        red = have;
        if (out[g] != NULL) out[g]->ready = kk * pbytes + red * es;
        if (red < m) continue;
        s = coll_hier_chain_repost(c, &ch, k, parts);
        red = 0;
        k++;
    }
    return s == TP_OK ? coll_wait_all(c) : s;
}
