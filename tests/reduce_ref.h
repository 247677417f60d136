/* reduce_ref.h: the reference for reductions, folded here element by element in each type's documented arithmetic
 * (rank order; bf16 and f16 in f32, rounded once), the inputs that exercise it, and the comparison. */
#ifndef REDUCE_REF_H
#define REDUCE_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "f16_ref.h"
#include "tp.h"

static uint64_t rng = 88172645463325252ull;
static inline uint64_t next_rand(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return rng;
}

/* f32 to bf16, rounded to nearest even: the remainder below the kept 16 bits against half. */
static inline uint16_t ref_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t upper = u >> 16, lower = u & 0xffffu;
    if (lower > 0x8000u || (lower == 0x8000u && (upper & 1u))) upper++;
    return (uint16_t)upper;
}
static inline float ref_from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline double fold(tp_op_t op, double acc, double x)
{
    if (op == TP_SUM) return acc + x;
    if (isnan(acc)) return acc;
    if (isnan(x)) return x;
    return op == TP_MAX ? (x > acc ? x : acc) : (x < acc ? x : acc);
}

/* Element i of the rank-order fold, each type in its own arithmetic (bf16 and f16 in f32, rounded once). */
static inline void ref_element(tp_dtype_t t, tp_op_t op, void *out, const void *const *srcs, int n, size_t i)
{
    size_t es = tp_dtype_size(t);
    if (t == TP_F64) {
        double acc, x;
        memcpy(&acc, (const char *)srcs[0] + i * es, 8);
        for (int s = 1; s < n; s++) memcpy(&x, (const char *)srcs[s] + i * es, 8), acc = fold(op, acc, x);
        memcpy(out, &acc, 8);
    } else if (t == TP_F32 || t == TP_BF16 || t == TP_F16) {
        float acc = 0, x = 0;
        for (int s = 0; s < n; s++) {
            const char *p = (const char *)srcs[s] + i * es;
            if (t == TP_F32) {
                memcpy(&x, p, 4);
            } else if (t == TP_BF16) {
                uint16_t h;
                memcpy(&h, p, 2);
                x = ref_from_bf16(h);
            } else {
                uint16_t h;
                memcpy(&h, p, 2);
                x = ref_f16_to_f32(h);
            }
            acc = s == 0 ? x : op == TP_SUM ? acc + x : (float)fold(op, acc, x);
        }
        if (t == TP_F32) memcpy(out, &acc, 4);
        else if (t == TP_BF16) {
            uint16_t h = ref_to_bf16(acc);
            memcpy(out, &h, 2);
        } else {
            uint16_t h = ref_f32_to_f16(acc);
            memcpy(out, &h, 2);
        }
    } else { /* i32 and i64 in i64: sums wrap at the type's width, max and min compare signed */
        int64_t acc = 0, x;
        for (int s = 0; s < n; s++) {
            const char *p = (const char *)srcs[s] + i * es;
            if (t == TP_I32) {
                int32_t v;
                memcpy(&v, p, 4);
                x = v;
            } else {
                memcpy(&x, p, 8);
            }
            acc = s == 0         ? x
                  : op == TP_SUM ? (int64_t)((uint64_t)acc + (uint64_t)x)
                  : op == TP_MAX ? (x > acc ? x : acc)
                                 : (x < acc ? x : acc);
            if (t == TP_I32) acc = (int32_t)(uint32_t)(uint64_t)acc;
        }
        if (t == TP_I32) {
            int32_t v = (int32_t)acc;
            memcpy(out, &v, 4);
        } else {
            memcpy(out, &acc, 8);
        }
    }
}

/* Bit for bit, except that any NaN matches any NaN (payloads are not part of the contract). */
static inline int same_element(tp_dtype_t t, const void *a, const void *b)
{
    size_t es = tp_dtype_size(t);
    if (memcmp(a, b, es) == 0) return 1;
    if (t == TP_F32) {
        float x, y;
        memcpy(&x, a, 4), memcpy(&y, b, 4);
        return isnan(x) && isnan(y);
    }
    if (t == TP_F64) {
        double x, y;
        memcpy(&x, a, 8), memcpy(&y, b, 8);
        return isnan(x) && isnan(y);
    }
    if (t == TP_BF16 || t == TP_F16) {
        uint16_t x, y, e = t == TP_BF16 ? 0x7f80u : 0x7c00u, m = t == TP_BF16 ? 0x7fu : 0x3ffu;
        memcpy(&x, a, 2), memcpy(&y, b, 2);
        return (x & e) == e && (x & m) && (y & e) == e && (y & m);
    }
    return 0;
}

/* Mostly values whose sums round (small integers scaled), some raw bit patterns (infinities, NaNs, subnormals). */
static inline void fill(tp_dtype_t t, void *buf, size_t count)
{
    size_t es = tp_dtype_size(t);
    for (size_t i = 0; i < count; i++) {
        uint64_t r = next_rand();
        char *p = (char *)buf + i * es;
        if (r % 8 == 0 || t == TP_I32 || t == TP_I64) {
            memcpy(p, &r, es);
        } else {
            double v = ldexp((double)(int32_t)(r >> 32) / 65536.0, (int)(r % 40) - 20);
            float f = (float)v;
            if (t == TP_F64) memcpy(p, &v, 8);
            else if (t == TP_F32) memcpy(p, &f, 4);
            else if (t == TP_BF16) {
                uint16_t h = ref_to_bf16(f);
                memcpy(p, &h, 2);
            } else {
                uint16_t h = ref_f32_to_f16(f / 1024.0f);
                memcpy(p, &h, 2);
            }
        }
    }
}

#endif
