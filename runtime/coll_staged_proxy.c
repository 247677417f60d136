/*
 * coll_staged_proxy.c: how the proxy runs one staged call. The call moves in parts of TP_PART_BYTES elements per
 * block: part k + 1 is copied into one half of the slab while part k's host collective runs on the other, and part
 * k's result is copied back behind it, all on the proxy's copy stream. The host engine does the arithmetic, so sums
 * are its rank-order sums, bit for bit.
 */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "coll_staged.h"
#include "runtime_fate.h"

int tp_stage_poll(const uint64_t *word, uint64_t value, const atomic_int *cancel, int64_t deadline_ns)
{
    /* a copy of ours lands soon: poll it longer (yielding, so a busy host still runs) before sleeping */
    int64_t start = tp_now_ns(), nap = 1000, eager = deadline_ns != 0 ? 2000000 : tp_stage.spin_ns;
    for (;;) {
        for (int i = 0; i < 64; i++)
            if (__atomic_load_n(word, __ATOMIC_ACQUIRE) >= value) return 1;
        int64_t now = tp_now_ns();
        if (cancel != NULL && (atomic_load(cancel) || tp_fate_failed() != TP_OK)) return 0;
        if (deadline_ns != 0 && now >= deadline_ns) return -1;
        if (now - start < tp_stage.spin_ns) continue;
        if (now - start < eager) {
            sched_yield();
            continue;
        }
        struct timespec ts = {0, nap}; /* idle: a device write is not a wakeup, so poll at a growing interval */
        nanosleep(&ts, NULL);
        if (nap < 20000) nap *= 2;
    }
}

static uint64_t mark(stage_lane_t *l, tp_status_t *s)
{
    uint64_t *tick = &l->words[2 * TP_STAGE_SLOTS];
    if (*s == TP_OK)
        *s = l->dev->stream_write64(l->copy, l->words_dev + ((uint8_t *)tick - (uint8_t *)l->words), ++l->tick);
    return l->tick;
}

static int ticked(stage_lane_t *l, uint64_t t)
{
    return tp_stage_poll(&l->words[2 * TP_STAGE_SLOTS], t, NULL, tp_now_ns() + tp_stage.timeout_ns) == 1;
}

static tp_status_t wait_tick(stage_lane_t *l, uint64_t t, const char *fn, const char *what)
{
    if (ticked(l, t)) return TP_OK;
    l->stuck = 1;
    tp_log(TP_LOG_ERROR, "stage",
           "%s: %s on device %s did not finish within TP_STAGE_TIMEOUT (%.1f s): the call failed; the copy may still "
           "land, so synchronise the device before reusing the call's buffers",
           fn, what, l->dev->name, (double)tp_stage.timeout_ns / 1e9);
    return TP_ERR_SYSTEM;
}

int tp_stage_copies_landed(stage_lane_t *lane)
{
    tp_status_t s = TP_OK;
    uint64_t t = mark(lane, &s);
    return s == TP_OK && ticked(lane, t);
}

/* One call's geometry: blocks of count elements (gatherv: counts[p]) move pe elements per part. */
typedef struct plan {
    stage_call_t *c;
    stage_lane_t *l;
    const tp_coll_args_t *a;
    const char *fn;
    int me, n;
    size_t es, pe, width, set_bytes, nparts; /* width: elements of one block's slot in a part set */
    size_t *pcounts, *pdisp, *disp; /* gatherv: this part's counts and offsets in the slab; the caller's offsets */
    tp_status_t s;                  /* the first failed copy queued */
} plan_t;

static size_t part_of(size_t count, size_t pe, size_t k)
{
    return k * pe >= count ? 0 : count - k * pe < pe ? count - k * pe : pe;
}

/* Queues a copy on the proxy's stream between the caller's buffer and the slab half of part k at slab_off. */
static void copy(plan_t *p, size_t k, int in, uint8_t *user, size_t slab_off, size_t bytes)
{
    if (bytes == 0 || p->s != TP_OK) return;
    uint8_t *slab = p->l->slab_dev + (k % 2) * p->set_bytes + slab_off;
    p->s = in ? p->l->dev->copy(slab, user, bytes, p->l->copy) : p->l->dev->copy(user, slab, bytes, p->l->copy);
}

static void gatherv_part(plan_t *p, size_t k)
{
    size_t off = 0;
    for (int r = 0; r < p->n; r++) {
        p->pcounts[r] = part_of(p->a->counts[r], p->pe, k);
        p->pdisp[r] = off;
        off += p->pcounts[r];
    }
}

/* Part k's copies into the slab (in) or back out of it to the caller's buffers. */
static void copies(plan_t *p, size_t k, int in)
{
    const tp_coll_args_t *a = p->a;
    size_t es = p->es, ck = part_of(a->count, p->pe, k), off = k * p->pe * es, b = ck * es;
    const uint8_t *send = a->send;
    uint8_t *recv = a->recv;
    switch (a->call) {
    case TP_CALL_ALL_REDUCE: copy(p, k, in, in ? (uint8_t *)send + off : recv + off, 0, b); break;
    case TP_CALL_BROADCAST:
        if ((p->me == a->peer) == in) copy(p, k, in, recv + off, 0, b);
        break;
    case TP_CALL_SEND:
        if (in) copy(p, k, 1, (uint8_t *)send + off, 0, b);
        break;
    case TP_CALL_RECV:
        if (!in) copy(p, k, 0, recv + off, 0, b);
        break;
    case TP_CALL_EXCHANGE: copy(p, k, in, in ? (uint8_t *)send + off : recv + off, in ? 0 : p->width * es, b); break;
    case TP_CALL_ALL_GATHER: {
        size_t blk = a->count * es;
        if (in) copy(p, k, 1, (uint8_t *)send + off, (size_t)p->me * b, b);
        for (int r = 0; !in && r < p->n; r++)
            if (r != p->me || send != recv + (size_t)r * blk)
                copy(p, k, 0, recv + (size_t)r * blk + off, (size_t)r * b, b);
        break;
    }
    case TP_CALL_ALL_GATHERV: {
        gatherv_part(p, k);
        size_t mine = p->disp[p->me] * es, at = k * p->pe * es;
        if (in) copy(p, k, 1, (uint8_t *)send + at, p->pdisp[p->me] * es, p->pcounts[p->me] * es);
        for (int r = 0; !in && r < p->n; r++)
            if (r != p->me || send != recv + mine)
                copy(p, k, 0, recv + p->disp[r] * es + at, p->pdisp[r] * es, p->pcounts[r] * es);
        break;
    }
    case TP_CALL_REDUCE_SCATTER:
        for (int r = 0; in && r < p->n; r++)
            copy(p, k, 1, (uint8_t *)send + (size_t)r * a->count * es + off, (size_t)r * b, b);
        if (!in) copy(p, k, 0, recv + off, (size_t)p->me * b, b);
        break;
    case TP_CALL_ALL_TO_ALL:
        for (int r = 0; r < p->n; r++)
            copy(p, k, in, (in ? (uint8_t *)send : recv) + (size_t)r * a->count * es + off, (size_t)r * b, b);
        break;
    default: break;
    }
}

/* Part k's host collective on the slab half it was copied into. */
static tp_status_t host_part(plan_t *p, size_t k)
{
    const tp_coll_args_t *a = p->a;
    size_t es = p->es, ck = part_of(a->count, p->pe, k);
    uint8_t *set = p->l->slab + (k % 2) * p->set_bytes;
    tp_coll_args_t h = {.call = a->call,
                        .count = ck,
                        .dtype = a->dtype,
                        .op = a->op,
                        .peer = a->peer,
                        .mem_type = TP_MEM_HOST,
                        .device = &tp_host_device_ops,
                        .send = set,
                        .recv = set};
    const tp_coll_ops_t *o = &tp_host_coll_ops;
    void *hs = tp_coll_host_state(p->c->sc->comm->coll_state);
    switch (a->call) {
    case TP_CALL_ALL_REDUCE: return o->all_reduce(hs, &h);
    case TP_CALL_BROADCAST: return o->broadcast(hs, &h);
    case TP_CALL_SEND: return o->send(hs, &h);
    case TP_CALL_RECV: return o->recv(hs, &h);
    case TP_CALL_EXCHANGE: h.recv = set + p->width * es; return o->exchange(hs, &h);
    case TP_CALL_ALL_GATHER: h.send = set + (size_t)p->me * ck * es; return o->all_gather(hs, &h);
    case TP_CALL_ALL_GATHERV:
        gatherv_part(p, k);
        h.counts = p->pcounts;
        h.count = p->pdisp[p->n - 1] + p->pcounts[p->n - 1];
        h.send = set + p->pdisp[p->me] * es;
        return o->all_gatherv(hs, &h);
    case TP_CALL_REDUCE_SCATTER: h.recv = set + (size_t)p->me * ck * es; return o->reduce_scatter(hs, &h);
    case TP_CALL_ALL_TO_ALL: return o->all_to_all(hs, &h);
    default: return TP_ERR_UNSUPPORTED;
    }
}

/* The lane's slab (made with the lane, see lane_of) holds two part sets of every comm's calls. */
static tp_status_t slab_fits(plan_t *p)
{
    if (p->l->slab_len >= 2 * p->set_bytes) return TP_OK;
    tp_log(TP_LOG_ERROR, "stage", "%s: %zu bytes of parts do not fit the %zu-byte slab of device %s", p->fn,
           2 * p->set_bytes, p->l->slab_len, p->l->dev->name);
    return TP_ERR_STATE;
}

/* A device failure: this rank cannot take its part, and its peers would wait for it forever, so fate hears of it. */
static tp_status_t device_failed(plan_t *p, tp_status_t s, const char *what, size_t k)
{
    char why[400];
    snprintf(why, sizeof(why), "%s", tp_last_error()); /* a timeout's own message says it all */
    if (!p->l->stuck) {
        snprintf(why, sizeof(why), "%s: %s of part %zu of %zu failed on device %s: %s", p->fn, what, k + 1, p->nparts,
                 p->l->dev->name, tp_last_error());
        tp_log(TP_LOG_ERROR, "stage", "%s", why);
    }
    if (p->c->sc->comm->size > 1) tp_fate_report(p->c->sc->comm->world->rank, why);
    return s;
}

/* The host engine failed a part (logged there): a peer's failure goes to the fate path, as a call's would. */
static tp_status_t part_failed(plan_t *p, tp_status_t s)
{
    if (tp_fate_status(s)) s = tp_fate_call_failed(s, p->fn);
    return s;
}

static tp_status_t run_parts(plan_t *p)
{
    tp_status_t s;
    copies(p, 0, 1);
    uint64_t t_in = mark(p->l, &p->s), t_out = 0;
    if (p->s != TP_OK) return device_failed(p, p->s, "queueing the copy in", 0);
    for (size_t k = 0; k < p->nparts; k++) {
        if ((s = wait_tick(p->l, t_in, p->fn, "the proxy's copy in")) != TP_OK)
            return device_failed(p, s, "the copy in", k);
        if (k + 1 < p->nparts) {
            copies(p, k + 1, 1);
            t_in = mark(p->l, &p->s);
        }
        if ((s = host_part(p, k)) != TP_OK) return part_failed(p, s);
        copies(p, k, 0);
        t_out = mark(p->l, &p->s);
        if (p->s != TP_OK) return device_failed(p, p->s, "queueing a copy", k);
    }
    if ((s = wait_tick(p->l, t_out, p->fn, "the proxy's copy out")) != TP_OK)
        return device_failed(p, s, "the copy out", p->nparts - 1);
    return TP_OK;
}

tp_status_t tp_stage_run(stage_call_t *c)
{
    tp_comm_t *comm = c->sc->comm;
    plan_t p = {.c = c,
                .l = c->lane,
                .a = &c->a,
                .fn = tp_stage_call_names[c->a.call],
                .me = comm->rank,
                .n = comm->size,
                .es = tp_dtype_size(c->a.dtype)};
    size_t pb = comm->world->part_bytes, most = c->a.count;
    p.pe = pb / p.es > 0 ? pb / p.es : 1;
    if (c->a.call == TP_CALL_ALL_GATHERV) {
        p.pcounts = calloc(3 * (size_t)p.n, sizeof(size_t));
        if (p.pcounts == NULL) return TP_ERR_NO_MEMORY;
        p.pdisp = p.pcounts + p.n;
        p.disp = p.pdisp + p.n;
        most = 0;
        size_t off = 0;
        for (int r = 0; r < p.n; r++) {
            p.disp[r] = off;
            off += c->a.counts[r];
            if (c->a.counts[r] > most) most = c->a.counts[r];
        }
    }
    p.nparts = most == 0 ? 1 : (most + p.pe - 1) / p.pe;
    p.width = p.nparts > 1 ? p.pe : most > 0 ? most : 1; /* a small call needs a small slab */
    p.set_bytes = (size_t)(p.n > 2 ? p.n : 2) * p.width * p.es;
    tp_status_t s = slab_fits(&p);
    if (s == TP_OK) s = run_parts(&p);
    free(p.pcounts);
    return s;
}
