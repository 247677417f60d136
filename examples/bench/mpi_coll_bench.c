/* mpi_coll_bench: tp-bench's loop with MPI's collectives, so both print comparable p50 / p90 tables (--json). */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_schedule.h"

static void one_call(int op, float *send, float *recv, size_t bytes, int me, int n)
{
    int count = (int)(bytes / 4), peer = (me ^ 1) < n ? me ^ 1 : me;
    switch (op) {
    case 0: MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case 1: MPI_Allgather(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, MPI_COMM_WORLD); break;
    case 2: MPI_Reduce_scatter_block(send, recv, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); break;
    case 3: MPI_Bcast(send, count, MPI_FLOAT, 0, MPI_COMM_WORLD); break;
    case 4:
        MPI_Sendrecv(send, count, MPI_FLOAT, peer, 0, recv, count, MPI_FLOAT, peer, 0, MPI_COMM_WORLD,
                     MPI_STATUS_IGNORE);
        break;
    case 5: MPI_Alltoall(send, count / n, MPI_FLOAT, recv, count / n, MPI_FLOAT, MPI_COMM_WORLD); break;
    }
}

int main(int argc, char **argv)
{
    const char *impl = "mpi", *ops = "allreduce,allgather,reduce_scatter,bcast,sendrecv";
    size_t max_bytes = (size_t)64 << 20;
    MPI_Init(&argc, &argv);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--impl") == 0 && i + 1 < argc) impl = argv[++i];
        else if (strcmp(argv[i], "--ops") == 0 && i + 1 < argc) ops = argv[++i];
        else if (strcmp(argv[i], "--max-bytes") == 0 && i + 1 < argc) max_bytes = strtoull(argv[++i], NULL, 0);
    }
    int me, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    size_t cap = max_bytes * (size_t)n + 64;
    float *send = malloc(cap), *recv = malloc(cap);
    double t[500], tmax[500];
    for (size_t i = 0; i < cap / 4; i++) send[i] = (float)(i % 1000) * 0.5f, recv[i] = 0;
    for (int op = 0; op < 6; op++) {
        if (strstr(ops, op_names[op]) == NULL) continue;
        for (size_t bytes = 16; bytes <= max_bytes; bytes *= 4) {
            if (op == 5 && bytes < (size_t)4 * n) continue;
            int iters = iterations_for(bytes);
            for (int i = -5; i < iters; i++) {
                MPI_Barrier(MPI_COMM_WORLD);
                double t0 = MPI_Wtime();
                one_call(op, send, recv, bytes, me, n);
                if (i >= 0) t[i] = (MPI_Wtime() - t0) * 1e6;
            }
            MPI_Allreduce(t, tmax, iters, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
            qsort(tmax, (size_t)iters, sizeof(double), cmp_double);
            if (me == 0)
                printf("{\"impl\":\"%s\",\"ranks\":%d,\"op\":\"%s\",\"bytes\":%zu,\"iters\":%d,\"p50_us\":%.2f,"
                       "\"p90_us\":%.2f}\n", impl, n, op_names[op], bytes, iters, tmax[iters / 2],
                       tmax[(iters * 9) / 10]);
            fflush(stdout);
        }
    }
    MPI_Finalize();
    return 0;
}
