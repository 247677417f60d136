/* host_reduce.h: the host device's element-wise reductions in rank order, and the bf16/f16 conversions they use. */
#ifndef HOST_REDUCE_H
#define HOST_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "tp_provider.h"

float tp_bf16_to_f32(uint16_t h);
/* Rounds to nearest even; NaN stays NaN (quiet), overflow gives infinity. */
uint16_t tp_f32_to_bf16(float f);
float tp_f16_to_f32(uint16_t h);
uint16_t tp_f32_to_f16(float f);

/*
 * dst[i] = ((srcs[0][i] op srcs[1][i]) op srcs[2][i]) ..., in f32 for bf16 and f16 (rounded once at the end);
 * dst may be any one of the sources (each element reads every source before it is written).
 */
void tp_reduce_n(tp_dtype_t dtype, tp_op_t op, void *dst, const void *const *srcs, int n, size_t count);
/* The instruction set tp_reduce_n uses here: "avx2" where the CPU has it, else "baseline"; for tests,
 * tp_host_reduce_baseline(1) makes it use the baseline's (the same bits, as the tests check). */
const char *tp_host_reduce_isa(void);
void tp_host_reduce_baseline(int on);

#endif
