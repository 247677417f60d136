/* coll_unit: the collectives' pure parts: bf16/f16 rounding, rank-order reductions, frame checks, TP_TRANSPORTS. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "coll_frame.h"
#include "host_reduce.h"
#include "runtime_transports.h"

#include "f16_ref.h"
#include "unit_check.h"

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void test_f16(void)
{
    for (uint32_t h = 0; h < 65536; h++) { /* every f16 survives the trip through f32, NaNs stay NaN */
        float f = tp_f16_to_f32((uint16_t)h);
        int nan = (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu);
        if (nan) CHECK(isnan(f) && (tp_f32_to_f16(f) & 0x7e00u) == 0x7e00u, "f16 NaN %04x", h);
        else {
            CHECK(bits(f) == bits(ref_f16_to_f32((uint16_t)h)), "f16 %04x to f32", h);
            CHECK(tp_f32_to_f16(f) == h, "f16 %04x round trip gave %04x", h, tp_f32_to_f16(f));
        }
        if (REF_F16_COMPILER) /* the tests' arithmetic reference, used where the compiler has no _Float16 */
            CHECK(bits(ref_f16_to_f32_arith((uint16_t)h)) == bits(ref_f16_to_f32((uint16_t)h)),
                  "f16 %04x: arithmetic reference %08x, compiler %08x", h, bits(ref_f16_to_f32_arith((uint16_t)h)),
                  bits(ref_f16_to_f32((uint16_t)h)));
    }
    uint64_t x = 88172645463325252ull; /* f32 to f16 agrees with the reference's rounding on wide random floats */
    for (int i = 0; i < 2000000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        float f = from_bits((uint32_t)x);
        if (REF_F16_COMPILER)
            CHECK(ref_f32_to_f16_arith(f) == ref_f32_to_f16(f), "f32 %08x: arithmetic reference %04x, compiler %04x",
                  (uint32_t)x, ref_f32_to_f16_arith(f), ref_f32_to_f16(f));
        if (isnan(f)) continue;
        CHECK(tp_f32_to_f16(f) == ref_f32_to_f16(f), "f32 %08x to f16: %04x, want %04x", (uint32_t)x, tp_f32_to_f16(f),
              ref_f32_to_f16(f));
        if (failures > 10) return;
    }
}

static void test_bf16(void)
{
    CHECK(tp_f32_to_bf16(1.0f) == 0x3f80, "1.0");
    CHECK(tp_f32_to_bf16(from_bits(0x3f808000u)) == 0x3f80, "tie rounds to even (down)");
    CHECK(tp_f32_to_bf16(from_bits(0x3f818000u)) == 0x3f82, "tie rounds to even (up)");
    CHECK(tp_f32_to_bf16(from_bits(0x3f808001u)) == 0x3f81, "above the tie rounds up");
    CHECK(tp_f32_to_bf16(from_bits(0x7f7fffffu)) == 0x7f80, "overflow gives infinity");
    CHECK((tp_f32_to_bf16(from_bits(0x7f800001u)) & 0x7fc0) == 0x7fc0, "a signalling NaN stays a (quiet) NaN");
    for (uint32_t h = 0; h < 65536; h++)
        if ((h & 0x7f80u) != 0x7f80u || !(h & 0x7fu))
            CHECK(tp_f32_to_bf16(tp_bf16_to_f32((uint16_t)h)) == h, "bf16 %04x round trip", h);
}

static void test_reduce(void)
{
    /* rank order: (1e8 + 1) - 1e8 is 0 in f32; any other order gives 1 */
    float a[3] = {1e8f, 1.0f, -1e8f}, out;
    const void *src[3] = {&a[0], &a[1], &a[2]};
    tp_reduce_n(TP_F32, TP_SUM, &out, src, 3, 1);
    CHECK(out == 0.0f, "f32 rank order: got %g", out);
    const void *src2[3] = {&a[0], &a[2], &a[1]};
    tp_reduce_n(TP_F32, TP_SUM, &out, src2, 3, 1);
    CHECK(out == 1.0f, "f32 other order: got %g", out);
    /* bf16: 256 + 1 + 1 is 258 with an f32 accumulator, 256 when each step rounds to bf16 */
    uint16_t b[3] = {tp_f32_to_bf16(256.0f), tp_f32_to_bf16(1.0f), tp_f32_to_bf16(1.0f)}, bo;
    const void *bs[3] = {&b[0], &b[1], &b[2]};
    tp_reduce_n(TP_BF16, TP_SUM, &bo, bs, 3, 1);
    CHECK(tp_bf16_to_f32(bo) == 258.0f, "bf16 accumulates in f32: got %g", tp_bf16_to_f32(bo));
    uint16_t h[3] = {tp_f32_to_f16(2048.0f), tp_f32_to_f16(1.0f), tp_f32_to_f16(1.0f)}, ho;
    const void *hs[3] = {&h[0], &h[1], &h[2]};
    tp_reduce_n(TP_F16, TP_SUM, &ho, hs, 3, 1);
    CHECK(tp_f16_to_f32(ho) == 2050.0f, "f16 accumulates in f32: got %g", tp_f16_to_f32(ho));
    /* dst may be any source; blocks longer than the accumulator */
    static int32_t x[3][1000];
    for (int i = 0; i < 1000; i++) x[0][i] = i, x[1][i] = 2 * i, x[2][i] = -i;
    const void *xs[3] = {x[0], x[1], x[2]};
    tp_reduce_n(TP_I32, TP_MAX, x[2], xs, 3, 1000);
    CHECK(x[2][999] == 1998 && x[2][0] == 0, "i32 max in place");
    int64_t big[2] = {INT64_MAX, 1}, bo64;
    const void *b64[2] = {&big[0], &big[1]};
    tp_reduce_n(TP_I64, TP_SUM, &bo64, b64, 2, 1);
    CHECK(bo64 == INT64_MIN, "i64 sums wrap");
    float nan = from_bits(0x7fc00001u), m[2] = {1.0f, nan};
    const void *ms[2] = {&m[0], &m[1]};
    tp_reduce_n(TP_F32, TP_MAX, &out, ms, 2, 1);
    CHECK(isnan(out), "max propagates NaN");
    CHECK(!tp_reduce_supported(TP_BYTES, TP_SUM) && tp_reduce_supported(TP_BF16, TP_MIN), "supported types");
    /* a few elements go one at a time, more as blocks: the same rank-order result either way, in place or not */
    for (size_t count = 1; count <= 12; count++)
        for (int op = TP_SUM; op <= TP_MIN; op++) {
            float f[3][12], fr[12], fo[12];
            int32_t k[3][12], kr[12], ko[12];
            for (size_t i = 0; i < count; i++)
                for (int r = 0; r < 3; r++) {
                    float big = i % 2 ? 1e8f : -1e8f; /* (big + small) - big: 0 in rank order, small in any other */
                    f[r][i] = r == 0 ? big : r == 2 ? -big : i == 2 ? nan : (float)(i + 1);
                    k[r][i] = r == 0 && i == 1 ? INT32_MAX : (int32_t)(i * 5) - r * 9;
                }
            for (size_t i = 0; i < count; i++) { /* the reference: ((x0 op x1) op x2) */
                fr[i] = f[0][i], kr[i] = k[0][i];
                for (int r = 1; r < 3; r++) {
                    float y = f[r][i];
                    if (op == TP_SUM) fr[i] += y;
                    else if (op == TP_MAX ? (y > fr[i] || y != y) : (y < fr[i] || y != y)) fr[i] = y;
                    int32_t z = k[r][i];
                    kr[i] = op == TP_SUM   ? (int32_t)((uint32_t)kr[i] + (uint32_t)z)
                            : op == TP_MAX ? (z > kr[i] ? z : kr[i])
                                           : (z < kr[i] ? z : kr[i]);
                }
            }
            const void *fs[3] = {f[0], f[1], f[2]}, *ks[3] = {k[0], k[1], k[2]};
            tp_reduce_n(TP_F32, (tp_op_t)op, fo, fs, 3, count);
            tp_reduce_n(TP_I32, (tp_op_t)op, ko, ks, 3, count);
            CHECK(memcmp(fo, fr, count * 4) == 0 && memcmp(ko, kr, count * 4) == 0, "count %zu op %d", count, op);
            tp_reduce_n(TP_F32, (tp_op_t)op, f[1], fs, 3, count);
            tp_reduce_n(TP_I32, (tp_op_t)op, k[1], ks, 3, count);
            CHECK(memcmp(f[1], fr, count * 4) == 0 && memcmp(k[1], kr, count * 4) == 0, "count %zu op %d in place",
                  count, op);
        }
}

static void test_frames(void)
{
    tp_frame_id_t id = {
        .coll = TP_COLL_ALL_REDUCE, .dtype = TP_F32, .op = TP_SUM, .comm_id = 3, .seq = 17, .count = 1024};
    uint8_t want[TP_FRAME_HEADER_BYTES], got[TP_FRAME_HEADER_BYTES];
    int matched;
    tp_frame_pack(want, &id, 0);
    tp_frame_set_part(want, 2, 4096);
    memcpy(got, want, sizeof(got));
    CHECK(tp_frame_check(want, got, 65536, 1, &matched) == TP_OK && matched, "the same header matches");
    tp_frame_set_part(got, 3, 4096);
    CHECK(tp_frame_check(want, got, 65536, 1, &matched) == TP_OK && !matched, "another part of the call");
    tp_frame_set_part(got, 3, 100000);
    CHECK(tp_frame_check(want, got, 65536, 1, &matched) == TP_ERR_PROTOCOL, "over the part size (another part)");
    tp_frame_set_part(got, 2, 4000);
    CHECK(tp_frame_check(want, got, 65536, 1, &matched) == TP_ERR_PROTOCOL, "a size other than the part's");
    memcpy(got, want, sizeof(got));
    got[0] ^= 1;
    CHECK(tp_frame_check(want, got, 65536, 1, &matched) == TP_ERR_PROTOCOL, "bad magic");
    tp_frame_id_t other = id;
    other.coll = TP_COLL_ALL_GATHER;
    tp_frame_pack(got, &other, 0);
    tp_frame_set_part(got, 2, 4096);
    CHECK(tp_frame_check(want, got, 65536, 1, &matched) == TP_ERR_DESYNC, "another collective");
    other = id, other.count = 1000;
    tp_frame_pack(got, &other, 0);
    CHECK(tp_frame_check(want, got, 65536, 1, &matched) == TP_ERR_DESYNC, "another count");
    other = id, other.seq = 18;
    tp_frame_pack(got, &other, 0);
    CHECK(tp_frame_check(want, got, 65536, 1, &matched) == TP_ERR_DESYNC, "another call");
    other = id, other.coll = 99;
    tp_frame_pack(got, &other, 0);
    CHECK(tp_frame_check(want, got, 65536, 1, &matched) == TP_ERR_PROTOCOL, "an unknown collective");
    /* a header equal to the expected one is still refused for what no receive may expect */
    memcpy(got, want, sizeof(got));
    CHECK(tp_frame_check(want, got, 4000, 1, &matched) == TP_ERR_PROTOCOL && !matched,
          "the same header, over the part size");
    tp_frame_pack(want, &id, TP_FRAME_STEP_DESYNC);
    memcpy(got, want, sizeof(got));
    CHECK(tp_frame_check(want, got, 65536, 1, &matched) == TP_ERR_DESYNC && !matched,
          "the same header, a desync report");
    tp_frame_pack(want, &id, 0);
    want[0] ^= 1;
    memcpy(got, want, sizeof(got));
    CHECK(tp_frame_check(want, got, 65536, 1, &matched) == TP_ERR_PROTOCOL && !matched, "the same header, bad magic");
}

static void test_transports_parse(void)
{
    const char *names[3] = {"shm", "verbs", "tcp"};
    int order[8], n;
    char unknown[64];
    n = tp_transports_parse("", names, 3, order, unknown, sizeof(unknown));
    CHECK(n == 3 && order[0] == 0 && order[2] == 2 && unknown[0] == 0, "empty keeps all in order");
    n = tp_transports_parse("tcp,shm", names, 3, order, unknown, sizeof(unknown));
    CHECK(n == 2 && order[0] == 2 && order[1] == 0, "a list keeps its order");
    n = tp_transports_parse("^verbs", names, 3, order, unknown, sizeof(unknown));
    CHECK(n == 2 && order[0] == 0 && order[1] == 2, "^name drops one");
    n = tp_transports_parse("tcp,bogus,^shm,nccl", names, 3, order, unknown, sizeof(unknown));
    CHECK(n == 1 && order[0] == 2 && strcmp(unknown, "bogus,nccl") == 0, "unknown names listed: %s", unknown);
    n = tp_transports_parse("^tcp,tcp", names, 3, order, unknown, sizeof(unknown));
    CHECK(n == 0, "an excluded name stays excluded");
}

int main(void)
{
    test_f16();
    test_bf16();
    test_reduce();
    test_frames();
    test_transports_parse();
    printf("coll_unit: %s\n", failures ? "FAILED" : "all passed");
    return failures ? 1 : 0;
}
