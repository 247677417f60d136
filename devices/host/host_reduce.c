/* host_reduce.c: rank-order reductions; blocks of elements keep an accumulator so dst may alias a source. */
#include "host_reduce.h"

#include <string.h>

#define BLOCK 256

/* The conversions inline here, so the reduce loops call no function per element; tp_*_to_* are the same. */
static inline float bf16_load(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round to nearest even; a NaN stays a (quiet) NaN. Branch-free, so a block's loop vectorizes. */
static inline uint16_t bf16_store(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16, quiet = (u >> 16) | 0x0040u;
    return (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? quiet : rounded);
}

static inline float f16_load(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, u;
    if (exp == 0x1f) {
        u = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {
        u = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {
        u = sign;
    } else { /* subnormal: normalize */
        int e = -1;
        do {
            e++;
            man <<= 1;
        } while ((man & 0x400u) == 0);
        u = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f16_store(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds to or beyond 65520: infinity */
    if (a < 0x38800000u) {                                    /* below the smallest normal: subnormal or zero */
        if (a < 0x33000000u) return sign;                     /* under half the smallest subnormal */
        uint32_t exp = a >> 23, man = (a & 0x7fffffu) | 0x800000u;
        unsigned shift = 126u - exp; /* 14..24 */
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1u), half = 1u << (shift - 1u);
        if (rem > half || (rem == half && (q & 1u))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = a + 0xfffu + ((a >> 13) & 1u);
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

float tp_bf16_to_f32(uint16_t h) { return bf16_load(h); }
uint16_t tp_f32_to_bf16(float f) { return bf16_store(f); }
float tp_f16_to_f32(uint16_t h) { return f16_load(h); }
uint16_t tp_f32_to_f16(float f) { return f16_store(f); }

/* NaN propagates: a NaN accumulator stays, a NaN operand replaces it. */
#define FOLD_FLOAT(acc, x, op)                                                                                     \
    do {                                                                                                           \
        if ((op) == TP_SUM) (acc) += (x);                                                                          \
        else if ((op) == TP_MAX) { if ((x) > (acc) || (x) != (x)) (acc) = (x); }                                   \
        else { if ((x) < (acc) || (x) != (x)) (acc) = (x); }                                                       \
    } while (0)

/* stmt for i < m: a whole block's loop has a constant trip count, which the compiler vectorizes at -O2 (the same
 * operations per element, so the same bits); the last, partial block takes the plain loop. */
#define BLOCK_LOOP(m, stmt)                                                                                        \
    do {                                                                                                           \
        if ((m) == BLOCK) {                                                                                        \
            for (size_t i = 0; i < BLOCK; i++) stmt;                                                               \
        } else {                                                                                                   \
            for (size_t i = 0; i < (m); i++) stmt;                                                                 \
        }                                                                                                          \
    } while (0)
#define ADD_BLOCK(acc, x, m, T, UT) BLOCK_LOOP(m, (acc)[i] = (T)((UT)(acc)[i] + (UT)(x)[i]))

/* Block b of a buffer: user buffers may be misaligned, so elements are copied out, never loaded through a cast. */
#define BLOCK_AT(ptr, b, size) ((const char *)(ptr) + (b) * (size))

static void reduce_f32(tp_op_t op, void *dst, const void *const *srcs, int n, size_t count)
{
    float acc[BLOCK], x[BLOCK];
    for (size_t b = 0; b < count; b += BLOCK) {
        size_t m = count - b < BLOCK ? count - b : BLOCK;
        memcpy(acc, BLOCK_AT(srcs[0], b, 4), m * 4);
        for (int s = 1; s < n; s++) {
            memcpy(x, BLOCK_AT(srcs[s], b, 4), m * 4);
            if (op == TP_SUM) {
                ADD_BLOCK(acc, x, m, float, float);
            } else {
                for (size_t i = 0; i < m; i++) FOLD_FLOAT(acc[i], x[i], op);
            }
        }
        memcpy((char *)dst + b * 4, acc, m * 4);
    }
}

static void reduce_f64(tp_op_t op, void *dst, const void *const *srcs, int n, size_t count)
{
    double acc[BLOCK], x[BLOCK];
    for (size_t b = 0; b < count; b += BLOCK) {
        size_t m = count - b < BLOCK ? count - b : BLOCK;
        memcpy(acc, BLOCK_AT(srcs[0], b, 8), m * 8);
        for (int s = 1; s < n; s++) {
            memcpy(x, BLOCK_AT(srcs[s], b, 8), m * 8);
            if (op == TP_SUM) {
                ADD_BLOCK(acc, x, m, double, double);
            } else {
                for (size_t i = 0; i < m; i++) FOLD_FLOAT(acc[i], x[i], op);
            }
        }
        memcpy((char *)dst + b * 8, acc, m * 8);
    }
}

/* bf16 and f16: accumulate in f32, round once; the conversions inline (a call per element was 30x slower). */
#define REDUCE_HALF(name, load, store)                                                                             \
    static void name(tp_op_t op, void *dst, const void *const *srcs, int n, size_t count)                          \
    {                                                                                                              \
        float acc[BLOCK], v[BLOCK];                                                                                \
        uint16_t x[BLOCK];                                                                                         \
        for (size_t b = 0; b < count; b += BLOCK) {                                                                \
            size_t m = count - b < BLOCK ? count - b : BLOCK;                                                      \
            memcpy(x, BLOCK_AT(srcs[0], b, 2), m * 2);                                                             \
            BLOCK_LOOP(m, acc[i] = load(x[i]));                                                                   \
            for (int s = 1; s < n; s++) {                                                                          \
                memcpy(x, BLOCK_AT(srcs[s], b, 2), m * 2);                                                         \
                BLOCK_LOOP(m, v[i] = load(x[i]));                                                                  \
                if (op == TP_SUM) {                                                                                \
                    ADD_BLOCK(acc, v, m, float, float);                                                            \
                } else {                                                                                           \
                    for (size_t i = 0; i < m; i++) FOLD_FLOAT(acc[i], v[i], op);                                   \
                }                                                                                                  \
            }                                                                                                      \
            BLOCK_LOOP(m, x[i] = store(acc[i]));                                                                   \
            memcpy((char *)dst + b * 2, x, m * 2);                                                                 \
        }                                                                                                          \
    }
REDUCE_HALF(reduce_bf16, bf16_load, bf16_store)
REDUCE_HALF(reduce_f16, f16_load, f16_store)

/* Integers: sums wrap (computed unsigned), max and min compare signed. */
#define REDUCE_INT(name, T, UT)                                                                                    \
    static void name(tp_op_t op, void *dst, const void *const *srcs, int n, size_t count)                          \
    {                                                                                                              \
        T acc[BLOCK], x[BLOCK];                                                                                    \
        for (size_t b = 0; b < count; b += BLOCK) {                                                                \
            size_t m = count - b < BLOCK ? count - b : BLOCK;                                                      \
            memcpy(acc, BLOCK_AT(srcs[0], b, sizeof(T)), m * sizeof(T));                                           \
            for (int s = 1; s < n; s++) {                                                                          \
                memcpy(x, BLOCK_AT(srcs[s], b, sizeof(T)), m * sizeof(T));                                         \
                if (op == TP_SUM) {                                                                                \
                    ADD_BLOCK(acc, x, m, T, UT);                                                                   \
                    continue;                                                                                      \
                }                                                                                                  \
                for (size_t i = 0; i < m; i++) {                                                                   \
                    if (op == TP_MAX) acc[i] = x[i] > acc[i] ? x[i] : acc[i];                                      \
                    else acc[i] = x[i] < acc[i] ? x[i] : acc[i];                                                   \
                }                                                                                                  \
            }                                                                                                      \
            memcpy((char *)dst + b * sizeof(T), acc, m * sizeof(T));                                               \
        }                                                                                                          \
    }
REDUCE_INT(reduce_i32, int32_t, uint32_t)
REDUCE_INT(reduce_i64, int64_t, uint64_t)

void tp_reduce_n(tp_dtype_t dtype, tp_op_t op, void *dst, const void *const *srcs, int n, size_t count)
{
    switch (dtype) {
    case TP_F32: reduce_f32(op, dst, srcs, n, count); break;
    case TP_F64: reduce_f64(op, dst, srcs, n, count); break;
    case TP_BF16: reduce_bf16(op, dst, srcs, n, count); break;
    case TP_F16: reduce_f16(op, dst, srcs, n, count); break;
    case TP_I32: reduce_i32(op, dst, srcs, n, count); break;
    case TP_I64: reduce_i64(op, dst, srcs, n, count); break;
    case TP_BYTES: break;
    }
}
