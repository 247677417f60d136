/* bench_rank: the rank program of the benchmarks: joins the job, says ready, then leaves (boot) or computes (spin). */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <tp.h>

int main(int argc, char **argv)
{
    int spin = argc == 2 && strcmp(argv[1], "spin") == 0;
    if (argc != 2 || (!spin && strcmp(argv[1], "boot") != 0)) {
        fprintf(stderr, "usage: bench_rank boot|spin\n");
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
    if (!spin) return tp_finalize(world) == TP_OK ? 0 : 1;
    volatile unsigned long spins = 0;
    for (;;) spins++; /* busy computing: libtp's fate thread, or the launcher, must end this rank */
}
