/* coll_engine.c: the transfer pool, the wait loop and the pairwise exchange every algorithm uses. */
#include <stdlib.h>
#include <string.h>

#include "coll_internal.h"
#include "runtime_fate.h"
#include "runtime_transports.h"

void coll_begin(coll_call_t *c, coll_state_t *cs, const tp_device_ops_t *dev, tp_coll_kind_t coll, tp_dtype_t dtype,
                tp_op_t op, uint64_t count, int root)
{
    tp_comm_t *comm = cs->comm;
    c->comm = comm;
    c->cs = cs;
    c->dev = dev;
    c->cs->pool_used = 0;
    c->part_bytes = comm->world->part_bytes;
    c->id = (tp_frame_id_t){.coll = coll,
                            .dtype = dtype,
                            .op = op,
                            .comm_id = comm->comm_id,
                            .root = root,
                            .seq = comm->seq++,
                            .count = count};
    c->stop = (tp_stop_call_t){.name = tp_coll_name(coll), .index = c->id.seq, .peer = -1};
    c->stop_gen = 0;
}

/* Sets every field of x but its header (the frame identity) and what the transport fills before use (wire,
 * prefix): field by field, since a memset of the whole struct is a rep stos, 25 of the 85 ns a 2-rank small call
 * took to post its two transfers (BENCHMARKS.md, fourteenth pass). */
static void xfer_set(tp_xfer_t *x, int world_peer, int is_send, void *buf, size_t len, size_t part_bytes,
                     uint32_t first_part)
{
    x->peer = world_peer;
    x->is_send = is_send;
    x->buf = buf;
    x->len = len;
    x->ready = is_send ? len : 0;
    x->part_bytes = part_bytes;
    x->first_part = first_part;
    x->mem = TP_MEM_HOST;
    x->deliver = NULL;
    x->deliver_arg = NULL;
    x->mirror = NULL;
    x->land = NULL;
    x->streamed = x->lend = x->complete = x->growing = 0;
    x->done = x->frame_off = 0;
    x->next = NULL;
    x->prefix_left = 0;
}

tp_xfer_t *coll_xfer(coll_call_t *c, int peer, int is_send, uint8_t step, void *buf, size_t len, uint32_t first_part,
                     size_t part_bytes)
{
    coll_state_t *cs = c->cs;
    if (cs->pool_used == cs->pool_len) return NULL;
    tp_xfer_t *x = &cs->pool[cs->pool_used++];
    tp_frame_pack(x->header, &c->id, step);
    xfer_set(x, c->comm->world_ranks[peer], is_send, buf, len, part_bytes != 0 ? part_bytes : c->part_bytes,
             first_part);
    return x;
}

tp_status_t coll_post(coll_call_t *c, tp_xfer_t *x)
{
    if (x == NULL) return TP_ERR_NO_MEMORY;
    return tp_transports_post(c->comm->world, x);
}

tp_status_t coll_progress(coll_call_t *c)
{
    tp_status_t s = tp_transports_progress(c->comm->world, 1);
    if (s != TP_OK) return s;
    if ((s = tp_fate_failed()) != TP_OK) return s;
    uint64_t gen = tp_stop_gen();
    if (gen == c->stop_gen) return TP_OK;
    c->stop_gen = gen;
    return tp_stop_check(c->comm, &c->stop);
}

tp_status_t coll_wait_all(coll_call_t *c)
{
    coll_state_t *cs = c->cs;
    for (int i = 0; i < cs->pool_used;) {
        if (cs->pool[i].complete) {
            i++;
            continue;
        }
        tp_status_t s = coll_progress(c);
        if (s != TP_OK) return s;
    }
    return TP_OK;
}

/*
 * Tells every peer that this call failed (an empty frame of this call's identity, step TP_FRAME_STEP_DESYNC): a
 * rank waiting on this one in any algorithm reads it and fails too instead of waiting. Only what goes out at once
 * is sent: a peer whose socket is full is not reading from this rank, so it waits on another.
 */
static void coll_report_failure(coll_call_t *c)
{
    c->cs->pool_used = 0;
    for (int p = 0; p < c->comm->size; p++)
        if (p != c->comm->rank) (void)coll_post(c, coll_xfer(c, p, 1, TP_FRAME_STEP_DESYNC, NULL, 0, 0, 0));
    for (int i = 0; i < 4; i++) (void)tp_transports_progress(c->comm->world, 0);
    tp_transports_cancel(c->comm->world);
}

tp_status_t coll_fail(coll_call_t *c, tp_status_t s)
{
    tp_transports_cancel(c->comm->world);
    if (s == TP_ERR_DESYNC || s == TP_ERR_PROTOCOL) coll_report_failure(c);
    return s;
}

uint8_t *coll_slot(coll_call_t *c, int peer, int k)
{
    return c->cs->scratch + ((size_t)peer * COLL_WINDOW + (size_t)(k % COLL_WINDOW)) * c->cs->slot_bytes;
}

int coll_overlap(const void *a, size_t alen, const void *b, size_t blen)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return alen > 0 && blen > 0 && x < y + blen && y < x + alen;
}

static size_t parts_of(size_t len, size_t pb) { return len == 0 ? 1 : (len + pb - 1) / pb; }

/* In place: parts land in scratch, then move into rbuf[p] once that part of sbuf[p] has gone out. */
static tp_status_t pairwise_in_place(coll_call_t *c, int only, void *const *buf, const size_t *len)
{
    int me = c->comm->rank, n = c->comm->size;
    size_t pb = c->part_bytes;
    coll_state_t *cs = c->cs;
    tp_xfer_t **sx = cs->xb, **rx = cs->xa;
    size_t *next_copy = cs->next;
    memset(next_copy, 0, (size_t)n * sizeof(size_t));
    tp_status_t s = TP_OK;
    for (int p = 0; p < n && s == TP_OK; p++) {
        if (p == me || (only >= 0 && p != only)) continue;
        size_t parts = parts_of(len[p], pb);
        for (size_t k = 0; k < parts && k < COLL_WINDOW && s == TP_OK; k++) {
            size_t off = k * pb, l = len[p] - off < pb ? len[p] - off : pb;
            rx[p * COLL_WINDOW + k] = coll_xfer(c, p, 0, 0, coll_slot(c, p, (int)k), l, (uint32_t)k, pb);
            s = coll_post(c, rx[p * COLL_WINDOW + k]);
        }
        if (s == TP_OK) s = coll_post(c, sx[p] = coll_xfer(c, p, 1, 0, buf[p], len[p], 0, pb));
    }
    for (int busy = 1; busy && s == TP_OK;) {
        busy = 0;
        for (int p = 0; p < n; p++) {
            if (p == me || (only >= 0 && p != only)) continue;
            size_t parts = parts_of(len[p], pb);
            while (next_copy[p] < parts) {
                size_t k = next_copy[p], off = k * pb, l = len[p] - off < pb ? len[p] - off : pb;
                tp_xfer_t *x = rx[p * COLL_WINDOW + k % COLL_WINDOW];
                if (!x->complete || (!sx[p]->complete && sx[p]->done < off + l)) break;
                if ((s = c->dev->copy((char *)buf[p] + off, x->buf, l, NULL)) != TP_OK) break;
                next_copy[p]++;
                if (k + COLL_WINDOW < parts) { /* reuse the slot for the part after the window */
                    size_t k2 = k + COLL_WINDOW, off2 = k2 * pb, l2 = len[p] - off2 < pb ? len[p] - off2 : pb;
                    xfer_set(x, x->peer, 0, x->buf, l2, pb, (uint32_t)k2); /* the same receive's header */
                    if ((s = coll_post(c, x)) != TP_OK) break;
                }
            }
            busy |= next_copy[p] < parts || !sx[p]->complete;
        }
        if (busy && s == TP_OK) s = coll_progress(c);
    }
    return s;
}

int coll_mirror_peer(coll_call_t *c)
{
    if (c->dev->kind != TP_DEVICE_HOST) return -1;
    for (int p = 0; p < c->comm->size; p++)
        if (p != c->comm->rank && (tp_transports_flags(c->comm->world, c->comm->world_ranks[p]) & TP_TRANSPORT_MIRROR))
            return p;
    return -1;
}

tp_status_t coll_pairwise(coll_call_t *c, int only, void *const *sbuf, const size_t *slen, void *const *rbuf,
                          const size_t *rlen, int in_place, void *mirror)
{
    if (in_place) return pairwise_in_place(c, only, sbuf, slen);
    int mp = mirror != NULL ? coll_mirror_peer(c) : -1;
    tp_status_t s = TP_OK;
    for (int p = 0; p < c->comm->size && s == TP_OK; p++) {
        if (p == c->comm->rank || (only >= 0 && p != only)) continue;
        s = coll_post(c, coll_xfer(c, p, 0, 0, rbuf[p], rlen[p], 0, 0));
        tp_xfer_t *x = coll_xfer(c, p, 1, 0, sbuf[p], slen[p], 0, 0);
        if (x != NULL && p == mp) x->mirror = mirror;
        if (s == TP_OK) s = coll_post(c, x);
    }
    return s == TP_OK ? coll_wait_all(c) : s;
}
