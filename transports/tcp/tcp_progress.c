/* tcp_progress.c: the data path: frames out with sendmsg, frames in through a per-connection buffer, both at once. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "tcp.h"

#define H TP_FRAME_HEADER_BYTES

/* Payload offset where the current frame began. */
static size_t frame_base(const tp_xfer_t *x) { return x->done - (x->frame_off > H ? x->frame_off - H : 0); }

/* A refused frame leaves the byte stream in from the peer unusable, but frames can still go out to it (a desync
 * report among them); a lost connection ends both directions. */
void tcp_conn_fail(tcp_state_t *st, tcp_conn_t *c, tp_status_t why, const char *reason)
{
    if (why == TP_ERR_PEER_FAILED && c->send_broken == TP_OK) c->send_broken = why;
    if (c->broken != TP_OK) return;
    c->broken = why;
    if (why == TP_ERR_PEER_FAILED) { /* what the job names as its failure is fate's verdict, not this */
        tp_log(TP_LOG_DEBUG, "tcp", "connection to rank %d: %s", c->peer, reason);
        tp_fate_report(c->peer, reason);
    }
}

/* Whether count a has reached b (counts wrap). */
static int reached(uint32_t a, uint32_t b) { return (int32_t)(a - b) >= 0; }

static const tcp_sock_t *other_sock(const tcp_conn_t *c, const tcp_sock_t *k) { return k == &c->in ? &c->out : &c->in; }

/* Whether k's next frame still waits for frames due on the other socket (its order mark's count). */
static int gate_shut(const tcp_conn_t *c, const tcp_sock_t *k)
{
    return k->gated && !reached(other_sock(c, k)->taken, k->gate);
}

static uint32_t frames_of(const tp_xfer_t *x)
{
    return x->len == 0 ? 1 : (uint32_t)((x->len + x->part_bytes - 1) / x->part_bytes);
}

/* Queues a send on its socket: small ones on the lower rank's, the rest on this rank's own; a move to the other
 * socket than the last send's starts with an order mark. */
static void post_send(tcp_state_t *st, tcp_conn_t *c, tp_xfer_t *x)
{
    tcp_sock_t *k = x->len > TCP_SHARED_BYTES || st->env.rank < c->peer ? &c->out : &c->in;
    tp_xfer_enqueue(x, st->env.part_bytes, &k->send_head, &k->send_tail);
    tp_xfer_frame_header(x, 0, x->wire); /* x->wire holds the header of the frame x is at (send_advance moves it) */
    x->prefix_left = 0;
    if (c->last_send != NULL && c->last_send != k) {
        tp_put_le32(x->prefix, TCP_MARK_MAGIC);
        tp_put_le32(x->prefix + 4, other_sock(c, k)->posted);
        x->prefix_left = TCP_MARK_BYTES;
    }
    k->posted += frames_of(x);
    c->last_send = k;
}

tp_status_t tcp_post(void *state, tp_xfer_t *x)
{
    tcp_state_t *st = state;
    tcp_conn_t *c = &st->conns[x->peer];
    tp_status_t s = c->in.fd < 0 || c->out.fd < 0 ? tcp_links_need(st, x->peer) : TP_OK; /* connections on demand */
    if (s != TP_OK) return s;
    if (x->is_send ? c->send_broken != TP_OK : c->broken != TP_OK) return x->is_send ? c->send_broken : c->broken;
    if (x->is_send) {
        post_send(st, c, x);
    } else {
        tp_xfer_enqueue(x, st->env.part_bytes, &c->recv_head, &c->recv_tail);
        c->in.held = c->out.held = 0; /* a waiting header may match this one */
    }
    return TP_OK;
}

/* Whether a transfer has bytes that may go now: after a move of socket, once every frame posted before it on the
 * other one is out. */
static int sendable(const tcp_conn_t *c, const tcp_sock_t *k, const tp_xfer_t *x)
{
    if (x->prefix_left == TCP_MARK_BYTES && !reached(other_sock(c, k)->sent, tp_get_le32(x->prefix + 4))) return 0;
    size_t base = frame_base(x), poff = x->frame_off > H ? x->frame_off - H : 0;
    if (x->frame_off < H)
        return x->frame_off > 0 || tp_xfer_frame_len(x, base) == 0 || tp_xfer_frame_ready(x, base) > 0;
    return tp_xfer_frame_ready(x, base) > poff;
}

/* After x's current frame, which ends at payload offset end, its next frames that are whole and ready (up to
 * TCP_BATCH_FRAMES, their headers in k->batch): a transfer in small parts goes in few system calls, not one a part.
 * Returns the new count. */
static int batch_frames(tcp_sock_t *k, const tp_xfer_t *x, size_t end, struct iovec *iov, int n)
{
    for (int j = 0; j < TCP_BATCH_FRAMES && end < x->len && n + 2 <= TCP_IOV_MAX; j++) {
        size_t fl = tp_xfer_frame_len(x, end);
        if (tp_xfer_frame_ready(x, end) < fl) break;
        tp_xfer_frame_header(x, end, k->batch[j]);
        iov[n++] = (struct iovec){k->batch[j], H};
        iov[n++] = (struct iovec){(char *)x->buf + end, fl};
        end += fl;
    }
    return n;
}

/* Gathers what may go from the head of the send queue into iov (a transfer's current frame, and its next whole
 * ready ones); returns the count. */
static int send_iov(const tcp_conn_t *c, tcp_sock_t *k, struct iovec *iov)
{
    int n = 0;
    for (tp_xfer_t *x = k->send_head; x != NULL && n + 3 <= TCP_IOV_MAX; x = x->next) {
        if (!sendable(c, k, x)) return n;
        size_t base = frame_base(x), off = x->frame_off, fl = tp_xfer_frame_len(x, base),
               fr = tp_xfer_frame_ready(x, base);
        if (x->prefix_left > 0) iov[n++] = (struct iovec){x->prefix + TCP_MARK_BYTES - x->prefix_left, x->prefix_left};
        if (off < H) iov[n++] = (struct iovec){x->wire + off, H - off};
        size_t poff = off > H ? off - H : 0;
        if (fr > poff) iov[n++] = (struct iovec){(char *)x->buf + base + poff, fr - poff};
        if (fr < fl) return n; /* the rest of this frame comes later */
        if (base + fl < x->len) return batch_frames(k, x, base + fl, iov, n); /* more of x before the next transfer */
    }
    return n;
}

/* Applies n sent bytes to the queue head, completing marks, frames and transfers. */
static void send_advance(tcp_sock_t *k, size_t n)
{
    while (n > 0 && k->send_head != NULL) {
        tp_xfer_t *x = k->send_head;
        if (x->prefix_left > 0) {
            size_t take = n < x->prefix_left ? n : x->prefix_left;
            x->prefix_left -= (uint8_t)take;
            n -= take;
            continue;
        }
        size_t base = frame_base(x), fl = tp_xfer_frame_len(x, base), rem = H + fl - x->frame_off;
        size_t take = n < rem ? n : rem;
        size_t before = x->frame_off > H ? x->frame_off - H : 0;
        x->frame_off += take;
        size_t after = x->frame_off > H ? x->frame_off - H : 0;
        x->done += after - before;
        n -= take;
        if (x->frame_off < H + fl) break;
        x->frame_off = 0;
        k->sent++;
        /* the next frame's header: a send that ends inside it (a batched frame's went from k->batch) goes on from
         * x->wire */
        if (x->done < x->len) tp_xfer_frame_header(x, x->done, x->wire);
        if (x->done == x->len) {
            x->complete = 1;
            k->send_head = x->next;
            if (k->send_head == NULL) k->send_tail = NULL;
        }
    }
}

static tp_status_t pump_send(tcp_state_t *st, tcp_conn_t *c, tcp_sock_t *k, int *moved)
{
    struct iovec iov[TCP_IOV_MAX];
    while (k->send_head != NULL) {
        int n = send_iov(c, k, iov);
        if (n == 0) return TP_OK;
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(k->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return TP_OK;
            if (errno == EINTR) continue;
            char why[128];
            snprintf(why, sizeof(why), "connection lost while sending (%s)", strerror(errno));
            tcp_conn_fail(st, c, TP_ERR_PEER_FAILED, why);
            return TP_ERR_PEER_FAILED;
        }
        *moved = 1;
        send_advance(k, (size_t)w);
    }
    return TP_OK;
}

static void recv_finish_frame(tcp_conn_t *c, tcp_sock_t *k)
{
    tp_xfer_t *x = k->rx_cur;
    k->rx_cur = NULL;
    k->taken++;
    if (x->done < x->len) return;
    x->complete = 1;
    tp_xfer_t **pp = &c->recv_head, *prev = NULL;
    while (*pp != x) prev = *pp, pp = &(*pp)->next;
    *pp = x->next;
    if (c->recv_tail == x) c->recv_tail = prev;
}

/* Matches the header at rx_start against the posted receives; refuses what belongs to no call of ours. */
static tp_status_t recv_match(tcp_state_t *st, tcp_conn_t *c, tcp_sock_t *k)
{
    const uint8_t *got = k->rx + k->rx_start;
    for (tp_xfer_t *x = c->recv_head; x != NULL; x = x->next) {
        int matched = 0;
        tp_xfer_frame_header(x, x->done, x->wire);
        tp_status_t s = tp_frame_check(x->wire, got, st->env.part_bytes, c->peer, &matched);
        if (s != TP_OK) {
            tcp_conn_fail(st, c, s, "bad frame");
            return s;
        }
        if (!matched) continue;
        k->rx_start += H;
        k->rx_cur = x;
        k->rx_left = tp_xfer_frame_len(x, x->done);
        if (k->rx_left == 0) recv_finish_frame(c, k);
        return TP_OK;
    }
    k->held = 1;
    return TP_OK;
}

static tp_status_t peer_closed(tcp_state_t *st, tcp_conn_t *c, ssize_t r)
{
    char why[128];
    snprintf(why, sizeof(why), r == 0 ? "connection closed in the middle of a call" : "connection lost (%s)",
             strerror(errno));
    tcp_conn_fail(st, c, TP_ERR_PEER_FAILED, why);
    return TP_ERR_PEER_FAILED;
}

/* The order mark at rx_start: this socket's next frame waits for that many from the other; a count the other has
 * already passed, or one further ahead than socket buffers could hold, was never sent by a rank that keeps the
 * order. */
static tp_status_t take_mark(tcp_state_t *st, tcp_conn_t *c, tcp_sock_t *k)
{
    uint32_t n = tp_get_le32(k->rx + k->rx_start + 4), taken = other_sock(c, k)->taken;
    if (!reached(n, taken) || n - taken > TCP_MARK_AHEAD_MAX) {
        char what[160], why[240];
        snprintf(what, sizeof(what),
                 "rank %d sent an order mark for %u frames on its other connection, which has "
                 "%s given %u",
                 c->peer, n, reached(n, taken) ? "only" : "already", taken);
        snprintf(why, sizeof(why), "it broke the collective protocol: %s", what);
        tp_log(TP_LOG_ERROR, "tcp", "%s: refused", what);
        tp_fate_blame(c->peer, TP_ERR_PROTOCOL, why);
        tcp_conn_fail(st, c, TP_ERR_PROTOCOL, "bad order mark");
        return TP_ERR_PROTOCOL;
    }
    k->rx_start += TCP_MARK_BYTES;
    k->gate = n;
    k->gated = 1;
    return TP_OK;
}

static tp_status_t pump_recv(tcp_state_t *st, tcp_conn_t *c, tcp_sock_t *k, int *moved)
{
    for (;;) {
        size_t avail = k->rx_end - k->rx_start;
        if (k->rx_cur != NULL) {
            tp_xfer_t *x = k->rx_cur;
            if (avail > 0) {
                size_t take = avail < k->rx_left ? avail : k->rx_left;
                memcpy((char *)x->buf + x->done, k->rx + k->rx_start, take);
                k->rx_start += take;
                x->done += take;
                k->rx_left -= take;
                *moved = 1;
                if (k->rx_left == 0) recv_finish_frame(c, k);
                continue;
            }
            k->rx_start = k->rx_end = 0;
            ssize_t r;
            if (k->rx_left >= TCP_DIRECT_MIN) {
                struct iovec iov[2] = {{(char *)x->buf + x->done, k->rx_left}, {k->rx, k->rx_cap}};
                r = readv(k->fd, iov, 2);
                if (r > 0) {
                    size_t direct = (size_t)r < k->rx_left ? (size_t)r : k->rx_left;
                    x->done += direct;
                    k->rx_left -= direct;
                    k->rx_end = (size_t)r - direct;
                }
            } else {
                r = recv(k->fd, k->rx, k->rx_cap, MSG_DONTWAIT);
                if (r > 0) k->rx_end = (size_t)r;
            }
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return TP_OK;
            if (r <= 0) return peer_closed(st, c, r);
            *moved = 1;
            if (k->rx_left == 0) recv_finish_frame(c, k);
            continue;
        }
        if (gate_shut(c, k)) return TP_OK; /* frames due on the other socket first */
        k->gated = 0;
        if (k->held || c->recv_head == NULL) return TP_OK; /* nothing to deliver to: leave bytes in the kernel */
        int mark = avail >= 4 && tp_get_le32(k->rx + k->rx_start) == TCP_MARK_MAGIC;
        if (mark && avail >= TCP_MARK_BYTES) {
            tp_status_t s = take_mark(st, c, k);
            if (s != TP_OK) return s;
            continue;
        }
        if (!mark && avail >= H) {
            tp_status_t s = recv_match(st, c, k);
            if (s != TP_OK) return s;
            if (!k->held) *moved = 1;
            continue;
        }
        if (k->rx_start > 0) {
            memmove(k->rx, k->rx + k->rx_start, avail);
            k->rx_start = 0;
            k->rx_end = avail;
        }
        ssize_t r = recv(k->fd, k->rx + k->rx_end, k->rx_cap - k->rx_end, MSG_DONTWAIT);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return TP_OK;
        if (r <= 0) return peer_closed(st, c, r);
        k->rx_end += (size_t)r;
    }
}

/* Whether a spin reads k now. The lower rank reads two sockets from each higher peer: the one its next frame is
 * expected on (by the size of the first receive posted, as the peer routes its sends), one with a frame under way or
 * an order mark waiting, and else one spin in TCP_OTHER_READ_EVERY (a wait polls both), so that a call does not pay
 * an empty read of the other socket each spin. */
static int worth_reading(tcp_conn_t *c, tcp_sock_t *k)
{
    const tcp_sock_t *o = other_sock(c, k);
    if (k->rx == NULL) return 0;
    if (o->rx == NULL) return 1; /* the only socket this rank reads from the peer */
    if (k->rx_cur != NULL || k->rx_end > k->rx_start || k->gated || o->gated) return 1;
    if ((c->recv_head->len <= TCP_SHARED_BYTES) == (k == &c->out)) return 1; /* the lower rank's own is the shared */
    return c->idle_reads++ % TCP_OTHER_READ_EVERY == 0;
}

/* Sends on every connection before any receive: a rank that then finds a mismatch has already put its own
 * headers out, so each peer it disagrees with sees them and fails too instead of waiting. */
static tp_status_t pump_all(tcp_state_t *st, int *moved)
{
    for (int r = 0; r < st->size; r++) {
        tcp_conn_t *c = &st->conns[r];
        tcp_sock_t *both[2] = {&c->out, &c->in};
        for (int i = 0; i < 2; i++) {
            if (both[i]->fd < 0 || both[i]->send_head == NULL) continue;
            if (c->send_broken != TP_OK) return c->send_broken;
            tp_status_t s = pump_send(st, c, both[i], moved);
            if (s != TP_OK) return s;
        }
    }
    for (int r = 0; r < st->size; r++) {
        tcp_conn_t *c = &st->conns[r];
        if (c->recv_head == NULL || (c->in.rx == NULL && c->out.rx == NULL)) continue; /* nothing to read yet */
        if (c->broken != TP_OK) return c->broken;
        tcp_sock_t *both[2] = {&c->in, &c->out};
        for (int pass = 0; pass < 2 && c->recv_head != NULL; pass++) {
            uint32_t before = c->in.taken + c->out.taken;
            for (int i = 0; i < 2 && c->recv_head != NULL; i++) {
                if (!worth_reading(c, both[i])) continue;
                tp_status_t s = pump_recv(st, c, both[i], moved);
                if (s != TP_OK) return s;
            }
            if (!c->in.gated && !c->out.gated) break; /* else a frame just taken may open the other's gate */
            if (c->in.taken + c->out.taken == before) break;
        }
    }
    return TP_OK;
}

/* What a wait blocks on: the sockets with a receive to deliver to, and those with a frame ready to go. */
int tcp_event_fds(void *state, struct pollfd *fds, int max)
{
    const tcp_state_t *st = state;
    int n = 0;
    int waiting = 0; /* a transfer queued for a peer that has not connected yet: the acceptor's admission wakes it */
    for (int r = 0; r < st->size; r++) {
        const tcp_conn_t *c = &st->conns[r];
        int queued = c->recv_head != NULL || c->in.send_head != NULL || c->out.send_head != NULL;
        waiting |= queued && (c->in.fd < 0 || c->out.fd < 0);
        const tcp_sock_t *both[2] = {&c->in, &c->out};
        for (int i = 0; i < 2; i++) {
            const tcp_sock_t *k = both[i];
            short ev = 0;
            if (k->fd < 0) continue;
            if (k->rx != NULL && c->recv_head != NULL && !k->held && !gate_shut(c, k)) ev |= POLLIN;
            if (k->send_head != NULL && sendable(c, k, k->send_head)) ev |= POLLOUT;
            if (ev != 0 && n++ < max) fds[n - 1] = (struct pollfd){.fd = k->fd, .events = ev};
        }
    }
    if (waiting && tcp_links_event_fd(st) >= 0 && n++ < max)
        fds[n - 1] = (struct pollfd){.fd = tcp_links_event_fd(st), .events = POLLIN};
    return n;
}

tp_status_t tcp_progress(void *state, int *moved_out)
{
    int moved = tcp_links_take(state) > 0; /* connections the acceptor admitted since */
    tp_status_t s = pump_all(state, &moved);
    *moved_out = moved;
    return s;
}

void tcp_cancel(void *state)
{
    tcp_state_t *st = state;
    for (int r = 0; r < st->size; r++) {
        tcp_conn_t *c = &st->conns[r];
        tcp_sock_t *both[2] = {&c->in, &c->out};
        for (int i = 0; i < 2; i++) {
            tcp_sock_t *k = both[i];
            tp_xfer_t *h = k->send_head;
            int cut = h != NULL && (h->frame_off > 0 || (h->prefix_left > 0 && h->prefix_left < TCP_MARK_BYTES));
            if (cut && c->send_broken == TP_OK) c->send_broken = TP_ERR_ABORTED;
            if (k->rx_cur != NULL && c->broken == TP_OK) c->broken = TP_ERR_ABORTED;
            k->send_head = k->send_tail = NULL;
            k->posted = k->sent; /* what was dropped never went out: no mark may count it */
            k->rx_cur = NULL;
        }
        c->recv_head = c->recv_tail = NULL;
    }
}
