/* shm_progress.c: frames through each pair's cells (headers, small payloads) and byte ring (large payloads, in
 * chunks), blocking on an eventfd when idle. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shm.h"

#define H TP_FRAME_HEADER_BYTES

/* Payload bytes of the current frame that are written; the frame begins at done minus those. */
static size_t part_done(const tp_xfer_t *x) { return x->frame_off > H ? x->frame_off - H : 0; }

/* n bytes of src into the ring at pos (two spans at the wrap), cached or streaming. */
static void ring_put(const shm_peer_t *p, int way, uint64_t pos, const uint8_t *src, size_t n)
{
    size_t off = (size_t)(pos & (p->ring - 1)), first = p->ring - off < n ? p->ring - off : n;
    if (way == SHM_WRITE_STREAMING) {
        shm_copy_streaming(p->out_ring + off, src, first);
        shm_copy_streaming(p->out_ring, src + first, n - first);
        return;
    }
    memcpy(p->out_ring + off, src, first);
    memcpy(p->out_ring, src + first, n - first);
}

/* A chunk of c payload bytes of the send x, from x->done on, into the ring at head, the way TP_SHM_WRITE picks for
 * it; with a mirror, into it as well in pieces small enough that the second read of each finds it in the cache (one
 * pass over the source, not two). A timed chunk's first ring write (all of it, or its first piece) is timed. */
static void put_chunk(shm_peer_t *p, int rank, tp_xfer_t *x, uint64_t head, size_t c)
{
    const uint8_t *src = (const uint8_t *)x->buf + x->done;
    size_t first = x->mirror == NULL || c < SHM_MIRROR_PIECE ? c : SHM_MIRROR_PIECE;
    size_t end = (size_t)(head & (p->ring - 1)) + c; /* where the chunk ends in the ring, past its size at a wrap */
    int timed = 0, way = shm_write_way(&p->write, c, p->ring_reached == p->ring || end <= p->ring_reached, &timed);
    if (end > p->ring_reached) p->ring_reached = end < p->ring ? end : p->ring; /* a wrap: all of it */
    int64_t t0 = timed ? tp_now_ns() : 0;
    ring_put(p, way, head, src, first);
    if (timed && shm_write_timed(&p->write, first, (uint64_t)(tp_now_ns() - t0)))
        tp_log(TP_LOG_DEBUG, "shm",
               "rank %d: ring chunks of %d KiB and more to it now written %s (cached: %u ns per KiB)", rank,
               SHM_WRITE_TIMED_MIN / 1024, p->write.way == SHM_WRITE_STREAMING ? "streaming" : "cached",
               p->write.last_ns_kib);
    if (x->mirror != NULL) memcpy((uint8_t *)x->mirror + x->done, src, first);
    for (size_t off = first; off < c; off += SHM_MIRROR_PIECE) { /* only with a mirror: else first is all of c */
        size_t k = c - off < SHM_MIRROR_PIECE ? c - off : SHM_MIRROR_PIECE;
        ring_put(p, way, head + off, src + off, k);
        memcpy((uint8_t *)x->mirror + x->done + off, src + off, k);
    }
    if (way == SHM_WRITE_STREAMING) shm_write_fence(); /* publish_head's release store does not order them */
}

/* n ring bytes from pos to the receive x: lent to its deliver where they lie (two spans at the wrap), else copied. */
static tp_status_t ring_get(tp_xfer_t *x, const uint8_t *ring, size_t size, uint64_t pos, size_t n)
{
    size_t off = (size_t)(pos & (size - 1)), first = size - off < n ? size - off : n;
    if (x->deliver == NULL) {
        memcpy((uint8_t *)x->buf + x->done, ring + off, first);
        memcpy((uint8_t *)x->buf + x->done + first, ring, n - first);
        return TP_OK;
    }
    tp_status_t s = x->deliver(x->deliver_arg, x->done, ring + off, first);
    return s != TP_OK || n == first ? s : x->deliver(x->deliver_arg, x->done + first, ring, n - first);
}

/* Wakes a rank that armed its sleeping word: the fence orders this rank's publishing stores before the load. */
static void wake(shm_peer_t *p)
{
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load_explicit(&p->ctl->sleeping, memory_order_relaxed)) {
        uint64_t one = 1;
        if (write(p->eventfd, &one, sizeof(one)) < 0) { /* full or gone: the peer is awake or dead anyway */
        }
    }
}

/* Cells a frame of fl payload bytes takes: its header's, then more for an inline payload (a larger one: the ring). */
static uint64_t cells_for(size_t fl)
{
    if (fl <= SHM_CELL_FIRST || fl > SHM_INLINE_MAX) return 1;
    return 1 + (fl - SHM_CELL_FIRST + SHM_CELL_BODY - 1) / SHM_CELL_BODY;
}

/* An inline payload: its first bytes beside the header in cell c, the rest in the cells after it. */
static void cells_put(shm_cell_t *cells, uint64_t c, const uint8_t *src, size_t n)
{
    if (n == 0) return; /* an empty payload may have no buffer: memcpy from NULL is undefined even for 0 bytes */
    size_t first = n < SHM_CELL_FIRST ? n : SHM_CELL_FIRST;
    uint64_t k = c;
    for (size_t off = first; off < n; off += SHM_CELL_BODY) {
        shm_cell_t *cell = &cells[++k % SHM_CELLS];
        memcpy(cell->body, src + off, n - off < SHM_CELL_BODY ? n - off : SHM_CELL_BODY);
        atomic_store_explicit(&cell->seq, k + 1, memory_order_relaxed);
    }
    memcpy(cells[c % SHM_CELLS].body + TP_FRAME_HEADER_BYTES, src, first);
}

/* An inline payload to the receive x, through a private copy when it is lent (its cells are not contiguous). */
static tp_status_t cells_get(tp_xfer_t *x, const shm_cell_t *cells, uint64_t c, size_t n)
{
    uint8_t tmp[SHM_INLINE_MAX], *dst = x->deliver != NULL ? tmp : (uint8_t *)x->buf + x->done;
    size_t first = n < SHM_CELL_FIRST ? n : SHM_CELL_FIRST;
    if (first > 0) memcpy(dst, cells[c % SHM_CELLS].body + TP_FRAME_HEADER_BYTES, first); /* dst may be NULL at 0 */
    for (size_t off = first; off < n; off += SHM_CELL_BODY)
        memcpy(dst + off, cells[++c % SHM_CELLS].body, n - off < SHM_CELL_BODY ? n - off : SHM_CELL_BODY);
    return x->deliver != NULL ? x->deliver(x->deliver_arg, x->done, tmp, n) : TP_OK;
}

/* A lost peer ends both directions; a refused frame only the one from it (a desync report can still go out). */
tp_status_t shm_fail(shm_peer_t *p, int rank, tp_status_t why, const char *reason)
{
    if (why == TP_ERR_PEER_FAILED && p->send_broken == TP_OK) p->send_broken = why;
    if (p->broken != TP_OK) return why;
    p->broken = why;
    if (why == TP_ERR_PEER_FAILED) { /* what the job names as its failure is fate's verdict, not this */
        tp_log(TP_LOG_DEBUG, "shm", "rank %d: %s", rank, reason);
        tp_fate_report(rank, reason);
    } else { /* garbage in shared memory: the job names the peer that wrote it */
        tp_log(TP_LOG_ERROR, "shm", "rank %d: %s: refused", rank, reason);
        char blame[320];
        snprintf(blame, sizeof(blame), "it broke the shared-memory protocol: %s", reason);
        tp_fate_blame(rank, why, blame);
    }
    return why;
}

/* A position the peer wrote in shared memory, outside what this rank's own records allow. */
static tp_status_t shm_fail_position(shm_peer_t *p, int rank, int sending, const char *what, uint64_t got, uint64_t lo,
                                     uint64_t hi)
{
    char why[160];
    snprintf(why, sizeof(why), "its %s %llu in shared memory is outside %llu-%llu", what, (unsigned long long)got,
             (unsigned long long)lo, (unsigned long long)hi);
    if (sending) p->send_broken = TP_ERR_PROTOCOL;
    return shm_fail(p, rank, TP_ERR_PROTOCOL, why);
}

tp_status_t shm_post(void *state, tp_xfer_t *x)
{
    shm_state_t *st = state;
    shm_peer_t *p = &st->peers[x->peer];
    tp_status_t s = p->use ? TP_OK : shm_connect_peer(st, x->peer); /* connections on demand */
    if (s != TP_OK) return s;
    if (x->is_send ? p->send_broken != TP_OK : p->broken != TP_OK) return x->is_send ? p->send_broken : p->broken;
    if (x->is_send) tp_xfer_enqueue(x, st->env.part_bytes, &p->send_head, &p->send_tail);
    else tp_xfer_enqueue(x, st->env.part_bytes, &p->recv_head, &p->recv_tail);
    if (x->is_send && p->xchg.on) shm_xchg_post(st, p, x);
    return TP_OK;
}

static void publish_head(shm_peer_t *p, uint64_t head)
{
    atomic_store_explicit(&p->out->head, head, memory_order_release);
    wake(p);
}

/* Whether k more cells fit: the peer's consumed count is read only when the last one read says they do not. */
static tp_status_t cells_room(shm_peer_t *p, int rank, uint64_t k, int *room)
{
    *room = p->out_cells_sent + k - p->out_cells_seen <= SHM_CELLS;
    if (*room) return TP_OK;
    uint64_t d = atomic_load_explicit(&p->out->cells_done, memory_order_acquire);
    if (d - p->out_cells_seen > p->out_cells_sent - p->out_cells_seen)
        return shm_fail_position(p, rank, 1, "consumed cell count", d, p->out_cells_seen, p->out_cells_sent);
    p->out_cells_seen = d;
    *room = p->out_cells_sent + k - d <= SHM_CELLS;
    return TP_OK;
}

/* Ring bytes free for the payload: the peer's consumed position is read only when the last one leaves too few. */
static tp_status_t ring_room(shm_peer_t *p, int rank, uint64_t head, size_t want, uint64_t *space)
{
    *space = p->ring - (head - p->out_tail_seen);
    if (*space >= want) return TP_OK;
    uint64_t t = atomic_load_explicit(&p->out->tail, memory_order_acquire);
    if (t - p->out_tail_seen > head - p->out_tail_seen)
        return shm_fail_position(p, rank, 1, "consumed position", t, p->out_tail_seen, head);
    p->out_tail_seen = t;
    *space = p->ring - (head - t);
    return TP_OK;
}

/* Whether a ring frame of fl payload bytes of x walks the ring where the peer allows it (p->walk): one of
 * SHM_RING_WINDOW bytes and more, or any frame of a transfer of several (the peer reads each one while the next is
 * written). A transfer of one small frame goes back to the ring's start, whose lines stay cached between calls
 * (BENCHMARKS.md, "Eighteenth pass"). */
static int shm_walks(const tp_xfer_t *x, size_t fl) { return fl >= SHM_RING_WINDOW || x->len > x->part_bytes; }

/*
 * Where a ring frame's payload goes: where the last one ended while it stays within the ring's first
 * SHM_RING_WINDOW bytes, else at the ring's start when all of it fits there now, else where the last one ended.
 * Frames then reuse the ring's first pages instead of walking all of it: they stay in cache, and in a virtual
 * machine the first touch of each page through each mapping is expensive, populated or not. Going back to the start
 * needs the peer's consumed position, a line it writes after every frame: read once per window, not per frame.
 * To a peer with p->walk, frames that walk (shm_walks) go on where the last one ended: going back, they rewrite the
 * lines the peer has just read, each write first taking its line back from the peer's cache.
 */
static tp_status_t ring_start(shm_peer_t *p, int rank, uint64_t head, size_t fl, int walks, uint64_t *start)
{
    uint64_t skip = (p->ring - (head & (p->ring - 1))) & (p->ring - 1), space = 0;
    *start = head;
    if (skip == 0 || fl > p->ring - skip || (p->walk && walks)) return TP_OK;
    if ((head & (p->ring - 1)) + fl <= SHM_RING_WINDOW) return TP_OK;
    tp_status_t s = ring_room(p, rank, head, skip + fl, &space);
    if (s == TP_OK && space >= skip + fl) *start = head + skip;
    return s;
}

/* Starts x's next frame: its header in a cell, with the payload when it fits there (else where it goes: the ring
 * from *head on, or this rank's buffer for the peer to read); *go is 0 when it must wait. */
static tp_status_t send_header(shm_peer_t *p, int rank, tp_xfer_t *x, size_t base, uint64_t *head, int *go)
{
    size_t fl = tp_xfer_frame_len(x, base), fr = tp_xfer_frame_ready(x, base);
    int inl = fl <= SHM_INLINE_MAX, room = 0;
    /* lent where TP_SHM_CMA_BYTES lets exchanges or frames go by CMA at all and the peer may read this rank */
    int lend = x->lend && !inl && !x->streamed && (p->cma_min > 0 || p->xchg.on) &&
               atomic_load_explicit(&p->out->cma, memory_order_relaxed);
    *go = 0;
    if ((inl && fr < fl) || (!inl && fr == 0) || (lend && fr < fl)) return TP_OK; /* its bytes do not exist yet */
    uint64_t k = cells_for(fl), c = p->out_cells_sent, start = *head;
    tp_status_t s = cells_room(p, rank, k, &room);
    if (s != TP_OK || !room) {
        p->stalled = s == TP_OK;
        return s;
    }
    uint64_t via[2] = {SHM_VIA_RING, 0};
    /* the peer reads it where it lies; never bytes made during the call: the peer would then hold lines this rank
     * writes again in its next call, each write waiting to take its line back (a 512 KiB reduce: 150 against 40 us) */
    int map = !inl && fr == fl && !x->growing && shm_map_describe(p, x, base, fl, via);
    int cma = !inl && !map && !x->streamed && fr == fl &&
              (lend || (p->cma_min > 0 ? fl >= p->cma_min : p->xchg.send == x && p->xchg.way == SHM_XCHG_CMA)) &&
              atomic_load_explicit(&p->out->cma, memory_order_relaxed);
    x->peer_lent |= cma;
    if (p->xchg.send == x && !inl) p->xchg.went |= 1u << (cma ? SHM_VIA_CMA : map ? SHM_VIA_MAP : SHM_VIA_RING);
    if (!inl && !cma && !map && (s = ring_start(p, rank, *head, fl, shm_walks(x, fl), &start)) != TP_OK) return s;
    if (start != *head) { /* published before the cell: a reader that sees the frame never sees the head behind it */
        p->ring_large_back += fl >= SHM_RING_WINDOW;
        p->ring_parts_back += x->len > x->part_bytes;
        *head = start;
        atomic_store_explicit(&p->out->head, start, memory_order_release);
    }
    shm_cell_t *cell = &p->out_cells[c % SHM_CELLS];
    if (cma) via[0] = SHM_VIA_CMA, via[1] = (uint64_t)(uintptr_t)((const uint8_t *)x->buf + base);
    else if (!map) via[1] = start;
    p->ring_frames += !inl && !cma && !map;
    if (inl) { /* the cells after the polled one first: that one is written in one go, header last */
        cells_put(p->out_cells, c, (const uint8_t *)x->buf + base, fl);
        x->done = base + fl;
    } else {
        memcpy(cell->body + H, via, sizeof(via));
    }
    tp_xfer_frame_header(x, base, cell->body);
    atomic_store_explicit(&cell->seq, c + 1, memory_order_release);
    p->out_cells_sent = c + k;
    /* A mirror of a frame in the ring is written chunk by chunk; one the peer reads itself, while it reads it. */
    if (x->mirror != NULL && (inl || cma || map)) {
        if (!inl) wake(p);
        memcpy((uint8_t *)x->mirror + base, (const uint8_t *)x->buf + base, fl);
    }
    x->frame_off = inl ? 0 : H;
    if (cma || map) p->lent_wait = c + 1; /* the buffer stays the peer's to read until it consumes this cell */
    *go = 1;
    return TP_OK;
}

static void send_complete(shm_peer_t *p, tp_xfer_t *x)
{
    x->complete = 1;
    p->send_head = x->next;
    if (p->send_head == NULL) p->send_tail = NULL;
}

/* Whether the peer has read the frame this rank lent it its buffer for (CMA, mapped): it consumed that cell. */
static tp_status_t lent_done(shm_peer_t *p, int rank, int *done)
{
    uint64_t d = atomic_load_explicit(&p->out->cells_done, memory_order_acquire);
    if (d - p->out_cells_seen > p->out_cells_sent - p->out_cells_seen)
        return shm_fail_position(p, rank, 1, "consumed cell count", d, p->out_cells_seen, p->out_cells_sent);
    p->out_cells_seen = d;
    *done = d >= p->lent_wait;
    return TP_OK;
}

static tp_status_t pump_send(shm_peer_t *p, int rank, int *moved)
{
    uint64_t head = p->out_head, cells = p->out_cells_sent;
    tp_status_t s = TP_OK;
    p->stalled = 0;
    while (p->send_head != NULL) {
        tp_xfer_t *x = p->send_head;
        size_t base = x->done - part_done(x), fl = tp_xfer_frame_len(x, base);
        if (p->lent_wait != 0) { /* the frame is out once the peer has read it */
            int done = 0;
            if ((s = lent_done(p, rank, &done)) != TP_OK) break;
            if (!done) {
                p->stalled = 1;
                break;
            }
            p->lent_wait = 0;
            x->done = base + fl;
            x->frame_off = 0;
            *moved = 1;
            if (x->done == x->len) send_complete(p, x);
            continue;
        }
        if (x->frame_off == 0) {
            int go = 0;
            if ((s = send_header(p, rank, x, base, &head, &go)) != TP_OK || !go) break;
            if (x->frame_off == 0) { /* inline: the frame is out */
                if (x->done == x->len) send_complete(p, x);
                continue;
            }
            if (p->lent_wait != 0) continue; /* the peer reads the payload itself */
        }
        size_t n = tp_xfer_frame_ready(x, base) - part_done(x);
        uint64_t space = 0;
        if (n > 0 && (s = ring_room(p, rank, head, n, &space)) != TP_OK) break;
        if (n > space) n = (size_t)space;
        for (size_t off = 0; off < n;) { /* each chunk is published at once, so the reader copies beside the writer */
            size_t c = n - off < SHM_CHUNK_BYTES ? n - off : SHM_CHUNK_BYTES;
            put_chunk(p, rank, x, head, c);
            head += c;
            off += c;
            x->done += c;
            x->frame_off += c;
            publish_head(p, head);
        }
        if (x->frame_off < H + fl) { /* bytes that exist but did not fit: the ring is full */
            p->stalled = part_done(x) < tp_xfer_frame_ready(x, base);
            break;
        }
        x->frame_off = 0;
        if (x->done == x->len) send_complete(p, x);
    }
    if (cells != p->out_cells_sent) wake(p);
    if (head != p->out_head || cells != p->out_cells_sent) *moved = 1; /* a frame waiting for bytes or room: none */
    p->out_head = head;
    return s;
}

static void recv_finish_frame(shm_peer_t *p, tp_xfer_t *x)
{
    p->rx_cur = NULL;
    if (x->done < x->len) return;
    x->complete = 1;
    tp_xfer_t **pp = &p->recv_head, *prev = NULL;
    while (*pp != x) prev = *pp, pp = &(*pp)->next;
    *pp = x->next;
    if (p->recv_tail == x) p->recv_tail = prev;
}

/* The posted receive the header taken from a cell belongs to, or NULL; refuses what belongs to no call of ours. */
static tp_status_t recv_match(shm_state_t *st, shm_peer_t *p, int rank, tp_xfer_t **out)
{
    *out = NULL;
    for (tp_xfer_t *x = p->recv_head; x != NULL; x = x->next) {
        int matched = 0;
        uint8_t want[H];
        tp_xfer_frame_header(x, x->done, want);
        tp_status_t s = tp_frame_check(want, p->hdr, st->env.part_bytes, rank, &matched);
        if (s != TP_OK) { /* tp_frame_check logged why */
            p->broken = s;
            return s;
        }
        if (matched) {
            *out = x;
            return TP_OK;
        }
    }
    return TP_OK;
}

/* What cell c holds before the peer writes it: its previous lap's number, or zero on the first lap. */
static uint64_t cell_before(uint64_t c) { return c >= SHM_CELLS ? c + 1 - SHM_CELLS : 0; }

/* Takes the header of the peer's next frame from its cell, if written; anything but that or the cell's previous
 * use is garbage. */
static tp_status_t recv_header(shm_peer_t *p, int rank, int *have)
{
    uint64_t c = p->in_cells_next, v = atomic_load_explicit(&p->in_cells[c % SHM_CELLS].seq, memory_order_acquire);
    uint64_t before = cell_before(c);
    *have = v == c + 1;
    if (!*have && v != before) return shm_fail_position(p, rank, 0, "cell sequence word", v, before, c + 1);
    if (*have) {
        memcpy(p->hdr, p->in_cells[c % SHM_CELLS].body, SHM_CELL_BODY); /* private: what is checked is used */
        /* The sender wrote the frame's other cells before this one: fetch them while the header is matched. */
        uint64_t k = cells_for(tp_frame_bytes(p->hdr));
        for (uint64_t i = 1; i < k; i++) __builtin_prefetch(&p->in_cells[(c + i) % SHM_CELLS]);
    }
    p->hdr_have = *have;
    return TP_OK;
}

/* Ring bytes of the current frame's payload, copied as they arrive. */
static tp_status_t recv_ring(shm_peer_t *p, int rank, uint64_t *tail, int *moved)
{
    uint64_t h = atomic_load_explicit(&p->in->head, memory_order_acquire);
    if (h - *tail > p->ring || h - *tail < p->in_head_seen - *tail)
        return shm_fail_position(p, rank, 0, "written position", h, p->in_head_seen, *tail + p->ring);
    p->in_head_seen = h;
    tp_xfer_t *x = p->rx_cur;
    size_t take = h - *tail < p->rx_left ? (size_t)(h - *tail) : p->rx_left;
    if (take == 0) return TP_OK;
    tp_status_t s = ring_get(x, p->in_ring, p->ring, *tail, take);
    if (s != TP_OK) return s;
    *tail += take;
    x->done += take;
    p->rx_left -= take;
    *moved = 1;
    if (p->rx_left == 0) recv_finish_frame(p, x);
    return TP_OK;
}

/* A frame whose payload is not in its cells: from the ring as it arrives (where the last one ended, or at the ring's
 * next start), or read at once from the sender's buffer (its tp_mem_alloc memory mapped here, or CMA) into this
 * rank's receive, whose own length bounds the read whatever the peer wrote. */
static tp_status_t recv_large(shm_peer_t *p, int rank, tp_xfer_t *x, size_t fl, uint64_t *tail)
{
    uint64_t via[2];
    char why[200];
    memcpy(via, p->hdr + H, sizeof(via));
    if (via[0] == SHM_VIA_RING) {
        uint64_t next = (*tail + p->ring - 1) & ~(uint64_t)(p->ring - 1);
        if (via[1] != *tail && via[1] != next) {
            snprintf(why, sizeof(why), "its frame's ring position %llu is neither %llu nor %llu",
                     (unsigned long long)via[1], (unsigned long long)*tail, (unsigned long long)next);
            return shm_fail(p, rank, TP_ERR_PROTOCOL, why);
        }
        *tail = via[1]; /* the bytes skipped to the ring's start were never written */
        if (p->in_head_seen < *tail) p->in_head_seen = *tail;
        p->in_cells_next++;
        p->rx_cur = x;
        p->rx_left = fl;
        return TP_OK;
    }
    tp_status_t s = TP_OK;
    if (SHM_VIA_KIND(via[0]) == SHM_VIA_MAP) {
        s = shm_map_read(p, rank, x, fl, via, why, sizeof(why));
        if (s != TP_OK && why[0] == '\0') return s; /* the lent receive's own failure, not the peer's */
    } else if (via[0] != SHM_VIA_CMA || !atomic_load_explicit(&p->in->cma, memory_order_relaxed)) {
        snprintf(why, sizeof(why), "its frame's payload is at an unknown place %llu", (unsigned long long)via[0]);
        s = TP_ERR_PROTOCOL;
    } else if (x->deliver == NULL) {
        s = shm_cma_read(p, (uint8_t *)x->buf + x->done, fl, via[1], why, sizeof(why));
    } else if (x->land != NULL) { /* whole where the lent receive said, then lent from there in one piece */
        uint8_t *at = (uint8_t *)x->land + x->done;
        s = shm_cma_read(p, at, fl, via[1], why, sizeof(why));
        if (s == TP_OK && (s = x->deliver(x->deliver_arg, x->done, at, fl)) != TP_OK) return s;
    } else { /* a lent receive has no buffer: the sender's bytes come through a bounce, a chunk at a time */
        uint8_t bounce[SHM_CMA_BOUNCE];
        for (size_t off = 0; off < fl && s == TP_OK; off += SHM_CMA_BOUNCE) {
            size_t n = fl - off < SHM_CMA_BOUNCE ? fl - off : SHM_CMA_BOUNCE;
            s = shm_cma_read(p, bounce, n, via[1] + off, why, sizeof(why));
            if (s == TP_OK && (s = x->deliver(x->deliver_arg, x->done + off, bounce, n)) != TP_OK) return s;
        }
    }
    if (s != TP_OK) return shm_fail(p, rank, s, why);
    x->peer_lent |= via[0] == SHM_VIA_CMA;
    x->done += fl;
    p->in_cells_next++;
    recv_finish_frame(p, x);
    return TP_OK;
}

static tp_status_t pump_recv(shm_state_t *st, shm_peer_t *p, int rank, int *moved)
{
    uint64_t tail = p->in_tail, cells = p->in_cells_next;
    tp_status_t s = TP_OK;
    for (;;) {
        if (p->rx_cur != NULL) {
            size_t left = p->rx_left;
            if ((s = recv_ring(p, rank, &tail, moved)) != TP_OK || p->rx_left == left) break;
            continue;
        }
        int have = p->hdr_have;
        tp_xfer_t *x = NULL;
        if (!have && ((s = recv_header(p, rank, &have)) != TP_OK || !have)) break;
        if ((s = recv_match(st, p, rank, &x)) != TP_OK || x == NULL) break;
        size_t fl = tp_xfer_frame_len(x, x->done); /* the header says the same: tp_frame_check compared them */
        p->hdr_have = 0;
        *moved = 1;
        if (fl <= SHM_INLINE_MAX) {
            if ((s = cells_get(x, p->in_cells, p->in_cells_next, fl)) != TP_OK) break;
            x->done += fl;
            p->in_cells_next += cells_for(fl);
            recv_finish_frame(p, x);
        } else if ((s = recv_large(p, rank, x, fl, &tail)) != TP_OK) {
            break;
        }
    }
    if (tail != p->in_tail || cells != p->in_cells_next) {
        p->in_tail = tail;
        atomic_store_explicit(&p->in->tail, tail, memory_order_release);
        atomic_store_explicit(&p->in->cells_done, p->in_cells_next, memory_order_release);
        wake(p);
    }
    return s;
}

/* Peers with queued transfers whose process has exited (their pidfd is readable), into st->dead; returns how many. */
static int dead_peers(shm_state_t *st)
{
    int k = 0, dead = 0;
    for (int r = 0; r < st->size; r++) {
        shm_peer_t *p = &st->peers[r];
        if (p->use && (p->send_head != NULL || p->recv_head != NULL)) {
            st->dead[k] = r;
            st->pfds[k++] = (struct pollfd){.fd = p->pidfd, .events = POLLIN};
        }
    }
    if (k > 0 && poll(st->pfds, (nfds_t)k, 0) > 0)
        for (int i = 0; i < k; i++)
            if (st->pfds[i].revents) st->dead[dead++] = st->dead[i];
    return dead;
}

/* Sends on every pair before any receive: a rank that then finds a mismatch has already put its own headers out. */
tp_status_t shm_progress(void *state, int *moved_out)
{
    shm_state_t *st = state;
    int moved = 0, ndead = 0;
    tp_status_t s = TP_OK;
    if (st->waited) { /* back from a wait: disarm, drain the wake-ups, and look for peers that died meanwhile */
        uint64_t v;
        st->waited = 0;
        atomic_store_explicit(&st->ctl->sleeping, 0, memory_order_relaxed);
        if (read(st->eventfd, &v, sizeof(v)) < 0 && errno != EAGAIN) s = TP_ERR_SYSTEM;
        ndead = dead_peers(st); /* before the pumps: what a dead peer wrote before it died is read first */
    }
    for (int r = 0; s == TP_OK && r < st->size; r++) {
        shm_peer_t *p = &st->peers[r];
        if (!p->use || p->send_head == NULL) continue;
        s = p->send_broken != TP_OK ? p->send_broken : pump_send(p, r, &moved);
    }
    for (int r = 0; s == TP_OK && r < st->size; r++) {
        shm_peer_t *p = &st->peers[r];
        if (!p->use || p->recv_head == NULL) continue;
        s = p->broken != TP_OK ? p->broken : pump_recv(st, p, r, &moved);
    }
    for (int i = 0; s == TP_OK && i < ndead; i++) {
        shm_peer_t *p = &st->peers[st->dead[i]];
        if (p->send_head == NULL && p->recv_head == NULL) continue;
        char why[96];
        tp_status_t exited = shm_peer_exited_why(p, why, sizeof(why));
        s = shm_fail(p, st->dead[i], exited, why);
    }
    if (st->xchg_open > 0) shm_xchg_check(st);
    *moved_out = moved;
    return s;
}

/* This rank's eventfd (peers write it once it armed its sleeping word) and the pidfds of the peers it waits on. */
int shm_event_fds(void *state, struct pollfd *fds, int max)
{
    shm_state_t *st = state;
    int n = 1, news = 0;
    for (int r = 0; r < st->size; r++) {
        shm_peer_t *p = &st->peers[r];
        if (!p->use || (p->send_head == NULL && p->recv_head == NULL)) continue;
        if (n++ < max) fds[n - 1] = (struct pollfd){.fd = p->pidfd, .events = POLLIN};
    }
    if (n == 1) return 0;
    if (max > 0) fds[0] = (struct pollfd){.fd = st->eventfd, .events = POLLIN};
    atomic_store(&st->ctl->sleeping, 1);
    st->waited = 1;
    /* What moved between the last look and the arming would wake no one: look once more after it. */
    for (int r = 0; r < st->size && !news; r++) {
        shm_peer_t *p = &st->peers[r];
        if (!p->use) continue;
        uint64_t c = p->in_cells_next;
        if (p->recv_head != NULL && p->rx_cur != NULL) news = atomic_load(&p->in->head) != p->in_head_seen;
        else if (p->recv_head != NULL && !p->hdr_have)
            news = atomic_load(&p->in_cells[c % SHM_CELLS].seq) != cell_before(c);
        if (p->send_head != NULL && p->stalled)
            news |=
                atomic_load(&p->out->tail) != p->out_tail_seen || atomic_load(&p->out->cells_done) != p->out_cells_seen;
    }
    uint64_t one = 1;
    if (news && write(st->eventfd, &one, sizeof(one)) < 0) return -1;
    return n;
}

void shm_cancel(void *state)
{
    shm_state_t *st = state;
    for (int r = 0; r < st->size; r++) {
        shm_peer_t *p = &st->peers[r];
        if (!p->use) continue;
        if (p->send_head != NULL && p->send_head->frame_off > 0 && p->send_broken == TP_OK)
            p->send_broken = TP_ERR_ABORTED;
        if (p->rx_cur != NULL && p->broken == TP_OK) p->broken = TP_ERR_ABORTED;
        p->send_head = p->send_tail = NULL;
        p->recv_head = p->recv_tail = NULL;
        p->rx_cur = NULL;
        p->lent_wait = 0; /* its frame had started: the pair is broken above, so nothing waits on it again */
        p->xchg.send = p->xchg.recv = NULL;
    }
    st->xchg_open = 0;
}
