/*
 * ab_bench: libtp's collectives and MPI's in the same processes, in alternating blocks of calls, so both meet the
 * machine in the same state; separate launches of a shared VM can land in states whose per-call costs differ by
 * microseconds (docs/BENCHMARKS.md, "Twenty-second pass"). Run under mpirun (libtp bootstraps from its PMIx server):
 *   TP_TRANSPORTS=tcp mpirun -x TP_TRANSPORTS -n 2 ab_bench --impl ompi-tcp --ours tprun-tcp --floor --json ...
 * Each size: warm-up calls of each, then the timed calls in blocks of --block, the implementations taking turns at
 * going first and the first call of each block untimed; a row pools one implementation's calls over its blocks.
 * --floor (2 ranks) adds "tcp-floor": the call's bytes exchanged over loopback TCP with no library around them. Up to
 * FLOOR_ONE_SOCKET_BYTES (all_reduce, all_gather, sendrecv) one segment each way on one socket, what any
 * implementation over the kernel's TCP pays at the least. Above it (all_gather and sendrecv only) one socket each
 * way, as libtp has (one socket both ways takes twice as long at 4 MiB), with libtp's socket settings (FLOOR_SOCKBUF,
 * reno), sent and taken without blocking in turn, and all_gather's own block copied into place: what the kernel
 * charges for those bytes without libtp's parts, frames and progress, not a proven least.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <mpi.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <tp.h>

#include "bench_mpi_call.h"
#include "bench_schedule.h"
#include "bench_tp_call.h"

enum { IMPL_TP, IMPL_MPI, IMPL_FLOOR, IMPLS, FLOOR_ONE_SOCKET_BYTES = 256, FLOOR_SOCKBUF = 4194304 };

/* One call's arguments for any implementation; s: libtp's status of the call that failed. */
typedef struct ab_call {
    tp_comm_t *w;
    int op, me, n;
    int floor_fd, floor_out, floor_in; /* the tcp-floor's sockets: both ways; this rank's sends; the peer's */
    float *send, *recv;
    size_t bytes;
    tp_status_t s;
} ab_call_t;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Sends bytes of out on out_fd while taking as many from in_fd into in, both at once; 0 when both are done. */
static int floor_exchange(int out_fd, int in_fd, const void *out, void *in, size_t bytes)
{
    size_t sent = 0, got = 0;
    while (sent < bytes || got < bytes) {
        if (sent < bytes) {
            ssize_t w = send(out_fd, (const char *)out + sent, bytes - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w > 0) sent += (size_t)w;
            else if (w < 0 && errno != EAGAIN && errno != EINTR) return perror("ab_bench: tcp-floor send"), -1;
        }
        if (got < bytes) {
            ssize_t r = recv(in_fd, (char *)in + got, bytes - got, MSG_DONTWAIT);
            if (r > 0) got += (size_t)r;
            else if (r == 0) return fprintf(stderr, "ab_bench: tcp-floor: the peer closed its socket\n"), -1;
            else if (errno != EAGAIN && errno != EINTR) return perror("ab_bench: tcp-floor recv"), -1;
        }
    }
    return 0;
}

/* Rank 0 listens on loopback, rank 1 dials the port rank 0 names; large: with libtp's buffers and congestion control;
 * -1 (printed) when the socket cannot be had. */
static int floor_connect(int me, int large)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    int fd = -1, ls = -1, ok = 1, all = 0, one = 1;
    if (me == 0) {
        ls = socket(AF_INET, SOCK_STREAM, 0);
        ok = ls >= 0 && bind(ls, (struct sockaddr *)&a, len) == 0 && listen(ls, 1) == 0 &&
             getsockname(ls, (struct sockaddr *)&a, &len) == 0;
    }
    MPI_Bcast(&a, (int)sizeof(a), MPI_BYTE, 0, MPI_COMM_WORLD);
    if (me == 1) ok = (fd = socket(AF_INET, SOCK_STREAM, 0)) >= 0 && connect(fd, (struct sockaddr *)&a, len) == 0;
    else if (ok) ok = (fd = accept(ls, NULL, NULL)) >= 0;
    if (ls >= 0) close(ls);
    ok = ok && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0;
    if (ok && large) { /* as transports/tcp sets its sockets (tcp.h); congestion control where the kernel has it */
        int sb = FLOOR_SOCKBUF;
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, "reno", 4);
        ok = setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sb, sizeof(sb)) == 0 &&
             setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sb, sizeof(sb)) == 0;
    }
    if (!ok) perror("ab_bench: tcp-floor: loopback socket");
    MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all) return fd;
    if (fd >= 0) close(fd);
    return -1;
}

/* Under a libtp built with --enable-sanitizers (ab_build.sh then builds this program with them too): LeakSanitizer
 * off, as the leaks it finds at exit are Open MPI's; libtp's are checked by every other test. ASAN_OPTIONS may
 * still turn it on. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "detect_leaks=0"; }

/* Each implementation's barrier and call, for bench_calls_t; ctx is the ab_call_t. */
static int tp_barrier_one(void *ctx)
{
    ab_call_t *c = ctx;
    return (c->s = tp_barrier(c->w)) != TP_OK;
}

static int tp_call_one(void *ctx)
{
    ab_call_t *c = ctx;
    return (c->s = bench_tp_call(c->w, c->op, c->send, c->recv, c->bytes)) != TP_OK;
}

static int mpi_barrier_one(void *ctx)
{
    (void)ctx;
    return MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS;
}

static int mpi_call_one(void *ctx)
{
    ab_call_t *c = ctx;
    return bench_mpi_call(c->op, c->send, c->recv, c->bytes, c->me, c->n) != MPI_SUCCESS;
}

static int floor_barrier_one(void *ctx)
{
    ab_call_t *c = ctx;
    char a = 0, b;
    return floor_exchange(c->floor_fd, c->floor_fd, &a, &b, 1);
}

static int floor_call_one(void *ctx)
{
    ab_call_t *c = ctx;
    if (c->bytes <= FLOOR_ONE_SOCKET_BYTES) return floor_exchange(c->floor_fd, c->floor_fd, c->send, c->recv, c->bytes);
    char *peer_block = (char *)c->recv;
    if (c->op == BENCH_ALL_GATHER) {
        memcpy((char *)c->recv + (size_t)c->me * c->bytes, c->send, c->bytes);
        peer_block += (size_t)(1 - c->me) * c->bytes;
    }
    return floor_exchange(c->floor_out, c->floor_in, c->send, peer_block, c->bytes);
}

/* Whether the tcp-floor has a row for op at bytes (see the top of this file). */
static int floor_applies(int op, size_t bytes)
{
    if (op == BENCH_ALL_GATHER || op == BENCH_SENDRECV) return 1;
    return op == BENCH_ALL_REDUCE && bytes <= FLOOR_ONE_SOCKET_BYTES;
}

/* Takes --block N, --ours NAME and --floor out of argv (the rest is bench_parse_args's); -1 (printed) on a bad one. */
static int take_own_args(int *argc, char **argv, int *block, const char **ours, int *with_floor)
{
    int kept = 1;
    for (int i = 1; i < *argc; i++) {
        unsigned long long v;
        if (strcmp(argv[i], "--floor") == 0) {
            *with_floor = 1;
        } else if (strcmp(argv[i], "--block") == 0 || strcmp(argv[i], "--ours") == 0) {
            if (i + 1 == *argc) return fprintf(stderr, "ab_bench: %s needs a value\n", argv[i]), -1;
            if (strcmp(argv[i], "--ours") == 0) *ours = argv[i + 1];
            else if (bench_parse_count(argv[i + 1], 1, BENCH_MAX_ITERS, &v) == 0) *block = (int)v;
            else
                return fprintf(stderr, "ab_bench: --block: expected 1 to %d, got \"%s\"\n", BENCH_MAX_ITERS,
                               argv[i + 1]),
                       -1;
            i++;
        } else {
            argv[kept++] = argv[i];
        }
    }
    *argc = kept;
    return 0;
}

/* One size: warm-up, the blocks in turn (each after one untimed call), then each implementation's row (the slowest
 * rank's time per call). */
static int run_size(const bench_opts_t *o, ab_call_t *c, int block, int impls, const char *const *names,
                    double *const *t, double *tmax)
{
    int iters = o->iters > 0 ? o->iters : iterations_for(c->bytes);
    size_t send_bytes = bench_send_bytes(c->op, c->bytes, c->n);
    const bench_calls_t loops[IMPLS] = {
        [IMPL_TP] = {tp_barrier_one, tp_call_one, now_us, c, c->send, send_bytes},
        [IMPL_MPI] = {mpi_barrier_one, mpi_call_one, now_us, c, c->send, send_bytes},
        [IMPL_FLOOR] = {floor_barrier_one, floor_call_one, now_us, c, c->send, send_bytes},
    };
    double sw[IMPLS] = {0}, per_call;
    for (int impl = 0; impl < impls; impl++)
        for (int i = 0; i < bench_warm_calls(send_bytes); i++)
            if (loops[impl].barrier(c) != 0 || loops[impl].call(c) != 0) return -1;
    for (int done = 0, b = 0; done < iters; b++) {
        int k = iters - done < block ? iters - done : block;
        for (int j = 0; j < impls; j++) {
            int impl = (b + j) % impls;
            if (bench_time_block(o, &loops[impl], 1, k, t[impl] + done, &per_call) != 0) return -1;
            sw[impl] += per_call * k;
        }
        done += k;
    }
    for (int impl = 0; impl < impls; impl++) {
        double mine = sw[impl] / iters, sum = 0;
        MPI_Allreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        MPI_Allreduce(t[impl], tmax, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        qsort(tmax, (size_t)iters, sizeof(double), cmp_double);
        if (c->me == 0) bench_print_json(names[impl], c->n, c->op, c->bytes, iters, tmax, sum / c->n);
    }
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    bench_opts_t o;
    char err[256];
    int block = 10, with_floor = 0, me, n;
    const char *ours = "tprun";
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int bad = take_own_args(&argc, argv, &block, &ours, &with_floor) != 0;
    if (!bad && bench_parse_args(argc, argv, 1, &o, err, sizeof(err)) != 0)
        bad = 1, fprintf(stderr, "ab_bench: %s\n", err);
    if (!bad && with_floor && n != 2) bad = 1, fprintf(stderr, "ab_bench: --floor: needs 2 ranks, not %d\n", n);
    if (bad || o.help) {
        if (!bad && me == 0) {
            bench_usage(stdout, "ab_bench", 1);
            printf(
                "  --block N      calls of one implementation before the next's turn (default 10)\n"
                "  --ours NAME    libtp's name in the JSON rows (default tprun)\n"
                "  --floor        also the call's bytes exchanged over bare loopback TCP sockets (2 ranks; all_reduce\n"
                "                 up to 256 B, all_gather and sendrecv at every size)\n");
        }
        MPI_Finalize();
        return bad ? 2 : 0;
    }
    ab_call_t c = {.me = me, .n = n, .floor_fd = -1, .floor_out = -1, .floor_in = -1};
    tp_status_t s = tp_init(NULL, &c.w);
    if (s != TP_OK) {
        fprintf(stderr, "ab_bench: rank %d: tp_init: %s (%s)\n", me, tp_status_string(s), tp_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (with_floor) { /* rank 0 sends on the second socket, rank 1 on the third */
        int low_to_high = -1, high_to_low = -1;
        if ((c.floor_fd = floor_connect(me, 0)) < 0 || (low_to_high = floor_connect(me, 1)) < 0 ||
            (high_to_low = floor_connect(me, 1)) < 0)
            MPI_Abort(MPI_COMM_WORLD, 1);
        c.floor_out = me == 0 ? low_to_high : high_to_low, c.floor_in = me == 0 ? high_to_low : low_to_high;
    }
    size_t cap = o.max_bytes * (size_t)n + 64;
    c.send = malloc(cap), c.recv = malloc(cap);
    double *t[IMPLS], *tmax = malloc(BENCH_MAX_ITERS * sizeof(double));
    int nomem = c.send == NULL || c.recv == NULL || tmax == NULL;
    for (int i = 0; i < IMPLS; i++) nomem |= (t[i] = malloc(BENCH_MAX_ITERS * sizeof(double))) == NULL;
    if (nomem) {
        fprintf(stderr, "ab_bench: rank %d: out of memory for 2 x %zu bytes (lower --max-bytes)\n", me, cap);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < cap / 4; i++) c.send[i] = (float)(i % 1000) * 0.5f, c.recv[i] = 0;
    const char *names[IMPLS] = {[IMPL_TP] = ours, [IMPL_MPI] = o.impl, [IMPL_FLOOR] = "tcp-floor"};
    for (c.op = 0; c.op < BENCH_OPS; c.op++) {
        if (!(o.ops & (1u << c.op))) continue;
        for (int si = 0; bench_size(&o, si) != 0; si++) {
            c.bytes = bench_size(&o, si);
            int impls = with_floor && floor_applies(c.op, c.bytes) ? IMPLS : IMPL_FLOOR;
            if (!bench_op_fits(c.op, c.bytes, n)) continue;
            if (run_size(&o, &c, block, impls, names, t, tmax) != 0) {
                fprintf(stderr, "ab_bench: rank %d: %s of %zu bytes failed: %s\n", me, op_names[c.op], c.bytes,
                        c.s != TP_OK ? tp_last_error() : "see the message above");
                MPI_Abort(MPI_COMM_WORLD, 1);
            }
        }
    }
    for (int i = 0; i < IMPLS; i++) free(t[i]);
    free(c.send), free(c.recv), free(tmax);
    if (c.floor_fd >= 0) close(c.floor_fd), close(c.floor_out), close(c.floor_in);
    s = tp_finalize(c.w);
    if (s != TP_OK)
        fprintf(stderr, "ab_bench: rank %d: tp_finalize: %s (%s)\n", me, tp_status_string(s), tp_last_error());
    MPI_Finalize();
    return s == TP_OK ? 0 : 1;
}
