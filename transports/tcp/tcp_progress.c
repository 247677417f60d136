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

tp_status_t tcp_post(void *state, tp_xfer_t *x)
{
    tcp_state_t *st = state;
    tcp_conn_t *c = &st->conns[x->peer];
    tp_status_t s = c->fd < 0 || c->sfd < 0 ? tcp_links_need(st, x->peer) : TP_OK; /* connections on demand */
    if (s != TP_OK) return s;
    if (x->is_send ? c->send_broken != TP_OK : c->broken != TP_OK) return x->is_send ? c->send_broken : c->broken;
    if (x->is_send) {
        tp_xfer_enqueue(x, st->env.part_bytes, &c->send_head, &c->send_tail);
    } else {
        tp_xfer_enqueue(x, st->env.part_bytes, &c->recv_head, &c->recv_tail);
        c->held = 0; /* a waiting header may match this one */
    }
    return TP_OK;
}

/* Whether the head transfer has bytes that may go now. */
static int sendable(const tp_xfer_t *x)
{
    size_t base = frame_base(x), poff = x->frame_off > H ? x->frame_off - H : 0;
    if (x->frame_off < H)
        return x->frame_off > 0 || tp_xfer_frame_len(x, base) == 0 || tp_xfer_frame_ready(x, base) > 0;
    return tp_xfer_frame_ready(x, base) > poff;
}

/* Gathers what may go from the head of the send queue into iov (one frame per transfer); returns the count. */
static int send_iov(tcp_conn_t *c, struct iovec *iov)
{
    int n = 0;
    for (tp_xfer_t *x = c->send_head; x != NULL && n + 2 <= TCP_IOV_MAX; x = x->next) {
        if (!sendable(x)) return n;
        size_t base = frame_base(x), off = x->frame_off, fl = tp_xfer_frame_len(x, base),
               fr = tp_xfer_frame_ready(x, base);
        if (off == 0) tp_xfer_frame_header(x, base, x->wire);
        if (off < H) iov[n++] = (struct iovec){x->wire + off, H - off};
        size_t poff = off > H ? off - H : 0;
        if (fr > poff) iov[n++] = (struct iovec){(char *)x->buf + base + poff, fr - poff};
        if (fr < fl || base + fl < x->len) return n; /* the rest of this frame, or its next one, comes later */
    }
    return n;
}

/* Applies n sent bytes to the queue head, completing frames and transfers. */
static void send_advance(tcp_conn_t *c, size_t n)
{
    while (n > 0 && c->send_head != NULL) {
        tp_xfer_t *x = c->send_head;
        size_t base = frame_base(x), fl = tp_xfer_frame_len(x, base), rem = H + fl - x->frame_off;
        size_t take = n < rem ? n : rem;
        size_t before = x->frame_off > H ? x->frame_off - H : 0;
        x->frame_off += take;
        size_t after = x->frame_off > H ? x->frame_off - H : 0;
        x->done += after - before;
        n -= take;
        if (x->frame_off < H + fl) break;
        x->frame_off = 0;
        if (x->done == x->len) {
            x->complete = 1;
            c->send_head = x->next;
            if (c->send_head == NULL) c->send_tail = NULL;
        }
    }
}

static tp_status_t pump_send(tcp_state_t *st, tcp_conn_t *c, int *moved)
{
    struct iovec iov[TCP_IOV_MAX];
    while (c->send_head != NULL) {
        int n = send_iov(c, iov);
        if (n == 0) return TP_OK;
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->sfd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) return TP_OK;
            if (errno == EINTR) continue;
            char why[128];
            snprintf(why, sizeof(why), "connection lost while sending (%s)", strerror(errno));
            tcp_conn_fail(st, c, TP_ERR_PEER_FAILED, why);
            return TP_ERR_PEER_FAILED;
        }
        *moved = 1;
        send_advance(c, (size_t)w);
    }
    return TP_OK;
}

static void recv_finish_frame(tcp_conn_t *c)
{
    tp_xfer_t *x = c->rx_cur;
    c->rx_cur = NULL;
    if (x->done < x->len) return;
    x->complete = 1;
    tp_xfer_t **pp = &c->recv_head, *prev = NULL;
    while (*pp != x) prev = *pp, pp = &(*pp)->next;
    *pp = x->next;
    if (c->recv_tail == x) c->recv_tail = prev;
}

/* Matches the header at rx_start against the posted receives; refuses what belongs to no call of ours. */
static tp_status_t recv_match(tcp_state_t *st, tcp_conn_t *c)
{
    const uint8_t *got = c->rx + c->rx_start;
    for (tp_xfer_t *x = c->recv_head; x != NULL; x = x->next) {
        int matched = 0;
        tp_xfer_frame_header(x, x->done, x->wire);
        tp_status_t s = tp_frame_check(x->wire, got, st->env.part_bytes, c->peer, &matched);
        if (s != TP_OK) {
            tcp_conn_fail(st, c, s, "bad frame");
            return s;
        }
        if (!matched) continue;
        c->rx_start += H;
        c->rx_cur = x;
        c->rx_left = tp_xfer_frame_len(x, x->done);
        if (c->rx_left == 0) recv_finish_frame(c);
        return TP_OK;
    }
    c->held = 1;
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

static tp_status_t pump_recv(tcp_state_t *st, tcp_conn_t *c, int *moved)
{
    for (;;) {
        size_t avail = c->rx_end - c->rx_start;
        if (c->rx_cur != NULL) {
            tp_xfer_t *x = c->rx_cur;
            if (avail > 0) {
                size_t take = avail < c->rx_left ? avail : c->rx_left;
                memcpy((char *)x->buf + x->done, c->rx + c->rx_start, take);
                c->rx_start += take;
                x->done += take;
                c->rx_left -= take;
                *moved = 1;
                if (c->rx_left == 0) recv_finish_frame(c);
                continue;
            }
            c->rx_start = c->rx_end = 0;
            ssize_t r;
            if (c->rx_left >= TCP_DIRECT_MIN) {
                struct iovec iov[2] = {{(char *)x->buf + x->done, c->rx_left}, {c->rx, TCP_RX_BYTES}};
                r = readv(c->fd, iov, 2);
                if (r > 0) {
                    size_t direct = (size_t)r < c->rx_left ? (size_t)r : c->rx_left;
                    x->done += direct;
                    c->rx_left -= direct;
                    c->rx_end = (size_t)r - direct;
                }
            } else {
                r = recv(c->fd, c->rx, TCP_RX_BYTES, MSG_DONTWAIT);
                if (r > 0) c->rx_end = (size_t)r;
            }
            if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return TP_OK;
            if (r <= 0) return peer_closed(st, c, r);
            *moved = 1;
            if (c->rx_left == 0) recv_finish_frame(c);
            continue;
        }
        if (c->held || c->recv_head == NULL) return TP_OK; /* nothing to deliver to: leave bytes in the kernel */
        if (avail >= H) {
            tp_status_t s = recv_match(st, c);
            if (s != TP_OK) return s;
            if (!c->held) *moved = 1;
            continue;
        }
        if (c->rx_start > 0) {
            memmove(c->rx, c->rx + c->rx_start, avail);
            c->rx_start = 0;
            c->rx_end = avail;
        }
        ssize_t r = recv(c->fd, c->rx + c->rx_end, TCP_RX_BYTES - c->rx_end, MSG_DONTWAIT);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return TP_OK;
        if (r <= 0) return peer_closed(st, c, r);
        c->rx_end += (size_t)r;
    }
}

/* Sends on every connection before any receive: a rank that then finds a mismatch has already put its own
 * headers out, so each peer it disagrees with sees them and fails too instead of waiting. */
static tp_status_t pump_all(tcp_state_t *st, int *moved)
{
    for (int r = 0; r < st->size; r++) {
        tcp_conn_t *c = &st->conns[r];
        if (c->sfd < 0 || c->send_head == NULL) continue;
        if (c->send_broken != TP_OK) return c->send_broken;
        tp_status_t s = pump_send(st, c, moved);
        if (s != TP_OK) return s;
    }
    for (int r = 0; r < st->size; r++) {
        tcp_conn_t *c = &st->conns[r];
        if (c->fd < 0) continue;
        if (c->recv_head != NULL) {
            if (c->broken != TP_OK) return c->broken;
            tp_status_t s = pump_recv(st, c, moved);
            if (s != TP_OK) return s;
        }
    }
    return TP_OK;
}

/* What a wait blocks on: the connections with a receive to deliver to, and those with a frame ready to go. */
int tcp_event_fds(void *state, struct pollfd *fds, int max)
{
    const tcp_state_t *st = state;
    int n = 0;
    int waiting = 0; /* a transfer queued for a peer that has not connected yet: the acceptor's admission wakes it */
    for (int r = 0; r < st->size; r++) {
        const tcp_conn_t *c = &st->conns[r];
        waiting |= (c->fd < 0 && c->recv_head != NULL) || (c->sfd < 0 && c->send_head != NULL);
        if (c->fd >= 0 && c->recv_head != NULL && !c->held && n++ < max)
            fds[n - 1] = (struct pollfd){.fd = c->fd, .events = POLLIN};
        if (c->sfd >= 0 && c->send_head != NULL && sendable(c->send_head) && n++ < max)
            fds[n - 1] = (struct pollfd){.fd = c->sfd, .events = POLLOUT};
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
        if (c->send_head != NULL && c->send_head->frame_off > 0 && c->send_broken == TP_OK)
            c->send_broken = TP_ERR_ABORTED;
        if (c->rx_cur != NULL && c->broken == TP_OK) c->broken = TP_ERR_ABORTED;
        c->send_head = c->send_tail = NULL;
        c->recv_head = c->recv_tail = NULL;
        c->rx_cur = NULL;
    }
}
