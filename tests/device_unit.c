/*
 * device_unit: the host device's copy and reduce against a reference folded here element by element, bit for bit,
 * for every type and op; and a test-only device and collective provider for a fake memory type, which the memory
 * query must pick for their buffers and only for those.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coll_dispatch.h"
#include "runtime_devices.h"
#include "runtime_dtype.h"

#include "host_reduce.h"
#include "reduce_ref.h"
#include "unit_check.h"

static const tp_dtype_t types[] = {TP_F32, TP_F64, TP_BF16, TP_F16, TP_I32, TP_I64};
static const tp_op_t ops[] = {TP_SUM, TP_MAX, TP_MIN};

/* Every type and op, 1 to 5 sources, counts around the device's blocks, misaligned, out of place and in place. */
static void test_host_reduce(void)
{
    const tp_device_ops_t *d = &tp_host_device_ops;
    static const size_t counts[] = {0, 1, 7, 8, 9, 16, 17, 32, 33, 48, 255, 256, 257, 1000}; /* to 64 B: by element */
    enum { MAXN = 5, MAXC = 1000 };
    static char srcbuf[MAXN][MAXC * 8 + 1], work[MAXN][MAXC * 8 + 1], want[MAXC * 8], out[MAXC * 8 + 1];
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++)
        for (size_t oi = 0; oi < 3; oi++)
            for (int n = 1; n <= MAXN; n++)
                for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
                    tp_dtype_t t = types[ti];
                    tp_op_t op = ops[oi];
                    size_t count = counts[ci], es = tp_dtype_size(t);
                    const void *srcs[MAXN], *wsrcs[MAXN];
                    for (int s = 0; s < n; s++) {
                        fill(t, srcbuf[s] + 1, count); /* odd addresses: user buffers need not be aligned */
                        srcs[s] = srcbuf[s] + 1;
                    }
                    for (size_t i = 0; i < count; i++) ref_element(t, op, want + i * es, srcs, n, i);
                    CHECK(d->reduce(t, op, out + 1, srcs, n, count, NULL) == TP_OK, "reduce");
                    for (size_t i = 0; i < count; i++)
                        if (!same_element(t, out + 1 + i * es, want + i * es)) {
                            CHECK(0, "%s %s n=%d count=%zu: element %zu differs", tp_dtype_name(t), tp_op_name(op), n,
                                  count, i);
                            break;
                        }
                    for (int k = 0; k < n; k++) { /* in place: dst is source k */
                        for (int s = 0; s < n; s++) {
                            memcpy(work[s] + 1, srcs[s], count * es);
                            wsrcs[s] = work[s] + 1;
                        }
                        CHECK(d->reduce(t, op, work[k] + 1, wsrcs, n, count, NULL) == TP_OK, "reduce in place");
                        for (size_t i = 0; i < count; i++)
                            if (!same_element(t, work[k] + 1 + i * es, want + i * es)) {
                                CHECK(0, "%s %s n=%d count=%zu into source %d: element %zu differs", tp_dtype_name(t),
                                      tp_op_name(op), n, count, k, i);
                                break;
                            }
                    }
                    if (failures > 20) return;
                }
}

/* Rank order is the contract: (1e8 + 1) - 1e8 is 0 in f32, and the device must not reorder it. */
static void test_host_order(void)
{
    float a[3] = {1e8f, 1.0f, -1e8f}, out = -1;
    const void *src[3] = {&a[0], &a[1], &a[2]};
    CHECK(tp_host_device_ops.reduce(TP_F32, TP_SUM, &out, src, 3, 1, NULL) == TP_OK && out == 0.0f,
          "f32 rank order: got %g", out);
}

static void test_host_copy(void)
{
    const tp_device_ops_t *d = &tp_host_device_ops;
    static uint8_t buf[8192], want[8192];
    static const size_t lens[] = {0, 1, 15, 64, 1000, 3000};
    static const long shifts[] = {0, 1, -1, 7, -7, 500, -500, 1000};
    for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++)
        for (size_t si = 0; si < sizeof(shifts) / sizeof(shifts[0]); si++) {
            size_t len = lens[li], src = 2048, dst = (size_t)((long)src + shifts[si]);
            for (size_t i = 0; i < sizeof(buf); i++) buf[i] = (uint8_t)next_rand();
            memcpy(want, buf, sizeof(buf));
            uint8_t tmp[3000]; /* the reference: through a separate buffer, so overlap cannot matter */
            for (size_t i = 0; i < len; i++) tmp[i] = want[src + i];
            for (size_t i = 0; i < len; i++) want[dst + i] = tmp[i];
            CHECK(d->copy(buf + dst, buf + src, len, NULL) == TP_OK, "copy");
            CHECK(memcmp(buf, want, sizeof(buf)) == 0, "copy of %zu bytes shifted by %ld (regions may overlap)", len,
                  shifts[si]);
        }
}

static void test_host_ops(void)
{
    const tp_device_ops_t *d = &tp_host_device_ops;
    CHECK(d->abi_version == TP_DEVICE_ABI && d->ops_size == sizeof(tp_device_ops_t) && strcmp(d->name, "host") == 0,
          "host device's ABI fields");
    CHECK(d->kind == TP_DEVICE_HOST && d->init() == TP_OK, "the host device serves host streams, needs no library");
    tp_device_event_t *ev = NULL;
    tp_stream_t *st = NULL;
    void *h = NULL, *dv = NULL;
    CHECK(tp_device_unsupported_stream(NULL, &ev) == TP_ERR_UNSUPPORTED &&
              tp_device_unsupported_init() == TP_ERR_UNSUPPORTED &&
              tp_device_unsupported_host_alloc(8, &h, &dv) == TP_ERR_UNSUPPORTED &&
              tp_device_unsupported_stream_create(NULL, &st) == TP_ERR_UNSUPPORTED &&
              tp_device_unsupported_stream_adopt(NULL, &st) == TP_ERR_UNSUPPORTED &&
              tp_device_unsupported_stream_sync(NULL) == TP_ERR_UNSUPPORTED &&
              tp_device_unsupported_value(NULL, &h, 1) == TP_ERR_UNSUPPORTED &&
              tp_device_unsupported_capturing(NULL) == TP_ERR_UNSUPPORTED && st == NULL && h == NULL,
          "the unsupported stubs refuse and set nothing");
    int local = 0;
    void *heap = malloc(16);
    tp_mem_type_t ty = TP_MEM_CUDA;
    CHECK(d->mem_query(&local, &ty) && ty == TP_MEM_HOST, "a stack pointer is host memory");
    ty = TP_MEM_CUDA;
    CHECK(d->mem_query(heap, &ty) && ty == TP_MEM_HOST, "a heap pointer is host memory");
    free(heap);
}

/* ---- a test-only device for a memory type no real device has: the pointers of its own arena ---- */

#define FAKE_MEM ((tp_mem_type_t)TP_MEM_TYPES)
static char arena[4096], harena[4096];
static int copies[2], reduces[2], fake_calls; /* by arena: the fake one, the host one */
static tp_coll_args_t fake_seen;
static tp_status_t fake_result = TP_OK;

static int fake_query(const void *ptr, tp_mem_type_t *type)
{
    if ((const char *)ptr < arena || (const char *)ptr >= arena + sizeof(arena)) return 0;
    *type = FAKE_MEM;
    return 1;
}
static int arena_of(const void *p) { return (const char *)p >= harena && (const char *)p < harena + sizeof(harena); }
static tp_status_t fake_copy(void *dst, const void *src, size_t len, tp_stream_t *stream)
{
    copies[arena_of(dst)]++;
    return tp_host_device_ops.copy(dst, src, len, stream);
}
static tp_status_t fake_reduce(tp_dtype_t dtype, tp_op_t op, void *dst, const void *const *srcs, int n, size_t count,
                               tp_stream_t *stream)
{
    reduces[arena_of(dst)]++;
    return tp_host_device_ops.reduce(dtype, op, dst, srcs, n, count, stream);
}
static const tp_device_ops_t fake_device = {
    .abi_version = TP_DEVICE_ABI,
    .ops_size = sizeof(tp_device_ops_t),
    .name = "fake",
    .kind = (tp_device_kind_t)7, /* no stream kind: tp_stream_create never finds it */
    .init = tp_device_unsupported_init,
    .mem_query = fake_query,
    .copy = fake_copy,
    .reduce = fake_reduce,
    .host_alloc = tp_device_unsupported_host_alloc,
    .host_free = tp_device_unsupported_host_free,
    .stream_create = tp_device_unsupported_stream_create,
    .stream_adopt = tp_device_unsupported_stream_adopt,
    .stream_destroy = tp_device_unsupported_stream_destroy,
    .stream_sync = tp_device_unsupported_stream_sync,
    .stream_write64 = tp_device_unsupported_value,
    .stream_wait64 = tp_device_unsupported_value,
    .stream_capturing = tp_device_unsupported_capturing,
    .event_record = tp_device_unsupported_stream,
    .stream_wait = tp_device_unsupported_stream,
    .event_sync = tp_device_unsupported_stream,
    .event_release = tp_device_unsupported_stream,
    .stream_bus_id = tp_device_unsupported_bus_id,
};

/* A provider for the fake memory type that takes only all_reduce: one rank, the fold through the call's device. */
static tp_status_t fake_all_reduce(void *state, const tp_coll_args_t *a)
{
    (void)state;
    fake_calls++;
    fake_seen = *a;
    if (fake_result != TP_OK) return fake_result;
    const void *srcs[1] = {a->send};
    return a->device->reduce(a->dtype, a->op, a->recv, srcs, 1, a->count, a->stream);
}
static tp_status_t fake_comm_create(tp_comm_t *comm, void **state)
{
    *state = comm;
    return TP_OK;
}
static void fake_comm_destroy(void *state) { (void)state; }
static const tp_coll_ops_t fake_coll = {
    .abi_version = TP_COLL_ABI,
    .ops_size = sizeof(tp_coll_ops_t),
    .name = "fake",
    .mem_types = TP_MEM_BIT(FAKE_MEM),
    .calls = TP_CALL_BIT(TP_CALL_ALL_REDUCE),
    .comm_create = fake_comm_create,
    .comm_destroy = fake_comm_destroy,
    .barrier = tp_coll_unsupported,
    .broadcast = tp_coll_unsupported,
    .all_gather = tp_coll_unsupported,
    .all_gatherv = tp_coll_unsupported,
    .all_reduce = fake_all_reduce,
    .reduce_scatter = tp_coll_unsupported,
    .all_to_all = tp_coll_unsupported,
    .send = tp_coll_unsupported,
    .recv = tp_coll_unsupported,
    .exchange = tp_coll_unsupported,
};

static void test_device_choice(void)
{
    char host_buf[16];
    tp_mem_type_t ty;
    CHECK(tp_device_of(arena, &ty) == &tp_host_device_ops && ty == TP_MEM_HOST, "before: the host device has all");
    tp_device_ops_t old_abi = fake_device;
    old_abi.abi_version = TP_DEVICE_ABI + 1;
    CHECK(tp_device_add(&old_abi) == TP_ERR_INVALID, "a device of another ABI is refused");
    old_abi = fake_device;
    old_abi.ops_size = sizeof(tp_device_ops_t) - 8;
    CHECK(tp_device_add(&old_abi) == TP_ERR_INVALID, "a device of another ops size is refused");
    CHECK(tp_device_add(&fake_device) == TP_OK, "add the fake device");
    CHECK(tp_device_of(arena + 100, &ty) == &fake_device && ty == FAKE_MEM, "the arena is the fake device's");
    CHECK(tp_device_of(arena + sizeof(arena) - 1, &ty) == &fake_device, "the arena's last byte too");
    CHECK(tp_device_of(host_buf, &ty) == &tp_host_device_ops && ty == TP_MEM_HOST, "a stack buffer stays host");
    CHECK(tp_device_of(arena + sizeof(arena), &ty) == &tp_host_device_ops, "one past the arena is host");
}

/* A comm made by hand (no world): the dispatcher's choice and the public call, without the host engine. */
static void test_provider_choice(void)
{
    coll_comm_t cc = {.n = 2, .ops = {&fake_coll, &tp_host_coll_ops}, .state = {&cc, NULL}};
    tp_comm_t comm = {.rank = 0, .size = 1, .coll_state = &cc};
    char host_buf[64];
    void *state = NULL;
    tp_coll_args_t a = {.call = TP_CALL_ALL_REDUCE};
    CHECK(tp_coll_choose(&cc, "t", &a, arena, arena + 64, &state) == &fake_coll && state == &cc &&
              a.device == &fake_device && a.mem_type == FAKE_MEM,
          "fake memory goes to the fake provider with the fake device");
    a = (tp_coll_args_t){.call = TP_CALL_ALL_REDUCE};
    CHECK(tp_coll_choose(&cc, "t", &a, host_buf, host_buf, &state) == &tp_host_coll_ops && state == NULL &&
              a.device == &tp_host_device_ops && a.mem_type == TP_MEM_HOST,
          "host memory goes to the host engine");
    a = (tp_coll_args_t){.call = TP_CALL_ALL_REDUCE};
    CHECK(tp_coll_choose(&cc, "t", &a, arena, host_buf, &state) == NULL, "buffers on two devices are refused");
    a = (tp_coll_args_t){.call = TP_CALL_BROADCAST};
    CHECK(tp_coll_choose(&cc, "t", &a, arena, NULL, &state) == NULL, "a call no provider takes for the type");
    a = (tp_coll_args_t){.call = TP_CALL_RECV};
    CHECK(tp_coll_choose(&cc, "t", &a, NULL, host_buf, &state) == &tp_host_coll_ops, "recv: by its one buffer");

    /* through tp_all_reduce: the fake provider folds through the fake device */
    int32_t in[4] = {1, -2, 3, 4}, got[4];
    memcpy(arena, in, sizeof(in));
    fake_calls = reduces[0] = 0;
    CHECK(tp_all_reduce(&comm, arena, arena + 1024, 4, TP_I32, TP_MAX, NULL) == TP_OK, "tp_all_reduce on fake");
    memcpy(got, arena + 1024, sizeof(got));
    CHECK(fake_calls == 1 && reduces[0] == 1 && memcmp(got, in, sizeof(in)) == 0, "the fake path ran (%d, %d)",
          fake_calls, reduces[0]);
    CHECK(fake_seen.count == 4 && fake_seen.dtype == TP_I32 && fake_seen.op == TP_MAX && fake_seen.send == arena &&
              fake_seen.recv == arena + 1024 && fake_seen.device == &fake_device,
          "the provider got the call's arguments");
    CHECK(tp_all_reduce(&comm, arena, arena + 1024, 4, TP_I32, TP_SUM, (tp_stream_t *)arena) == TP_ERR_INVALID &&
              fake_calls == 1,
          "a stream tp_stream_create did not make is refused before any provider");
    tp_stream_t *hs = NULL;
    CHECK(tp_stream_create(TP_DEVICE_HOST, NULL, &hs) == TP_OK, "a host stream");
    CHECK(tp_all_reduce(&comm, arena, arena + 1024, 4, TP_I32, TP_SUM, hs) == TP_ERR_UNSUPPORTED && fake_calls == 1,
          "a stream no provider takes is refused before any provider");
    CHECK(tp_stream_destroy(hs) == TP_OK, "destroy the host stream");
    CHECK(tp_all_reduce(&comm, arena, arena + 1024, 4, TP_I32, TP_SUM, hs) == TP_ERR_INVALID && fake_calls == 1 &&
              strstr(tp_last_error(), "tp_all_reduce: stream") && strstr(tp_last_error(), "not a live stream"),
          "a destroyed stream is refused by name: %s", tp_last_error());
    CHECK(tp_all_reduce(&comm, arena, host_buf, 4, TP_I32, TP_SUM, NULL) == TP_ERR_UNSUPPORTED && fake_calls == 1,
          "mixed buffers are refused before any provider");
    fake_result = TP_COLL_DECLINED;
    CHECK(tp_all_reduce(&comm, arena, arena + 1024, 4, TP_I32, TP_SUM, NULL) == TP_ERR_UNSUPPORTED &&
              strstr(tp_last_error(), "provider fake cannot take") != NULL && fake_calls == 2,
          "a decline with no provider left is refused naming the one that declined: %s", tp_last_error());
    fake_result = TP_ERR_UNSUPPORTED;
    tp_log(TP_LOG_ERROR, "unit", "the provider's own refusal");
    CHECK(tp_all_reduce(&comm, arena, arena + 1024, 4, TP_I32, TP_SUM, NULL) == TP_ERR_UNSUPPORTED &&
              strstr(tp_last_error(), "the provider's own refusal") != NULL && fake_calls == 3,
          "a provider's refusal (not a decline) ends the call with its own message: %s", tp_last_error());
    fake_result = TP_ERR_PEER_FAILED;
    CHECK(tp_all_reduce(&comm, arena, arena + 1024, 4, TP_I32, TP_SUM, NULL) == TP_ERR_PEER_FAILED, "a failure");
    fake_result = TP_OK;
    CHECK(tp_all_reduce(&comm, arena, arena + 1024, 4, TP_I32, TP_SUM, NULL) == TP_ERR_PEER_FAILED && fake_calls == 4,
          "a comm that failed a call fails the next alike, without calling the provider");
    CHECK(tp_coll_unsupported(NULL, &a) == TP_ERR_UNSUPPORTED, "the shared unsupported stub");
}

/* ---- a counting device that claims another arena, of host memory: the host engine must go through it ---- */

static int counted_query(const void *ptr, tp_mem_type_t *type)
{
    if ((const char *)ptr < harena || (const char *)ptr >= harena + sizeof(harena)) return 0;
    *type = TP_MEM_HOST;
    return 1;
}

/* One rank's calls on the host engine: every copy and fold of the user's buffers goes to the buffers' device. */
static void test_engine_uses_device(void)
{
    static tp_device_ops_t counted; /* listed from here on: it must outlive this function */
    counted = fake_device;
    counted.name = "counted";
    counted.mem_query = counted_query;
    int zero = 0;
    tp_world_t world = {.part_bytes = 65536};
    tp_comm_t comm = {.world = &world, .rank = 0, .size = 1, .world_ranks = &zero, .comm_id = 1};
    tp_coll_ops_t old_abi = fake_coll;
    old_abi.ops_size = sizeof(tp_coll_ops_t) - 8;
    CHECK(tp_coll_provider_add(&old_abi) == TP_ERR_INVALID, "a provider of another ops size is refused");
    old_abi = fake_coll;
    old_abi.abi_version = TP_COLL_ABI + 1;
    CHECK(tp_coll_provider_add(&old_abi) == TP_ERR_INVALID, "a provider of another ABI is refused");
    CHECK(tp_coll_provider_add(&fake_coll) == TP_OK, "add the fake provider");
    CHECK(tp_coll_comm_init(&comm) == TP_OK, "a one-rank comm on the host engine");
    coll_comm_t *cc = comm.coll_state;
    CHECK(cc->n == 4 && cc->ops[0] == &fake_coll && cc->state[0] == &comm && cc->ops[2] == &tp_host_coll_ops &&
              tp_coll_host_state(cc) == cc->state[2] && strcmp(cc->ops[1]->name, "nccl") == 0 &&
              strcmp(cc->ops[3]->name, "staged") == 0,
          "the comm has a state in every provider, the added one first, the list's after it (nccl, host, staged)");
    CHECK(tp_device_add(&counted) == TP_OK, "add the counting device");
    int32_t in[4] = {5, -6, 7, 8}, got[4];
    char *send = harena, *recv = harena + 1024;
    memcpy(send, in, sizeof(in));
    CHECK(tp_all_reduce(&comm, send, recv, 4, TP_I32, TP_SUM, NULL) == TP_OK && reduces[1] == 1,
          "all_reduce folds through the device (%d)", reduces[1]);
    CHECK(tp_reduce_scatter(&comm, send, recv + 64, 4, TP_I32, TP_SUM, NULL) == TP_OK && reduces[1] == 2,
          "reduce_scatter folds through the device (%d)", reduces[1]);
    CHECK(tp_all_gather(&comm, send, recv + 128, 4, TP_I32, NULL) == TP_OK && copies[1] == 1,
          "all_gather copies through the device (%d)", copies[1]);
    CHECK(tp_all_gatherv(&comm, send, recv + 192, (const size_t[]){4}, TP_I32, NULL) == TP_OK && copies[1] == 2,
          "all_gatherv copies through the device (%d)", copies[1]);
    CHECK(tp_all_to_all(&comm, send, recv + 256, 4, TP_I32, NULL) == TP_OK && copies[1] == 3,
          "all_to_all copies through the device (%d)", copies[1]);
    CHECK(tp_exchange(&comm, send, recv + 320, 4, TP_I32, 0, NULL) == TP_OK && copies[1] == 4,
          "exchange with itself copies through the device (%d)", copies[1]);
    for (int k = 0; k < 6; k++) {
        memcpy(got, recv + 64 * k, sizeof(got));
        CHECK(memcmp(got, in, sizeof(in)) == 0, "one rank's result %d is its own input", k);
    }
    char host_a[16] = "abcdefghijklmno", host_b[16];
    CHECK(tp_all_gather(&comm, host_a, host_b, 16, TP_BYTES, NULL) == TP_OK && copies[1] == 4 &&
              memcmp(host_a, host_b, 16) == 0,
          "other host memory stays with the host device");
    tp_coll_comm_fini(&comm);
    CHECK(comm.coll_state == NULL, "fini clears the comm's state");
}

int main(void)
{
    test_host_ops();
    test_host_order();
    test_host_copy();
    /* the reductions with the instruction set this CPU gives them, then with the baseline's: the same bits */
    const char *isa = tp_host_reduce_isa();
    test_host_reduce();
    tp_host_reduce_baseline(1);
    CHECK(strcmp(tp_host_reduce_isa(), "baseline") == 0, "the baseline reductions can be forced");
    test_host_reduce();
    tp_host_reduce_baseline(0);
    printf("device_unit: host reductions checked with %s%s\n", isa, strcmp(isa, "baseline") ? " and baseline" : "");
    test_device_choice();
    test_provider_choice();
    test_engine_uses_device();
    printf("device_unit: %s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
