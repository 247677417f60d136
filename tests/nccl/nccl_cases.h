/*
 * nccl_cases.h: every call on device buffers against the same call on host buffers (the host engine's rank-order
 * sums), bit for bit; shared by tests/nccl/nccl_rank (fake NCCL, fake device) and tests/gpu/nccl_gpu (real ones).
 * The includer defines me, n, failures and a cases_mem_t for its device memory.
 */
#ifndef NCCL_CASES_H
#define NCCL_CASES_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tp.h"

/* The includer's device memory: a block for one case (freed by the next reset), copies in and out, a wait. */
typedef struct cases_mem {
    void (*reset)(void);
    void *(*alloc)(size_t len);
    void (*put)(void *dev, const void *host, size_t len);
    void (*get)(void *host, const void *dev, size_t len);
    void (*sync)(tp_stream_t *stream);
} cases_mem_t;

static int me, n, failures;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x ^ (x >> 29);
}

/* Values whose float sums depend on the order (wide exponents, mixed signs). */
static void fill(tp_dtype_t t, void *buf, size_t count, uint64_t seed)
{
    uint8_t *p = buf;
    for (size_t i = 0; i < count; i++) {
        uint64_t h = mix(seed * 1000003u + (uint64_t)me * 7919u + i);
        switch (t) {
        case TP_F32: {
            float f = (float)ldexp((double)(int32_t)h, (int)(h >> 59) * 3 - 40);
            memcpy(p + 4 * i, &f, 4);
            break;
        }
        case TP_F64: {
            double d = ldexp((double)(int64_t)h, (int)(h >> 58) * 2 - 90);
            memcpy(p + 8 * i, &d, 8);
            break;
        }
        case TP_BF16:
        case TP_F16: {
            uint16_t v = (uint16_t)((h & 0x83ff) | ((10 + (h >> 60)) << 10)); /* normal halves; bf16 small ones */
            memcpy(p + 2 * i, &v, 2);
            break;
        }
        default: memcpy(p + tp_dtype_size(t) * i, &h, tp_dtype_size(t));
        }
    }
}

typedef enum { ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER, ALL_GATHERV, BROADCAST, ALL_TO_ALL, EXCHANGE, RING } call_t;
static const char *const call_names[] = {"all_reduce", "reduce_scatter", "all_gather", "all_gatherv",
                                         "broadcast",  "all_to_all",     "exchange",   "send/recv ring"};

/* One call on buf (in and out laid out as the call needs); inplace picks the in-place form. */
static tp_status_t run(tp_comm_t *w, call_t c, tp_dtype_t t, tp_op_t op, size_t count, int inplace, uint8_t *in,
                       uint8_t *out, tp_stream_t *s)
{
    size_t es = tp_dtype_size(t), b = count * es;
    size_t counts[64];
    for (int p = 0; p < n; p++) counts[p] = p == 1 ? 0 : count + (size_t)p;
    switch (c) {
    case ALL_REDUCE: return tp_all_reduce(w, in, inplace ? in : out, count, t, op, s);
    case REDUCE_SCATTER: return tp_reduce_scatter(w, in, inplace ? in + (size_t)me * b : out, count, t, op, s);
    case ALL_GATHER:
        return tp_all_gather(w, inplace == 2 ? out : inplace ? out + (size_t)me * b : in, out, count, t, s);
    case ALL_GATHERV: {
        size_t off = 0;
        for (int p = 0; p < me; p++) off += counts[p] * es;
        return tp_all_gatherv(w, inplace ? out + off : in, out, counts, t, s);
    }
    case BROADCAST: return tp_broadcast(w, in, count, t, 1 % n, s);
    case ALL_TO_ALL: return tp_all_to_all(w, in, inplace ? in : out, count, t, s);
    case EXCHANGE: return me < (n & ~1) ? tp_exchange(w, in, inplace ? in : out, count, t, me ^ 1, s) : TP_OK;
    case RING: { /* one way round, then back: every pair's sends and receives stay in step (in-place exchanges) */
        if (n == 1) return TP_OK;
        tp_status_t st = TP_OK;
        for (int dir = 1; dir >= -1 && st == TP_OK; dir -= 2) {
            int to = (me + n + dir) % n, from = (me + n - dir) % n;
            uint8_t *dst = out + (dir < 0 ? b : 0);
            if (me % 2 == 0) st = tp_send(w, in, count, t, to, s);
            if (st == TP_OK) st = tp_recv(w, dst, count, t, from, s);
            if (st == TP_OK && me % 2 == 1) st = tp_send(w, in, count, t, to, s);
        }
        return st;
    }
    }
    return TP_ERR_INVALID;
}

/* One call on device buffers and on host buffers, from the same inputs: every byte of both buffers must agree (the
 * in-place forms leave their result in the input). */
static void one_case(const cases_mem_t *m, tp_stream_t *stream, tp_comm_t *w, call_t c, tp_dtype_t t, tp_op_t op,
                     size_t count, int inplace)
{
    size_t es = tp_dtype_size(t), len = count * es * (size_t)n + (count + (size_t)n) * es * (size_t)n + 64;
    uint8_t *hin = calloc(1, len), *hout = calloc(1, len), *rin = calloc(1, len), *rout = calloc(1, len);
    m->reset();
    uint8_t *din = m->alloc(len), *dout = m->alloc(len);
    fill(t, hin, len / es, (uint64_t)c * 131 + count);
    for (size_t i = 0; op != TP_SUM && t == TP_F32 && i < len / 4; i += 5) { /* zeros of both signs, NaNs */
        float z = me % 2 ? -0.0f : 0.0f;
        uint32_t nan = 0x7fc00000u | (uint32_t)me;
        if (i % 3 == 0) memcpy(hin + 4 * i, &nan, 4);
        else memcpy(hin + 4 * i, &z, 4);
    }
    memcpy(hout, hin, len); /* the in-place gathers read their own block from the output */
    m->put(din, hin, len);
    m->put(dout, hin, len);
    tp_status_t sh = run(w, c, t, op, count, inplace, hin, hout, NULL);
    tp_status_t sd = run(w, c, t, op, count, inplace, din, dout, stream);
    m->sync(stream);
    m->get(rin, din, len);
    m->get(rout, dout, len);
    int same = memcmp(hin, rin, len) == 0 && memcmp(hout, rout, len) == 0;
    if (sh != TP_OK || sd != TP_OK || !same) {
        fprintf(stderr, "nccl check %d: FAIL %s type %d op %d count %zu%s: host %s, device %s, %s\n", me, call_names[c],
                (int)t, (int)op, count,
                inplace == 2 ? " overlapping"
                : inplace    ? " in place"
                             : "",
                tp_status_string(sh), tp_status_string(sd), same ? "same bits" : "bits differ");
        failures++;
    }
    free(hin);
    free(hout);
    free(rin);
    free(rout);
}

static int check(const cases_mem_t *m, tp_stream_t *stream, tp_comm_t *w)
{
    static const size_t sizes[] = {1, 7, 1000, 70001};
    static const tp_dtype_t types[] = {TP_F32, TP_BF16, TP_F16, TP_F64, TP_I32, TP_I64};
    int cases = 0;
    /* Point-to-point first: no collective has made the comm's communicator yet, so pairs get their own. */
    for (int k = 0; k < 4; k++, cases += 2) {
        one_case(m, stream, w, RING, TP_F32, TP_SUM, sizes[k], 0);
        one_case(m, stream, w, EXCHANGE, TP_BYTES, TP_SUM, sizes[k], k % 2);
    }
    for (int k = 0; k < 4; k++)
        for (int ti = 0; ti < 6; ti++)
            for (int ip = 0; ip < 2; ip++, cases += 3) {
                one_case(m, stream, w, ALL_REDUCE, types[ti], ti % 3 == 2 ? TP_MAX : TP_SUM, sizes[k], ip);
                one_case(m, stream, w, REDUCE_SCATTER, types[ti], TP_SUM, sizes[k], ip);
                one_case(m, stream, w, ALL_GATHER, types[ti], TP_SUM, sizes[k], ip);
            }
    for (int k = 0; k < 4; k++)
        for (int ip = 0; ip < 2; ip++, cases += 4) {
            one_case(m, stream, w, ALL_GATHERV, TP_F32, TP_SUM, sizes[k], ip);
            one_case(m, stream, w, BROADCAST, TP_I32, TP_SUM, sizes[k], 0);
            one_case(m, stream, w, ALL_TO_ALL, TP_BF16, TP_SUM, sizes[k], ip);
            one_case(m, stream, w, EXCHANGE, TP_F64, TP_SUM, sizes[k], ip);
        }
    /* f32 max and min with NaNs and zeros of both signs: libtp's rules (first NaN, first zero), not the library's */
    for (int k = 0; k < 4; k++, cases += 2) {
        one_case(m, stream, w, ALL_REDUCE, TP_F32, TP_MAX, sizes[k], k % 2);
        one_case(m, stream, w, REDUCE_SCATTER, TP_F32, TP_MIN, sizes[k], k % 2);
    }
    /* all_gather whose send overlaps recv away from this rank's block (staged through scratch) */
    for (int k = 0; k < 4; k++, cases++) one_case(m, stream, w, ALL_GATHER, TP_I64, TP_SUM, sizes[k], 2);
    printf("nccl check %d: %d cases, %d failures\n", me, cases, failures);
    return failures ? 1 : 0;
}

#endif
