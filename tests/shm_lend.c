/*
 * shm_lend: two ranks over shm, where the owner reduces its peer's bytes straight from the ring. An odd-sized
 * exchange first leaves the ring's position off every element boundary, so elements straddle the ring's wrap and
 * spans split inside an element; every all_reduce (in and out of place) and reduce_scatter must still give the
 * rank-order sum bit for bit. Prints "shm_lend: all match" on rank 0, else the first mismatch.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tp.h>

/* Rank r's element i: not exactly representable, so a wrong pairing or a torn element changes bits. */
static double value(int r, size_t i) { return (double)(i % 9973) / 7.0 + (double)r / 3.0 + (double)(i / 9973) * 1e-3; }

static void fill(void *buf, tp_dtype_t t, int r, size_t off, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        if (t == TP_F64) ((double *)buf)[i] = value(r, off + i);
        else ((float *)buf)[i] = (float)value(r, off + i);
    }
}

/* The rank-order sum of element i, as the host reduce computes it: rank 0's value, then rank 1's added. */
static int check(const void *got, tp_dtype_t t, size_t off, size_t count, const char *what, size_t bytes)
{
    for (size_t i = 0; i < count; i++) {
        int ok;
        if (t == TP_F64) {
            double a = value(0, off + i), b = value(1, off + i), want = a + b, g = ((const double *)got)[i];
            ok = memcmp(&g, &want, sizeof(g)) == 0;
        } else {
            float a = (float)value(0, off + i), b = (float)value(1, off + i), want = a + b, g = ((const float *)got)[i];
            ok = memcmp(&g, &want, sizeof(g)) == 0;
        }
        if (!ok) {
            fprintf(stderr, "shm_lend: %s after an odd %zu-byte exchange: element %zu differs\n", what, bytes, off + i);
            return 1;
        }
    }
    return 0;
}

int main(void)
{
    tp_comm_t *w;
    if (tp_init(NULL, &w) != TP_OK) {
        fprintf(stderr, "shm_lend: tp_init: %s\n", tp_last_error());
        return 1;
    }
    int me = tp_comm_rank(w), bad = 0;
    if (tp_comm_size(w) != 2) {
        fprintf(stderr, "shm_lend: run it with 2 ranks\n");
        return 2;
    }
    size_t max = 700001; /* elements: several MiB of f64, so the 1 MiB ring wraps many times */
    uint8_t *odd = malloc(32768), *odd_in = malloc(32768);
    double *send = malloc(max * 2 * sizeof(double)), *recv = malloc(max * 2 * sizeof(double));
    if (odd == NULL || odd_in == NULL || send == NULL || recv == NULL) return 1;
    memset(odd, me, 32768);
    const size_t counts[] = {700001, 262147, 1031, 99991};
    for (int round = 0; round < 8 && !bad; round++) {
        size_t bytes = 4097 + 2 * (size_t)round * 811 + (size_t)round % 3; /* past the cells' inline payload */
        tp_dtype_t t = round % 2 ? TP_F32 : TP_F64;
        size_t count = counts[round % 4], es = tp_dtype_size(t);
        tp_status_t s = tp_exchange(w, odd, odd_in, bytes, TP_BYTES, 1 - me, NULL);
        fill(send, t, me, 0, count);
        if (s == TP_OK) s = tp_all_reduce(w, send, recv, count, t, TP_SUM, NULL);
        if (s == TP_OK) bad |= check(recv, t, 0, count, "all_reduce", bytes);
        if (s == TP_OK) s = tp_exchange(w, odd, odd_in, bytes + 2, TP_BYTES, 1 - me, NULL);
        if (s == TP_OK) s = tp_all_reduce(w, send, send, count, t, TP_SUM, NULL); /* in place */
        if (s == TP_OK) bad |= check(send, t, 0, count, "all_reduce in place", bytes + 2);
        fill(send, t, me, 0, 2 * count);
        if (s == TP_OK) s = tp_exchange(w, odd, odd_in, bytes + 4, TP_BYTES, 1 - me, NULL);
        if (s == TP_OK) s = tp_reduce_scatter(w, send, recv, count, t, TP_SUM, NULL);
        if (s == TP_OK) bad |= check(recv, t, (size_t)me * count, count, "reduce_scatter", bytes + 4);
        if (s != TP_OK) {
            fprintf(stderr, "shm_lend: rank %d: round %d (%zu-byte elements): %s\n", me, round, es, tp_last_error());
            return 1;
        }
    }
    if (me == 0 && !bad) printf("shm_lend: all match\n");
    free(odd);
    free(odd_in);
    free(send);
    free(recv);
    tp_finalize(w);
    return bad;
}
