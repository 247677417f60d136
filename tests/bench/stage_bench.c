/*
 * stage_bench: staged all_gather (call + stream synchronise) at 16 B and 4 MiB, and the floors it is held to: a
 * stream ready/done round trip, that round trip with the proxy's two 16 B copies, and copy out + host all_gather +
 * copy in of 4 MiB measured one by one. Prints a table of p50/p90 on rank 0. Run under tprun -n 2; --cuda: device
 * memory of GPU 0 and a CUDA stream (every rank on GPU 0), else host memory on a host stream.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tp.h>
#include <tp_provider.h>

static int me, n, cuda;
static tp_stream_t *st, *side;
static const tp_device_ops_t *dev;
static int (*cu_alloc)(unsigned long long *, size_t);

static void *dalloc(size_t len)
{
    unsigned long long p = 0;
    if (!cuda) return calloc(1, len);
    if (cu_alloc(&p, len) != 0) {
        fprintf(stderr, "stage_bench: cuMemAlloc of %zu bytes failed\n", len);
        exit(1);
    }
    return (void *)(uintptr_t)p;
}

static int cmp(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void row(const char *what, int64_t *v, int iters)
{
    qsort(v, (size_t)iters, sizeof(*v), cmp);
    if (me == 0) printf("| %-52s | %9.1f | %9.1f |\n", what, v[iters / 2] / 1e3, v[iters * 9 / 10] / 1e3);
}

static void spin_until(const uint64_t *w, uint64_t v)
{
    while (__atomic_load_n(w, __ATOMIC_ACQUIRE) < v) {
    }
}

/* The proxy's path without the network: ready seen, two 16 B copies on the side stream each waited for, done set. */
static void floors(int iters, int64_t *rt, int64_t *copies, uint64_t *words, uint8_t *wdev, void *dbuf, void *pin)
{
    for (int i = 1; i <= 2 * iters; i++) {
        int with = i > iters;
        uint64_t k = (uint64_t)i;
        int64_t t0 = tp_now_ns();
        dev->stream_write64(st, wdev, k);
        dev->stream_wait64(st, wdev + 8, k);
        spin_until(&words[0], k);
        if (with) {
            dev->copy(pin, dbuf, 16, side);
            dev->stream_write64(side, wdev + 16, 2 * k);
            spin_until(&words[2], 2 * k);
            dev->copy(dbuf, pin, 16, side);
            dev->stream_write64(side, wdev + 16, 2 * k + 1);
            spin_until(&words[2], 2 * k + 1);
        }
        __atomic_store_n(&words[1], k, __ATOMIC_RELEASE);
        dev->stream_sync(st);
        (with ? copies : rt)[(i - 1) % iters] = tp_now_ns() - t0;
    }
}

int main(int argc, char **argv)
{
    cuda = argc > 1 && strcmp(argv[1], "--cuda") == 0;
    int iters = argc > 2 ? atoi(argv[2]) : 500;
    if (iters < 10) iters = 10;
    tp_comm_t *w;
    if (tp_init(NULL, &w) != TP_OK) return 1;
    me = tp_comm_rank(w), n = tp_comm_size(w);
    if (cuda) { /* the engine's side: device 0's primary context and a non-blocking stream of its own */
        void *lib = dlopen("libcuda.so.1", RTLD_NOW);
        int (*init)(unsigned) = lib ? dlsym(lib, "cuInit") : NULL;
        int (*retain)(void **, int) = lib ? dlsym(lib, "cuDevicePrimaryCtxRetain") : NULL;
        int (*set)(void *) = lib ? dlsym(lib, "cuCtxSetCurrent") : NULL;
        int (*mk)(void **, unsigned) = lib ? dlsym(lib, "cuStreamCreate") : NULL;
        cu_alloc = lib ? dlsym(lib, "cuMemAlloc_v2") : NULL;
        void *ctx, *native;
        if (!init || !retain || !set || !mk || !cu_alloc || init(0) != 0 || retain(&ctx, 0) != 0 || set(ctx) != 0 ||
            mk(&native, 1) != 0 || tp_stream_create(TP_DEVICE_CUDA, native, &st) != TP_OK) {
            fprintf(stderr, "stage_bench: no usable CUDA GPU (%s)\n", tp_last_error());
            return 77;
        }
    } else if (tp_stream_create(TP_DEVICE_HOST, NULL, &st) != TP_OK) {
        return 1;
    }
    dev = st->dev;
    size_t big = 4u << 20;
    uint8_t *send = dalloc(big), *recv = dalloc(big * (size_t)n), *hsend = calloc(1, big), *hrecv = malloc(big * n);
    int64_t *v = malloc((size_t)iters * sizeof(int64_t)), *v2 = malloc((size_t)iters * sizeof(int64_t));
    uint64_t *words;
    uint8_t *wdev;
    void *pin, *pin_dev;
    if (dev->host_alloc(64, (void **)&words, (void **)&wdev) != TP_OK || dev->stream_create(st, &side) != TP_OK ||
        dev->host_alloc(big * (size_t)n, &pin, &pin_dev) != TP_OK)
        return 1;
    if (me == 0) {
        printf("stage_bench: %d ranks, %s, %d iterations (p50 and p90 in us)\n\n", n,
               cuda ? "CUDA device memory and stream" : "host memory on a host stream", iters);
        printf("| %-52s | %9s | %9s |\n|---|---:|---:|\n", "measure", "p50 us", "p90 us");
    }
    size_t sizes[2] = {16, big};
    for (int si = 0; si < 2; si++) {
        int it = si == 0 ? iters : iters / 5;
        for (int i = -it / 10; i < it; i++) { /* the first tenth warms up */
            int64_t t0 = tp_now_ns();
            tp_all_gather(w, send, recv, sizes[si], TP_BYTES, st);
            int64_t t1 = tp_now_ns();
            dev->stream_sync(st);
            if (i >= 0) v[i] = tp_now_ns() - t0, v2[i] = t1 - t0;
        }
        char what[80];
        snprintf(what, sizeof(what), "staged all_gather %zu B: call + stream sync", sizes[si]);
        row(what, v, it);
        snprintf(what, sizeof(what), "staged all_gather %zu B: the call alone", sizes[si]);
        row(what, v2, it);
    }
    tp_barrier(w);
    if (me == 0) floors(iters, v, v2, words, wdev, send, pin_dev); /* alone on the device: the others wait */
    row("floor: stream ready/done round trip", v, iters);
    row("floor: round trip + the proxy's two 16 B copies", v2, iters);
    tp_barrier(w);
    for (int i = -iters / 10; i < iters; i++) { /* the host path alone, for the staged 16 B call's share of it */
        int64_t t0 = tp_now_ns();
        tp_all_gather(w, hsend, hrecv, 16, TP_BYTES, NULL);
        if (i >= 0) v[i] = tp_now_ns() - t0;
    }
    row("16 B: host all_gather (no stream)", v, iters);
    int it = iters / 5;
    int64_t *out = malloc((size_t)it * sizeof(int64_t)), *gat = malloc((size_t)it * sizeof(int64_t)),
            *in = malloc((size_t)it * sizeof(int64_t)), *sum = malloc((size_t)it * sizeof(int64_t));
    for (int i = 0; i < it; i++) {
        int64_t t0 = tp_now_ns();
        dev->copy(pin_dev, send, big, side);
        dev->stream_sync(side);
        int64_t t1 = tp_now_ns();
        tp_all_gather(w, hsend, hrecv, big, TP_BYTES, NULL);
        int64_t t2 = tp_now_ns();
        dev->copy(recv, pin_dev, big * (size_t)n, side);
        dev->stream_sync(side);
        int64_t t3 = tp_now_ns();
        out[i] = t1 - t0, gat[i] = t2 - t1, in[i] = t3 - t2, sum[i] = t3 - t0;
    }
    row("4 MiB: copy out (device to pinned)", out, it);
    row("4 MiB: host all_gather (no stream)", gat, it);
    row("4 MiB: copy in (n x 4 MiB, pinned to device)", in, it);
    row("4 MiB: the three in a row", sum, it);
    tp_finalize(w);
    return 0;
}
