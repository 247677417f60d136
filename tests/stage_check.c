/*
 * stage_check: the staging provider over host streams. all: every stream call x type x size against the same call
 * without a stream (the host engine, itself checked against rank-order references by coll_check), bit for bit and
 * over the whole receive buffer. later: calls queued on a held stream move nothing until it runs. capture: a
 * capturing stream is refused, the comm stays usable. fail, hang, hang-keep: a device whose copies fail or never
 * finish. abort: a peer dies while a stream waits on a done word. bad: a stream that is not one.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tp.h>
#include <tp_provider.h>

#include "cuda_device.h"
#include "coll_staged.h"
#include "runtime_devices.h"
#include "runtime_stream.h"

static int me, n, failures;
static size_t part;
static tp_stream_t *st;

#define FAIL(...)                                                                                                      \
    do {                                                                                                               \
        printf("rank %d: FAIL ", me);                                                                                  \
        printf(__VA_ARGS__);                                                                                           \
        printf("\n");                                                                                                  \
        failures++;                                                                                                    \
    } while (0)

static uint64_t hash(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* Finite values of every type, exponents spread so that sums depend on their order. */
static void fill(tp_dtype_t t, void *buf, size_t bytes, uint64_t seed)
{
    size_t es = t == TP_BYTES ? 8 : tp_dtype_size(t); /* bytes: eight at a time, the tail below */
    uint8_t *p = buf;
    for (size_t i = bytes / es * es; i < bytes; i++) p[i] = (uint8_t)hash(seed + i);
    for (size_t i = 0; i < bytes / es; i++) {
        uint64_t h = hash(seed * 7777777u + i), e = (h >> 48) % 24;
        if (t == TP_F32) h = (h & 0x807fffffull) | (110 + e) << 23;
        if (t == TP_BF16) h = (h & 0x807full) | (115 + e) << 7;
        if (t == TP_F16) h = (h & 0x83ffull) | (3 + e / 2) << 10;
        if (t == TP_F64) h = (h & 0x800fffffffffffffull) | (1010 + e) << 52;
        memcpy(p + i * es, &h, es);
    }
}

enum { C_REDUCE, C_BCAST, C_GATHER, C_GATHERV, C_RS, C_A2A, C_EXCHANGE, C_SENDRECV, C_KINDS };
static const char *const kind_names[C_KINDS] = {"all_reduce",     "broadcast",  "all_gather", "all_gatherv",
                                                "reduce_scatter", "all_to_all", "exchange",   "send/recv"};

/* One call of a kind on buffers send and recv (recv also holds in-place input); stream NULL: the host engine. */
static tp_status_t issue(tp_comm_t *w, int kind, tp_dtype_t t, tp_op_t op, size_t count, uint8_t *send, uint8_t *recv,
                         int in_place, tp_stream_t *s, uint64_t seed)
{
    size_t es = tp_dtype_size(t), b = count * es, counts[64], disp = 0;
    int peer = (me ^ 1) < n ? me ^ 1 : me;
    switch (kind) {
    case C_REDUCE: return tp_all_reduce(w, in_place ? recv : send, recv, count, t, op, s);
    case C_BCAST: return tp_broadcast(w, recv, count, t, (int)(seed % (uint64_t)n), s);
    case C_GATHER: return tp_all_gather(w, in_place ? recv + (size_t)me * b : send, recv, count, t, s);
    case C_GATHERV:
        for (int r = 0; r < n; r++) counts[r] = r == 1 ? 0 : count + 3 * (size_t)r;
        for (int r = 0; r < me; r++) disp += counts[r];
        return tp_all_gatherv(w, in_place ? recv + disp * es : send, recv, counts, t, s);
    case C_RS:
        return tp_reduce_scatter(w, in_place ? recv : send, in_place ? recv + (size_t)me * b : recv, count, t, op, s);
    case C_A2A: return tp_all_to_all(w, in_place ? recv : send, recv, count, t, s);
    case C_EXCHANGE: return tp_exchange(w, in_place ? recv : send, recv, count, t, peer, s);
    default: {
        if (peer == me) return TP_OK;
        tp_status_t s1 = me < peer ? tp_send(w, send, count, t, peer, s) : tp_recv(w, recv, count, t, peer, s);
        tp_status_t s2 = me < peer ? tp_recv(w, recv, count, t, peer, s) : tp_send(w, send, count, t, peer, s);
        return s1 != TP_OK ? s1 : s2;
    }
    }
}

static tp_status_t sync_stream(tp_stream_t *s) { return s->dev->stream_sync(s); }

/* Where the staged calls' buffers live: host memory on a host stream, or (--cuda) device memory on a CUDA stream held
 * by a wait on a pinned gate word. The reference always runs on host memory without a stream. */
static int cuda;
static cu_result_t (*cu_alloc)(cu_ptr_t *, size_t), (*cu_free)(cu_ptr_t);
static cu_stream_t native;
static uint64_t *gate_word, gate_gen;
static void *gate_dev;

static uint8_t *dev_alloc(size_t bytes)
{
    cu_ptr_t p = 0;
    if (!cuda) return malloc(bytes);
    if (cu_alloc(&p, bytes) != CU_SUCCESS) FAIL("cuMemAlloc of %zu bytes", bytes);
    return (uint8_t *)(uintptr_t)p;
}

static void dev_free(uint8_t *p)
{
    if (cuda) cu_free((cu_ptr_t)(uintptr_t)p);
    else free(p);
}

static void dev_copy(void *dst, const void *src, size_t bytes)
{
    if (!cuda) memcpy(dst, src, bytes);
    /* From pageable memory cuMemcpy may return before its DMA lands, on the legacy stream, which the engine's
     * non-blocking stream is not ordered after: wait for it, or a staged call could copy out the old bytes. */
    else if (tp_cu.Memcpy((cu_ptr_t)(uintptr_t)dst, (cu_ptr_t)(uintptr_t)src, bytes) != CU_SUCCESS ||
             tp_cu.StreamSynchronize(NULL) != CU_SUCCESS)
        FAIL("cuMemcpy");
}

static void hold_stream(int hold)
{
    if (!cuda) {
        tp_host_stream_hold(st, hold);
    } else if (hold) {
        tp_cu.StreamWaitValue64(native, (cu_ptr_t)(uintptr_t)gate_dev, ++gate_gen, 0);
    } else {
        __atomic_store_n(gate_word, gate_gen, __ATOMIC_RELEASE);
    }
}

/* The stream call against the host engine's on the same inputs: every byte of recv, which both start alike. */
static void compare(tp_comm_t *w, int kind, tp_dtype_t t, tp_op_t op, size_t count, int in_place)
{
    size_t bytes = (size_t)n * (count + 3 * (size_t)n) * tp_dtype_size(t) + 16;
    uint8_t *send = malloc(bytes), *recv = malloc(bytes), *ref = malloc(bytes);
    uint8_t *dsend = dev_alloc(bytes), *drecv = dev_alloc(bytes);
    static uint64_t seed;
    seed++;
    fill(t, send, bytes, seed * 131 + (uint64_t)me);
    fill(t, ref, bytes, seed * 131 + 64 + (uint64_t)me);
    dev_copy(dsend, send, bytes);
    dev_copy(drecv, ref, bytes);
    tp_status_t s = issue(w, kind, t, op, count, send, ref, in_place, NULL, seed);
    if (s != TP_OK) FAIL("%s reference: %s", kind_names[kind], tp_last_error());
    if ((s = issue(w, kind, t, op, count, dsend, drecv, in_place, st, seed)) == TP_OK) s = sync_stream(st);
    dev_copy(recv, drecv, bytes);
    if (s != TP_OK)
        FAIL("%s type %d count %zu%s: %s (%s)", kind_names[kind], (int)t, count, in_place ? " in place" : "",
             tp_status_string(s), tp_last_error());
    else if (memcmp(recv, ref, bytes) != 0) {
        size_t i = 0;
        while (recv[i] == ref[i]) i++;
        FAIL("%s type %d op %d count %zu%s: byte %zu differs from the host engine's", kind_names[kind], (int)t, (int)op,
             count, in_place ? " in place" : "", i);
    }
    free(send);
    free(recv);
    free(ref);
    dev_free(dsend);
    dev_free(drecv);
}

static void run_all(tp_comm_t *w)
{
    static const tp_dtype_t types[] = {TP_BYTES, TP_F32, TP_BF16, TP_F16, TP_F64, TP_I64};
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        tp_dtype_t t = types[ti];
        size_t es = tp_dtype_size(t);
        size_t sizes[] = {0, 1, 7, part / es - 1, part / es + 1, 3 * part / es + 5};
        for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++)
            for (int kind = 0; kind < C_KINDS; kind++) {
                int reduces = kind == C_REDUCE || kind == C_RS;
                if (reduces && t == TP_BYTES) continue;
                for (int in_place = 0; in_place < 2; in_place++) {
                    if (in_place && (kind == C_BCAST || kind == C_SENDRECV)) continue;
                    compare(w, kind, t, TP_SUM, sizes[si], in_place);
                    if (reduces && si == 4) compare(w, kind, t, TP_MAX, sizes[si], in_place);
                }
            }
    }
}

/* Queued on a held stream: nothing moves; released, every result is the host engine's. */
/* Staging's pinned memory is made when the engine hands libtp its stream, not by the first call: a pinned allocation
 * synchronises the device, and run_later's first call comes while its stream is held by the test's gate. */
static void check_prepared(void)
{
    for (int i = 0; i < tp_stage.n_lanes; i++)
        if (tp_stage.lanes[i].dev == st->dev && tp_stage.lanes[i].slab != NULL) return;
    FAIL("later: no staging memory for device %s after tp_stream_create: the first call would make it", st->dev->name);
}

static void run_later(tp_comm_t *w)
{
    check_prepared();
    enum { CALLS = 2 * C_KINDS };
    size_t count = 3 * part / 4 + 5, bytes = (size_t)n * (count + 3 * (size_t)n) * 4 + 16;
    uint8_t *send[CALLS], *recv[CALLS], *ref[CALLS], *got = malloc(bytes);
    for (int i = 0; i < CALLS; i++) {
        send[i] = dev_alloc(bytes), recv[i] = dev_alloc(bytes), ref[i] = malloc(bytes);
        fill(TP_F32, got, bytes, 1000u + (uint64_t)(i * 64 + me));
        dev_copy(send[i], got, bytes);
        fill(TP_F32, ref[i], bytes, 5000u + (uint64_t)(i * 64 + me));
        dev_copy(recv[i], ref[i], bytes);
        if (issue(w, i % C_KINDS, TP_F32, TP_SUM, count, got, ref[i], i >= C_KINDS, NULL, (uint64_t)i) != TP_OK)
            FAIL("later: reference %d: %s", i, tp_last_error());
    }
    hold_stream(1);
    for (int i = 0; i < CALLS; i++) {
        tp_status_t s = issue(w, i % C_KINDS, TP_F32, TP_SUM, count, send[i], recv[i], i >= C_KINDS, st, (uint64_t)i);
        if (s != TP_OK) FAIL("later: queueing %s: %s", kind_names[i % C_KINDS], tp_last_error());
    }
    for (int i = 0; i < CALLS; i++) { /* a call that ran at once, or waited for its stream here, fails this */
        uint8_t *before = malloc(bytes);
        fill(TP_F32, before, bytes, 5000u + (uint64_t)(i * 64 + me));
        dev_copy(got, recv[i], bytes);
        if (memcmp(got, before, bytes) != 0)
            FAIL("later: %s moved data before its stream ran", kind_names[i % C_KINDS]);
        free(before);
    }
    printf("rank %d: later: %d calls queued on a held stream, nothing moved\n", me, CALLS);
    hold_stream(0);
    if (sync_stream(st) != TP_OK) FAIL("later: stream sync");
    for (int i = 0; i < CALLS; i++) {
        dev_copy(got, recv[i], bytes);
        if (memcmp(got, ref[i], bytes) != 0) FAIL("later: %s differs from the host engine's", kind_names[i % C_KINDS]);
        dev_free(send[i]), dev_free(recv[i]), free(ref[i]);
    }
    free(got);
    /* calls without a stream right behind calls on a running stream: they wait for them, in order */
    float in[1024], want[1024], out[8][1024];
    uint8_t *din = dev_alloc(sizeof(in)), *dout = dev_alloc(sizeof(out));
    for (int i = 0; i < 1024; i++) in[i] = (float)(i % 13) * 0.5f + (float)me;
    dev_copy(din, in, sizeof(in));
    if (tp_all_reduce(w, in, want, 1024, TP_F32, TP_SUM, NULL) != TP_OK) FAIL("order: reference");
    for (int round = 0; round < 20; round++) {
        for (int k = 0; k < 8; k++)
            if (tp_all_reduce(w, din, dout + k * sizeof(in), 1024, TP_F32, TP_SUM, st) != TP_OK) FAIL("order: queue");
        float host[1024];
        if (tp_all_reduce(w, in, host, 1024, TP_F32, TP_SUM, NULL) != TP_OK || memcmp(host, want, sizeof(want)) != 0)
            FAIL("order: the call without a stream, round %d: %s", round, tp_last_error());
    }
    sync_stream(st);
    dev_copy(out, dout, sizeof(out));
    for (int k = 0; k < 8; k++)
        if (memcmp(out[k], want, sizeof(want)) != 0) FAIL("order: stream call %d differs", k);
    dev_free(din);
    dev_free(dout);
}

static tp_status_t expect(const char *what, tp_status_t got, tp_status_t want, const char *msg)
{
    if (got != want || (msg != NULL && strstr(tp_last_error(), msg) == NULL))
        FAIL("%s: got %s (%s), want %s with \"%s\"", what, tp_status_string(got), tp_last_error(),
             tp_status_string(want), msg ? msg : "");
    else printf("rank %d: %s: %s%s%s\n", me, what, tp_status_string(got), msg ? ": " : "", msg ? tp_last_error() : "");
    return got;
}

/* A device that owns one arena of host memory and fails (or never finishes) its copies from the nth on. */
static uint8_t *arena;
static size_t arena_len;
static int fault_mode, fault_after; /* 1: copy returns an error; 2: copy waits on gate first */
static uint64_t *gate;

static int faulty_query(const void *ptr, tp_mem_type_t *type)
{
    *type = TP_MEM_HOST;
    return (const uint8_t *)ptr >= arena && (const uint8_t *)ptr < arena + arena_len;
}

static tp_status_t faulty_copy(void *dst, const void *src, size_t len, tp_stream_t *s)
{
    if (s != NULL && fault_after-- <= 0) {
        if (fault_mode == 1) {
            tp_log(TP_LOG_ERROR, "faulty", "copy of %zu bytes: the test device fails it", len);
            return TP_ERR_SYSTEM;
        }
        tp_host_device_ops.stream_wait64(s, gate, 1);
    }
    return tp_host_device_ops.copy(dst, src, len, s);
}

static tp_device_ops_t faulty;

/* CUDA's and HIP's pinned allocations synchronise the device: done by the proxy while a stream waits on it, they
 * never return. The test device counts those made off the engine's thread. */
static pthread_t engine_thread;
static atomic_int pinned_off_thread;
static tp_status_t faulty_host_alloc(size_t len, void **host, void **dev)
{
    if (!pthread_equal(pthread_self(), engine_thread)) atomic_fetch_add(&pinned_off_thread, 1);
    return tp_host_device_ops.host_alloc(len, host, dev);
}
static void faulty_host_free(void *host)
{
    if (!pthread_equal(pthread_self(), engine_thread)) atomic_fetch_add(&pinned_off_thread, 1);
    tp_host_device_ops.host_free(host);
}

/* pinned: calls growing from 16 B to many parts, and no pinned allocation or free on the proxy's thread. */
static void run_pinned(tp_comm_t *w)
{
    size_t sizes[3] = {4, 16384, 65536};
    float *a = (float *)arena, *b = (float *)arena + 65536;
    for (int k = 0; k < 3; k++) {
        for (size_t i = 0; i < sizes[k]; i++) a[i] = (float)(i % 7 + (size_t)me);
        expect("pinned: a call", tp_all_reduce(w, a, b, sizes[k], TP_F32, TP_SUM, st), TP_OK, NULL);
        sync_stream(st);
        float want = (float)((sizes[k] - 1) % 7) * (float)n + (float)(n * (n - 1) / 2);
        if (b[sizes[k] - 1] != want) FAIL("pinned: %g, want %g", (double)b[sizes[k] - 1], (double)want);
    }
    if (atomic_load(&pinned_off_thread) != 0)
        FAIL("pinned: %d pinned allocations or frees off the engine's thread", atomic_load(&pinned_off_thread));
}

static void run_fault(tp_comm_t *w, const char *mode)
{
    (void)w;
    int size1 = n == 1;
    float *a = (float *)arena, *b = (float *)arena + 1024;
    for (int i = 0; i < 1024; i++) a[i] = (float)(i + me);
    fault_after = 0;
    tp_status_t s = tp_all_reduce(w, a, b, 1024, TP_F32, TP_SUM, st);
    expect("queued", s, TP_OK, NULL);
    /* a failed copy sets every done word: the stream goes on; the error shows at the next call */
    expect("stream sync after the failed call", sync_stream(st), TP_OK, NULL);
    if (!size1) return; /* fate ends this rank and its peers, naming the failure */
    const char *why = strcmp(mode, "fail") == 0 ? "the test device fails it" : "TP_STAGE_TIMEOUT";
    expect("next stream call", tp_all_reduce(w, a, b, 1024, TP_F32, TP_SUM, st), TP_ERR_SYSTEM, why);
    expect("next call without a stream", tp_all_reduce(w, a, b, 16, TP_F32, TP_SUM, NULL), TP_ERR_SYSTEM, why);
    if (strcmp(mode, "hang") == 0) __atomic_store_n(gate, 1, __ATOMIC_RELEASE); /* the late copy may land now */
}

/* abort: rank 1 has one call waiting for a held stream and one whose stream waits on its done word; rank 0 dies. */
static tp_stream_t *held;
static void on_fate(const tp_failure_t *f, void *arg)
{
    (void)arg;
    tp_status_t s = sync_stream(st); /* hangs unless the stage released its done words */
    printf("rank %d: fate: rank %d failed; the waiting stream drained (%s)\n", me, f->rank, tp_status_string(s));
    fflush(stdout);
}

static void run_abort(tp_comm_t *w)
{
    float a[64] = {0}, b[64];
    tp_peer_info_t zero;
    if (tp_comm_peer(w, 0, &zero) != TP_OK) FAIL("abort: rank 0's pid");
    if (me == 0)
        for (;;) pause(); /* rank 1 kills it once its streams are set */
    if (tp_stream_create(TP_DEVICE_HOST, NULL, &held) != TP_OK) FAIL("abort: a second stream");
    tp_host_stream_hold(held, 1);
    expect("abort: queued on the held stream", tp_all_reduce(w, a, b, 64, TP_F32, TP_SUM, held), TP_OK, NULL);
    expect("abort: queued on the running stream", tp_all_reduce(w, a, b, 64, TP_F32, TP_SUM, st), TP_OK, NULL);
    fflush(stdout);
    signal(SIGTERM, SIG_IGN); /* tprun ends the job when rank 0 dies: this rank's own fate path is what is tested */
    kill(zero.pid, SIGKILL);
    if (getenv("TP_ERRORS") == NULL || strcmp(getenv("TP_ERRORS"), "return") != 0)
        for (;;) pause(); /* fate ends this rank */
    /* TP_ERRORS=return: the stream drains, the next call returns the failure, tp_finalize ends the held call */
    expect("abort: the waiting stream drained", sync_stream(st), TP_OK, NULL);
    expect("abort: the next call", tp_all_reduce(w, a, b, 64, TP_F32, TP_SUM, st), TP_ERR_PEER_FAILED, "rank 0");
}

/* destroy: a sub-comm destroyed with calls its held stream never reached cancels them after TP_STAGE_TIMEOUT, and
 * the stream then goes on; tp_finalize with calls queued on a running stream runs them first. */
static float fin_out[4096], fin_ref[4096];
static void run_destroy(tp_comm_t *w)
{
    float in[4096];
    for (int i = 0; i < 4096; i++) in[i] = (float)(i % 97) * 0.25f + (float)me;
    float got[2][4096];
    memset(got, 0, sizeof(got));
    tp_comm_t *sub;
    if (tp_comm_split(w, 0, me, &sub) != TP_OK) FAIL("destroy: split");
    tp_host_stream_hold(st, 1);
    for (int i = 0; i < 2; i++)
        expect("destroy: queued", tp_all_reduce(sub, in, got[i], 4096, TP_F32, TP_SUM, st), TP_OK, NULL);
    expect("destroy: tp_comm_destroy", tp_comm_destroy(sub), TP_OK, NULL);
    tp_host_stream_hold(st, 0);
    expect("destroy: the stream goes on", sync_stream(st), TP_OK, NULL);
    if (got[0][5] != 0 || got[1][5] != 0) FAIL("destroy: a cancelled call moved data");
    if (tp_all_reduce(w, in, fin_ref, 4096, TP_F32, TP_SUM, NULL) != TP_OK) FAIL("destroy: reference");
    for (int i = 0; i < 3; i++)
        expect("finalize: queued", tp_all_reduce(w, in, fin_out, 4096, TP_F32, TP_SUM, st), TP_OK, NULL);
}

/* --cuda: device 0's primary context, a native non-blocking stream of the engine's, the gate word. */
static int cuda_setup(void)
{
    cu_ctx_t ctx;
    if (tp_device_of_kind(TP_DEVICE_CUDA) == NULL) { /* loads the driver (tp_cu) before anything below uses it */
        printf("rank %d: FAIL the CUDA setup: %s\n", me, tp_last_error());
        return 1;
    }
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    cu_alloc = lib ? dlsym(lib, "cuMemAlloc_v2") : NULL;
    cu_free = lib ? dlsym(lib, "cuMemFree_v2") : NULL;
    if (cu_alloc == NULL || cu_free == NULL || tp_cu.DevicePrimaryCtxRetain(&ctx, 0) != CU_SUCCESS ||
        tp_cu.CtxPushCurrent(ctx) != CU_SUCCESS || tp_cu.StreamCreate(&native, 1 /* non-blocking */) != CU_SUCCESS ||
        tp_stream_create(TP_DEVICE_CUDA, native, &st) != TP_OK ||
        tp_cuda_device_ops.host_alloc(64, (void **)&gate_word, &gate_dev) != TP_OK) {
        printf("rank %d: FAIL the CUDA setup: %s\n", me, tp_last_error());
        return 1;
    }
    return 0;
}

/* capture on a real stream: cuStreamBeginCapture in relaxed mode (other threads' CUDA calls stay legal). */
static int cuda_capture(int on)
{
    static cu_result_t (*begin)(cu_stream_t, int), (*end)(cu_stream_t, void **), (*destroy)(void *);
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), *graph = NULL;
    if (begin == NULL)
        begin = dlsym(lib, "cuStreamBeginCapture_v2"), end = dlsym(lib, "cuStreamEndCapture"),
        destroy = dlsym(lib, "cuGraphDestroy");
    if (begin == NULL || end == NULL || destroy == NULL) return -1;
    if (on) return begin(native, 2) == CU_SUCCESS ? 0 : -1;
    if (end(native, &graph) != CU_SUCCESS) return -1;
    if (graph != NULL) destroy(graph);
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "all";
    cuda = argc > 2 && strcmp(argv[2], "--cuda") == 0;
    if (strcmp(mode, "probe-cuda") == 0) { /* tests/gpu/stage_cuda.sh: 77 without a usable GPU */
        if (tp_cuda_device_ops.init() == TP_OK) return 0;
        printf("SKIP: no usable CUDA GPU: %s\n", tp_last_error());
        return 77;
    }
    engine_thread = pthread_self();
    if (strcmp(mode, "fail") == 0 || strncmp(mode, "hang", 4) == 0 || strcmp(mode, "reinit") == 0 ||
        strcmp(mode, "pinned") == 0) {
        arena_len = 1 << 20;
        arena = aligned_alloc(64, arena_len);
        gate = aligned_alloc(64, 64);
        *gate = 0;
        faulty = tp_host_device_ops;
        faulty.name = "faulty";
        faulty.mem_query = faulty_query;
        faulty.copy = faulty_copy;
        faulty.host_alloc = faulty_host_alloc;
        faulty.host_free = faulty_host_free;
        fault_mode = strncmp(mode, "hang", 4) == 0 ? 2 : 1;
        if (strcmp(mode, "pinned") == 0) fault_after = 1 << 30;
        tp_device_add(&faulty);
    }
    const char *errors = getenv("TP_ERRORS");
    if (strcmp(mode, "abort") == 0 && (errors == NULL || strcmp(errors, "return") != 0))
        tp_fate_register(on_fate, NULL);
    tp_comm_t *w;
    if (tp_init(NULL, &w) != TP_OK) return 1;
    me = tp_comm_rank(w);
    n = tp_comm_size(w);
    const char *pb = tp_comm_setting(w, "part_bytes");
    part = pb ? strtoull(pb, NULL, 10) : 4194304;
    if (!cuda && tp_stream_create(TP_DEVICE_HOST, NULL, &st) != TP_OK) return 1;
    if (cuda && cuda_setup() != 0) return 1;
    if (strcmp(mode, "all") == 0) run_all(w);
    else if (strcmp(mode, "later") == 0) run_later(w);
    else if (strcmp(mode, "abort") == 0) run_abort(w);
    else if (strcmp(mode, "destroy") == 0) run_destroy(w);
    else if (strcmp(mode, "pinned") == 0) run_pinned(w);
    else if (strcmp(mode, "fail") == 0 || strncmp(mode, "hang", 4) == 0) run_fault(w, mode);
    else if (strcmp(mode, "reinit") == 0) { /* a session whose staging failed, then a fresh one after tp_finalize */
        run_fault(w, "fail");
        tp_finalize(w);
        fault_after = 1 << 30;
        if (tp_init(NULL, &w) != TP_OK) FAIL("reinit: tp_init: %s", tp_last_error());
        float *a = (float *)arena, *b = (float *)arena + 1024;
        expect("reinit: a stream call", tp_all_reduce(w, a, b, 1024, TP_F32, TP_SUM, st), TP_OK, NULL);
        sync_stream(st);
        if (b[1023] != (float)(1023 + me)) FAIL("reinit: %g, want %g", (double)b[1023], (double)(1023 + me));
    } else if (strcmp(mode, "capture") == 0) {
        float in[8] = {1, 2, 3, 4, 5, 6, 7, 8}, out[8];
        uint8_t *a = dev_alloc(sizeof(in)), *b = dev_alloc(sizeof(in));
        dev_copy(a, in, sizeof(in));
        if (cuda ? cuda_capture(1) : tp_host_stream_set_capturing(st, 1)) FAIL("capture: begin");
        expect("capture", tp_all_reduce(w, a, b, 8, TP_F32, TP_SUM, st), TP_ERR_UNSUPPORTED, "capturing a graph");
        if (cuda ? cuda_capture(0) : tp_host_stream_set_capturing(st, 0)) FAIL("capture: end");
        expect("after capture", tp_all_reduce(w, a, b, 8, TP_F32, TP_SUM, st), TP_OK, NULL);
        sync_stream(st);
        dev_copy(out, b, sizeof(out));
        if (out[7] != 8.0f * (float)n) FAIL("after capture: %g, want %g", (double)out[7], 8.0 * n);
        dev_free(a);
        dev_free(b);
    } else if (strcmp(mode, "bad") == 0) {
        float a[8] = {0}, b[8];
        tp_stream_t *gone;
        tp_stream_create(TP_DEVICE_HOST, NULL, &gone);
        tp_stream_destroy(gone);
        expect("destroyed stream", tp_all_reduce(w, a, b, 8, TP_F32, TP_SUM, gone), TP_ERR_INVALID,
               "not a live stream");
        expect("then", tp_all_reduce(w, a, b, 8, TP_F32, TP_SUM, st), TP_OK, NULL);
        sync_stream(st);
    }
    tp_status_t s = tp_finalize(w);
    if (s != TP_OK && strcmp(mode, "abort") != 0) FAIL("tp_finalize: %s", tp_status_string(s));
    if (strcmp(mode, "destroy") == 0 && (sync_stream(st) != TP_OK || memcmp(fin_out, fin_ref, sizeof(fin_ref)) != 0))
        FAIL("finalize: the calls queued before it did not run first");
    if (me == 0 || strcmp(mode, "all") != 0)
        printf("stage_check %s: %d ranks, part %zu bytes: %s\n", mode, n, part, failures ? "FAILED" : "all match");
    tp_stream_destroy(st);
    if (cuda) tp_cu.StreamDestroy(native);
    return failures ? 1 : 0;
}
