/*
 * cuda_device: the CUDA device on a real GPU (exits 77 without one, or without a driver that can wait on stream
 * values): tp_stream_create on a native stream and on the default stream, the memory query, async copies, events,
 * capture status, the 64-bit stream value round trip (held until the host writes, then its latency), and the
 * reduce kernels bit for bit against the host's tp_reduce_n on random data with NaN, Inf and -0, every type and op,
 * aligned, misaligned and in place. Builds without CUDA's headers: the driver's entry points come from libtp's table.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda_device.h"
#include "host_reduce.h"
#include "reduce_ref.h"
#include "runtime_devices.h"
#include "runtime_dtype.h"
#include "runtime_stream.h"
#include "unit_check.h"

static cu_result_t (*mem_alloc)(cu_ptr_t *, size_t);
static cu_result_t (*mem_free)(cu_ptr_t);
static cu_result_t (*begin_capture)(cu_stream_t, int);
static cu_result_t (*end_capture)(cu_stream_t, void **);
static cu_result_t (*graph_destroy)(void *);

static const tp_device_ops_t *d = &tp_cuda_device_ops;

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void *dalloc(size_t len)
{
    cu_ptr_t p = 0;
    CHECK(mem_alloc(&p, len > 0 ? len : 1) == CU_SUCCESS, "cuMemAlloc of %zu bytes", len);
    return (void *)(uintptr_t)p;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void test_query_copy_events(tp_stream_t *s)
{
    enum { N = 1 << 20 };
    tp_mem_type_t ty = TP_MEM_HOST;
    char *dbuf = dalloc(N), *dbuf2 = dalloc(N), *src = malloc(N), *dst = calloc(1, N);
    void *pinned, *pinned_dev;
    CHECK(d->host_alloc(4096, &pinned, &pinned_dev) == TP_OK, "host_alloc");
    CHECK(tp_device_of(dbuf + 100, &ty) == d && ty == TP_MEM_CUDA, "device memory is CUDA's");
    CHECK(tp_device_of(src, &ty) == &tp_host_device_ops && ty == TP_MEM_HOST, "malloc memory is the host's");
    CHECK(tp_device_of(pinned, &ty) == &tp_host_device_ops, "pinned host memory is the host's");
    for (int i = 0; i < N; i++) src[i] = (char)next_rand();
    tp_stream_t *s2 = NULL;
    tp_device_event_t *ev = NULL;
    CHECK(d->stream_create(s, &s2) == TP_OK && s2->owned && s2->priv == s->priv, "a stream libtp owns, like s");
    CHECK(d->copy(dbuf, src, N, s) == TP_OK && d->copy(dbuf2, dbuf, N, s) == TP_OK && d->event_record(s, &ev) == TP_OK,
          "queue host to device, device to device, record");
    CHECK(d->stream_wait(s2, &ev) == TP_OK && d->copy(dst, dbuf2, N, s2) == TP_OK && d->stream_sync(s2) == TP_OK,
          "s2 waits for the event, copies back");
    CHECK(memcmp(src, dst, N) == 0, "the bytes came back through two device buffers and two streams");
    CHECK(d->event_sync(NULL, &ev) == TP_OK && d->event_release(NULL, &ev) == TP_OK && ev == NULL,
          "event sync, release");
    /* capture status */
    void *graph = NULL;
    CHECK(d->stream_capturing(s2) == 0, "not capturing");
    CHECK(begin_capture(s2->native, 0) == CU_SUCCESS && d->stream_capturing(s2) == 1, "capturing");
    CHECK(end_capture(s2->native, &graph) == CU_SUCCESS && d->stream_capturing(s2) == 0, "capture ended");
    if (graph != NULL) graph_destroy(graph);
    d->stream_destroy(s2);
    d->host_free(pinned);
    mem_free((cu_ptr_t)(uintptr_t)dbuf), mem_free((cu_ptr_t)(uintptr_t)dbuf2);
    free(src), free(dst);
}

/* The stream waits for word 0 and then writes word 1: the host's store releases it, its write comes back. */
static void test_values(tp_stream_t *s)
{
    enum { ROUNDS = 1000 };
    uint64_t *h;
    char *dv;
    CHECK(d->host_alloc(64, (void **)&h, (void **)&dv) == TP_OK && h[0] == 0 && h[1] == 0, "words");
    static int64_t lat[ROUNDS];
    for (uint64_t i = 1; i <= ROUNDS; i++) {
        CHECK(d->stream_wait64(s, dv, i) == TP_OK && d->stream_write64(s, dv + 8, i) == TP_OK, "queue round %lu",
              (unsigned long)i);
        if (i == 1) {
            int64_t t0 = now_ns();
            int moved = 0;
            while (now_ns() - t0 < 20000000) moved |= __atomic_load_n(&h[1], __ATOMIC_ACQUIRE) != 0;
            CHECK(!moved, "the stream holds until the host writes the word");
        }
        int64_t t0 = now_ns();
        __atomic_store_n(&h[0], i, __ATOMIC_RELEASE);
        while (__atomic_load_n(&h[1], __ATOMIC_ACQUIRE) != i)
            if (now_ns() - t0 > 5000000000LL) break;
        lat[i - 1] = now_ns() - t0;
        CHECK(h[1] == i, "round %lu: the stream's write came back", (unsigned long)i);
        if (failures) break;
    }
    qsort(lat, ROUNDS, sizeof(lat[0]), cmp_i64);
    printf("cuda_device: host write -> stream wait -> stream write -> host sees it: p50 %.1f us, p90 %.1f us (%d "
           "rounds)\n",
           lat[ROUNDS / 2] / 1e3, lat[ROUNDS * 9 / 10] / 1e3, ROUNDS);
    CHECK(d->stream_sync(s) == TP_OK, "sync");
    d->host_free(h);
}

/* One reduction on the GPU against the host's; off is a byte offset applied to every buffer (misaligned when odd). */
static void reduce_case(tp_stream_t *s, tp_dtype_t t, tp_op_t op, int n, size_t count, size_t off, int in_place)
{
    size_t es = tp_dtype_size(t), bytes = count * es + off;
    void *hs[128], *ds[128];
    const void *hsrc[128], *dsrc[128];
    char *want = malloc(bytes), *got = malloc(bytes), *ddst = in_place ? NULL : dalloc(bytes);
    for (int k = 0; k < n; k++) {
        hs[k] = malloc(bytes);
        fill(t, (char *)hs[k] + off, count);
        /* NaN, infinities and both zeros at fixed places of every source */
        static const uint64_t special[] = {0x7ff8000000000001ull, 0x7ff0000000000000ull, 0xfff0000000000000ull,
                                           0x8000000000000000ull, 0};
        for (size_t i = 0; i < 5 && i < count; i++) {
            size_t at = (i * 7919 + (size_t)k * 31) % count;
            uint64_t v = special[(i + (size_t)k) % 5];
            double dv;
            float fv;
            memcpy(&dv, &v, 8);
            fv = (float)dv;
            if (t == TP_F64) memcpy((char *)hs[k] + off + at * es, &dv, 8);
            else if (t == TP_F32) memcpy((char *)hs[k] + off + at * es, &fv, 4);
            else if (t == TP_BF16 || t == TP_F16) {
                uint16_t hv = t == TP_BF16 ? tp_f32_to_bf16(fv) : tp_f32_to_f16(fv);
                memcpy((char *)hs[k] + off + at * es, &hv, 2);
            }
        }
        ds[k] = dalloc(bytes);
        CHECK(d->copy(ds[k], hs[k], bytes, s) == TP_OK, "upload");
        hsrc[k] = (char *)hs[k] + off;
        dsrc[k] = (char *)ds[k] + off;
    }
    tp_reduce_n(t, op, want + off, hsrc, n, count);
    char *out = in_place ? ds[0] : ddst;
    CHECK(d->reduce(t, op, out + off, dsrc, n, count, s) == TP_OK, "reduce");
    CHECK(d->copy(got, out, bytes, s) == TP_OK && d->stream_sync(s) == TP_OK, "download");
    for (size_t i = 0; i < count; i++)
        if (!same_element(t, got + off + i * es, want + off + i * es)) {
            CHECK(0, "%s op %d n=%d count=%zu off=%zu%s: element %zu differs from the host's", tp_dtype_name(t), op, n,
                  count, off, in_place ? " in place" : "", i);
            break;
        }
    for (int k = 0; k < n; k++) free(hs[k]), mem_free((cu_ptr_t)(uintptr_t)ds[k]);
    if (ddst != NULL) mem_free((cu_ptr_t)(uintptr_t)ddst);
    free(want), free(got);
}

static void test_reduce(tp_stream_t *s)
{
    static const tp_dtype_t types[] = {TP_F32, TP_F64, TP_BF16, TP_F16, TP_I32, TP_I64};
    static const int ns[] = {1, 2, 3, 5, 17};
    static const size_t counts[] = {1, 7, 1000, 65537};
    int cases = 0;
    for (size_t ti = 0; ti < 6; ti++)
        for (int op = 0; op < 3; op++) {
            for (size_t ni = 0; ni < 5; ni++)
                for (size_t ci = 0; ci < 4; ci++, cases++) reduce_case(s, types[ti], op, ns[ni], counts[ci], 0, 0);
            reduce_case(s, types[ti], op, 3, 1001, 1, 0); /* every pointer odd: the byte loads */
            reduce_case(s, types[ti], op, 4, 1001, 0, 1); /* dst is source 0 */
            reduce_case(s, types[ti], op, 128, 33, 0, 0); /* the most sources one launch takes */
            cases += 3;
            if (failures > 20) return;
        }
    const void *srcs[129] = {0};
    CHECK(d->reduce(TP_F32, TP_SUM, (void *)srcs, srcs, 129, 1, s) == TP_ERR_UNSUPPORTED, "129 sources are refused");
    printf("cuda_device: %d reductions bit for bit against the host's\n", cases);
}

int main(void)
{
    if (d->init() != TP_OK) {
        printf("SKIP: no usable CUDA GPU: %s\n", tp_last_error());
        return 77;
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    mem_alloc = dlsym(lib, "cuMemAlloc_v2");
    mem_free = dlsym(lib, "cuMemFree_v2");
    begin_capture = dlsym(lib, "cuStreamBeginCapture_v2");
    end_capture = dlsym(lib, "cuStreamEndCapture");
    graph_destroy = dlsym(lib, "cuGraphDestroy");
    if (!mem_alloc || !mem_free || !begin_capture || !end_capture || !graph_destroy) {
        printf("FAIL: libcuda.so.1 lacks cuMemAlloc_v2, cuMemFree_v2 or the capture calls\n");
        return 1;
    }
    cu_ctx_t ctx;
    cu_stream_t native;
    CHECK(tp_cu.DevicePrimaryCtxRetain(&ctx, 0) == CU_SUCCESS && tp_cu.CtxPushCurrent(ctx) == CU_SUCCESS,
          "device 0's primary context");
    CHECK(tp_cu.StreamCreate(&native, CU_STREAM_NON_BLOCKING) == CU_SUCCESS, "a native stream");
    tp_stream_t *s = NULL, *def = NULL;
    CHECK(tp_stream_create(TP_DEVICE_CUDA, native, &s) == TP_OK && s->native == native && s->priv == ctx && !s->owned,
          "tp_stream_create on the native stream");
    CHECK(tp_stream_create(TP_DEVICE_CUDA, NULL, &def) == TP_OK && def->priv == ctx, "and on the default stream");
    if (failures) return 1;
    test_query_copy_events(s);
    test_values(s);
    test_reduce(s);
    CHECK(tp_stream_destroy(def) == TP_OK && tp_stream_destroy(s) == TP_OK, "destroy the wrappers");
    CHECK(tp_cu.StreamSynchronize(native) == CU_SUCCESS && tp_cu.StreamDestroy(native) == CU_SUCCESS,
          "the native stream is still the engine's");
    printf("cuda_device: %s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
