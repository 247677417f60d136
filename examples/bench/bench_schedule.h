/* bench_schedule.h: what tp-bench and its MPI twin share, so both time the same calls the same way. */
#ifndef BENCH_SCHEDULE_H
#define BENCH_SCHEDULE_H

#include <stddef.h>

static const char *const op_names[] = {"allreduce", "allgather", "reduce_scatter", "bcast", "sendrecv", "alltoall"};

/* Iterations per size: 500 up to 1 MiB, then fewer so a 64 MiB row stays seconds long. */
static inline int iterations_for(size_t bytes)
{
    if (bytes <= ((size_t)1 << 20)) return 500;
    if (bytes <= ((size_t)4 << 20)) return 100;
    if (bytes <= ((size_t)16 << 20)) return 20;
    return 10;
}

/* qsort order for the per-iteration times whose p50 and p90 are printed. */
static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#endif
