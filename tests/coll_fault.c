/*
 * coll_fault: ranks that go wrong on purpose (and clean: a barrier and an all_reduce that must succeed). desync-coll|desync-count|desync-type|desync-root|desync-large|
 * desync-barrier: the last rank calls something else (in the last two, with another algorithm: dissemination
 * against every peer at once) and every rank must fail with TP_ERR_DESYNC. kill: the last rank SIGKILLs itself mid-call and the
 * others must fail with TP_ERR_PEER_FAILED (or be ended by the fate path). garbage|oversize: rank 1 writes a forged
 * frame on its real data connection to rank 0, which must refuse it with TP_ERR_PROTOCOL. stream: every call with a
 * stream tp_stream_create did not make fails with TP_ERR_INVALID, and the comm still works. short-sends: every
 * sendmsg moves at most 1060 bytes (a socket that takes a little at a time): with 1000-byte parts, sends stop
 * inside the headers and payloads of batched frames; all_gather and all_reduce must still give the right values.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <tp.h>

#include "coll_frame.h"
#include "runtime_transports.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void on_failure(const tp_failure_t *f, void *arg)
{
    printf("fate: rank %d learned that rank %d failed at %.3f ms: %s\n", *(int *)arg, f->rank, now_ms(), f->reason);
    fflush(stdout);
}

static int expect(int me, const char *what, tp_status_t got, tp_status_t want)
{
    printf("rank %d: %s: %s%s%s\n", me, what, tp_status_string(got), got != TP_OK ? ": " : "",
           got != TP_OK ? tp_last_error() : "");
    fflush(stdout);
    return got == want ? 0 : 1;
}

/* The wire image of the one frame whose claimed size the socket layer rewrites, or NULL. */
static const uint8_t *oversize_frame;

/* A socket transport's frames leave through sendmsg: the armed frame's header goes out claiming a size no part can
 * have, as a broken or hostile peer would send it (no transport builds such a frame). */
ssize_t __real_sendmsg(int fd, const struct msghdr *msg, int flags);
/* short-sends: the most bytes one sendmsg moves (0: all it is given). */
static size_t send_cap;

ssize_t __wrap_sendmsg(int fd, const struct msghdr *msg, int flags)
{
    if (send_cap > 0) { /* the first send_cap bytes of the iovecs, as a socket with little room takes them */
        struct iovec iov[64];
        struct msghdr m = *msg;
        size_t left = send_cap, k = 0;
        for (; k < msg->msg_iovlen && k < 64 && left > 0; k++) {
            iov[k] = msg->msg_iov[k];
            if (iov[k].iov_len > left) iov[k].iov_len = left;
            left -= iov[k].iov_len;
        }
        m.msg_iov = iov;
        m.msg_iovlen = k;
        return __real_sendmsg(fd, &m, flags);
    }
    if (oversize_frame != NULL && msg->msg_iovlen > 0 && msg->msg_iov[0].iov_len >= TP_FRAME_HEADER_BYTES &&
        memcmp(msg->msg_iov[0].iov_base, oversize_frame, TP_FRAME_HEADER_BYTES) == 0) {
        tp_frame_set_part(msg->msg_iov[0].iov_base, 0, 0x7ffffff0u);
        oversize_frame = NULL;
    }
    return __real_sendmsg(fd, msg, flags);
}

/*
 * Sends header as this rank's next frame to world rank 0 through the transport that reaches it (its ops table, as
 * the collectives do), with bytes of payload (at most 1); oversize makes its header claim far more. The transfer is
 * dropped once it has gone out.
 */
static void forge_frame(tp_world_t *world, const uint8_t header[TP_FRAME_HEADER_BYTES], size_t bytes, int oversize)
{
    static uint8_t payload[1], wire[TP_FRAME_HEADER_BYTES];
    tp_xfer_t x = {.peer = 0, .is_send = 1, .buf = payload, .len = bytes, .ready = bytes, .part_bytes = 65536};
    memcpy(x.header, header, TP_FRAME_HEADER_BYTES);
    memcpy(wire, header, TP_FRAME_HEADER_BYTES);
    tp_frame_set_part(wire, 0, (uint32_t)bytes);
    oversize_frame = oversize ? wire : NULL;
    if (tp_transports_post(world, &x) != TP_OK) return;
    while (!x.complete && tp_transports_progress(world, 1) == TP_OK) {
    }
    if (oversize_frame != NULL) printf("rank 1: the forged frame never reached sendmsg\n");
    tp_transports_cancel(world);
}

int main(int argc, char **argv)
{
    static int me;
    if (argc < 2) return 2;
    const char *mode = argv[1];
    tp_fate_register(on_failure, &me);
    tp_comm_t *w;
    if (tp_init(NULL, &w) != TP_OK) return 1;
    me = tp_comm_rank(w);
    int n = tp_comm_size(w), last = me == n - 1, bad = 0;
    float a[1024] = {0}, b[8192]; /* an all_gather of 1024 at up to 8 ranks */
    double d[1024] = {0};
    if (strcmp(mode, "desync-coll") == 0) {
        tp_status_t s =
            last ? tp_all_gather(w, a, b, 1024, TP_F32, NULL) : tp_all_reduce(w, a, b, 1024, TP_F32, TP_SUM, NULL);
        bad = expect(me, mode, s, TP_ERR_DESYNC);
    } else if (strcmp(mode, "desync-count") == 0) {
        bad = expect(me, mode, tp_all_reduce(w, a, b, last ? 1000 : 1024, TP_F32, TP_SUM, NULL), TP_ERR_DESYNC);
    } else if (strcmp(mode, "desync-type") == 0) {
        tp_status_t s = last ? tp_all_reduce(w, d, d, 1024, TP_F64, TP_SUM, NULL)
                             : tp_all_reduce(w, a, b, 1024, TP_F32, TP_SUM, NULL);
        bad = expect(me, mode, s, TP_ERR_DESYNC);
    } else if (strcmp(mode, "clean") == 0) { /* a barrier and an all_reduce that must succeed */
        for (int i = 0; i < 1024; i++) a[i] = (float)(me + 1);
        tp_status_t s = tp_barrier(w);
        if (s == TP_OK) s = tp_all_reduce(w, a, b, 1024, TP_F32, TP_SUM, NULL);
        int wrong = 0;
        for (int i = 0; s == TP_OK && i < 1024; i++) wrong += b[i] != (float)(n * (n + 1) / 2);
        bad = expect(me, mode, s, TP_OK) || wrong;
        if (wrong) printf("rank %d: clean: %d sums wrong\n", me, wrong);
    } else if (strcmp(mode, "short-sends") == 0) { /* run with small parts: transfers of several frames */
        send_cap = 1060;
        tp_status_t s = TP_OK;
        int wrong = 0;
        for (int round = 0; round < 20 && s == TP_OK; round++) {
            for (int i = 0; i < 1024; i++) a[i] = (float)(me * 4096 + i + round);
            if ((s = tp_all_gather(w, a, b, 1024, TP_F32, NULL)) != TP_OK) break;
            for (int r = 0; r < n; r++)
                for (int i = 0; i < 1024; i++) wrong += b[r * 1024 + i] != (float)(r * 4096 + i + round);
            if ((s = tp_all_reduce(w, a, b, 1024, TP_F32, TP_SUM, NULL)) != TP_OK) break;
            for (int i = 0; i < 1024; i++) wrong += b[i] != (float)(4096 * n * (n - 1) / 2 + n * (i + round));
        }
        send_cap = 0;
        bad = expect(me, mode, s, TP_OK) || wrong;
        if (wrong) printf("rank %d: short-sends: %d values wrong\n", me, wrong);
    } else if (strcmp(mode, "desync-large") == 0) { /* dissemination against the scatter-reduce */
        size_t big = 256 * 1024;
        float *x = calloc(big, 4);
        bad = expect(me, mode, tp_all_reduce(w, x, x, last ? big : 1024, TP_F32, TP_SUM, NULL), TP_ERR_DESYNC);
        free(x);
    } else if (strcmp(mode, "desync-barrier") == 0) { /* a barrier against an all_gather of every peer at once */
        size_t big = 64 * 1024;
        float *x = calloc(big * (size_t)n, 4);
        bad = expect(me, mode, last ? tp_barrier(w) : tp_all_gather(w, x, x, big, TP_F32, NULL), TP_ERR_DESYNC);
        free(x);
    } else if (strcmp(mode, "desync-root") == 0) {
        bad = expect(me, mode, tp_broadcast(w, a, 1024, TP_F32, last ? 1 : 0, NULL), TP_ERR_DESYNC);
    } else if (strcmp(mode, "kill") == 0) {
        size_t count = 256 * 1024;
        float *x = calloc(count, 4);
        signal(SIGTERM, SIG_IGN); /* tprun's teardown must not end a survivor before its own call fails */
        for (int i = 0; i < 1000; i++) {
            if (last && i == 20) {
                printf("rank %d: killing itself at %.3f ms\n", me, now_ms());
                fflush(stdout);
                raise(SIGKILL);
            }
            tp_status_t s = tp_all_reduce(w, x, x, count, TP_F32, TP_SUM, NULL);
            if (s != TP_OK) {
                printf("rank %d: call %d failed at %.3f ms: %s: %s\n", me, i, now_ms(), tp_status_string(s),
                       tp_last_error());
                fflush(stdout);
                bad = s != TP_ERR_PEER_FAILED;
                break;
            }
        }
        if (!bad) pause(); /* the fate path ends this rank */
    } else if (strcmp(mode, "garbage") == 0 || strcmp(mode, "oversize") == 0) {
        if (me == 1) {
            uint8_t h[TP_FRAME_HEADER_BYTES];
            if (strcmp(mode, "garbage") == 0) {
                for (size_t i = 0; i < sizeof(h); i++) h[i] = (uint8_t)(i * 37 + 11);
                forge_frame(w->world, h, 0, 0);
            } else { /* this call's own identity, with a size no part can have */
                tp_frame_id_t id = {.coll = TP_COLL_BARRIER, .dtype = TP_BYTES, .comm_id = w->comm_id, .seq = w->seq};
                tp_frame_pack(h, &id, 0);
                forge_frame(w->world, h, 1, 1);
            }
            printf("rank 1: forged frame sent\n");
        } else if (me == 0) {
            bad = expect(me, mode, tp_barrier(w), TP_ERR_PROTOCOL);
        }
    } else if (strcmp(mode, "pair") == 0) { /* ranks 0 and 1 exchange; the others make no call */
        if (me < 2) bad = expect(me, mode, tp_exchange(w, a, b, 4, TP_F32, 1 - me, NULL), TP_OK);
    } else if (strcmp(mode, "dead-peer") == 0) { /* rank 1 ends before any call: the others' first call names it */
        if (me == 1) _exit(3);
        signal(SIGTERM, SIG_IGN); /* tprun's teardown must not end a survivor before its own call fails */
        tp_status_t s = tp_all_reduce(w, a, b, 1024, TP_F32, TP_SUM, NULL);
        printf("rank %d: dead-peer: %s: %s\n", me, tp_status_string(s), tp_last_error());
        bad = s != TP_ERR_PEER_FAILED;
    } else if (strcmp(mode, "stopped-peer") == 0) { /* rank 1 stops before any call: rank 2's dial to it must not
                                                     * outwait fate's verdict (heartbeats name it) */
        if (me == 1) raise(SIGSTOP);
        if (me == 2) {
            double t0 = now_ms();
            tp_status_t s = tp_exchange(w, a, b, 4, TP_F32, 1, NULL);
            printf("rank 2: stopped-peer: %s after %.0f ms: %s\n", tp_status_string(s), now_ms() - t0,
                   tp_last_error());
            bad = s != TP_ERR_PEER_FAILED;
            tp_peer_info_t stopped; /* the job ends: a stopped rank would hold tprun until its own timeout */
            if (tp_comm_peer(w, 1, &stopped) == TP_OK) kill(stopped.pid, SIGKILL);
        }
    } else if (strcmp(mode, "stream") == 0) { /* every call refuses a made-up stream by name; the comm stays usable */
        tp_stream_t *st = (tp_stream_t *)a;
        int peer = (me + 1) % n;
        size_t cnt[8] = {4, 4, 4, 4, 4, 4, 4, 4};
        static const char *const names[] = {"tp_broadcast",  "tp_all_gather",     "tp_all_gatherv",
                                            "tp_all_reduce", "tp_reduce_scatter", "tp_all_to_all",
                                            "tp_send",       "tp_recv",           "tp_exchange"};
        for (int i = 0; i < 9; i++) { /* each checked at once: tp_last_error is the latest call's */
            tp_status_t got = i == 0   ? tp_broadcast(w, a, 4, TP_F32, 0, st)
                              : i == 1 ? tp_all_gather(w, a, b, 4, TP_F32, st)
                              : i == 2 ? tp_all_gatherv(w, a, b, cnt, TP_F32, st)
                              : i == 3 ? tp_all_reduce(w, a, b, 4, TP_F32, TP_SUM, st)
                              : i == 4 ? tp_reduce_scatter(w, b, a, 4, TP_F32, TP_SUM, st)
                              : i == 5 ? tp_all_to_all(w, b, b + 4096, 4, TP_F32, st)
                              : i == 6 ? tp_send(w, a, 4, TP_F32, peer, st)
                              : i == 7 ? tp_recv(w, a, 4, TP_F32, peer, st)
                                       : tp_exchange(w, a, b, 4, TP_F32, peer, st);
            bad |= expect(me, names[i], got, TP_ERR_INVALID);
        }
        bad |= expect(me, "stream then NULL", tp_all_reduce(w, a, b, 4, TP_F32, TP_SUM, NULL), TP_OK);
    } else {
        return 2;
    }
    tp_finalize(w);
    return bad;
}
