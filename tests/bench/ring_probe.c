/*
 * ring_probe: what the shm transport's ring costs between CPUs 0 and 1 with each way of writing it (TP_SHM_WRITE):
 * a writer copies 4 MiB through a 1 MiB ring in shared memory (a memfd, as the transport's segment) in 64 KiB chunks
 * with memcpy (cached) or the transport's own streaming copy, publishing each chunk; the reader copies each out and
 * frees it. Prints, per way, the cache-line one-way latency just before (which vCPU placement this run had), the
 * writer's copy cost per KiB and the transfer's best and median time over PASSES passes. On a VM the placement can
 * change between two lines: run it several times. Usage: ring_probe [passes]
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinned_pair.h"
#include "shm.h"

#define RING_BYTES  (1u << 20)
#define CHUNK_BYTES (64u << 10)
#define TOTAL_BYTES (4u << 20)
#define PINGS       20000

typedef struct {
    _Alignas(64) _Atomic uint64_t head; /* chunks written */
    _Alignas(64) _Atomic uint64_t tail; /* chunks read */
    _Alignas(64) _Atomic long ping;
} ctl_t;

/* One way's passes, on both sides (the reader is the child): the cache line's one-way latency first, then PASSES
 * transfers; the writer returns its copy time per KiB and the transfers' times in t. */
static void run_way(ctl_t *c, int reader, char *ring, const uint8_t *src, uint8_t *dst, int streaming, int passes,
                    double *t, double *one_way_us, double *writer_ns_kib)
{
    const uint64_t chunks = TOTAL_BYTES / CHUNK_BYTES, slots = RING_BYTES / CHUNK_BYTES;
    long v = (long)streaming * 2 * PINGS; /* the cache-line floor, as floor_probe measures it */
    *one_way_us = ping_rounds(&c->ping, reader, &v, PINGS);
    double writer_ns = 0;
    for (int pass = 0; pass < passes; pass++) {
        uint64_t base = ((uint64_t)streaming * (uint64_t)passes + (uint64_t)pass) * chunks;
        double t0 = now_us();
        for (uint64_t k = 0; k < chunks; k++) {
            uint64_t f = base + k;
            char *slot = ring + (f % slots) * CHUNK_BYTES;
            if (reader) {
                while (atomic_load_explicit(&c->head, memory_order_acquire) <= f) {
                }
                memcpy(dst + k * CHUNK_BYTES, slot, CHUNK_BYTES);
                atomic_store_explicit(&c->tail, f + 1, memory_order_release);
                continue;
            }
            while (f - atomic_load_explicit(&c->tail, memory_order_acquire) >= slots) {
            }
            double w0 = now_us();
            if (streaming) {
                shm_copy_streaming((uint8_t *)slot, src + k * CHUNK_BYTES, CHUNK_BYTES);
                shm_write_fence();
            } else {
                memcpy(slot, src + k * CHUNK_BYTES, CHUNK_BYTES);
            }
            writer_ns += (now_us() - w0) * 1000;
            atomic_store_explicit(&c->head, f + 1, memory_order_release);
        }
        if (!reader) {
            while (atomic_load_explicit(&c->tail, memory_order_acquire) != base + chunks) {
            }
            t[pass] = now_us() - t0;
        }
    }
    *writer_ns_kib = writer_ns / passes / (TOTAL_BYTES / 1024);
}

int main(int argc, char **argv)
{
    int passes = argc > 1 ? atoi(argv[1]) : 30;
    if (passes < 1 || passes > 10000) {
        fprintf(stderr, "usage: ring_probe [passes, 1 to 10000]\n");
        return 2;
    }
    int fd = memfd_create("ring_probe", 0);
    ctl_t *c = mmap(NULL, sizeof(ctl_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    uint8_t *src = malloc(TOTAL_BYTES), *dst = malloc(TOTAL_BYTES);
    double *t = malloc(sizeof(double) * (size_t)passes);
    if (fd < 0 || ftruncate(fd, RING_BYTES) != 0 || c == MAP_FAILED || !src || !dst || !t) return 1;
    char *ring = mmap(NULL, RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ring == MAP_FAILED) return 1;
    memset(ring, 0, RING_BYTES);
    memset(src, 1, TOTAL_BYTES);
    memset(dst, 0, TOTAL_BYTES);
    pid_t child = fork();
    if (child < 0) return 1;
    int reader = child == 0;
    if (pin(reader ? 1 : 0) != 0) {
        fprintf(stderr, "ring_probe: CPUs 0 and 1 are not both allowed here\n");
        if (reader) _exit(1);
        kill(child, SIGKILL);
        return 1;
    }
    for (int streaming = 0; streaming <= shm_can_stream; streaming++) {
        double one_way_us, writer_ns_kib;
        run_way(c, reader, ring, src, dst, streaming, passes, t, &one_way_us, &writer_ns_kib);
        if (reader) continue;
        qsort(t, (size_t)passes, sizeof(double), cmp_double);
        printf("ring_probe %-9s cache line one way %.3f us; 4 MiB through a 1 MiB ring, CPUs 0 -> 1: writer %4.0f ns "
               "per KiB, best %5.0f us, median %5.0f us (%d passes)\n",
               streaming ? "streaming" : "cached", one_way_us, writer_ns_kib, t[0], t[passes / 2], passes);
    }
    if (reader) _exit(0);
    waitpid(child, NULL, 0);
    return 0;
}
