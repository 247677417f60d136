/* shm_progress.c: frames through each pair's ring (pipelined in chunks), blocking on an eventfd when idle. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "shm.h"

#define H TP_FRAME_HEADER_BYTES

/* Payload bytes of the current frame that are written; the frame begins at done minus those. */
static size_t part_done(const tp_xfer_t *x) { return x->frame_off > H ? x->frame_off - H : 0; }

static void ring_put(uint8_t *ring, size_t size, uint64_t pos, const void *src, size_t n)
{
    size_t off = (size_t)(pos & (size - 1)), first = size - off < n ? size - off : n;
    memcpy(ring + off, src, first);
    memcpy(ring, (const uint8_t *)src + first, n - first);
}

static void ring_get(void *dst, const uint8_t *ring, size_t size, uint64_t pos, size_t n)
{
    size_t off = (size_t)(pos & (size - 1)), first = size - off < n ? size - off : n;
    memcpy(dst, ring + off, first);
    memcpy((uint8_t *)dst + first, ring, n - first);
}

/* Wakes a rank that armed its sleeping word; the store before this is ordered before the load (seq_cst). */
static void wake(shm_peer_t *p)
{
    if (atomic_load(&p->ctl->sleeping)) {
        uint64_t one = 1;
        if (write(p->eventfd, &one, sizeof(one)) < 0) { /* full or gone: the peer is awake or dead anyway */
        }
    }
}

/* A lost peer ends both directions; a refused frame only the one from it (a desync report can still go out). */
static tp_status_t shm_fail(shm_peer_t *p, int rank, tp_status_t why, const char *reason)
{
    if (why == TP_ERR_PEER_FAILED && p->send_broken == TP_OK) p->send_broken = why;
    if (p->broken != TP_OK) return why;
    p->broken = why;
    if (why == TP_ERR_PEER_FAILED) { /* what the job names as its failure is fate's verdict, not this */
        tp_log(TP_LOG_DEBUG, "shm", "rank %d: %s", rank, reason);
        tp_fate_report(rank, reason);
    } else { /* garbage in shared memory: the job names the peer that wrote it */
        tp_log(TP_LOG_ERROR, "shm", "rank %d: %s: refused", rank, reason);
        char blame[256];
        snprintf(blame, sizeof(blame), "it broke the shared-memory protocol: %s", reason);
        tp_fate_blame(rank, why, blame);
    }
    return why;
}

tp_status_t shm_post(void *state, tp_xfer_t *x)
{
    shm_state_t *st = state;
    shm_peer_t *p = &st->peers[x->peer];
    tp_status_t s = p->use ? TP_OK : shm_connect_peer(st, x->peer); /* connections on demand */
    if (s != TP_OK) return s;
    if (x->is_send ? p->send_broken != TP_OK : p->broken != TP_OK) return x->is_send ? p->send_broken : p->broken;
    x->done = 0;
    x->complete = 0;
    x->frame_off = 0;
    x->next = NULL;
    if (x->part_bytes == 0 || x->part_bytes > st->env.part_bytes) x->part_bytes = st->env.part_bytes;
    tp_xfer_t **head = x->is_send ? &p->send_head : &p->recv_head, **tail = x->is_send ? &p->send_tail : &p->recv_tail;
    if (*tail) (*tail)->next = x;
    else *head = x;
    *tail = x;
    return TP_OK;
}

static void publish_head(shm_peer_t *p, uint64_t head)
{
    atomic_store(&p->out->head, head);
    wake(p);
}

static tp_status_t pump_send(shm_peer_t *p, int rank, int *moved)
{
    uint64_t t = atomic_load_explicit(&p->out->tail, memory_order_acquire), head = p->out_head;
    if (t - p->out_tail_seen > head - p->out_tail_seen) {
        char why[160];
        snprintf(why, sizeof(why), "its consumed position %llu in shared memory is outside %llu-%llu",
                 (unsigned long long)t, (unsigned long long)p->out_tail_seen, (unsigned long long)head);
        p->send_broken = TP_ERR_PROTOCOL;
        return shm_fail(p, rank, TP_ERR_PROTOCOL, why);
    }
    p->out_tail_seen = t;
    while (p->send_head != NULL) {
        tp_xfer_t *x = p->send_head;
        size_t base = x->done - part_done(x), fl = tp_xfer_frame_len(x, base), fr = tp_xfer_frame_ready(x, base);
        uint64_t space = p->ring - (head - t);
        if (x->frame_off == 0) {
            if ((fl > 0 && fr == 0) || space < H) break;
            tp_xfer_frame_header(x, base, x->wire);
            ring_put(p->out_ring, p->ring, head, x->wire, H);
            head += H;
            space -= H;
            x->frame_off = H;
            if (fl == 0 || space == 0) publish_head(p, head);
        }
        size_t n = fr - part_done(x);
        if (n > space) n = (size_t)space;
        for (size_t off = 0; off < n;) { /* each chunk is published at once, so the reader copies beside the writer */
            size_t c = n - off < SHM_CHUNK_BYTES ? n - off : SHM_CHUNK_BYTES;
            ring_put(p->out_ring, p->ring, head, (const uint8_t *)x->buf + x->done, c);
            head += c;
            off += c;
            x->done += c;
            x->frame_off += c;
            publish_head(p, head);
        }
        if (head != p->out_head) *moved = 1; /* a frame waiting for its bytes or for room moved nothing */
        if (x->frame_off < H + fl) break;
        x->frame_off = 0;
        if (x->done == x->len) {
            x->complete = 1;
            p->send_head = x->next;
            if (p->send_head == NULL) p->send_tail = NULL;
        }
    }
    p->out_head = head;
    return TP_OK;
}

static void recv_finish_frame(shm_peer_t *p)
{
    tp_xfer_t *x = p->rx_cur;
    p->rx_cur = NULL;
    if (x->done < x->len) return;
    x->complete = 1;
    tp_xfer_t **pp = &p->recv_head, *prev = NULL;
    while (*pp != x) prev = *pp, pp = &(*pp)->next;
    *pp = x->next;
    if (p->recv_tail == x) p->recv_tail = prev;
}

/* Matches the header taken from the ring against the posted receives; refuses what belongs to no call of ours. */
static tp_status_t recv_match(shm_state_t *st, shm_peer_t *p, int rank, int *moved)
{
    for (tp_xfer_t *x = p->recv_head; x != NULL; x = x->next) {
        int matched = 0;
        uint8_t want[H];
        tp_xfer_frame_header(x, x->done, want);
        tp_status_t s = tp_frame_check(want, p->hdr, st->env.part_bytes, rank, &matched);
        if (s != TP_OK) { /* tp_frame_check logged why */
            p->broken = s;
            return s;
        }
        if (!matched) continue;
        p->hdr_have = 0;
        p->rx_cur = x;
        p->rx_left = tp_xfer_frame_len(x, x->done);
        *moved = 1;
        if (p->rx_left == 0) recv_finish_frame(p);
        return TP_OK;
    }
    return TP_OK;
}

static tp_status_t pump_recv(shm_state_t *st, shm_peer_t *p, int rank, int *moved)
{
    uint64_t h = atomic_load_explicit(&p->in->head, memory_order_acquire), tail = p->in_tail;
    if (h - tail > p->ring || h - tail < p->in_head_seen - tail) {
        char why[160];
        snprintf(why, sizeof(why), "its written position %llu in shared memory is outside %llu-%llu",
                 (unsigned long long)h, (unsigned long long)p->in_head_seen, (unsigned long long)tail + p->ring);
        return shm_fail(p, rank, TP_ERR_PROTOCOL, why);
    }
    p->in_head_seen = h;
    tp_status_t s = TP_OK;
    for (;;) {
        uint64_t avail = h - tail;
        if (p->rx_cur != NULL) {
            tp_xfer_t *x = p->rx_cur;
            size_t take = avail < p->rx_left ? (size_t)avail : p->rx_left;
            if (take == 0) break;
            ring_get((uint8_t *)x->buf + x->done, p->in_ring, p->ring, tail, take);
            tail += take;
            x->done += take;
            p->rx_left -= take;
            *moved = 1;
            if (p->rx_left == 0) recv_finish_frame(p);
            continue;
        }
        if (!p->hdr_have) {
            if (avail < H) break;
            ring_get(p->hdr, p->in_ring, p->ring, tail, H); /* a private copy: what is checked is what is used */
            tail += H;
            p->hdr_have = 1;
        }
        if (p->recv_head == NULL || (s = recv_match(st, p, rank, moved)) != TP_OK || p->hdr_have) break;
    }
    if (tail != p->in_tail) {
        p->in_tail = tail;
        atomic_store(&p->in->tail, tail);
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
        snprintf(why, sizeof(why), "its process (pid %d) exited in the middle of a call", p->pid);
        s = shm_fail(p, st->dead[i], TP_ERR_PEER_FAILED, why);
    }
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
        news = (p->recv_head != NULL && atomic_load(&p->in->head) != p->in_head_seen) ||
               (p->send_head != NULL && atomic_load(&p->out->tail) != p->out_tail_seen);
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
    }
}
