/* host_reduce.c: rank-order reductions; blocks of elements keep an accumulator so dst may alias a source. */
#include "host_reduce.h"

#include <stdatomic.h>
#include <string.h>

#define BLOCK 256
/* Up to this many bytes a reduction goes element by element, each element through every source in rank order
 * before the next: the block copies' calls cost more than the arithmetic there (16 B of f32 from 2 sources: 8-16
 * against 21-32 ns; even at 64 B, behind at 128; BENCHMARKS.md, fourteenth pass). The same operations in the same
 * order: the same bits. */
#define SMALL_BYTES 64

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

/*
 * f16 to f32, exact. Branch-free (selects), so a block's loop vectorizes: the 15 bits shifted into place and rebiased
 * are a normal number; all exponent bits set is infinity or NaN (its payload kept); a subnormal or zero is the
 * normal number one exponent up minus 2^-14, which f32 holds exactly (and never as a subnormal).
 */
static inline float f16_load(uint16_t h)
{
    uint32_t o = (uint32_t)(h & 0x7fffu) << 13, exp = o & 0x0f800000u;
    uint32_t normal = o + 0x38000000u, special = normal + 0x38000000u, up = normal + 0x00800000u, sub;
    float f;
    memcpy(&f, &up, 4);
    f -= 6.103515625e-05f; /* 2^-14 */
    memcpy(&sub, &f, 4);
    uint32_t is_special = 0u - (uint32_t)(exp == 0x0f800000u), is_sub = 0u - (uint32_t)(exp == 0); /* masks */
    uint32_t u = (special & is_special) | (sub & is_sub) | (normal & ~(is_special | is_sub));
    u |= (uint32_t)(h & 0x8000u) << 16;
    memcpy(&f, &u, 4);
    return f;
}

/*
 * f32 to f16, rounded to nearest even; a NaN stays a (quiet) NaN with its payload's top bits. Branch-free like the
 * load: a normal result is rebiased and rounded on the 13 dropped bits; one that rounds to 65520 or beyond is
 * infinity; under 2^-14, adding 0.5 puts the f16 subnormal's unit (2^-24) at f32's last bit, so the addition rounds
 * to nearest even (the FPU's default mode) and the bits above 0.5 are the result (0x400 when it rounds up to the
 * smallest normal).
 */
static inline uint16_t f16_store(float f)
{
    uint32_t u, sb;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    uint32_t normal = (a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13, nan = 0x7e00u | ((a >> 13) & 0x3ffu);
    float s;
    memcpy(&s, &a, 4);
    s += 0.5f;
    memcpy(&sb, &s, 4);
    uint32_t is_nan = 0u - (uint32_t)(a > 0x7f800000u), is_inf = (0u - (uint32_t)(a >= 0x477ff000u)) & ~is_nan;
    uint32_t is_sub = 0u - (uint32_t)(a < 0x38800000u), is_normal = ~(is_nan | is_inf | is_sub); /* masks */
    uint32_t r = (nan & is_nan) | (0x7c00u & is_inf) | ((sb - 0x3f000000u) & is_sub) | (normal & is_normal);
    return (uint16_t)(sign | r);
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

/* stmt for i < m: a loop with a constant trip count is what the compiler vectorizes at -O2 (the same operations
 * per element, so the same bits): a whole block at once, a partial one in pieces of PIECE elements, then the rest
 * one by one (pieces: 256 B of f32 from 2 sources 35-48 ns against 48-71, 512 B from 8 159-226 against 405-654;
 * BENCHMARKS.md, fourteenth pass). */
#define PIECE 16
#define BLOCK_LOOP(m, stmt)                                                                                        \
    do {                                                                                                           \
        if ((m) == BLOCK) {                                                                                        \
            for (size_t i = 0; i < BLOCK; i++) stmt;                                                               \
        } else {                                                                                                   \
            size_t piece_ = 0;                                                                                     \
            for (; piece_ + PIECE <= (m); piece_ += PIECE)                                                         \
                for (size_t i = piece_; i < piece_ + PIECE; i++) stmt;                                             \
            for (size_t i = piece_; i < (m); i++) stmt;                                                            \
        }                                                                                                          \
    } while (0)
#define ADD_BLOCK(acc, x, m, T, UT) BLOCK_LOOP(m, (acc)[i] = (T)((UT)(acc)[i] + (UT)(x)[i]))

/* Block b of a buffer: user buffers may be misaligned, so elements are copied out, never loaded through a cast. */
#define BLOCK_AT(ptr, b, size) ((const char *)(ptr) + (b) * (size))

/* Max and min of integers, compared signed. */
#define FOLD_INT(acc, x, op) ((acc) = (op) == TP_MAX ? ((x) > (acc) ? (x) : (acc)) : ((x) < (acc) ? (x) : (acc)))

/* f32, f64 and the integers: the fold in the type itself; sums through UT (integers: unsigned, so they wrap). */
#define REDUCE_SAME(name, T, UT, fold)                                                                             \
    static void name(tp_op_t op, void *dst, const void *const *srcs, int n, size_t count)                          \
    {                                                                                                              \
        if (count * sizeof(T) <= SMALL_BYTES) {                                                                    \
            for (size_t i = 0; i < count; i++) {                                                                   \
                T a, v;                                                                                            \
                memcpy(&a, BLOCK_AT(srcs[0], i, sizeof(T)), sizeof(T));                                            \
                for (int s = 1; s < n; s++) {                                                                      \
                    memcpy(&v, BLOCK_AT(srcs[s], i, sizeof(T)), sizeof(T));                                        \
                    if (op == TP_SUM) a = (T)((UT)a + (UT)v);                                                      \
                    else fold(a, v, op);                                                                           \
                }                                                                                                  \
                memcpy((char *)dst + i * sizeof(T), &a, sizeof(T));                                                \
            }                                                                                                      \
            return;                                                                                                \
        }                                                                                                          \
        T acc[BLOCK], x[BLOCK];                                                                                    \
        for (size_t b = 0; b < count; b += BLOCK) {                                                                \
            size_t m = count - b < BLOCK ? count - b : BLOCK;                                                      \
            memcpy(acc, BLOCK_AT(srcs[0], b, sizeof(T)), m * sizeof(T));                                           \
            for (int s = 1; s < n; s++) {                                                                          \
                memcpy(x, BLOCK_AT(srcs[s], b, sizeof(T)), m * sizeof(T));                                         \
                if (op == TP_SUM) {                                                                                \
                    ADD_BLOCK(acc, x, m, T, UT);                                                                   \
                } else {                                                                                           \
                    for (size_t i = 0; i < m; i++) fold(acc[i], x[i], op);                                         \
                }                                                                                                  \
            }                                                                                                      \
            memcpy((char *)dst + b * sizeof(T), acc, m * sizeof(T));                                               \
        }                                                                                                          \
    }

/* bf16 and f16: accumulate in f32, round once; the conversions inline (a call per element was 30x slower). */
#define REDUCE_HALF(name, load, store)                                                                             \
    static void name(tp_op_t op, void *dst, const void *const *srcs, int n, size_t count)                          \
    {                                                                                                              \
        if (count * 2 <= SMALL_BYTES) {                                                                            \
            for (size_t i = 0; i < count; i++) {                                                                   \
                uint16_t h;                                                                                        \
                memcpy(&h, BLOCK_AT(srcs[0], i, 2), 2);                                                            \
                float a = load(h);                                                                                 \
                for (int s = 1; s < n; s++) {                                                                      \
                    memcpy(&h, BLOCK_AT(srcs[s], i, 2), 2);                                                        \
                    float v = load(h);                                                                             \
                    if (op == TP_SUM) a += v;                                                                      \
                    else FOLD_FLOAT(a, v, op);                                                                     \
                }                                                                                                  \
                h = store(a);                                                                                      \
                memcpy((char *)dst + i * 2, &h, 2);                                                                \
            }                                                                                                      \
            return;                                                                                                \
        }                                                                                                          \
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

typedef void (*reduce_fn)(tp_op_t op, void *dst, const void *const *srcs, int n, size_t count);

/* Every type's reduction compiled for one instruction set, as the table reducers_ISA (by tp_dtype_t; TP_BYTES: none).
 * Both sets do the same IEEE operations per element (no fused multiply-add), so the same bits. */
#define REDUCERS(isa)                                                                                              \
    REDUCE_SAME(reduce_f32_##isa, float, float, FOLD_FLOAT)                                                        \
    REDUCE_SAME(reduce_f64_##isa, double, double, FOLD_FLOAT)                                                      \
    REDUCE_HALF(reduce_bf16_##isa, bf16_load, bf16_store)                                                          \
    REDUCE_HALF(reduce_f16_##isa, f16_load, f16_store)                                                             \
    REDUCE_SAME(reduce_i32_##isa, int32_t, uint32_t, FOLD_INT)                                                     \
    REDUCE_SAME(reduce_i64_##isa, int64_t, uint64_t, FOLD_INT)                                                     \
    static const reduce_fn reducers_##isa[TP_I64 + 1] = {                                                           \
        [TP_F32] = reduce_f32_##isa, [TP_F64] = reduce_f64_##isa, [TP_BF16] = reduce_bf16_##isa,                   \
        [TP_F16] = reduce_f16_##isa, [TP_I32] = reduce_i32_##isa,  [TP_I64] = reduce_i64_##isa};

REDUCERS(baseline)
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
/* x86-64's baseline vectors (SSE2) hold 4 floats; AVX2's hold 8 and widen and narrow 16-bit lanes in fewer
 * instructions: bf16 1.7x, f16 2.2x, f32 over 4 sources 1.4x faster here (tests/bench/reduce_bench). Chosen at run
 * time where the CPU has it, so one build runs everywhere. */
#pragma GCC push_options
#pragma GCC target("avx2")
REDUCERS(avx2)
#pragma GCC pop_options
#define HAVE_AVX2_REDUCERS 1
#endif

static _Atomic int forced_baseline;

void tp_host_reduce_baseline(int on) { forced_baseline = on; }

/* Whether tp_reduce_n takes the AVX2 table: built with it, the CPU has it, and no test forced the baseline. */
static int use_avx2(void)
{
#ifdef HAVE_AVX2_REDUCERS
    return !forced_baseline && __builtin_cpu_supports("avx2");
#else
    return 0;
#endif
}

const char *tp_host_reduce_isa(void) { return use_avx2() ? "avx2" : "baseline"; }

void tp_reduce_n(tp_dtype_t dtype, tp_op_t op, void *dst, const void *const *srcs, int n, size_t count)
{
    if (dtype <= TP_BYTES || dtype > TP_I64) return; /* bytes: nothing to reduce */
#ifdef HAVE_AVX2_REDUCERS
    if (use_avx2()) {
        reducers_avx2[dtype](op, dst, srcs, n, count);
        return;
    }
#endif
    reducers_baseline[dtype](op, dst, srcs, n, count);
}
