/*
 * turns_probe: where the kernel leaves processes that wait on each other by yielding, as ranks outnumbering CPUs
 * do. N processes (default 4) each raise a counter in shared memory, then wait, calling sched_yield, until every
 * other has raised its own: one barrier per iteration, 4000 iterations. For each block of 500 it prints the
 * median of the slowest process's time (µs) and which CPU each process was on in the middle of the block.
 * Unpinned (the default), 4 processes on 2 vCPUs sat 2 and 2 in some runs (about 10 µs) and 3 and 1 in others
 * (about 20 µs) for the whole run; with --pin, process i is pinned to CPU i mod the CPUs, as tprun binds an
 * oversubscribed job.
 *   tests/bench/turns_probe [--pin] [N]
 */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinned_pair.h"

#define MAX_PROCS 16
#define ITERS     4000
#define BLOCK     500

typedef struct shared {
    _Atomic long seq[MAX_PROCS][8]; /* a cache line each */
    double took[MAX_PROCS][ITERS];
    int cpu[MAX_PROCS][ITERS / BLOCK];
} shared_t;

static void run(shared_t *s, int me, int n)
{
    for (long q = 1; q <= ITERS; q++) {
        double t0 = now_us();
        atomic_store_explicit(&s->seq[me][0], q, memory_order_release);
        for (int p = 0; p < n; p++)
            while (p != me && atomic_load_explicit(&s->seq[p][0], memory_order_acquire) < q) sched_yield();
        s->took[me][q - 1] = now_us() - t0;
        if ((q - 1) % BLOCK == BLOCK / 2) s->cpu[me][(q - 1) / BLOCK] = sched_getcpu();
    }
}

int main(int argc, char **argv)
{
    int pinned = argc > 1 && strcmp(argv[1], "--pin") == 0, n = argc > 1 + pinned ? atoi(argv[1 + pinned]) : 4;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 2 || n > MAX_PROCS || cpus < 1) {
        fprintf(stderr, "usage: turns_probe [--pin] [N], N from 2 to %d\n", MAX_PROCS);
        return 2;
    }
    shared_t *s = mmap(NULL, sizeof(*s), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) return 1;
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("turns_probe: fork");
            return 1;
        }
        if (pid == 0) {
            if (pinned && pin((int)(i % cpus)) != 0) _exit(77);
            run(s, i, n);
            _exit(0);
        }
    }
    int bad = 0, status;
    while (wait(&status) > 0) bad |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
    if (bad) {
        fprintf(stderr, "turns_probe: a process failed (CPU %s)\n", pinned ? "not allowed" : "?");
        return 1;
    }
    printf("turns_probe: %d processes, %s; per block of %d iterations: median us [CPU of each process]\n", n,
           pinned ? "process i on CPU i mod CPUs" : "unpinned", BLOCK);
    for (int b = 0; b < ITERS / BLOCK; b++) {
        double v[BLOCK];
        for (int i = 0; i < BLOCK; i++) {
            v[i] = 0;
            for (int p = 0; p < n; p++)
                if (s->took[p][b * BLOCK + i] > v[i]) v[i] = s->took[p][b * BLOCK + i];
        }
        qsort(v, BLOCK, sizeof(double), cmp_double);
        printf("%6.1f [", v[BLOCK / 2]);
        for (int p = 0; p < n; p++) printf("%s%d", p > 0 ? " " : "", s->cpu[p][b]);
        printf("]%s", b + 1 < ITERS / BLOCK ? " " : "\n");
    }
    return 0;
}
