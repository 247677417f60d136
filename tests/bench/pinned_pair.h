/* pinned_pair.h: what the two-process probes (floor_probe, copy_floor, ring_probe) share: a clock, pinning, a sort
 * order, and the cache-line ping-pong. */
#ifndef PINNED_PAIR_H
#define PINNED_PAIR_H

#include <sched.h>
#include <stdatomic.h>
#include <time.h>

static inline double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* This process onto one CPU only, so a probe measures one core; 0, or -1 when the CPU is not allowed. */
static inline int pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof(set), &set);
}

/* rounds round trips of the word w between two processes, from *v on (which moves past them): the asker writes the
 * next odd value and waits for the even one after it, the answerer waits for each odd value and answers. Returns the
 * asker's one-way latency in µs (0 for the answerer, which only waits). */
static inline double ping_rounds(_Atomic long *w, int answerer, long *v, long rounds)
{
    double t0 = now_us();
    for (long i = 0; i < rounds; i++, *v += 2) {
        if (answerer) {
            while (atomic_load_explicit(w, memory_order_acquire) != *v + 1) {
            }
            atomic_store_explicit(w, *v + 2, memory_order_release);
        } else {
            atomic_store_explicit(w, *v + 1, memory_order_release);
            while (atomic_load_explicit(w, memory_order_acquire) != *v + 2) {
            }
        }
    }
    return answerer ? 0 : (now_us() - t0) / (double)rounds / 2;
}

static inline int cmp_double(const void *a, const void *b) { return *(const double *)a < *(const double *)b ? -1 : 1; }

#endif
