/* f16_ref.h: IEEE half precision to and from f32 for the tests, independent of libtp's conversions: the compiler's
 * _Float16 where it has one (gcc 12, clang 15 and later on x86-64), else arithmetic in double, which is exact for every
 * f16 and rounds an f32 once to the nearest f16, ties to even, as the hardware does. coll_unit checks that the two
 * agree wherever both exist. */
#ifndef F16_REF_H
#define F16_REF_H

#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float ref_f16_to_f32_arith(uint16_t h)
{
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    float sign = (h & 0x8000u) ? -1.0f : 1.0f;
    if (e == 0x1f && m != 0) { /* a quiet NaN keeping the payload and sign, as a conversion instruction does */
        uint32_t u = ((uint32_t)(h & 0x8000u) << 16) | 0x7fc00000u | (m << 13);
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    if (e == 0x1f) return sign * INFINITY;
    double v = e == 0 ? ldexp((double)m, -24) : ldexp((double)(m + 1024), (int)e - 25);
    return sign * (float)v;
}

static inline uint16_t ref_f32_to_f16_arith(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    if (isnan(f)) return (uint16_t)(sign | 0x7e00u | ((u >> 13) & 0x3ffu));
    double a = fabs((double)f);
    if (a >= 65520.0) return (uint16_t)(sign | 0x7c00u); /* past half way from the largest f16, 65504: infinity */
    if (a == 0.0) return sign;
    int e;
    frexp(a, &e);                            /* a lies in [2^(e-1), 2^e) */
    int ex = e - 1 < -14 ? -14 : e - 1;      /* the f16 binade's exponent; subnormals share -14's spacing */
    double r = nearbyint(ldexp(a, 10 - ex)); /* a in units of the binade's spacing, 2^(ex-10): exact, then rounded */
    if (ex == -14 && r < 1024.0) return (uint16_t)(sign | (uint16_t)r); /* subnormal, or zero */
    if (r >= 2048.0) {                                                  /* rounded up into the next binade */
        r /= 2.0;
        ex++;
    }
    return (uint16_t)(sign | (uint16_t)((ex + 15) << 10) | (uint16_t)(r - 1024.0));
}

#ifdef __FLT16_MAX__
#define REF_F16_COMPILER 1
static inline float ref_f16_to_f32(uint16_t h)
{
    _Float16 x;
    memcpy(&x, &h, 2);
    return (float)x;
}
static inline uint16_t ref_f32_to_f16(float f)
{
    _Float16 x = (_Float16)f;
    uint16_t h;
    memcpy(&h, &x, 2);
    return h;
}
#else
#define REF_F16_COMPILER 0
static inline float ref_f16_to_f32(uint16_t h) { return ref_f16_to_f32_arith(h); }
static inline uint16_t ref_f32_to_f16(float f) { return ref_f32_to_f16_arith(f); }
#endif

#endif
