/*
 * floor_probe: the one-way latency of a cache line between two processes pinned to CPUs 0 and 1 (median of 9
 * batches of ping-pongs), so a shared-memory benchmark can say which vCPU placement regime it ran in.
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUNDS  20000
#define BATCHES 9

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    sched_setaffinity(0, sizeof(set), &set); /* one CPU only: the probe then measures a single core */
}

static int cmp(const void *a, const void *b) { return *(const double *)a < *(const double *)b ? -1 : 1; }

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
    qsort(one_way, BATCHES, sizeof(double), cmp);
    printf("floor probe: cache line one way %.3f us (median of %d batches of %d round trips, CPUs 0 and 1)\n",
           one_way[BATCHES / 2], BATCHES, ROUNDS);
    return 0;
}
