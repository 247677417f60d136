/*
 * coll_check: every collective x type x size against a reference computed here the documented way, bit for bit.
 * --big adds slices of several parts; --conformance adds send/recv patterns, sizes of a few MiB and every collective
 * again on sub-communicators (tests/conformance.sh); --transports lists the registered transports and exits. A
 * second option --mem tp takes every buffer from tp_mem_alloc (a new allocation per call, so shm's peers map many).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tp.h>
#include <tp_provider.h>

#include "f16_ref.h"

static int me, n, failures;
static size_t part;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* Values whose sums depend on the order: wide exponents, mixed signs, and 1e8 / 1 / -1e8 runs. Stored with
 * memcpy: the buffers are deliberately misaligned. */
static void fill(tp_dtype_t t, void *buf, size_t count, int rank, uint64_t seed)
{
    uint8_t *p = buf;
    for (size_t i = 0; i < count; i++) {
        uint64_t h = mix(seed * 1000003u + (uint64_t)rank * 7919u + i);
        switch (t) {
        case TP_BYTES: p[i] = (uint8_t)h; break;
        case TP_I32: memcpy(p + 4 * i, &(int32_t){(int32_t)h}, 4); break;
        case TP_I64: memcpy(p + 8 * i, &(int64_t){(int64_t)h}, 8); break;
        case TP_F32: {
            static const float runs[3] = {1e8f, 1.0f, -1e8f};
            uint32_t u = (uint32_t)(h & 0x807fffffu) | (uint32_t)(103 + (h >> 40) % 48) << 23;
            float f;
            memcpy(&f, &u, 4);
            if (i % 4 == 0) f = runs[(rank + i / 4) % 3];
            memcpy(p + 4 * i, &f, 4);
            break;
        }
        case TP_F64: {
            uint64_t u = (h & 0x800fffffffffffffull) | (uint64_t)(1023 - 60 + (h >> 40) % 120) << 52;
            double d;
            memcpy(&d, &u, 8);
            if (i % 4 == 0) d = (rank % 2 ? -1e17 : 1e17) + (double)rank;
            memcpy(p + 8 * i, &d, 8);
            break;
        }
        case TP_BF16:
            memcpy(p + 2 * i, &(uint16_t){(uint16_t)((h & 0x807fu) | (uint32_t)(112 + (h >> 40) % 32) << 7)}, 2);
            break;
        case TP_F16:
            memcpy(p + 2 * i, &(uint16_t){(uint16_t)((h & 0x83ffu) | (uint32_t)(5 + (h >> 40) % 20) << 10)}, 2);
            break;
        }
    }
}

static float ref_bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Nearest bf16 by comparing distances in double: an independent way to round, ties to even. */
static uint16_t ref_f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1);
    double dl = (double)f - (double)ref_bf16_to_f32(lo), dh = (double)ref_bf16_to_f32(hi) - (double)f;
    if (dl < 0) dl = -dl;
    if (dh < 0) dh = -dh;
    if (dl < dh || (dl == dh && (lo & 1) == 0)) return lo;
    return hi;
}

static size_t esize(tp_dtype_t t) { return tp_dtype_size(t); }

/* out[i] = fold over ranks 0..n-1 of input(rank)[offset + i], as tp.h documents. */
static void reference(tp_dtype_t t, tp_op_t op, void *out, size_t count, size_t offset, uint64_t seed, size_t full)
{
    size_t es = esize(t);
    uint8_t *in = malloc(full * es + 1);
    for (int r = 0; r < n; r++) {
        fill(t, in, full, r, seed);
        for (size_t i = 0; i < count; i++) {
            size_t k = offset + i;
#define FOLD(T, acc, x)                                                                                            \
    do {                                                                                                           \
        if (r == 0) acc = x;                                                                                       \
        else if (op == TP_SUM) acc = (T)(acc + x);                                                                 \
        else if (op == TP_MAX) acc = x > acc ? x : acc;                                                            \
        else acc = x < acc ? x : acc;                                                                              \
    } while (0)
            switch (t) {
            case TP_F32: FOLD(float, ((float *)out)[i], ((float *)in)[k]); break;
            case TP_F64: FOLD(double, ((double *)out)[i], ((double *)in)[k]); break;
            case TP_I32: {
                int32_t *o = out, x = ((int32_t *)in)[k];
                if (r == 0) o[i] = x;
                else if (op == TP_SUM) o[i] = (int32_t)((uint32_t)o[i] + (uint32_t)x);
                else FOLD(int32_t, o[i], x);
                break;
            }
            case TP_I64: {
                int64_t *o = out, x = ((int64_t *)in)[k];
                if (r == 0) o[i] = x;
                else if (op == TP_SUM) o[i] = (int64_t)((uint64_t)o[i] + (uint64_t)x);
                else FOLD(int64_t, o[i], x);
                break;
            }
            case TP_BF16:
            case TP_F16: { /* the f32 accumulator lives in the upper scratch (float per element, aligned) */
                float *acc = (float *)((uint8_t *)out + (count * 2 + 15) / 8 * 8) + i, x;
                x = t == TP_BF16 ? ref_bf16_to_f32(((uint16_t *)in)[k]) : ref_f16_to_f32(((uint16_t *)in)[k]);
                FOLD(float, *acc, x);
                if (r == n - 1) ((uint16_t *)out)[i] = t == TP_BF16 ? ref_f32_to_bf16(*acc) : ref_f32_to_f16(*acc);
                break;
            }
            case TP_BYTES: break;
            }
        }
    }
    free(in);
}

static void check(const char *what, tp_dtype_t t, size_t count, tp_status_t s, const void *got, const void *want,
                  size_t bytes)
{
    if (s != TP_OK) {
        printf("rank %d: FAIL %s type %d count %zu: %s (%s)\n", me, what, (int)t, count, tp_status_string(s),
               tp_last_error());
        failures++;
        return;
    }
    if (bytes > 0 && memcmp(got, want, bytes) != 0) {
        size_t i = 0;
        while (((const uint8_t *)got)[i] == ((const uint8_t *)want)[i]) i++;
        printf("rank %d: FAIL %s type %d count %zu: byte %zu differs (%02x, want %02x)\n", me, what, (int)t, count,
               i, ((const uint8_t *)got)[i], ((const uint8_t *)want)[i]);
        failures++;
    }
}

static int tp_mem; /* --mem tp: every call's buffers from tp_mem_alloc (shm's peers read them where they lie) */

/* A buffer at an odd address when asked (unaligned calls must work). */
static void *odd_alloc(size_t bytes, int odd, void **base)
{
    if (!tp_mem) *base = malloc(bytes + 16);
    else if (tp_mem_alloc(bytes + 16, base) != TP_OK) *base = NULL;
    if (*base == NULL) {
        printf("rank %d: no memory for %zu bytes\n", me, bytes + 16);
        exit(1);
    }
    return (uint8_t *)*base + (odd ? 1 : 0);
}

static void odd_free(void *base)
{
    if (tp_mem) tp_mem_free(base);
    else free(base);
}


static uint64_t call_seed;

/* all_reduce and reduce_scatter: out of place and in place, every op. */
static void check_reductions(tp_comm_t *w, tp_dtype_t t, size_t count, int odd)
{
    size_t es = esize(t), bytes = count * es;
    void *b1, *b2, *b3;
    uint8_t *send = odd_alloc((size_t)n * bytes, odd, &b1), *recv = odd_alloc((size_t)n * bytes, odd, &b2);
    uint8_t *want = odd_alloc((size_t)n * count * 12 + 16, 0, &b3);
    for (int op = TP_SUM; op <= TP_MIN; op++) {
        uint64_t seed = ++call_seed;
        fill(t, send, count, me, seed);
        reference(t, (tp_op_t)op, want, count, 0, seed, count);
        check("all_reduce", t, count, tp_all_reduce(w, send, recv, count, t, (tp_op_t)op, NULL), recv, want, bytes);
        check("all_reduce in place", t, count, tp_all_reduce(w, send, send, count, t, (tp_op_t)op, NULL), send, want,
              bytes);
    }
    uint8_t *mine = send + (size_t)me * bytes;
    for (int op = TP_SUM; op <= TP_MIN; op++) {
        uint64_t seed = ++call_seed;
        fill(t, send, (size_t)n * count, me, seed);
        reference(t, (tp_op_t)op, want, count, (size_t)me * count, seed, (size_t)n * count);
        check("reduce_scatter", t, count, tp_reduce_scatter(w, send, recv, count, t, (tp_op_t)op, NULL), recv, want,
              bytes);
        check("reduce_scatter in place", t, count, tp_reduce_scatter(w, send, mine, count, t, (tp_op_t)op, NULL), mine,
              want, bytes);
    }
    if (t == TP_F32 && n > 1 && count > 0) { /* reductions of bytes are refused, here and everywhere */
        tp_status_t s = tp_all_reduce(w, send, recv, count, TP_BYTES, TP_SUM, NULL);
        if (s != TP_ERR_INVALID) {
            printf("rank %d: FAIL all_reduce of TP_BYTES gave %s\n", me, tp_status_string(s));
            failures++;
        }
        /* counts whose bytes pass SIZE_MAX / 2, or wrap, are refused before anything moves */
        size_t over = SIZE_MAX / 2 / 4 + 1, wraps = SIZE_MAX / 4 + 2, gather_over = SIZE_MAX / 2 / 4 / (size_t)n + 1;
        if ((s = tp_all_reduce(w, send, recv, over, TP_F32, TP_SUM, NULL)) != TP_ERR_INVALID ||
            (s = tp_all_reduce(w, send, recv, wraps, TP_F32, TP_SUM, NULL)) != TP_ERR_INVALID ||
            (s = tp_all_gather(w, send, recv, gather_over, TP_F32, NULL)) != TP_ERR_INVALID) {
            printf("rank %d: FAIL a count too large gave %s\n", me, tp_status_string(s));
            failures++;
        }
    }
    odd_free(b1);
    odd_free(b2);
    odd_free(b3);
}

/* Data movement: the expected bytes are every rank's generated input, placed as each call documents. */
static void check_movement(tp_comm_t *w, tp_dtype_t t, size_t count, int odd)
{
    size_t es = esize(t), bytes = count * es, total = (size_t)n * bytes + (size_t)n * (size_t)n * 3 * es;
    void *b1, *b2, *b3;
    uint8_t *send = odd_alloc(total, odd, &b1), *recv = odd_alloc(total, odd, &b2), *want = odd_alloc(total, 0, &b3);
    uint64_t seed = ++call_seed;
    /* all_gather */
    for (int r = 0; r < n; r++) fill(t, want + (size_t)r * bytes, count, r, seed);
    fill(t, send, count, me, seed);
    check("all_gather", t, count, tp_all_gather(w, send, recv, count, t, NULL), recv, want, (size_t)n * bytes);
    memset(recv, 0xee, (size_t)n * bytes);
    fill(t, recv + (size_t)me * bytes, count, me, seed);
    check("all_gather in place", t, count, tp_all_gather(w, recv + (size_t)me * bytes, recv, count, t, NULL), recv,
          want, (size_t)n * bytes);
    /* send at recv's start, away from this rank's block (but rank 0's): rank 0's block lands on it */
    memset(recv, 0xee, (size_t)n * bytes);
    fill(t, recv, count, me, seed);
    check("all_gather overlapping", t, count, tp_all_gather(w, recv, recv, count, t, NULL), recv, want,
          (size_t)n * bytes);
    /* all_gatherv: rank 1 gives nothing, the others count + 3r */
    size_t counts[64], off = 0;
    for (int r = 0; r < n; r++) counts[r] = r == 1 ? 0 : count + 3 * (size_t)r;
    for (int r = 0; r < n; r++) {
        fill(t, want + off * es, counts[r], r, seed);
        off += counts[r];
    }
    fill(t, send, counts[me], me, seed);
    check("all_gatherv", t, count, tp_all_gatherv(w, send, recv, counts, t, NULL), recv, want, off * es);
    /* broadcast from a root that moves with the seed */
    int root = (int)(seed % (uint64_t)n);
    fill(t, want, count, root, seed);
    fill(t, recv, count, me, seed);
    check("broadcast", t, count, tp_broadcast(w, recv, count, t, root, NULL), recv, want, bytes);
    /* all_to_all: slot p of rank r's input is fill(rank r, seed + p) */
    for (int p = 0; p < n; p++) fill(t, send + (size_t)p * bytes, count, me, seed * 131 + (uint64_t)p);
    for (int r = 0; r < n; r++) fill(t, want + (size_t)r * bytes, count, r, seed * 131 + (uint64_t)me);
    check("all_to_all", t, count, tp_all_to_all(w, send, recv, count, t, NULL), recv, want, (size_t)n * bytes);
    check("all_to_all in place", t, count, tp_all_to_all(w, send, send, count, t, NULL), send, want,
          (size_t)n * bytes);
    /* exchange and send/recv with the partner rank^1 (itself when it has none) */
    int peer = (me ^ 1) < n ? (me ^ 1) : me;
    fill(t, send, count, me, seed + 7);
    fill(t, want, count, peer, seed + 7);
    check("exchange", t, count, tp_exchange(w, send, recv, count, t, peer, NULL), recv, want, bytes);
    check("exchange in place", t, count, tp_exchange(w, send, send, count, t, peer, NULL), send, want, bytes);
    if (peer != me) {
        fill(t, send, count, me, seed + 9);
        fill(t, want, count, peer, seed + 9);
        tp_status_t s1, s2;
        if (me < peer) {
            s1 = tp_send(w, send, count, t, peer, NULL);
            s2 = tp_recv(w, recv, count, t, peer, NULL);
        } else {
            s2 = tp_recv(w, recv, count, t, peer, NULL);
            s1 = tp_send(w, send, count, t, peer, NULL);
        }
        check("send", t, count, s1, NULL, NULL, 0);
        check("recv", t, count, s2, recv, want, bytes);
    }
    check("barrier", t, count, tp_barrier(w), NULL, NULL, 0);
    odd_free(b1);
    odd_free(b2);
    odd_free(b3);
}

/*
 * Send/recv patterns, each leaving every pair with as many sends as receives (tp_exchange in place needs that): a
 * ring each way (an odd rank receives first, so no cycle of blocked sends), a fan-in to a root and a fan-out from it
 * in rank order, and three messages in a row each way between partners, received in the order sent.
 */
static void check_p2p(tp_comm_t *w, tp_dtype_t t, size_t count, int odd)
{
    if (n < 2) return;
    size_t es = esize(t), bytes = count * es;
    void *b1, *b2;
    uint8_t *send = odd_alloc(bytes + es, odd, &b1), *recv = odd_alloc(bytes + es, odd, &b2);
    uint8_t *want = malloc(bytes + es + 1);
    uint64_t seed = ++call_seed;
    for (int dir = 1; dir >= -1; dir -= 2) {
        int to = (me + n + dir) % n, from = (me + n - dir) % n;
        fill(t, send, count, me, seed + 5 + (uint64_t)dir);
        fill(t, want, count, from, seed + 5 + (uint64_t)dir);
        tp_status_t s1 = me % 2 ? tp_recv(w, recv, count, t, from, NULL) : tp_send(w, send, count, t, to, NULL);
        tp_status_t s2 = me % 2 ? tp_send(w, send, count, t, to, NULL) : tp_recv(w, recv, count, t, from, NULL);
        check("ring send", t, count, me % 2 ? s2 : s1, NULL, NULL, 0);
        check("ring recv", t, count, me % 2 ? s1 : s2, recv, want, bytes);
    }
    int root = (int)(seed % (uint64_t)n);
    fill(t, send, count, me, seed);
    for (int p = 0; p < n; p++) { /* fan-in: p sends fill(p); fan-out: root sends fill(p, seed + 1) to p */
        if (p == root) continue;
        if (me == p) check("fan-in send", t, count, tp_send(w, send, count, t, root, NULL), NULL, NULL, 0);
        if (me != root) continue;
        fill(t, want, count, p, seed);
        check("fan-in recv", t, count, tp_recv(w, recv, count, t, p, NULL), recv, want, bytes);
    }
    for (int p = 0; p < n; p++) {
        if (p == root || (me != root && me != p)) continue;
        fill(t, want, count, p, seed + 1);
        if (me == root)
            check("fan-out send", t, count, tp_send(w, want, count, t, p, NULL), NULL, NULL, 0);
        else
            check("fan-out recv", t, count, tp_recv(w, recv, count, t, root, NULL), recv, want, bytes);
    }
    int peer = me ^ 1;
    size_t counts[3] = {count, count / 2 + 1, 0}; /* in a row: each its own seed */
    for (int sender = 0; peer < n && sender < 2; sender++) {
        for (int k = 0; k < 3; k++) {
            if ((me < peer) == (sender == 0)) {
                fill(t, send, counts[k], me, seed + 2 + (uint64_t)k);
                check("in a row send", t, counts[k], tp_send(w, send, counts[k], t, peer, NULL), NULL, NULL, 0);
            } else {
                fill(t, want, counts[k], peer, seed + 2 + (uint64_t)k);
                check("in a row recv", t, counts[k], tp_recv(w, recv, counts[k], t, peer, NULL), recv, want,
                      counts[k] * es);
            }
        }
    }
    odd_free(b1);
    odd_free(b2);
    free(want);
}

/* Sizes of a few MiB (odd counts): an f32 reduction, data movement and the send/recv patterns. */
static void run_mib(tp_comm_t *w)
{
    check_reductions(w, TP_F32, (3u << 20) / 4 + 3, 0);
    check_movement(w, TP_BYTES, (512u << 10) + 5, 1);
    check_p2p(w, TP_BYTES, (1u << 20) + 1, 0);
}

/* Frames either side of shm's cell bounds (a cell holds 16 payload bytes beside the header, each next one 56) and
 * of its inline limit (240 B; 632 B before): each size as one whole frame, by all_gather and send/recv. */
static void run_cell_bounds(tp_comm_t *w)
{
    static const size_t bytes[] = {15, 16, 17, 71, 72, 73, 239, 240, 241, 631, 632, 633};
    for (size_t i = 0; i < sizeof(bytes) / sizeof(bytes[0]); i++) {
        check_movement(w, TP_BYTES, bytes[i], (int)(i % 2));
        check_p2p(w, TP_BYTES, bytes[i], (int)(i % 2));
    }
}

/* big: slices of several parts too; p2p: the send/recv patterns too; quick: fewer types and sizes (sub-comms). */
static void run_all(tp_comm_t *w, int big, int p2p, int quick)
{
    static const tp_dtype_t types[] = {TP_BYTES, TP_F32, TP_F64, TP_BF16, TP_F16, TP_I32, TP_I64};
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        tp_dtype_t t = types[ti];
        if (quick && t != TP_BYTES && t != TP_F32 && t != TP_BF16) continue;
        size_t es = esize(t);
        size_t sizes[] = {0, 1, 7, 4096 / es, (part - 1) / es, (part + 1) / es + 1, 3 * part / es + 5,
                          (size_t)n * 3 * part / es + 3};
        size_t nsizes = sizeof(sizes) / sizeof(sizes[0]) - (big ? 0 : 1);
        for (size_t si = 0; si < nsizes; si += quick && si == 2 ? 3 : 1) {
            int odd = (int)(si % 2);
            if (t != TP_BYTES) check_reductions(w, t, sizes[si], odd);
            if (t == TP_BYTES || t == TP_F32 || t == TP_BF16 || t == TP_I64 || big) check_movement(w, t, sizes[si], odd);
            if (p2p && t == TP_BYTES) check_p2p(w, t, sizes[si], odd);
        }
    }
}

/*
 * Every collective again (fewer types and sizes) on sub-communicators: halves by parity with the keys reversed (so
 * sub-rank order is not world order), then all but rank 0 (whose negative color must give NULL). me and n are the
 * sub-comm's meanwhile.
 */
static void run_split(tp_comm_t *w)
{
    int wme = me, wn = n;
    for (int round = 0; round < 2; round++) {
        int color = round == 0 ? wme % 2 : wme == 0 ? -1 : 1;
        tp_comm_t *sub = (tp_comm_t *)w;
        tp_status_t s = tp_comm_split(w, color, round == 0 ? -wme : wme, &sub);
        check("comm_split", TP_BYTES, 0, s, NULL, NULL, 0);
        if (s == TP_OK && color < 0 && sub != NULL) {
            printf("rank %d: FAIL comm_split with a negative color gave a comm\n", wme);
            failures++;
        }
        if (s == TP_OK && sub != NULL) {
            int want_n = round == 0 ? (wn + 1 - wme % 2) / 2 : wn - 1;
            int want_me = round == 0 ? (want_n - 1) - wme / 2 : wme - 1;
            me = tp_comm_rank(sub);
            n = tp_comm_size(sub);
            if (me != want_me || n != want_n) {
                printf("rank %d: FAIL comm_split round %d: rank %d of %d, want %d of %d\n", wme, round, me, n, want_me,
                       want_n);
                failures++;
            } else {
                call_seed = 1000u * (uint64_t)(round + 1); /* the same on every member, whatever comm it was in */
                run_all(sub, 0, 0, 1);
            }
            check("comm_destroy", TP_BYTES, 0, tp_comm_destroy(sub), NULL, NULL, 0);
        }
        me = wme;
        n = wn;
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--transports") == 0) { /* the registration's list, not a copy of it */
        for (int i = 0; tp_transport_at(i) != NULL; i++) printf("%s\n", tp_transport_at(i)->name);
        return 0;
    }
    tp_comm_t *w;
    tp_status_t s = tp_init(NULL, &w);
    if (s != TP_OK) {
        fprintf(stderr, "coll_check: tp_init: %s\n", tp_status_string(s));
        return 1;
    }
    me = tp_comm_rank(w);
    n = tp_comm_size(w);
    const char *pb = tp_comm_setting(w, "part_bytes");
    part = pb ? strtoull(pb, NULL, 10) : 4194304;
    int big = argc > 1 && strcmp(argv[1], "--big") == 0;
    int conformance = argc > 1 && strcmp(argv[1], "--conformance") == 0;
    tp_mem = argc > 3 && strcmp(argv[2], "--mem") == 0 && strcmp(argv[3], "tp") == 0;
    run_all(w, big, conformance, 0);
    run_cell_bounds(w);
    if (conformance) {
        run_mib(w);
        run_split(w);
    }
    tp_status_t bs = tp_barrier(w);
    if (bs != TP_OK) failures++;
    if (me == 0) printf("coll_check: %d ranks, part %zu bytes: %s\n", n, part, failures ? "FAILED" : "all match");
    tp_finalize(w);
    return failures ? 1 : 0;
}
