/*
 * stream_unit: host streams (order, hold and release, 64-bit values written and waited on, events, capture status,
 * destroy), tp_stream_create's refusals, the checks of a call's stream against its buffers, and the CUDA and HIP
 * devices' clean refusal where their driver is absent or unusable (with fake drivers: tests/stream_drivers.sh).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "coll_dispatch.h"
#include "cuda_device.h"
#include "host_stream.h"
#include "runtime_devices.h"
#include "runtime_stream.h"

#include "unit_check.h"

/* A broken wait would let the work behind it run within microseconds; 20 ms gives it every chance to show. */
static int stays_zero(const volatile uint64_t *word)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        if (__atomic_load_n(word, __ATOMIC_ACQUIRE) != 0) return 0;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 20000000L);
    return 1;
}

static void test_create_args(void)
{
    tp_stream_t *s = (tp_stream_t *)&s, *keep = s;
    CHECK(tp_stream_create(TP_DEVICE_HOST, NULL, NULL) == TP_ERR_INVALID, "out NULL");
    CHECK(tp_stream_create((tp_device_kind_t)5, NULL, &s) == TP_ERR_INVALID && s == keep, "kind 5");
    CHECK(strstr(tp_last_error(), "kind 5 is not TP_DEVICE_HOST") != NULL, "kind 5 named: %s", tp_last_error());
    CHECK(tp_stream_create((tp_device_kind_t)-1, NULL, &s) == TP_ERR_INVALID && s == keep, "kind -1");
    CHECK(tp_stream_create(TP_DEVICE_HOST, &s, &s) == TP_ERR_INVALID && s == keep, "host stream with a native");
    CHECK(strstr(tp_last_error(), "native must be NULL") != NULL, "names native: %s", tp_last_error());
    CHECK(tp_stream_destroy(NULL) == TP_ERR_INVALID, "destroy NULL");
    CHECK(tp_stream_create(TP_DEVICE_HOST, NULL, &s) == TP_OK && s != keep && s->kind == TP_DEVICE_HOST &&
              s->dev == &tp_host_device_ops && s->native == NULL,
          "a host stream");
    CHECK(tp_stream_check("t", s) == TP_OK, "a live stream passes");
    CHECK(tp_stream_destroy(s) == TP_OK, "destroy");
    CHECK(tp_stream_check("t", s) == TP_ERR_INVALID, "a destroyed stream is refused");
    CHECK(strstr(tp_last_error(), "t: stream") && strstr(tp_last_error(), "not a live stream"), "named: %s",
          tp_last_error());
    CHECK(tp_stream_destroy(s) == TP_ERR_INVALID, "destroy twice is refused");
}

static void test_order_and_hold(void)
{
    tp_stream_t *s;
    CHECK(tp_stream_create(TP_DEVICE_HOST, NULL, &s) == TP_OK, "create");
    int32_t a[64], b[64] = {0}, c[64] = {0}, d[64] = {0}, want[64];
    for (int i = 0; i < 64; i++) a[i] = i * 7 - 100, want[i] = 2 * a[i];
    uint64_t *flag, *flag_dev;
    CHECK(tp_host_device_ops.host_alloc(8, (void **)&flag, (void **)&flag_dev) == TP_OK && flag == flag_dev &&
              *flag == 0 && ((uintptr_t)flag & 7) == 0,
          "host_alloc: zeroed, aligned, its own device address");
    const tp_device_ops_t *dv = s->dev;
    CHECK(tp_host_stream_hold(s, 1) == TP_OK, "hold");
    const void *srcs[2] = {a, c};
    CHECK(dv->copy(b, a, sizeof(a), s) == TP_OK && dv->copy(c, b, sizeof(a), s) == TP_OK &&
              dv->reduce(TP_I32, TP_SUM, d, srcs, 2, 64, s) == TP_OK && dv->stream_write64(s, flag_dev, 1) == TP_OK,
          "queue copy, copy, reduce, write");
    CHECK(stays_zero(flag) && b[0] == 0 && c[5] == 0 && d[63] == 0, "nothing runs while held");
    CHECK(tp_host_stream_hold(s, 0) == TP_OK && dv->stream_sync(s) == TP_OK, "release and sync");
    CHECK(memcmp(b, a, sizeof(a)) == 0 && memcmp(c, a, sizeof(a)) == 0 && memcmp(d, want, sizeof(d)) == 0 && *flag == 1,
          "in order: each step saw the one before");
    /* destroy runs what a held stream has queued */
    memset(b, 0, sizeof(b));
    CHECK(tp_host_stream_hold(s, 1) == TP_OK && dv->copy(b, a, sizeof(a), s) == TP_OK, "queue on a held stream");
    CHECK(tp_stream_destroy(s) == TP_OK && memcmp(b, a, sizeof(a)) == 0, "destroy ran the held work");
    tp_host_device_ops.host_free(flag);
}

static void test_values(void)
{
    tp_stream_t *s1 = NULL, *s2 = NULL;
    CHECK(tp_stream_create(TP_DEVICE_HOST, NULL, &s1) == TP_OK && tp_stream_create(TP_DEVICE_HOST, NULL, &s2) == TP_OK,
          "two streams");
    const tp_device_ops_t *dv = &tp_host_device_ops;
    uint64_t *w, *wd;
    CHECK(dv->host_alloc(4 * 8, (void **)&w, (void **)&wd) == TP_OK, "words");
    char src[32] = "written after the wait", dst[32] = {0};
    CHECK(dv->stream_wait64(s1, wd, 2) == TP_OK && dv->copy(dst, src, sizeof(src), s1) == TP_OK &&
              dv->stream_write64(s1, wd + 1, 1) == TP_OK,
          "queue wait >= 2, copy, write");
    __atomic_store_n(&w[0], 1, __ATOMIC_RELEASE);
    CHECK(stays_zero(&w[1]) && dst[0] == 0, "a value below the target holds the stream");
    __atomic_store_n(&w[0], 3, __ATOMIC_RELEASE);
    CHECK(dv->stream_sync(s1) == TP_OK && w[1] == 1 && strcmp(dst, src) == 0, "a value past the target releases");
    /* stream to stream: s1 waits for what held s2 writes */
    CHECK(tp_host_stream_hold(s2, 1) == TP_OK && dv->stream_write64(s2, wd + 2, 5) == TP_OK &&
              dv->stream_wait64(s1, wd + 2, 5) == TP_OK && dv->stream_write64(s1, wd + 3, 7) == TP_OK,
          "queue a write on s2, a wait for it on s1");
    CHECK(stays_zero(&w[3]), "s1 waits while s2 is held");
    CHECK(tp_host_stream_hold(s2, 0) == TP_OK && dv->stream_sync(s1) == TP_OK && w[3] == 7, "s2 runs, s1 follows");
    CHECK(dv->stream_write64(s1, (char *)wd + 4, 1) == TP_ERR_INVALID &&
              dv->stream_wait64(s1, NULL, 1) == TP_ERR_INVALID,
          "a misaligned or NULL word is refused");
    CHECK(tp_stream_destroy(s1) == TP_OK && tp_stream_destroy(s2) == TP_OK, "destroy");
    dv->host_free(w);
}

static void test_events(void)
{
    tp_stream_t *s1 = NULL, *s2 = NULL;
    CHECK(tp_stream_create(TP_DEVICE_HOST, NULL, &s1) == TP_OK && tp_stream_create(TP_DEVICE_HOST, NULL, &s2) == TP_OK,
          "two streams");
    const tp_device_ops_t *dv = &tp_host_device_ops;
    uint64_t x = 42, y = 0, z = 0;
    tp_device_event_t *ev = NULL, *now = NULL;
    CHECK(tp_host_stream_hold(s1, 1) == TP_OK && dv->copy(&y, &x, 8, s1) == TP_OK &&
              dv->event_record(s1, &ev) == TP_OK && ev != NULL,
          "record after a copy on held s1");
    CHECK(dv->stream_wait(s2, &ev) == TP_OK && dv->copy(&z, &y, 8, s2) == TP_OK, "s2 waits for the event, then copies");
    CHECK(stays_zero(&z), "s2 waits while s1 has not reached the event");
    CHECK(tp_host_stream_hold(s1, 0) == TP_OK && dv->stream_sync(s2) == TP_OK && z == 42, "s1 runs, s2 copies after");
    CHECK(dv->event_sync(NULL, &ev) == TP_OK, "event_sync of a reached event");
    CHECK(dv->event_record(NULL, &now) == TP_OK && dv->event_sync(NULL, &now) == TP_OK, "the host's order: at once");
    CHECK(dv->event_release(NULL, &ev) == TP_OK && ev == NULL && dv->event_release(NULL, &now) == TP_OK,
          "release sets NULL");
    CHECK(dv->event_sync(NULL, &ev) == TP_ERR_INVALID && dv->event_record(s1, NULL) == TP_ERR_INVALID,
          "no event is refused");
    CHECK(tp_stream_destroy(s1) == TP_OK && tp_stream_destroy(s2) == TP_OK, "destroy");
}

static void test_capture_and_foreign(void)
{
    tp_stream_t *s;
    CHECK(tp_stream_create(TP_DEVICE_HOST, NULL, &s) == TP_OK, "create");
    const tp_device_ops_t *dv = &tp_host_device_ops;
    CHECK(dv->stream_capturing(s) == 0 && dv->stream_capturing(NULL) == 0, "not capturing");
    CHECK(tp_host_stream_set_capturing(s, 1) == TP_OK && dv->stream_capturing(s) == 1, "capturing");
    CHECK(tp_host_stream_set_capturing(s, 0) == TP_OK && dv->stream_capturing(s) == 0, "capture ended");
    tp_stream_t cuda = {.kind = TP_DEVICE_CUDA, .dev = &tp_cuda_device_ops};
    char a[8] = "abc", b[8] = {0};
    CHECK(dv->copy(b, a, 4, &cuda) == TP_ERR_INVALID && b[0] == 0, "the host device refuses a CUDA stream");
    CHECK(strstr(tp_last_error(), "a stream of device cuda given to the host device"), "named: %s", tp_last_error());
    CHECK(tp_host_stream_hold(&cuda, 1) == TP_ERR_INVALID && tp_host_stream_hold(NULL, 1) == TP_ERR_INVALID,
          "hold takes host streams only");
    CHECK(tp_cuda_device_ops.copy(b, a, 4, s) == TP_ERR_INVALID && b[0] == 0, "the CUDA device refuses a host stream");
    CHECK(strstr(tp_last_error(), "pass a CUDA stream"), "named: %s", tp_last_error());
    /* a call's buffers against its stream */
    const tp_device_ops_t *cd = &tp_cuda_device_ops;
    CHECK(tp_stream_check_memory("t", NULL, TP_MEM_HOST, dv) == TP_OK, "host memory, no stream");
    CHECK(tp_stream_check_memory("t", s, TP_MEM_HOST, dv) == TP_OK, "host memory, host stream");
    CHECK(tp_stream_check_memory("t", &cuda, TP_MEM_CUDA, cd) == TP_OK, "CUDA memory, CUDA stream");
    CHECK(tp_stream_check_memory("t", &cuda, TP_MEM_HOST, dv) == TP_ERR_INVALID &&
              strstr(tp_last_error(), "t: the buffers are host memory and the stream is a cuda stream"),
          "host memory with a CUDA stream: %s", tp_last_error());
    CHECK(tp_stream_check_memory("t", NULL, TP_MEM_CUDA, cd) == TP_ERR_INVALID &&
              strstr(tp_last_error(), "cuda device memory (device cuda) and stream is NULL"),
          "CUDA memory with no stream: %s", tp_last_error());
    CHECK(tp_stream_check_memory("t", s, TP_MEM_CUDA, cd) == TP_ERR_INVALID &&
              strstr(tp_last_error(), "and the stream is a host stream: pass a cuda stream"),
          "CUDA memory with a host stream: %s", tp_last_error());
    CHECK(tp_stream_check_memory("t", s, TP_MEM_HIP, cd) == TP_ERR_INVALID, "HIP memory with a host stream");
    CHECK(tp_stream_destroy(s) == TP_OK, "destroy");
}

/* What a CUDA or HIP stream gets here: expect is the message's telling part, or NULL when the driver may be present. */
static void test_driver(tp_device_kind_t kind, const char *expect)
{
    if (expect == NULL) return;
    tp_stream_t *s = NULL;
    CHECK(tp_stream_create(kind, NULL, &s) == TP_ERR_UNSUPPORTED && s == NULL, "no %s stream",
          tp_device_kind_name(kind));
    CHECK(strstr(tp_last_error(), expect) != NULL, "the refusal says \"%s\": %s", expect, tp_last_error());
    char host[16];
    tp_mem_type_t ty = TP_MEM_HIP;
    CHECK(tp_device_of(host, &ty) == &tp_host_device_ops && ty == TP_MEM_HOST, "host memory stays the host's");
    CHECK(tp_stream_create(kind, NULL, &s) == TP_ERR_UNSUPPORTED && strstr(tp_last_error(), expect) != NULL,
          "the same answer again: %s", tp_last_error());
}

/* Buffers from tp_mem_alloc are the host's without a driver query (~90 ns each on a GPU host); once freed, or past
 * the allocations the lock-free table holds, the driver is asked again. */
static void test_known_host(const int *calls)
{
    enum { MANY = 40 };
    void *m[MANY] = {NULL};
    char stack[8];
    tp_mem_type_t ty = TP_MEM_CUDA;
    int ok = 1;
    for (int i = 0; i < MANY; i++) ok = ok && tp_mem_alloc(100, &m[i]) == TP_OK;
    CHECK(ok, "40 allocations: %s", tp_last_error());
    int before = calls[4];
    CHECK(tp_device_of((char *)m[0] + 99, &ty) == &tp_host_device_ops && ty == TP_MEM_HOST && calls[4] == before,
          "tp_mem_alloc memory is the host's, the driver not asked (%d queries)", calls[4] - before);
    CHECK(tp_device_of(stack, &ty) == &tp_host_device_ops && calls[4] == before + 1, "other memory is asked about");
    CHECK(tp_device_of(m[MANY - 1], &ty) == &tp_host_device_ops && ty == TP_MEM_HOST && calls[4] == before + 2,
          "an allocation past the table's is asked about, and is the host's");
    void *first = m[0];
    CHECK(tp_mem_free(first) == TP_OK, "free");
    m[0] = NULL;
    CHECK(tp_device_of(first, &ty) == &tp_host_device_ops && calls[4] == before + 3,
          "a freed allocation's address is asked about again (%d queries)", calls[4] - before);
    CHECK(tp_device_of(m[MANY - 1], &ty) == &tp_host_device_ops && calls[4] == before + 3,
          "the table takes in the next allocation when one is freed");
    for (int i = 0; i < MANY; i++) tp_mem_free(m[i]);
    CHECK(tp_device_of(m[1], &ty) == &tp_host_device_ops && calls[4] == before + 4, "all freed: asked again");
}

/* Whether p lies in the mapping /proc/self/maps names [heap]. */
static int in_heap_mapping(const void *p)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[512];
    int in = 0;
    while (f != NULL && !in && fgets(line, sizeof(line), f) != NULL) {
        unsigned long lo, hi;
        in = strstr(line, "[heap]") != NULL && sscanf(line, "%lx-%lx", &lo, &hi) == 2 && (uintptr_t)p >= lo &&
             (uintptr_t)p < hi;
    }
    if (f != NULL) fclose(f);
    return in;
}

/* The main thread's small malloc'd buffers lie in the brk heap: the host's without a query. Memory mapped
 * elsewhere is asked about. */
static void test_heap_host(const int *calls)
{
    char *small = malloc(64);
    void *mapped = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    tp_mem_type_t ty = TP_MEM_CUDA;
    int before = calls[4];
    if (small != NULL && in_heap_mapping(small))
        CHECK(tp_device_of(small + 63, &ty) == &tp_host_device_ops && ty == TP_MEM_HOST && calls[4] == before,
              "a small malloc'd buffer is the host's, the driver not asked (%d queries)", calls[4] - before);
    else printf("note: malloc(64) is not in the [heap] mapping here (another allocator?): its check is skipped\n");
    before = calls[4];
    CHECK(mapped != MAP_FAILED && tp_device_of(mapped, &ty) == &tp_host_device_ops && calls[4] == before + 1,
          "memory mapped elsewhere is asked about (%d queries)", calls[4] - before);
    free(small);
    if (mapped != MAP_FAILED) munmap(mapped, 4096);
}

static atomic_int churn_stop;
static void *churn(void *arg)
{
    (void)arg;
    while (!atomic_load(&churn_stop)) {
        void *p = NULL;
        if (tp_mem_alloc(4096, &p) == TP_OK) tp_mem_free(p);
    }
    return NULL;
}

/* While another thread makes and frees allocations, every answer stays right: device memory is CUDA's and a live
 * allocation the host's, whichever way each look goes. */
static void test_known_churn(char *arena)
{
    void *mine = NULL;
    pthread_t t;
    CHECK(tp_mem_alloc(64, &mine) == TP_OK && pthread_create(&t, NULL, churn, NULL) == 0, "start the churn");
    int wrong = 0;
    tp_mem_type_t ty;
    for (int i = 0; i < 200000; i++) {
        wrong += tp_device_of(arena + 8, &ty) != &tp_cuda_device_ops || ty != TP_MEM_CUDA;
        wrong += tp_device_of(mine, &ty) != &tp_host_device_ops || ty != TP_MEM_HOST;
    }
    atomic_store(&churn_stop, 1);
    pthread_join(t, NULL);
    CHECK(wrong == 0, "answers beside allocations made and freed: %d wrong", wrong);
    tp_mem_free(mine);
}

/* Against tests/fake_libcuda.c in mode "ok": a CUDA stream and device memory without a GPU, and the dispatcher's
 * refusal of every mismatch between a call's buffers and its stream. */
static void test_fake_cuda(void)
{
    tp_stream_t *cs = NULL, *hs = NULL;
    CHECK(tp_stream_create(TP_DEVICE_CUDA, NULL, &cs) == TP_OK && cs->kind == TP_DEVICE_CUDA &&
              cs->dev == &tp_cuda_device_ops && cs->priv != NULL && !cs->owned,
          "a CUDA stream on the fake driver: %s", tp_last_error());
    CHECK(tp_stream_create(TP_DEVICE_HOST, NULL, &hs) == TP_OK, "a host stream");
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    char *arena = lib != NULL ? dlsym(lib, "fake_cuda_arena") : NULL;
    int *calls = lib != NULL ? dlsym(lib, "fake_cuda_calls") : NULL;
    CHECK(arena != NULL && calls != NULL, "the fake driver is the one loaded");
    if (cs == NULL || arena == NULL || calls == NULL) return;
    char host[64];
    tp_mem_type_t ty = TP_MEM_HOST;
    CHECK(tp_device_of(arena + 8, &ty) == &tp_cuda_device_ops && ty == TP_MEM_CUDA, "device memory is CUDA's");
    CHECK(tp_device_of(host, &ty) == &tp_host_device_ops && ty == TP_MEM_HOST, "a host buffer stays the host's");
    test_known_host(calls);
    test_heap_host(calls);
    test_known_churn(arena);
    coll_comm_t cc = {.n = 1, .ops = {&tp_host_coll_ops}, .state = {NULL}};
    void *state;
    tp_coll_args_t a = {.call = TP_CALL_ALL_REDUCE};
    CHECK(tp_coll_choose(&cc, "t", &a, arena, arena + 64, &state) == NULL &&
              strstr(tp_last_error(), "t: the buffers are cuda device memory (device cuda) and stream is NULL"),
          "device memory with no stream: %s", tp_last_error());
    a = (tp_coll_args_t){.call = TP_CALL_ALL_REDUCE, .stream = hs};
    CHECK(tp_coll_choose(&cc, "t", &a, arena, arena + 64, &state) == NULL &&
              strstr(tp_last_error(), "the stream is a host stream: pass a cuda stream"),
          "device memory with a host stream: %s", tp_last_error());
    a = (tp_coll_args_t){.call = TP_CALL_ALL_REDUCE, .stream = cs};
    CHECK(tp_coll_choose(&cc, "t", &a, host, host + 32, &state) == NULL &&
              strstr(tp_last_error(), "the buffers are host memory and the stream is a cuda stream"),
          "host memory with a CUDA stream: %s", tp_last_error());
    a = (tp_coll_args_t){.call = TP_CALL_ALL_REDUCE, .stream = cs};
    CHECK(tp_coll_choose(&cc, "t", &a, arena, arena + 64, &state) == NULL &&
              strstr(tp_last_error(), "no collective provider takes cuda memory"),
          "device memory with its stream passes the stream check: %s", tp_last_error());
    a = (tp_coll_args_t){.call = TP_CALL_ALL_GATHERV, .stream = cs};
    CHECK(tp_coll_choose(&cc, "t", &a, NULL, NULL, &state) == NULL && a.device == &tp_cuda_device_ops &&
              a.mem_type == TP_MEM_CUDA && strstr(tp_last_error(), "no collective provider takes cuda memory"),
          "a call of no bytes (no buffer to ask) on a CUDA stream is the stream's: %s", tp_last_error());
    const tp_device_ops_t *d = &tp_cuda_device_ops;
    memcpy(arena, "abcdefg", 8);
    CHECK(d->stream_write64(cs, arena + 64, 1) == TP_OK && d->stream_wait64(cs, arena + 64, 1) == TP_OK &&
              d->stream_capturing(cs) == 0 && d->copy(arena + 128, arena, 8, cs) == TP_OK,
          "stream ops reach the driver");
    CHECK(calls[0] == 1 && calls[1] == 1 && calls[3] == 1 && calls[2] == 1 && strcmp(arena + 128, "abcdefg") == 0,
          "one call each (%d %d %d %d)", calls[0], calls[1], calls[2], calls[3]);
    CHECK(d->stream_write64(hs, arena, 1) == TP_ERR_INVALID && calls[0] == 1, "a host stream never reaches the driver");
    char bus[32];
    CHECK(d->stream_bus_id(cs, bus, sizeof(bus)) == TP_OK && strcmp(bus, "0000:3b:00.0") == 0,
          "the stream's GPU by PCI bus id: %s", bus);
    CHECK(tp_host_device_ops.stream_bus_id(hs, bus, sizeof(bus)) == TP_ERR_UNSUPPORTED && bus[0] == '\0',
          "a host stream has no GPU");
    CHECK(tp_stream_destroy(cs) == TP_OK && tp_stream_destroy(hs) == TP_OK, "destroy");
}

/* Against tests/fake_libamdhip64.c in mode "ok": a HIP stream, HIP memory, and reduce refused by name. */
static void test_fake_hip(void)
{
    tp_stream_t *st = NULL;
    CHECK(tp_stream_create(TP_DEVICE_HIP, NULL, &st) == TP_OK && st->kind == TP_DEVICE_HIP && !st->owned,
          "a HIP stream on the fake runtime: %s", tp_last_error());
    void *lib = dlopen("libamdhip64.so.7", RTLD_NOW | RTLD_NOLOAD);
    char *arena = lib != NULL ? dlsym(lib, "fake_hip_arena") : NULL;
    int *calls = lib != NULL ? dlsym(lib, "fake_hip_calls") : NULL;
    CHECK(arena != NULL && calls != NULL, "the fake runtime is the one loaded");
    if (st == NULL || arena == NULL || calls == NULL) return;
    char host[64];
    tp_mem_type_t ty = TP_MEM_HOST;
    const tp_device_ops_t *d = st->dev;
    CHECK(tp_device_of(arena + 8, &ty) == d && ty == TP_MEM_HIP, "device memory is HIP's");
    CHECK(tp_device_of(host, &ty) == &tp_host_device_ops && ty == TP_MEM_HOST, "a host buffer stays the host's");
    CHECK(tp_stream_check_memory("t", NULL, TP_MEM_HIP, d) == TP_ERR_INVALID, "HIP memory needs its stream");
    memcpy(arena, "abcdefg", 8);
    CHECK(d->stream_write64(st, arena + 64, 1) == TP_OK && d->stream_wait64(st, arena + 64, 1) == TP_OK &&
              d->stream_capturing(st) == 0 && d->copy(arena + 128, arena, 8, st) == TP_OK,
          "stream ops reach the runtime");
    CHECK(calls[0] == 1 && calls[1] == 1 && calls[2] == 1 && strcmp(arena + 128, "abcdefg") == 0, "once each");
    char bus[32];
    CHECK(d->stream_bus_id(st, bus, sizeof(bus)) == TP_OK && strcmp(bus, "0000:c1:00.0") == 0,
          "the stream's GPU by PCI bus id: %s", bus);
    const void *srcs[1] = {arena};
    CHECK(d->reduce(TP_F32, TP_SUM, arena, srcs, 1, 1, st) == TP_ERR_UNSUPPORTED &&
              strstr(tp_last_error(), "no reduce kernels for HIP memory"),
          "reduce on HIP memory is refused by name: %s", tp_last_error());
    CHECK(tp_stream_destroy(st) == TP_OK, "destroy");
}

static const char *absent(const char *soname, const char *msg)
{
    void *h = dlopen(soname, RTLD_NOW | RTLD_NOLOAD);
    if (h == NULL) h = dlopen(soname, RTLD_LAZY | RTLD_LOCAL);
    if (h == NULL) return msg;
    dlclose(h);
    return NULL;
}

/* The first buffer lookup loads the devices' libraries even when the buffer is known host memory, so that cost
 * stays in the first call (run first: nothing before has looked a buffer up). */
static void test_first_lookup_loads(void)
{
    char *heap = malloc(64);
    tp_mem_type_t ty;
    CHECK(tp_device_of(heap, &ty) == &tp_host_device_ops, "a heap buffer is the host's");
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    CHECK(lib != NULL, "the first lookup, of a heap buffer, loaded the CUDA library");
    if (lib != NULL) dlclose(lib);
    free(heap);
}

/* STREAM_UNIT_CUDA / STREAM_UNIT_HIP (tests/stream_drivers.sh): "ok" for a capable fake driver, else the refusal's
 * telling part; unset: the refusal of a host without the library, when the loader finds none. */
int main(void)
{
    const char *cuda = getenv("STREAM_UNIT_CUDA"), *hip = getenv("STREAM_UNIT_HIP");
    if (cuda != NULL && strcmp(cuda, "ok") == 0) test_first_lookup_loads();
    test_create_args();
    test_order_and_hold();
    test_values();
    test_events();
    test_capture_and_foreign();
    if (cuda != NULL && strcmp(cuda, "ok") == 0) test_fake_cuda();
    else test_driver(TP_DEVICE_CUDA, cuda != NULL ? cuda : absent("libcuda.so.1", "no CUDA driver on this host"));
    if (hip != NULL && strcmp(hip, "ok") == 0) test_fake_hip();
    else
        test_driver(TP_DEVICE_HIP,
                    hip != NULL
                        ? hip
                        : absent("libamdhip64.so.7",
                                 absent("libamdhip64.so.6", absent("libamdhip64.so", "no HIP runtime on this host"))));
    printf("stream_unit: %s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
