/* bench_rank: the rank program of the benchmarks: joins the job, says ready, then leaves (boot), computes (spin), or
 * times its first all_reduce of 16 B, with the connections it opens (first). */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <tp.h>

int main(int argc, char **argv)
{
    int spin = argc == 2 && strcmp(argv[1], "spin") == 0, first = argc == 2 && strcmp(argv[1], "first") == 0;
    if (argc != 2 || (!spin && !first && strcmp(argv[1], "boot") != 0)) {
        fprintf(stderr, "usage: bench_rank boot|spin|first\n");
        return 2;
    }
    tp_comm_t *world;
    tp_status_t s = tp_init(NULL, &world);
    if (s != TP_OK) {
        fprintf(stderr, "bench_rank: tp_init: %s\n", tp_status_string(s));
        return 1;
    }
    printf("ready rank %d of %d pid %d\n", tp_comm_rank(world), tp_comm_size(world), (int)getpid());
    fflush(stdout);
    if (first) { /* the slowest rank's first call is the job's: reduced with MAX by a second call */
        float x[4] = {1, 2, 3, 4}, y[4];
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        s = tp_all_reduce(world, x, y, 4, TP_F32, TP_SUM, NULL);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6, most = 0;
        if (s == TP_OK) s = tp_all_reduce(world, &ms, &most, 1, TP_F64, TP_MAX, NULL);
        if (s == TP_OK && tp_comm_rank(world) == 0) printf("first all_reduce 16 B: %.3f ms (slowest rank)\n", most);
        if (s != TP_OK) fprintf(stderr, "bench_rank: first: %s: %s\n", tp_status_string(s), tp_last_error());
    }
    if (!spin) return tp_finalize(world) == TP_OK && s == TP_OK ? 0 : 1;
    volatile unsigned long spins = 0;
    for (;;) spins++; /* busy computing: libtp's fate thread, or the launcher, must end this rank */
}
