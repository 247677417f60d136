/*
 * tcp_order [order|stale|ahead|sender]: the TCP transport as rank 0 of 2 against a raw rank 1 (a child process that
 * dials both connections itself and writes frames and order marks byte by byte). "order": a frame of the next call,
 * marked to follow one frame on the other connection, is in before the frame it follows; the transport must wait
 * for that one instead of taking the early frame for a desync. "stale": a mark counting fewer frames than the other
 * connection has already given is refused as a protocol violation, naming the peer; "ahead": so is one counting
 * 2^24 + 1 more than it has given, at once (no socket holds that many frames: the old transport waited forever).
 * "sender": the transport as rank 1 against a raw rank 0 (sender(), below).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "coll_frame.h"
#include "tcp.h"
#include "tcp_raw.h"
#include "tp_provider.h"

#define FIRST_BYTES 1024 /* the first call's payload: a large transfer, on rank 1's own connection */
#define NEXT_BYTES  16   /* the next call's: a small one, on the connection rank 0 owns */

static const tp_transport_ops_t *tcp_ops(void)
{
    for (int i = 0; tp_transport_at(i) != NULL; i++)
        if (strcmp(tp_transport_at(i)->name, "tcp") == 0) return tp_transport_at(i);
    fprintf(stderr, "tcp_order: no transport named tcp is registered\n");
    return NULL;
}

/* The header of call seq's one frame (an exchange of bytes bytes, as tp_exchange frames it). */
static void header(uint8_t h[TP_FRAME_HEADER_BYTES], uint64_t seq, size_t bytes)
{
    tp_frame_id_t id = {.coll = TP_COLL_EXCHANGE, .dtype = TP_BYTES, .op = TP_SUM, .seq = seq, .count = bytes};
    tp_frame_pack(h, &id, 0);
    tp_frame_set_part(h, 0, (uint32_t)bytes);
}

static int write_all(int fd, const void *p, size_t n)
{
    for (size_t o = 0; o < n;) {
        ssize_t w = write(fd, (const char *)p + o, n - o);
        if (w <= 0) return -1;
        o += (size_t)w;
    }
    return 0;
}

/* One frame (mark first when mark >= 0) of call seq with bytes of payload filled with fill. */
static int send_frame(int fd, long mark, uint64_t seq, size_t bytes, uint8_t fill)
{
    uint8_t buf[TCP_MARK_BYTES + TP_FRAME_HEADER_BYTES + FIRST_BYTES], *p = buf;
    if (mark >= 0) {
        tp_put_le32(p, TCP_MARK_MAGIC);
        tp_put_le32(p + 4, (uint32_t)mark);
        p += TCP_MARK_BYTES;
    }
    header(p, seq, bytes);
    memset(p + TP_FRAME_HEADER_BYTES, fill, bytes);
    return write_all(fd, buf, (size_t)(p - buf) + TP_FRAME_HEADER_BYTES + bytes);
}

/* Rank 1's direction claim (1: it sends on the connection, 1 + size: it reads it), admitted by rank 0. */
static int dial(int port, const uint8_t key[TP_JOB_KEY_BYTES], int claim)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char admitted = 0;
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        tp_auth_connect(fd, key, TP_CONN_TCP, claim, tp_now_ns() + 20000000000LL, "rank 0") != TP_OK ||
        read(fd, &admitted, 1) != 1 || admitted != 'A')
        return -1;
    return fd;
}

/* The raw rank 1: go carries rank 0's word that it has waited (order) or taken the first frame (stale); sent, its
 * own that the next call's frame is out (order). */
static int raw_peer(const char *mode, int port, const uint8_t key[TP_JOB_KEY_BYTES], int go, int sent)
{
    int own = dial(port, key, 1), shared = dial(port, key, 1 + 2);
    char c;
    if (own < 0 || shared < 0) return 3;
    if (strcmp(mode, "order") == 0) {
        if (send_frame(shared, 1, 1, NEXT_BYTES, 0xbb) != 0 || write(sent, "s", 1) != 1) return 4; /* the next first */
        if (read(go, &c, 1) != 1 || send_frame(own, -1, 0, FIRST_BYTES, 0xaa) != 0) return 5;
    } else { /* stale: a mark of 0 after one frame; ahead: 2^24 + 2 (one given, one more allowed in flight) */
        long mark = strcmp(mode, "ahead") == 0 ? (long)TCP_MARK_AHEAD_MAX + 2 : 0;
        if (send_frame(own, -1, 0, FIRST_BYTES, 0xaa) != 0) return 4;
        if (read(go, &c, 1) != 1 || send_frame(shared, mark, 1, NEXT_BYTES, 0xbb) != 0) return 5;
    }
    while (read(go, &c, 1) > 0) { /* the sockets stay open until rank 0 is done */
    }
    return 0;
}

/* Posts to peer a send (ready bytes of it may go now) or a receive of call seq's frame in buf. */
static tp_status_t post(const tp_transport_ops_t *ops, void *st, tp_xfer_t *x, int peer, int is_send, uint64_t seq,
                        uint8_t *buf, size_t bytes, size_t ready)
{
    memset(x, 0, sizeof(*x));
    x->peer = peer;
    x->is_send = is_send;
    x->buf = buf;
    x->len = bytes;
    x->ready = ready;
    header(x->header, seq, bytes); /* the transport sets each frame's part and size over the template's */
    return ops->post(st, x);
}

/* Moves the transport until x completes, it fails, or (for_ns > 0) that long has passed. */
static tp_status_t wait_for(const tp_transport_ops_t *ops, void *st, tp_xfer_t *x, int64_t for_ns)
{
    tp_status_t s = TP_OK;
    int64_t start = tp_now_ns(), deadline = start + (for_ns > 0 ? for_ns : 20000000000LL);
    while (s == TP_OK && !x->complete && tp_now_ns() < deadline) {
        int moved;
        s = ops->progress(st, &moved);
    }
    return s;
}

/* The TCP transport opened as rank of 2 (connections on demand) with a key of its own; NULL if it cannot be. */
static void *open_as(const tp_transport_ops_t *ops, int rank, uint8_t key[TP_JOB_KEY_BYTES], char *address, size_t len)
{
    void *st;
    for (int i = 0; i < TP_JOB_KEY_BYTES; i++) key[i] = (uint8_t)(i * 41 + 7 + rank);
    tp_transport_env_t env = {.rank = rank,
                              .size = 2,
                              .job_key = key,
                              .connect_timeout_s = 20,
                              .spin_us = 50,
                              .part_bytes = 65536,
                              .ip = "",
                              .on_loopback = 1,
                              .connect_lazy = 1};
    return ops != NULL && ops->open(&env, &st, address, len) == TP_OK ? st : NULL;
}

/* One mode against a fresh transport and raw peer; 0 when the transport did what the mode expects. */
static int run(const char *mode)
{
    const tp_transport_ops_t *ops = tcp_ops();
    uint8_t key[TP_JOB_KEY_BYTES];
    char address[128];
    void *st = open_as(ops, 0, key, address, sizeof(address));
    int go[2], sent[2];
    if (st == NULL || pipe(go) != 0 || pipe(sent) != 0) return 1;
    pid_t child = fork();
    if (child == 0) {
        close(go[1]);
        close(sent[0]);
        _exit(raw_peer(mode, atoi(strrchr(address, ':') + 1), key, go[0], sent[1]));
    }
    close(go[0]);
    close(sent[1]);
    tp_transport_peer_t peers[2] = {{.use = 0}, {.use = 1, .dial = ""}};
    uint8_t first[FIRST_BYTES], next[NEXT_BYTES];
    tp_xfer_t x;
    int bad = 1;
    tp_status_t s = ops->connect(st, peers);
    char c;
    if (s == TP_OK && strcmp(mode, "order") == 0) {
        /* the next call's frame is in (a loopback write is in the receiver's socket when it returns): 20 ms of spins
         * read both connections many times over before the first call's frame is sent */
        s = post(ops, st, &x, 1, 0, 0, first, FIRST_BYTES, 0);
        if (s == TP_OK && read(sent[0], &c, 1) == 1) s = wait_for(ops, st, &x, 20000000);
        int early = x.complete;
        if (s == TP_OK && write(go[1], "g", 1) == 1) s = wait_for(ops, st, &x, 0);
        if (s == TP_OK) s = post(ops, st, &x, 1, 0, 1, next, NEXT_BYTES, 0);
        if (s == TP_OK) s = wait_for(ops, st, &x, 0);
        bad = s != TP_OK || early || first[0] != 0xaa || first[FIRST_BYTES - 1] != 0xaa || next[0] != 0xbb;
        printf("tcp_order: order: %s%s%s: the first call's frame %s, then the next call's %s\n", tp_status_string(s),
               s != TP_OK ? ": " : "", s != TP_OK ? tp_last_error() : "",
               early ? "completed before it was sent" : "waited for", next[0] == 0xbb ? "came whole" : "did not come");
    } else if (s == TP_OK) {
        s = post(ops, st, &x, 1, 0, 0, first, FIRST_BYTES, 0);
        if (s == TP_OK) s = wait_for(ops, st, &x, 0);
        if (s == TP_OK && write(go[1], "g", 1) == 1) s = post(ops, st, &x, 1, 0, 1, next, NEXT_BYTES, 0);
        int64_t start = tp_now_ns();
        if (s == TP_OK) s = wait_for(ops, st, &x, 0);
        double took = (double)(tp_now_ns() - start) / 1e9;
        bad = s != TP_ERR_PROTOCOL || took > 5;
        printf("tcp_order: %s: %s%s%s, after %.3f s\n", mode, tp_status_string(s), s != TP_OK ? ": " : "",
               s != TP_OK ? tp_last_error() : "", took);
    }
    close(go[1]);
    close(sent[0]);
    int status = 1;
    waitpid(child, &status, 0);
    ops->close(st);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("tcp_order: %s: the raw rank 1 failed (status %d)\n", mode, status);
        bad = 1;
    }
    return bad;
}

/* Reads exactly n bytes from fd within 20 s; 0 on success. */
static int read_all(int fd, uint8_t *p, size_t n)
{
    for (size_t o = 0; o < n;) {
        struct pollfd q = {.fd = fd, .events = POLLIN};
        if (poll(&q, 1, 20000) != 1) return -1;
        ssize_t r = read(fd, p + o, n - o);
        if (r <= 0) return -1;
        o += (size_t)r;
    }
    return 0;
}

/* Whether the next bytes of fd are an order mark counting n frames (and takes them). */
static int mark_is(int fd, uint32_t n)
{
    uint8_t m[TCP_MARK_BYTES], want[TCP_MARK_BYTES];
    tp_put_le32(want, TCP_MARK_MAGIC);
    tp_put_le32(want + 4, n);
    return read_all(fd, m, sizeof(m)) == 0 && memcmp(m, want, sizeof(m)) == 0;
}

/* Whether the next frame of fd is call seq's with bytes of payload (and takes it). */
static int frame_is(int fd, uint64_t seq, size_t bytes)
{
    uint8_t h[TP_FRAME_HEADER_BYTES], want[TP_FRAME_HEADER_BYTES], payload[FIRST_BYTES];
    header(want, seq, bytes);
    return read_all(fd, h, sizeof(h)) == 0 && memcmp(h, want, sizeof(h)) == 0 && read_all(fd, payload, bytes) == 0;
}

/* A raw rank 0 for "sender": admits rank 1's two connections (own: the one it sends large transfers on; shared: the
 * one it reads large and sends small on), reports over ready whether the shared one is still empty when told, then
 * reads what both must hold, marks included. */
static int raw_listener(int lfd, const uint8_t key[TP_JOB_KEY_BYTES], int go, int ready)
{
    int own = -1, shared = -1, rank;
    while (own < 0 || shared < 0) {
        int fd = tcp_raw_accept(lfd, key, &rank);
        if (fd < 0 || write(fd, "A", 1) != 1) return 5;
        *(rank == 1 ? &own : &shared) = fd;
    }
    char c;
    struct pollfd q = {.fd = shared, .events = POLLIN};
    if (read(go, &c, 1) != 1 || write(ready, poll(&q, 1, 0) == 0 ? "e" : "x", 1) != 1) return 6;
    /* own: the first large transfer; then, after the small ones on shared (two frames: one was dropped), the last */
    int ok = frame_is(own, 0, FIRST_BYTES) && mark_is(own, 2) && frame_is(own, 3, FIRST_BYTES);
    /* shared: the small transfer behind the first large one (one frame); the one after the drop, unmarked */
    ok = ok && mark_is(shared, 1) && frame_is(shared, 1, NEXT_BYTES) && frame_is(shared, 2, NEXT_BYTES);
    return ok ? 0 : 7;
}

/*
 * "sender": the transport as rank 1 of 2, rank 0 raw. A small send posted behind a large one whose bytes do not
 * exist yet must not go out before it (its mark would count a frame that a failed call may drop); after a cancel
 * drops a pair like that, the next mark counts only frames that went out.
 */
static int sender(void)
{
    const tp_transport_ops_t *ops = tcp_ops();
    uint8_t key[TP_JOB_KEY_BYTES];
    char address[128], dial[64];
    void *st = open_as(ops, 1, key, address, sizeof(address));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sl = sizeof(sa);
    int lfd = socket(AF_INET, SOCK_STREAM, 0), go[2], ready[2];
    if (st == NULL || lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(lfd, 8) != 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl) != 0 || pipe(go) != 0 || pipe(ready) != 0)
        return 1;
    pid_t child = fork();
    if (child == 0) _exit(raw_listener(lfd, key, go[0], ready[1]));
    close(lfd);
    snprintf(dial, sizeof(dial), "127.0.0.1:%d", ntohs(sa.sin_port));
    tp_transport_peer_t peers[2] = {{.use = 1, .dial = dial}, {.use = 0}};
    static uint8_t big[FIRST_BYTES], small[NEXT_BYTES];
    tp_xfer_t t1, t2, t3, t4;
    char empty = '?';
    tp_status_t s = ops->connect(st, peers);
    if (s == TP_OK) s = post(ops, st, &t1, 0, 1, 0, big, FIRST_BYTES, 0); /* its bytes come later */
    if (s == TP_OK) s = post(ops, st, &t2, 0, 1, 1, small, NEXT_BYTES, NEXT_BYTES);
    if (s == TP_OK) s = wait_for(ops, st, &t2, 20000000);
    if (s == TP_OK && (write(go[1], "g", 1) != 1 || read(ready[0], &empty, 1) != 1)) s = TP_ERR_SYSTEM;
    t1.ready = FIRST_BYTES;
    if (s == TP_OK) s = wait_for(ops, st, &t1, 0);
    if (s == TP_OK) s = wait_for(ops, st, &t2, 0);
    /* the same pair again, dropped as a failed call drops what it queued */
    if (s == TP_OK) s = post(ops, st, &t3, 0, 1, 9, big, FIRST_BYTES, 0);
    if (s == TP_OK) s = post(ops, st, &t4, 0, 1, 9, small, NEXT_BYTES, NEXT_BYTES);
    if (s == TP_OK) s = wait_for(ops, st, &t4, 20000000);
    ops->cancel(st);
    if (s == TP_OK) s = post(ops, st, &t3, 0, 1, 2, small, NEXT_BYTES, NEXT_BYTES);
    if (s == TP_OK) s = wait_for(ops, st, &t3, 0);
    if (s == TP_OK) s = post(ops, st, &t4, 0, 1, 3, big, FIRST_BYTES, FIRST_BYTES);
    if (s == TP_OK) s = wait_for(ops, st, &t4, 0);
    close(go[1]);
    int status = 1;
    waitpid(child, &status, 0);
    ops->close(st);
    int raw_ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    printf("tcp_order: sender: %s; the small send %s the large one before it; rank 0 %s\n", tp_status_string(s),
           empty == 'e' ? "waited for" : "went out before",
           raw_ok ? "read every frame and mark where it belongs" : "found a frame or mark out of place");
    return s != TP_OK || empty != 'e' || !raw_ok;
}

int main(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "order") == 0 || strcmp(argv[1], "stale") == 0 || strcmp(argv[1], "ahead") == 0))
        return run(argv[1]);
    if (argc == 2 && strcmp(argv[1], "sender") == 0) return sender();
    if (argc != 1) {
        fprintf(stderr, "usage: tcp_order [order|stale|ahead|sender] (no argument: all four)\n");
        return 2;
    }
    int order = run("order"), stale = run("stale"), ahead = run("ahead"), send = sender();
    return order || stale || ahead || send;
}
