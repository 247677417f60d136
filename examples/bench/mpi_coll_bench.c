/* mpi_coll_bench: tp-bench's loop with MPI's collectives, so both print comparable p50 / p90 tables (--json). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_mpi_call.h"
#include "bench_schedule.h"

/* What bench_time_calls calls: bench_mpi_call's arguments. */
typedef struct timed {
    int op, me, n;
    float *send, *recv;
    size_t bytes;
} timed_t;

static int timed_barrier(void *ctx)
{
    (void)ctx;
    return MPI_Barrier(MPI_COMM_WORLD) != MPI_SUCCESS;
}

static int timed_call(void *ctx)
{
    timed_t *c = ctx;
    return bench_mpi_call(c->op, c->send, c->recv, c->bytes, c->me, c->n) != MPI_SUCCESS;
}

static double wtime_us(void) { return MPI_Wtime() * 1e6; }

int main(int argc, char **argv)
{
    bench_opts_t o;
    char err[256];
    MPI_Init(&argc, &argv);
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int bad = bench_parse_args(argc, argv, 1, &o, err, sizeof(err)) != 0;
    if (bad || o.help) {
        if (bad) fprintf(stderr, "mpi_coll_bench: %s\n", err);
        else if (me == 0) bench_usage(stdout, "mpi_coll_bench", 1);
        MPI_Finalize();
        return bad ? 2 : 0;
    }
    size_t cap = o.max_bytes * (size_t)n + 64;
    float *send = malloc(cap), *recv = malloc(cap);
    double t[BENCH_MAX_ITERS], tmax[BENCH_MAX_ITERS];
    if (send == NULL || recv == NULL) {
        fprintf(stderr, "mpi_coll_bench: rank %d: out of memory for 2 x %zu bytes (lower --max-bytes)\n", me, cap);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < cap / 4; i++) send[i] = (float)(i % 1000) * 0.5f, recv[i] = 0;
    for (int op = 0; op < BENCH_OPS; op++) {
        if (!(o.ops & (1u << op))) continue;
        for (int si = 0; bench_size(&o, si) != 0; si++) {
            size_t bytes = bench_size(&o, si);
            if (!bench_op_fits(op, bytes, n)) continue;
            int iters = o.iters > 0 ? o.iters : iterations_for(bytes);
            timed_t c = {.op = op, .me = me, .n = n, .send = send, .recv = recv, .bytes = bytes};
            bench_calls_t loop = {timed_barrier, timed_call, wtime_us, &c, send, bench_send_bytes(op, bytes, n)};
            double sw = 0, sw_sum = 0;
            if (bench_time_calls(&o, &loop, iters, t, &sw) != 0) MPI_Abort(MPI_COMM_WORLD, 1);
            MPI_Allreduce(&sw, &sw_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
            MPI_Allreduce(t, tmax, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            qsort(tmax, (size_t)iters, sizeof(double), cmp_double);
            if (me == 0) bench_print_json(o.impl, n, op, bytes, iters, tmax, sw_sum / n);
            fflush(stdout);
        }
    }
    MPI_Finalize();
    return 0;
}
