/*
 * tp-bench: p50 and p90 in microseconds of back-to-back collectives, for the world it runs in (tprun -n N tp-bench).
 * One iteration's time is the slowest rank's, each iteration starting after a barrier (with --no-barrier: one barrier,
 * then the calls, each rank's mean per call).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tp.h>

#include "bench/bench_schedule.h"
#include "bench/bench_tp_call.h"

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* What bench_time_calls calls: bench_tp_call's arguments, and the status of the barrier or call that failed. */
typedef struct timed {
    tp_comm_t *w;
    int op;
    void *send, *recv;
    size_t bytes;
    tp_status_t s;
} timed_t;

static int timed_barrier(void *ctx)
{
    timed_t *c = ctx;
    return (c->s = tp_barrier(c->w)) != TP_OK;
}

static int timed_call(void *ctx)
{
    timed_t *c = ctx;
    return (c->s = bench_tp_call(c->w, c->op, c->send, c->recv, c->bytes)) != TP_OK;
}

int main(int argc, char **argv)
{
    bench_opts_t o;
    char err[256];
    if (bench_parse_args(argc, argv, 0, &o, err, sizeof(err)) != 0) {
        fprintf(stderr, "tp-bench: %s\n", err);
        return 2;
    }
    if (o.help) {
        bench_usage(stdout, "tp-bench", 0);
        printf("Run it under a launcher, e.g. tprun -n 4 tp-bench; rank 0 prints the table.\n");
        return 0;
    }
    tp_comm_t *w;
    tp_status_t s = tp_init(NULL, &w);
    if (s != TP_OK) {
        fprintf(stderr, "tp-bench: tp_init: %s (%s)\n", tp_status_string(s), tp_last_error());
        return 1;
    }
    int me = tp_comm_rank(w), n = tp_comm_size(w);
    size_t cap = o.max_bytes * (size_t)n + 64;
    float *send = NULL, *recv = NULL;
    if (!o.mem_tp) send = malloc(cap), recv = malloc(cap);
    else if ((s = tp_mem_alloc(cap, (void **)&send)) != TP_OK || (s = tp_mem_alloc(cap, (void **)&recv)) != TP_OK) {
        fprintf(stderr, "tp-bench: rank %d: tp_mem_alloc of %zu bytes: %s (%s)\n", me, cap, tp_status_string(s),
                tp_last_error());
        return 1;
    }
    double *t = malloc(BENCH_MAX_ITERS * sizeof(double)), *tmax = malloc(BENCH_MAX_ITERS * sizeof(double));
    if (send == NULL || recv == NULL || t == NULL || tmax == NULL) {
        fprintf(stderr, "tp-bench: rank %d: out of memory for 2 x %zu bytes (lower --max-bytes)\n", me, cap);
        return 1;
    }
    for (size_t i = 0; i < cap / 4; i++) send[i] = (float)(i % 1000) * 0.5f, recv[i] = 0;
    char calls[96];
    if (o.iters > 0) snprintf(calls, sizeof(calls), "%d per size", o.iters);
    else snprintf(calls, sizeof(calls), "500 up to 1 MiB, 100 at 4 MiB, 20 at 16 MiB, 10 above");
    if (me == 0 && !o.json)
        printf("tp-bench: %d ranks, libtp %s, part_bytes %s, buffers from %s; %s back-to-back calls (%s%s), %s\n"
               "%-15s %12s %6s %12s %12s\n",
               n, tp_version(), tp_comm_setting(w, "part_bytes"), o.mem_tp ? "tp_mem_alloc" : "malloc",
               o.no_barrier ? "p50 = p90 = us per call, the slowest rank's mean over" : "p50 / p90 us over", calls,
               o.rewrite ? ", each after a write of its send bytes" : "",
               o.no_barrier ? "after one barrier" : "each the slowest rank's time after a barrier", "op", "bytes",
               "iters", "p50_us", "p90_us");
    for (int op = 0; op < BENCH_OPS; op++) {
        if (!(o.ops & (1u << op))) continue;
        for (int si = 0; bench_size(&o, si) != 0; si++) {
            size_t bytes = bench_size(&o, si);
            if (!bench_op_fits(op, bytes, n)) continue;
            /* reduce_scatter takes N * bytes in and gives bytes out, in MPI's block terms */
            int iters = o.iters > 0 ? o.iters : iterations_for(bytes);
            timed_t c = {.w = w, .op = op, .send = send, .recv = recv, .bytes = bytes};
            bench_calls_t loop = {timed_barrier, timed_call, now_us, &c, send, bench_send_bytes(op, bytes, n)};
            double sw[2] = {0, 0};
            if (bench_time_calls(&o, &loop, iters, t, &sw[0]) != 0) {
                s = c.s;
                goto fail;
            }
            if ((s = tp_all_reduce(w, sw, sw + 1, 1, TP_F64, TP_SUM, NULL)) != TP_OK) goto fail;
            if ((s = tp_all_reduce(w, t, tmax, (size_t)iters, TP_F64, TP_MAX, NULL)) != TP_OK) goto fail;
            qsort(tmax, (size_t)iters, sizeof(double), cmp_double);
            double p50 = tmax[iters / 2], p90 = tmax[(iters * 9) / 10];
            if (me == 0 && o.json)
                bench_print_json(o.mem_tp ? "tprun-mem" : "tprun", n, op, bytes, iters, tmax, sw[1] / n);
            else if (me == 0) printf("%-15s %12zu %6d %12.1f %12.1f\n", op_names[op], bytes, iters, p50, p90);
            fflush(stdout);
        }
    }
    if (o.mem_tp) tp_mem_free(send), tp_mem_free(recv);
    else free(send), free(recv);
    free(t), free(tmax);
    return tp_finalize(w) == TP_OK ? 0 : 1;
fail:
    fprintf(stderr, "tp-bench: rank %d: %s (%s)\n", me, tp_status_string(s), tp_last_error());
    return 1;
}
