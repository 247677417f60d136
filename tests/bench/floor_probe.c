/*
 * floor_probe: the one-way latency of a cache line between two processes pinned to CPUs 0 and 1 (median of 9
 * batches of ping-pongs), so a shared-memory benchmark can say which vCPU placement regime it ran in.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinned_pair.h"

#define ROUNDS  20000
#define BATCHES 9

int main(void)
{
    _Atomic long *w = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (w == MAP_FAILED) return 1;
    long total = (long)ROUNDS * BATCHES;
    pid_t child = fork();
    if (child < 0) return 1;
    long v = 0;
    if (child == 0) { /* answers every batch's round trips */
        pin(1);
        ping_rounds(w, 1, &v, total);
        _exit(0);
    }
    pin(0);
    double one_way[BATCHES];
    for (int b = 0; b < BATCHES; b++) one_way[b] = ping_rounds(w, 0, &v, ROUNDS);
    waitpid(child, NULL, 0);
    qsort(one_way, BATCHES, sizeof(double), cmp_double);
    printf("floor probe: cache line one way %.3f us (median of %d batches of %d round trips, CPUs 0 and 1)\n",
           one_way[BATCHES / 2], BATCHES, ROUNDS);
    return 0;
}
