/* pinned_pair.h: what the two-process probes (floor_probe, copy_floor) share: a clock, pinning, a sort order. */
#ifndef PINNED_PAIR_H
#define PINNED_PAIR_H

#include <sched.h>
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

static inline int cmp_double(const void *a, const void *b) { return *(const double *)a < *(const double *)b ? -1 : 1; }

#endif
