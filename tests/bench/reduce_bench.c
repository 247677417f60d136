/*
 * reduce_bench: the host device's rank-order reduction (tp_reduce_n) alone, per type: best of 20 calls of
 * SUM over 2 and 4 sources of 1 MiB each, in µs and GB/s of output, with the instruction set the CPU gives it and
 * with the baseline's (x86-64: SSE2). Run from the build directory:
 *   ./tests/bench/reduce_bench
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "host_reduce.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(void)
{
    enum { BYTES = 1 << 20, SOURCES = 4, CALLS = 20 };
    static const struct {
        tp_dtype_t type;
        const char *name;
        size_t size;
    } types[] = {{TP_F32, "f32", 4}, {TP_F64, "f64", 8}, {TP_BF16, "bf16", 2}, {TP_F16, "f16", 2}, {TP_I32, "i32", 4}};
    uint8_t *src[SOURCES], *dst = malloc(BYTES);
    for (int s = 0; s < SOURCES; s++) {
        src[s] = malloc(BYTES);
        if (src[s] == NULL) return 1;
        /* small values in every type's bytes: finite halves, sums that round */
        for (size_t i = 0; i < BYTES; i++) src[s][i] = (uint8_t)(i % 2 ? (i * 7 + (size_t)s) & 0x3f : i * 13 + (size_t)s);
    }
    if (dst == NULL) return 1;
    const char *isa = tp_host_reduce_isa();
    printf("| type | sources | 1 MiB each, %s: best of %d, us | GB/s of output | baseline: us | GB/s |\n"
           "|---|---:|---:|---:|---:|---:|\n",
           isa, CALLS);
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        for (int n = 2; n <= SOURCES; n += 2) {
            const void *srcs[SOURCES] = {src[0], src[1], src[2], src[3]};
            double best[2] = {1e9, 1e9};
            for (int base = 0; base < 2; base++) {
                tp_host_reduce_baseline(base);
                for (int c = 0; c < CALLS; c++) {
                    double t = now_s();
                    tp_reduce_n(types[k].type, TP_SUM, dst, srcs, n, BYTES / types[k].size);
                    t = now_s() - t;
                    if (t < best[base]) best[base] = t;
                }
            }
            tp_host_reduce_baseline(0);
            printf("| %s | %d | %.1f | %.2f | %.1f | %.2f |\n", types[k].name, n, best[0] * 1e6, BYTES / best[0] / 1e9,
                   best[1] * 1e6, BYTES / best[1] / 1e9);
        }
    }
    free(dst);
    for (int s = 0; s < SOURCES; s++) free(src[s]);
    return 0;
}
