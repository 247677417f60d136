/*
 * coll_hier.c: a comm's hosts (ranks grouped by the host name in their records, the same table on every rank),
 * TP_COLL_HIER's choice per call, and the hierarchical all_gather: each rank trades its block with the ranks of the
 * same local index on the other hosts over the network, then hands the blocks of its index to its own host's ranks.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_hier.h"
#include "runtime_log.h"

/* A step is one byte: the steps of one pair must stay distinct, so very wide hosts or many hosts go flat. */
#define HIER_MAX_WIDTH 200

coll_hier_t *coll_hier_find(tp_comm_t *comm)
{
    int n = comm->size;
    coll_hier_t *h = calloc(1, sizeof(*h) + 5 * (size_t)n * sizeof(int));
    if (h == NULL) return NULL;
    h->host_of = (int *)(h + 1);
    h->local_of = h->host_of + n;
    h->first = h->local_of + n;
    h->count = h->first + n;
    h->members = h->count + n;
    const tp_peer_record_t *peers = comm->world->peers;
    for (int p = 0; p < n; p++) {
        const char *name = peers != NULL ? peers[comm->world_ranks[p]].host : "";
        int g = 0;
        while (g < h->hosts && strcmp(peers != NULL ? peers[comm->world_ranks[h->first[g]]].host : "", name) != 0) g++;
        if (g == h->hosts) h->first[h->hosts++] = p;
        h->host_of[p] = g;
        h->local_of[p] = h->count[g]++;
    }
    int *start = calloc((size_t)h->hosts + 1, sizeof(int));
    if (start == NULL) {
        free(h);
        return NULL;
    }
    for (int g = 0; g < h->hosts; g++) start[g + 1] = start[g] + h->count[g];
    for (int p = 0; p < n; p++) h->members[start[h->host_of[p]] + h->local_of[p]] = p;
    h->width = h->count[0];
    h->uniform = h->blocks = 1;
    int wide = 0;
    for (int g = 0; g < h->hosts; g++) {
        h->uniform &= h->count[g] == h->width;
        wide |= h->count[g] > 1;
        for (int j = 0; j < h->count[g]; j++) h->blocks &= h->members[start[g] + j] == h->first[g] + j;
    }
    h->start_of = start;
    int widest = 0;
    for (int g = 0; g < h->hosts; g++) widest = h->count[g] > widest ? h->count[g] : widest;
    const char *mode = tp_comm_setting(comm, "coll_hier");
    h->mode = mode != NULL && strcmp(mode, "off") == 0  ? COLL_HIER_OFF
              : mode != NULL && strcmp(mode, "on") == 0 ? COLL_HIER_ON
                                                        : COLL_HIER_AUTO;
    h->active =
        h->mode != COLL_HIER_OFF && h->hosts >= 2 && wide && h->hosts <= HIER_MAX_WIDTH && widest <= HIER_MAX_WIDTH;
    tp_log(TP_LOG_DEBUG, "coll", "comm %u: %d ranks on %d hosts (%s, %s): TP_COLL_HIER=%s, %s", comm->comm_id, n,
           h->hosts, h->uniform ? "as many on each" : "uneven", h->blocks ? "consecutive ranks" : "interleaved",
           mode != NULL ? mode : "auto", h->active ? "hierarchical" : "flat");
    return h;
}

void coll_hier_free(coll_hier_t *h)
{
    if (h == NULL) return;
    free(h->fold);
    free(h->start_of);
    free(h);
}

const coll_hier_t *coll_hier_of(coll_call_t *c) { return c->cs->hier->active ? c->cs->hier : NULL; }

static int hier_choice(coll_call_t *c, const coll_hier_t *h, size_t bytes)
{
    int n = c->comm->size, on = h->mode == COLL_HIER_ON;
    int halves = c->id.dtype == TP_BF16 || c->id.dtype == TP_F16;
    switch (c->id.coll) {
    case TP_COLL_ALL_GATHER:
    case TP_COLL_ALL_GATHERV:
        /* auto: small calls keep dissemination, whose fewer dependent hops won on the test hosts */
        if (!on && bytes - bytes / (size_t)n <= COLL_SMALL_BYTES) return 0;
        return h->uniform; /* pairs by local index: any placement, as many ranks on each host */
    case TP_COLL_ALL_REDUCE:
        /* bf16 and f16 fold in f32 and round once: a partial carried between hosts would round early */
        if (halves) return 0;
        if (coll_all_reduce_is_small(c, c->id.count)) return on;
        return h->uniform && h->blocks;
    case TP_COLL_REDUCE_SCATTER:
        /* the fold crosses hosts in rank order, a column of each; bytes: one rank's block; auto: large calls where a
         * rank's column (m blocks between hosts) is fewer than flat's w (m - 1) */
        if (halves || !h->uniform || !h->blocks) return 0;
        return on || (bytes * (size_t)(n - 1) > COLL_SMALL_BYTES && h->width * (h->hosts - 1) > h->hosts);
    case TP_COLL_BROADCAST: /* auto: large calls on interleaved ranks, where the flat chain crosses hosts each hop */
        return on || (bytes > COLL_SMALL_BYTES && !h->blocks);
    default: return 0;
    }
}

int coll_hier_wanted(coll_call_t *c, size_t bytes)
{
    const coll_hier_t *h = coll_hier_of(c);
    if (h == NULL || bytes == 0 || !hier_choice(c, h, bytes)) return 0;
    unsigned bit = 1u << c->id.coll;
    if (!(c->cs->hier->said & bit)) { /* once per collective, so a run's log shows which ones went this way */
        c->cs->hier->said |= bit;
        tp_log(TP_LOG_DEBUG, "coll", "comm %u: %s goes hierarchical (first: %s count %llu)", c->comm->comm_id,
               tp_coll_name(c->id.coll), tp_dtype_name(c->id.dtype), (unsigned long long)c->id.count);
    }
    return 1;
}

/* Rank of local index j on host g. */
static int member(const coll_hier_t *h, int g, int j) { return h->members[h->start_of[g] + j]; }

tp_status_t coll_hier_gather(coll_call_t *c, void *const *blocks, const size_t *lens)
{
    const coll_hier_t *h = coll_hier_of(c);
    int me = c->comm->rank, g0 = h->host_of[me], i = h->local_of[me], w = h->width, m = h->hosts;
    coll_state_t *cs = c->cs;
    tp_xfer_t **fwd = cs->xa, **in = cs->xb; /* fwd[g * w + j]: block of (g, i) to local j; in[g]: (g, i)'s */
    tp_status_t s = TP_OK;
    for (int g = 0; g < m && s == TP_OK; g++) { /* the network: the same local index on every other host */
        if (g == g0) continue;
        int q = member(h, g, i);
        s = coll_post(c, in[g] = coll_xfer(c, q, 0, 0, blocks[q], lens[q], 0, 0));
        if (s == TP_OK) s = coll_post(c, coll_xfer(c, q, 1, 0, blocks[me], lens[me], 0, 0));
    }
    for (int j = 0; j < w && s == TP_OK; j++) { /* this host: blocks of index i out, blocks of index j in */
        if (j == i) continue;
        int p = member(h, g0, j);
        /* this host's own blocks first (g0, then the next hosts), on both sides alike: a forwarded block waits for
         * its host, and a rank that called another collective must see this call's header from here, not wait */
        for (int k = 0; k < m && s == TP_OK; k++) {
            int g = (g0 + k) % m, r = member(h, g, j), q = member(h, g, i);
            s = coll_post(c, coll_xfer(c, p, 0, (uint8_t)(1 + g), blocks[r], lens[r], 0, 0));
            tp_xfer_t *x = coll_xfer(c, p, 1, (uint8_t)(1 + g), blocks[q], lens[q], 0, 0);
            if (x != NULL && g != g0) x->ready = 0; /* forwarded as it arrives */
            if (s == TP_OK) s = coll_post(c, fwd[g * w + j] = x);
        }
    }
    for (int busy = 1; busy && s == TP_OK;) {
        busy = 0;
        for (int g = 0; g < m; g++) {
            if (g == g0) continue;
            size_t got = in[g]->complete ? lens[member(h, g, i)] : in[g]->done;
            busy |= !in[g]->complete;
            for (int j = 0; j < w; j++)
                if (j != i) fwd[g * w + j]->ready = got;
        }
        if (busy) s = coll_progress(c);
    }
    return s == TP_OK ? coll_wait_all(c) : s;
}

/* Leader of host g for a broadcast from root: the root on its own host, else the host's first rank. */
static int bcast_leader(const coll_hier_t *h, int g, int root) { return g == h->host_of[root] ? root : h->first[g]; }

/*
 * Broadcast: every pair first trades an empty frame (ranks that disagree on the root see it in each other's headers
 * and fail instead of waiting, as the flat one does); then the root's host, then each next host in turn: the leader
 * receives from the previous host's leader and forwards each part as it arrives to the next leader and to its own
 * host's ranks. The bytes cross between hosts once per host, whatever the placement.
 */
tp_status_t coll_hier_broadcast(coll_call_t *c, void *buf, size_t bytes, int root)
{
    const coll_hier_t *h = coll_hier_of(c);
    int me = c->comm->rank, n = c->comm->size, m = h->hosts, gr = h->host_of[root], g0 = h->host_of[me];
    int lead = bcast_leader(h, g0, root);
    tp_status_t s = TP_OK;
    for (int p = 0; p < n && s == TP_OK; p++) {
        if (p == me) continue;
        s = coll_post(c, coll_xfer(c, p, 0, 1, NULL, 0, 0, 0));
        if (s == TP_OK) s = coll_post(c, coll_xfer(c, p, 1, 1, NULL, 0, 0, 0));
    }
    tp_xfer_t *in = NULL, **out = c->cs->xb;
    int nout = 0;
    if (s == TP_OK && me != root) {
        int from = me != lead ? lead : bcast_leader(h, (g0 - 1 + m) % m, root);
        s = coll_post(c, in = coll_xfer(c, from, 0, 0, buf, bytes, 0, 0));
    }
    if (s == TP_OK && me == lead && (g0 + 1) % m != gr)
        out[nout++] = coll_xfer(c, bcast_leader(h, (g0 + 1) % m, root), 1, 0, buf, bytes, 0, 0);
    for (int j = 0; j < h->count[g0] && me == lead; j++) {
        int p = member(h, g0, j);
        if (p != me) out[nout++] = coll_xfer(c, p, 1, 0, buf, bytes, 0, 0);
    }
    for (int o = 0; o < nout && s == TP_OK; o++) {
        if (out[o] != NULL && in != NULL) out[o]->ready = 0; /* forwarded as it arrives */
        s = coll_post(c, out[o]);
    }
    while (s == TP_OK && in != NULL && nout > 0) {
        for (int o = 0; o < nout; o++) out[o]->ready = in->complete ? bytes : in->done;
        if (in->complete) break;
        s = coll_progress(c);
    }
    return s == TP_OK ? coll_wait_all(c) : s;
}
