/*
 * coll_algos.c: the dissemination pattern (barrier, broadcast and the small all_gather and all_reduce) and the
 * large broadcast. In round r (d = 2^r < N) every rank sends to rank + d what it knows and receives from rank - d, a
 * round's frames leaving only once the rounds before have arrived: ceil(log2 N) rounds, one peer each, and after
 * them every rank has heard from every rank through a chain of frames whose identities each receiver compared with
 * its own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_internal.h"
#include "runtime_log.h"

#define DISSEM_MAX_ROUNDS 32
#define DISSEM_SEGS 3 /* frames per round: the sender's own block, then the others split where they wrap */

typedef struct seg {
    int first, count;
} seg_t;

/* Blocks top - cnt + 1 .. top (mod n) as runs of consecutive ranks: top alone first when split_top. */
static int segments(int top, int cnt, int n, int split_top, seg_t out[DISSEM_SEGS])
{
    int k = 0;
    if (split_top) {
        out[k++] = (seg_t){top, 1};
        cnt--;
        top = (top - 1 + n) % n;
    }
    if (cnt > 0) {
        int first = (top - cnt + 1 + n) % n;
        if (first + cnt <= n) {
            out[k++] = (seg_t){first, cnt};
        } else {
            out[k++] = (seg_t){first, n - first};
            out[k++] = (seg_t){0, cnt - (n - first)};
        }
    }
    return k;
}

/* Posts round r's sends (to rank + d) or receives (from rank - d); both sides derive the same frames. */
static tp_status_t post_round(coll_call_t *c, const coll_dissem_t *m, int r, int is_send)
{
    int n = c->comm->size, d = 1 << r, me = m->place != NULL ? m->place[c->comm->rank] : c->comm->rank;
    int at = is_send ? (me + d) % n : (me - d + n) % n, sender = is_send ? me : at; /* places on the ring */
    int peer = m->order != NULL ? m->order[at] : at;
    uint8_t step = (uint8_t)(DISSEM_SEGS * r);
    if (m->blocks == NULL) { /* barrier (no bytes) or broadcast: the root's bytes ride the round that reaches
                              * a rank first, once */
        int carries = m->bytes > 0 && (sender - m->root + n) % n < d && (sender + d - m->root + n) % n >= d;
        return coll_post(c, coll_xfer(c, peer, is_send, step, carries ? m->buf : NULL, carries ? m->bytes : 0,
                                      0, 0));
    }
    int cnt = d < n - d ? d : n - d;
    seg_t seg[DISSEM_SEGS];
    int k = segments(sender, cnt, n, m->own != NULL, seg);
    tp_status_t s = TP_OK;
    for (int i = 0; i < k && s == TP_OK; i++) {
        int last = seg[i].first + seg[i].count - 1;
        uint8_t *p = m->blocks[seg[i].first];
        size_t len = (size_t)((uint8_t *)m->blocks[last] + m->lens[last] - p);
        if (is_send && m->own != NULL && i == 0) p = (uint8_t *)m->own; /* split_top: seg 0 is this rank's */
        s = coll_post(c, coll_xfer(c, peer, is_send, (uint8_t)(step + i), p, len, 0, 0));
    }
    return s;
}

tp_status_t coll_dissem(coll_call_t *c, const coll_dissem_t *m)
{
    int n = c->comm->size, rounds = 0;
    while (rounds < DISSEM_MAX_ROUNDS - 1 && (1L << rounds) < n) rounds++;
    int rx_end[DISSEM_MAX_ROUNDS], base = c->cs->pool_used;
    tp_status_t s = TP_OK;
    for (int r = 0; r < rounds && s == TP_OK; r++) {
        s = post_round(c, m, r, 0);
        rx_end[r] = c->cs->pool_used;
    }
    for (int r = 0, i = base; r < rounds && s == TP_OK; r++) {
        while (r > 0 && i < rx_end[r - 1] && s == TP_OK) { /* round r carries what rounds 0..r-1 brought */
            if (c->cs->pool[i].complete) i++;
            else s = coll_progress(c);
        }
        if (s == TP_OK) s = post_round(c, m, r, 1);
    }
    return s == TP_OK ? coll_wait_all(c) : s;
}

tp_status_t coll_barrier(coll_call_t *c)
{
    coll_dissem_t m = {.order = c->cs->order, .place = c->cs->place};
    return coll_dissem(c, &m);
}

/* A rank's one CPU, or -1 when its record names none or several. */
static long single_cpu(const char *cpus)
{
    char *end;
    if (cpus == NULL || *cpus < '0' || *cpus > '9') return -1;
    long cpu = strtol(cpus, &end, 10);
    return *end == '\0' ? cpu : -1;
}

/* A rank's CPU and kernel, for grouping the ranks that share a CPU. */
typedef struct ring_key {
    const char *kernel;
    long cpu;
    int rank;
} ring_key_t;

/* By kernel, then CPU, then rank: ranks that share a CPU end up side by side, lowest rank first. */
static int ring_key_cmp(const void *a, const void *b)
{
    const ring_key_t *x = a, *y = b;
    int k = strcmp(x->kernel, y->kernel);
    if (k != 0) return k;
    if (x->cpu != y->cpu) return x->cpu < y->cpu ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

/* The ranks of one CPU: key[start .. start + len), the lowest rank first. */
typedef struct ring_run {
    int start, len, low;
} ring_run_t;

static int ring_run_cmp(const void *a, const void *b)
{
    int x = ((const ring_run_t *)a)->low, y = ((const ring_run_t *)b)->low;
    return (x > y) - (x < y);
}

tp_status_t coll_dissem_ring(const tp_comm_t *comm, int **order, int **place)
{
    int n = comm->size;
    *order = *place = NULL;
    if (n < 3) return TP_OK;
    ring_key_t *key = malloc((size_t)n * sizeof(*key));
    ring_run_t *run = malloc((size_t)n * sizeof(*run)); /* one per CPU */
    int *o = malloc((size_t)n * sizeof(int)), *pl = malloc((size_t)n * sizeof(int));
    if (key == NULL || run == NULL || o == NULL || pl == NULL) {
        free(key), free(run), free(o), free(pl);
        return TP_ERR_NO_MEMORY;
    }
    int bound = 1, runs = 0, shared = 0;
    for (int i = 0; i < n && bound; i++) {
        const tp_peer_record_t *me = &comm->world->peers[comm->world_ranks[i]];
        key[i] = (ring_key_t){.kernel = me->kernel, .cpu = single_cpu(me->cpus), .rank = i};
        bound = key[i].cpu >= 0 && me->kernel != NULL;
    }
    if (bound) {
        qsort(key, (size_t)n, sizeof(*key), ring_key_cmp);
        for (int i = 0; i < n; i++)
            if (i > 0 && key[i].cpu == key[i - 1].cpu && strcmp(key[i].kernel, key[i - 1].kernel) == 0) {
                run[runs - 1].len++;
                shared = 1;
            } else {
                run[runs++] = (ring_run_t){.start = i, .len = 1, .low = key[i].rank};
            }
    }
    int placed = 0, identity = 1;
    if (bound && shared) {
        qsort(run, (size_t)runs, sizeof(*run), ring_run_cmp);
        /* Round robin over the CPUs: the k-th rank of each, CPU by CPU, for k = 0, 1, ...; a CPU whose ranks are
         * all placed leaves the list. */
        for (int k = 0; runs > 0; k++) {
            int left = 0;
            for (int g = 0; g < runs; g++) {
                int r = key[run[g].start + k].rank;
                pl[r] = placed;
                identity = identity && r == placed;
                o[placed++] = r;
                if (run[g].len > k + 1) run[left++] = run[g];
            }
            runs = left;
        }
    }
    free(key), free(run);
    if (!bound || !shared || identity) {
        free(o), free(pl);
        return TP_OK;
    }
    *order = o;
    *place = pl;
    char list[96] = "";
    for (int v = 0, used = 0; v < n && used < (int)sizeof(list) - 12; v++)
        used += snprintf(list + used, sizeof(list) - (size_t)used, "%s%d", v > 0 ? "," : "", o[v]);
    tp_log(TP_LOG_DEBUG, "coll", "ranks share CPUs: barrier, small all_reduce and all_gather go round the ring %s%s",
           list, n > 16 ? ",..." : "");
    return TP_OK;
}

/*
 * Small: dissemination, the root's bytes riding the round that first reaches each rank. Larger: every pair of
 * ranks first trades an empty frame, so ranks that disagree on the root (or anything else) see each other's headers
 * and fail instead of waiting; then, two ranks: the root sends; more: a chain from the root, each rank forwarding
 * the bytes of a part as soon as they arrive.
 */
tp_status_t coll_broadcast(coll_call_t *c, void *buf, size_t bytes, int root)
{
    int me = c->comm->rank, n = c->comm->size;
    if (bytes <= COLL_SMALL_BYTES) {
        coll_dissem_t m = {.buf = buf, .bytes = bytes, .root = root};
        return coll_dissem(c, &m);
    }
    tp_status_t s = TP_OK;
    for (int p = 0; p < n && s == TP_OK; p++) {
        if (p == me) continue;
        s = coll_post(c, coll_xfer(c, p, 0, 1, NULL, 0, 0, 0));
        if (s == TP_OK) s = coll_post(c, coll_xfer(c, p, 1, 1, NULL, 0, 0, 0));
    }
    if (s == TP_OK && n == 2) {
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
