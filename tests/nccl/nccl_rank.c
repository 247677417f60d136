/*
 * nccl_rank: the NCCL provider's logic against tests/nccl/fake_nccl.c (TP_NCCL_LIBRARY), with "CUDA memory" that a
 * fake device claims (host memory in an arena). Modes:
 *   check   every call on "CUDA" buffers equals the same call on host buffers (libtp's host engine, rank-order
 *           sums) bit for bit, out of place and in place; p2p first (pair communicators), then collectives
 *   order   prints the all-reduce of 1, 1e8, -1e8 (ranks 0, 1, 2): 0 in rank order, 1 in the fake NCCL's order
 *   loop    all-reduces until killed (prints ready after the first); rank NCCL_DIE_RANK SIGKILLs itself after 20
 *   one     a single all-reduce; prints its status (declines, refusals, injected errors)
 *   pair    rank 0 sends to rank 1; prints the status of each side
 * FAKE_GPU_BUS: the PCI bus id the fake device gives for its stream (unset: not known).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include "nccl_cases.h"
#include "runtime_devices.h"
#include "tp.h"
#include "tp_provider.h"

static uint8_t *arena;
static size_t arena_len, arena_used;
static int events_recorded;

static int fake_query(const void *p, tp_mem_type_t *type)
{
    if ((const uint8_t *)p < arena || (const uint8_t *)p >= arena + arena_len) return 0;
    *type = TP_MEM_CUDA;
    return 1;
}

static tp_status_t fake_copy(void *dst, const void *src, size_t len, tp_stream_t *stream)
{
    (void)stream;
    memmove(dst, src, len);
    return TP_OK;
}

static tp_status_t fake_reduce(tp_dtype_t t, tp_op_t op, void *dst, const void *const *srcs, int k, size_t count,
                               tp_stream_t *stream)
{
    (void)stream;
    return tp_host_device_ops.reduce(t, op, dst, srcs, k, count, NULL);
}

static char event_token;

static tp_status_t fake_record(tp_stream_t *stream, tp_device_event_t **e)
{
    (void)stream;
    *e = (tp_device_event_t *)&event_token;
    events_recorded++;
    return TP_OK;
}

static tp_status_t fake_event_op(tp_stream_t *stream, tp_device_event_t **e)
{
    (void)stream;
    return *e == (tp_device_event_t *)&event_token ? TP_OK : TP_ERR_INVALID;
}

static tp_status_t fake_release(tp_stream_t *stream, tp_device_event_t **e)
{
    (void)stream;
    *e = NULL;
    return TP_OK;
}

static const tp_device_ops_t fake_cuda;

/* The engine's "CUDA stream": native is whatever the engine gave, which the fake NCCL logs. */
static tp_status_t fake_adopt(void *native, tp_stream_t **out)
{
    tp_stream_t *s = calloc(1, sizeof(*s));
    if (s == NULL) return TP_ERR_NO_MEMORY;
    *s = (tp_stream_t){.kind = TP_DEVICE_CUDA, .dev = &fake_cuda, .native = native};
    *out = s;
    return TP_OK;
}

static void fake_stream_destroy(tp_stream_t *s) { free(s); }

static tp_status_t fake_bus_id(tp_stream_t *s, char *out, size_t len)
{
    const char *bus = getenv("FAKE_GPU_BUS");
    if (bus == NULL) return tp_device_unsupported_bus_id(s, out, len);
    snprintf(out, len, "%s", bus);
    return TP_OK;
}

static const tp_device_ops_t fake_cuda = {
    .abi_version = TP_DEVICE_ABI,
    .ops_size = sizeof(tp_device_ops_t),
    .name = "fakecuda",
    .kind = TP_DEVICE_CUDA,
    .init = tp_device_init_none,
    .host_alloc = tp_device_unsupported_host_alloc,
    .host_free = tp_device_unsupported_host_free,
    .stream_create = tp_device_unsupported_stream_create,
    .stream_adopt = fake_adopt,
    .stream_destroy = fake_stream_destroy,
    .stream_sync = tp_device_unsupported_stream_sync,
    .stream_write64 = tp_device_unsupported_value,
    .stream_wait64 = tp_device_unsupported_value,
    .stream_capturing = tp_device_unsupported_capturing,
    .mem_query = fake_query,
    .copy = fake_copy,
    .reduce = fake_reduce,
    .event_record = fake_record,
    .stream_wait = fake_event_op,
    .event_sync = fake_event_op,
    .event_release = fake_release,
    .stream_bus_id = fake_bus_id,
};

static tp_stream_t *STREAM;

static void *dalloc(size_t len)
{
    void *p = arena + arena_used;
    arena_used += (len + 63) & ~(size_t)63;
    if (arena_used > arena_len) {
        fprintf(stderr, "nccl_rank: arena too small\n");
        exit(2);
    }
    return p;
}

static void arena_reset(void) { arena_used = 0; }
static void arena_put(void *dev, const void *host, size_t len) { memcpy(dev, host, len); }
static void arena_get(void *host, const void *dev, size_t len) { memcpy(host, dev, len); }
static void arena_sync(tp_stream_t *stream) { (void)stream; }
static const cases_mem_t arena_mem = {arena_reset, dalloc, arena_put, arena_get, arena_sync};

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "check";
    arena_len = 64u << 20;
    arena = malloc(arena_len);
    if (tp_device_add(&fake_cuda) != TP_OK) return 2;
    tp_comm_t *w;
    tp_status_t s = tp_init(NULL, &w);
    if (s != TP_OK) return 2;
    if (tp_stream_create(TP_DEVICE_CUDA, (void *)(uintptr_t)0x5eed, &STREAM) != TP_OK) return 2;
    me = tp_comm_rank(w);
    n = tp_comm_size(w);
    int rc = 0;
    if (strcmp(mode, "check") == 0) {
        rc = check(&arena_mem, STREAM, w);
        printf("nccl_rank %d: %d scratch events\n", me, events_recorded);
    } else if (strcmp(mode, "order") == 0) {
        float *v = dalloc(sizeof(float));
        *v = me == 0 ? 1.0f : me == 1 ? 1e8f : me == 2 ? -1e8f : 0.0f;
        s = tp_all_reduce(w, v, v, 1, TP_F32, TP_SUM, STREAM);
        printf("nccl_rank %d: order sum %g (%s)\n", me, (double)*v, tp_status_string(s));
        rc = s != TP_OK;
    } else if (strcmp(mode, "loop") == 0) {
        float *v = dalloc(4096);
        int die = getenv("NCCL_DIE_RANK") ? atoi(getenv("NCCL_DIE_RANK")) : -1;
        for (long i = 0; i < 100000000L; i++) {
            if (i == 1) printf("ready\n"), fflush(stdout);
            if (i == 20 && me == die) raise(SIGKILL);
            s = tp_all_reduce(w, v, v, 1024, TP_F32, TP_SUM, STREAM);
            if (s != TP_OK) break;
        }
        printf("nccl_rank %d: loop ended: %s\n", me, tp_status_string(s));
        rc = 1;
    } else if (strcmp(mode, "pair") == 0 || strcmp(mode, "onepair") == 0) { /* onepair: a collective first */
        float *v = dalloc(4096);
        if (mode[0] == 'o') {
            s = tp_all_reduce(w, v, v, 1024, TP_F32, TP_SUM, STREAM);
            printf("nccl_rank %d: one: %s (%s)\n", me, tp_status_string(s), tp_last_error());
        }
        s = me == 0 ? tp_send(w, v, 16, TP_F32, 1, STREAM) : me == 1 ? tp_recv(w, v, 16, TP_F32, 0, STREAM) : TP_OK;
        printf("nccl_rank %d: %s: %s (%s)\n", me, mode, tp_status_string(s), tp_last_error());
    } else {
        float *v = dalloc(4096);
        for (int i = 0; i < (argc > 2 ? atoi(argv[2]) : 1) && s == TP_OK; i++)
            s = tp_all_reduce(w, v, v, 1024, TP_F32, TP_SUM, strcmp(mode, "nostream") == 0 ? NULL : STREAM);
        printf("nccl_rank %d: %s: %s (%s)\n", me, mode, tp_status_string(s), tp_last_error());
        rc = 0; /* the status is the result: an exit status would have tprun end the ranks still printing theirs */
    }
    tp_stream_destroy(STREAM);
    tp_finalize(w);
    return rc;
}
