/*
 * coll_pair_way.c: which way a 2-rank all_reduce or reduce_scatter over a lending transport goes, streamed or lent,
 * chosen by the lower rank from its calls' times and followed by the other.
 *
 * Streamed: each rank writes its piece of the peer's slice into the transport (shm: the ring) and the peer reduces
 * it as it lands; the reduced slice goes back the same way as it grows. Lent: the peer reads each piece whole from
 * the sender's buffer (shm: CMA) into its receive's landing place and reduces it there, and reads the reduced slice
 * once it is whole. Which is faster depends on the machine: on a 16-core Xeon lent took 0.80-0.87 of streamed at
 * 1-4 MiB, on a 2-vCPU EPYC VM 1.4-1.7x (docs/BENCHMARKS.md, twentieth pass).
 *
 * The two ways move the same frames, so a call where the ranks differ is still right, only slower. Both ranks keep
 * the same schedule, call by call of the class (they make the same calls): an exploration two by two (lent, lent,
 * streamed, streamed, ...), then the best way but for probes of two calls the other way, 32, 64, ... 512 calls into
 * an epoch (the calls since the way last changed) and every 512 after (coll_pair_probes): a way that keeps losing
 * costs ever fewer calls. The lower rank (the leader) decides from its calls' times, counting only the second call
 * of a run of one way (the first after a change took longer, whichever way), and changes at a call between probes;
 * the other rank sees the change in how the leader's piece came in that call (x->peer_lent), and both start the
 * new epoch there. The ranks differ in that one call.
 */
#include <stdlib.h>

#include "coll_internal.h"
#include "runtime_log.h"

coll_pair_class_t *coll_pair_class(coll_state_t *cs, int reduce_scatter, size_t bytes)
{
    if (bytes < COLL_PAIR_MIN) return NULL;
    if (cs->pair_ways == NULL) {
        if ((cs->pair_ways = calloc(2 * COLL_PAIR_CLASSES, sizeof(*cs->pair_ways))) == NULL)
            return NULL; /* no memory for the table: streamed, as before it existed */
        for (int i = 0; i < 2 * COLL_PAIR_CLASSES; i++) {
            cs->pair_ways[i].reduce_scatter = i / COLL_PAIR_CLASSES;
            cs->pair_ways[i].min_bytes = (size_t)COLL_PAIR_MIN << i % COLL_PAIR_CLASSES;
        }
    }
    int k = 0;
    while (k < COLL_PAIR_CLASSES - 1 && bytes >= ((size_t)COLL_PAIR_MIN << (k + 1))) k++;
    return &cs->pair_ways[reduce_scatter * COLL_PAIR_CLASSES + k];
}

static uint32_t median(const uint32_t *v)
{
    uint32_t s[COLL_PAIR_WINDOW];
    for (int i = 0; i < COLL_PAIR_WINDOW; i++) { /* insertion sort of a window */
        int j = i;
        for (; j > 0 && s[j - 1] > v[i]; j--) s[j] = s[j - 1];
        s[j] = v[i];
    }
    return s[COLL_PAIR_WINDOW / 2];
}

int coll_pair_probes(uint64_t o)
{
    uint64_t t = o & ~(uint64_t)1; /* a probe is two calls: the first of a run is not timed */
    if (t < COLL_PAIR_PROBE_FIRST) return 0;
    return t < COLL_PAIR_PROBE_MAX ? (t & (t - 1)) == 0 : t % COLL_PAIR_PROBE_MAX == 0;
}

int coll_pair_way(coll_pair_class_t *c, int leads, int *sample)
{
    *sample = 0;
    if (c == NULL) return COLL_PAIR_STREAMED;
    uint64_t n = c->count++;
    int way;
    if (c->no_lend) way = COLL_PAIR_STREAMED;
    else if (n < COLL_PAIR_EXPLORE) way = (int)((n / 2 + 1) % 2); /* lent, lent, streamed, streamed, ... */
    else {
        /* the leader's change waits for a call between probes: the follower, which has the same schedule, sees
         * it there and starts the same epoch at the same call */
        if (c->pending && !coll_pair_probes(n - c->epoch)) c->best = !c->best, c->epoch = n, c->pending = 0;
        way = coll_pair_probes(n - c->epoch) ? !c->best : c->best;
    }
    *sample = leads && n > 0 && way == c->last;
    c->last = way;
    return way;
}

int coll_pair_timed(coll_pair_class_t *c, int way, uint32_t ns_per_kib)
{
    c->ns_kib[way][c->next[way]] = ns_per_kib;
    c->next[way] = (c->next[way] + 1) % COLL_PAIR_WINDOW;
    if (c->have[way] < COLL_PAIR_WINDOW) c->have[way]++;
    if (c->pending || c->have[0] < COLL_PAIR_WINDOW || c->have[1] < COLL_PAIR_WINDOW) return 0;
    uint64_t best = median(c->ns_kib[c->best]), other = median(c->ns_kib[!c->best]);
    if (other * 100 >= best * (100 - COLL_PAIR_MARGIN_PCT)) return 0;
    c->pending = 1;
    return 1;
}

void coll_pair_done(coll_pair_class_t *c, int leads, int way, int sample, int64_t ns, size_t bytes,
                    const tp_xfer_t *sent, const tp_xfer_t *got)
{
    if (c == NULL) return;
    /* Lent only where both pieces were: a transport that cannot lend (no CMA, TP_SHM_CMA_BYTES=0) moved them whole
     * through its own memory, which is neither way. Both ranks see the same, so a class that was never lent by the
     * end of its exploration stops trying on both at once. */
    uint64_t n = c->count - 1;
    int lent = sent->peer_lent && got->peer_lent;
    c->lent += (uint64_t)lent;
    if (c->count >= COLL_PAIR_EXPLORE && c->lent == 0) c->no_lend = 1;
    if (!leads) { /* a call between probes where the leader went the other way: its change, and a new epoch */
        int leader = got->peer_lent ? COLL_PAIR_LENT : COLL_PAIR_STREAMED;
        if (n >= COLL_PAIR_EXPLORE && !c->no_lend && !coll_pair_probes(n - c->epoch) && leader != c->best)
            c->best = leader, c->epoch = n;
        return;
    }
    if (!sample || (way == COLL_PAIR_LENT && !lent) || bytes == 0) return;
    uint64_t per_kib = (uint64_t)(ns > 0 ? ns : 0) * 1024 / bytes;
    if (coll_pair_timed(c, way, per_kib > UINT32_MAX ? UINT32_MAX : (uint32_t)per_kib))
        tp_log(TP_LOG_DEBUG, "coll", "2-rank %s of %zu KiB and more now go %s (median %u ns per KiB, against %u)",
               c->reduce_scatter ? "reduce_scatter" : "all_reduce", c->min_bytes / 1024,
               c->best == COLL_PAIR_LENT ? "streamed" : "lent", median(c->ns_kib[!c->best]),
               median(c->ns_kib[c->best]));
}

void coll_pair_report(const coll_state_t *cs, int rank)
{
    for (int i = 0; cs->pair_ways != NULL && i < 2 * COLL_PAIR_CLASSES; i++) {
        const coll_pair_class_t *c = &cs->pair_ways[i];
        if (c->count > 0)
            tp_log(TP_LOG_DEBUG, "coll", "rank %d: 2-rank %s of %zu KiB and more: %llu calls, %llu lent%s%s", rank,
                   c->reduce_scatter ? "reduce_scatter" : "all_reduce", c->min_bytes / 1024,
                   (unsigned long long)c->count, (unsigned long long)c->lent, c->best ? ", now lent" : "",
                   c->no_lend ? ", never lent (the transport cannot)" : "");
    }
}
