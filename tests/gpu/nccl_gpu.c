/*
 * nccl_gpu: the NCCL provider on real GPUs (one per rank: local rank % GPUs), through libtp's public API, with the
 * CUDA driver and NCCL reached by dlopen (no CUDA headers at build time). Exits 77 without libcuda, a GPU or NCCL.
 *   check   every call on device buffers equals the host engine's result bit for bit (tests/nccl/nccl_cases.h)
 *   loop    all-reduces 1 MiB with a stream synchronize each, printing "ready" after the first, until killed; its
 *           fate callback prints "fate_cb_ns=" and CLOCK_REALTIME, so a test can tell the time libtp took to learn
 *           of a death from the time the process then took to end (the driver's context teardown included)
 *   bench   p50 of call + cuStreamSynchronize, 16 B .. 64 MiB, all_reduce and all_gather: libtp over NCCL and a raw
 *           NCCL loop on its own communicator, in the same run
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "nccl_cases.h"
#include "tp.h"

#define SKIP 77

/* Runs on fate's thread before the process ends: when this rank learned of the failure. */
static void on_fate(const tp_failure_t *f, void *arg)
{
    (void)f, (void)arg;
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    fprintf(stderr, "fate_cb_ns=%lld\n", (long long)t.tv_sec * 1000000000LL + t.tv_nsec);
}

static struct {
    int (*init)(unsigned);
    int (*count)(int *);
    int (*get)(int *, int);
    int (*retain)(void **, int);
    int (*set_current)(void *);
    int (*stream_create)(void **, unsigned);
    int (*stream_sync)(void *);
    int (*alloc)(uint64_t *, size_t);
    int (*free)(uint64_t);
    int (*htod)(uint64_t, const void *, size_t);
    int (*dtoh)(void *, uint64_t, size_t);
} cu;

static const char *const cu_names[] = {"cuInit",
                                       "cuDeviceGetCount",
                                       "cuDeviceGet",
                                       "cuDevicePrimaryCtxRetain",
                                       "cuCtxSetCurrent",
                                       "cuStreamCreate",
                                       "cuStreamSynchronize",
                                       "cuMemAlloc_v2",
                                       "cuMemFree_v2",
                                       "cuMemcpyHtoD_v2",
                                       "cuMemcpyDtoH_v2"};

static void *native; /* the engine's CUstream */
static uint64_t blocks[2];
static int nblocks;

static void die(const char *what, int rc)
{
    fprintf(stderr, "nccl_gpu: %s failed (CUresult %d)\n", what, rc);
    exit(1);
}

static void cuda_reset(void)
{
    for (int i = 0; i < nblocks; i++) cu.free(blocks[i]);
    nblocks = 0;
}

static void *cuda_alloc(size_t len)
{
    int rc = cu.alloc(&blocks[nblocks], len);
    if (rc != 0) die("cuMemAlloc", rc);
    return (void *)(uintptr_t)blocks[nblocks++];
}

static void cuda_put(void *dev, const void *host, size_t len)
{
    /* From pageable memory cuMemcpyHtoD may return before its DMA lands, and the engine's non-blocking stream is not
     * ordered after the legacy stream that DMA is on: wait for it, or a call could read the old bytes. */
    int rc = cu.htod((uint64_t)(uintptr_t)dev, host, len);
    if (rc == 0) rc = cu.stream_sync(NULL);
    if (rc != 0) die("cuMemcpyHtoD", rc);
}

static void cuda_get(void *host, const void *dev, size_t len)
{
    int rc = cu.dtoh(host, (uint64_t)(uintptr_t)dev, len);
    if (rc != 0) die("cuMemcpyDtoH", rc);
}

static void cuda_sync(tp_stream_t *stream)
{
    (void)stream;
    int rc = cu.stream_sync(native);
    if (rc != 0) die("cuStreamSynchronize", rc);
}

static const cases_mem_t cuda_mem = {cuda_reset, cuda_alloc, cuda_put, cuda_get, cuda_sync};

/* The driver, this rank's GPU (local rank % count) made current, and a stream; 77 when there is none. */
static int cuda_open(int local_rank)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) return SKIP;
    void **slots = (void **)&cu;
    for (size_t i = 0; i < sizeof(cu_names) / sizeof(cu_names[0]); i++)
        if ((slots[i] = dlsym(h, cu_names[i])) == NULL) return SKIP;
    int count = 0, dev;
    void *ctx;
    if (cu.init(0) != 0 || cu.count(&count) != 0 || count == 0) return SKIP;
    if (cu.get(&dev, local_rank % count) != 0 || cu.retain(&ctx, dev) != 0 || cu.set_current(ctx) != 0)
        return SKIP;
    int rc = cu.stream_create(&native, 1); /* CU_STREAM_NON_BLOCKING, as engines' streams usually are */
    if (rc != 0) die("cuStreamCreate", rc);
    return 0;
}

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The raw loop's NCCL: its own communicator, its id through libtp's host broadcast. */
static struct {
    int (*get_id)(void *);
    int (*all_reduce)(const void *, void *, size_t, int, int, void *, void *);
    int (*all_gather)(const void *, void *, size_t, int, void *, void *);
} raw;

typedef struct id128 {
    char b[128];
} id128_t;

static void *raw_open(tp_comm_t *w)
{
    const char *path = getenv("TP_NCCL_LIBRARY") && *getenv("TP_NCCL_LIBRARY") ? getenv("TP_NCCL_LIBRARY") : "libnccl.so.2";
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) return NULL;
    raw.get_id = (int (*)(void *))dlsym(h, "ncclGetUniqueId");
    raw.all_reduce = (int (*)(const void *, void *, size_t, int, int, void *, void *))dlsym(h, "ncclAllReduce");
    raw.all_gather = (int (*)(const void *, void *, size_t, int, void *, void *))dlsym(h, "ncclAllGather");
    int (*init)(void **, int, id128_t, int) = (int (*)(void **, int, id128_t, int))dlsym(h, "ncclCommInitRank");
    if (!raw.get_id || !raw.all_reduce || !raw.all_gather || !init) return NULL;
    id128_t id;
    memset(&id, 0, sizeof(id));
    if (tp_comm_rank(w) == 0 && raw.get_id(&id) != 0) return NULL;
    if (tp_broadcast(w, &id, sizeof(id), TP_BYTES, 0, NULL) != TP_OK) return NULL;
    void *comm = NULL;
    return init(&comm, tp_comm_size(w), id, tp_comm_rank(w)) == 0 ? comm : NULL;
}

/* p50 in microseconds of iters calls of one kind (0 libtp, 1 raw NCCL), each followed by a stream synchronize. */
static double p50(tp_comm_t *w, tp_stream_t *s, void *comm, int op, int kind, void *send, void *recv, size_t bytes,
                  int iters)
{
    double *t = malloc(sizeof(double) * (size_t)iters);
    size_t count = bytes / 4;
    for (int i = -10; i < iters; i++) {
        double t0 = now_us();
        int rc;
        if (kind == 0)
            rc = op == 0 ? tp_all_reduce(w, send, recv, count, TP_F32, TP_SUM, s)
                         : tp_all_gather(w, send, recv, count, TP_F32, s);
        else
            rc = op == 0 ? raw.all_reduce(send, recv, count, 7, 0, comm, native)
                         : raw.all_gather(send, recv, count, 7, comm, native);
        int src = cu.stream_sync(native);
        if (rc != 0 || src != 0) {
            fprintf(stderr, "nccl_gpu: %s %s of %zu bytes failed (%d, CUresult %d)\n", kind ? "raw" : "libtp",
                    op ? "all_gather" : "all_reduce", bytes, rc, src);
            exit(1);
        }
        if (i >= 0) t[i] = now_us() - t0;
    }
    qsort(t, (size_t)iters, sizeof(double), cmp_double);
    double v = t[iters / 2];
    free(t);
    return v;
}

static int bench(tp_comm_t *w, tp_stream_t *s)
{
    void *comm = raw_open(w);
    if (comm == NULL) {
        fprintf(stderr, "nccl_gpu: cannot open NCCL for the raw loop\n");
        return 1;
    }
    size_t most = (size_t)64 << 20;
    void *send = cuda_alloc(most), *recv = cuda_alloc(most * (size_t)n);
    if (me == 0)
        printf("%-10s %10s %12s %12s %10s   (world %d, p50 of call + cuStreamSynchronize, us)\n", "op", "bytes",
               "libtp", "raw NCCL", "diff", n);
    for (int op = 0; op < 2; op++)
        for (size_t b = 16; b <= most; b *= 4) {
            int iters = b >= ((size_t)16 << 20) ? 50 : 300;
            double a = p50(w, s, comm, op, 0, send, recv, b, iters);
            double r = p50(w, s, comm, op, 1, send, recv, b, iters);
            if (me == 0)
                printf("%-10s %10zu %12.1f %12.1f %+9.1f%%\n", op ? "all_gather" : "all_reduce", b, a, r,
                       100.0 * (a - r) / r);
        }
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "check";
    const char *lr = getenv("TP_LOCAL_RANK") ? getenv("TP_LOCAL_RANK") : getenv("LOCAL_RANK") ? getenv("LOCAL_RANK") : getenv("RANK");
    int rc = cuda_open(lr ? atoi(lr) : 0);
    if (rc == SKIP) {
        printf("nccl_gpu: SKIP: no CUDA driver or GPU\n");
        return SKIP;
    }
    tp_comm_t *w;
    if (tp_init(NULL, &w) != TP_OK) return 1;
    me = tp_comm_rank(w);
    n = tp_comm_size(w);
    tp_stream_t *s;
    if (tp_stream_create(TP_DEVICE_CUDA, native, &s) != TP_OK) return 1;
    if (strcmp(mode, "check") == 0) {
        rc = check(&cuda_mem, s, w);
    } else if (strcmp(mode, "loop") == 0) {
        float *v = cuda_alloc((size_t)1 << 20);
        tp_fate_register(on_fate, NULL);
        for (long i = 0;; i++) {
            if (tp_all_reduce(w, v, v, (1 << 20) / 4, TP_F32, TP_SUM, s) != TP_OK) break;
            cuda_sync(s);
            if (i == 0) printf("ready\n"), fflush(stdout);
        }
        rc = 1;
    } else if (strcmp(mode, "bench") == 0) {
        rc = bench(w, s);
    }
    cuda_reset();
    tp_stream_destroy(s);
    tp_finalize(w);
    return rc;
}
