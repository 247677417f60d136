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
    if (child == 0) { /* answers every odd value with the next even one */
        pin(1);
        for (long v = 1; v < 2 * total; v += 2) {
            while (atomic_load_explicit(w, memory_order_acquire) != v) {
            }
            atomic_store_explicit(w, v + 1, memory_order_release);
        }
        _exit(0);
    }
    pin(0);
    double one_way[BATCHES];
    long v = 0;
    for (int b = 0; b < BATCHES; b++) {
        double t0 = now_us();
        for (int i = 0; i < ROUNDS; i++, v += 2) {
            atomic_store_explicit(w, v + 1, memory_order_release);
            while (atomic_load_explicit(w, memory_order_acquire) != v + 2) {
            }
        }
        one_way[b] = (now_us() - t0) / ROUNDS / 2;
    }
    waitpid(child, NULL, 0);
    qsort(one_way, BATCHES, sizeof(double), cmp_double);
    printf("floor probe: cache line one way %.3f us (median of %d batches of %d round trips, CPUs 0 and 1)\n",
           one_way[BATCHES / 2], BATCHES, ROUNDS);
    return 0;
}
