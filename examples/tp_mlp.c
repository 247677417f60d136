/*
 * tp_mlp: a tensor-parallel two-layer MLP forward pass, y = relu(x W1) W2. W1 is split by columns (each rank a
 * slice of the hidden units), W2 by rows (the same slice), and one all_reduce adds the partial outputs. Every rank
 * also computes each rank's partial product itself and adds them in rank order: the output must match bit for bit.
 *   tprun -n N tp_mlp [--dtype f32|bf16] [--batch B] [--model D] [--hidden H] [--seed S] [--iters K]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tp.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

/* Deterministic values in [-1, 1) from (seed, tensor, index). */
static float synth(uint64_t seed, uint64_t tensor, uint64_t i)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull ^ tensor * 0xc2b2ae3d27d4eb4full ^ (i + 1) * 0x165667b19e3779f9ull;
    x ^= x >> 31, x *= 0xbf58476d1ce4e5b9ull, x ^= x >> 29;
    return (float)((x >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static uint16_t to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

typedef struct mlp {
    int batch, model, hidden, bf16;
    uint64_t seed;
} mlp_t;

/* Hidden units [h0, h1) of rank r's shard: as even as the split allows. */
static void shard(const mlp_t *m, int r, int n, int *h0, int *h1)
{
    int base = m->hidden / n, rem = m->hidden % n;
    *h0 = r * base + (r < rem ? r : rem);
    *h1 = *h0 + base + (r < rem);
}

/* A value as the type stores it (bf16 values are rounded once, when made). */
static float value(const mlp_t *m, uint64_t tensor, uint64_t i)
{
    float v = synth(m->seed, tensor, i);
    return m->bf16 ? from_bf16(to_bf16(v)) : v;
}

/* Rank r's partial output (batch x model, f32): relu(x W1[:, h0:h1]) W2[h0:h1, :]. Returns the layer times. */
static void partial(const mlp_t *m, int r, int n, float *out, double *t1, double *t2)
{
    int h0, h1;
    shard(m, r, n, &h0, &h1);
    int w = h1 - h0;
    float *hid = calloc((size_t)m->batch * (size_t)(w > 0 ? w : 1), 4);
    double t = now_us();
    for (int b = 0; b < m->batch; b++)
        for (int j = 0; j < w; j++) {
            float acc = 0;
            for (int k = 0; k < m->model; k++)
                acc += value(m, 0, (uint64_t)b * m->model + k) * value(m, 1, (uint64_t)k * m->hidden + h0 + j);
            hid[(size_t)b * w + j] = acc > 0 ? acc : 0;
        }
    *t1 = now_us() - t;
    t = now_us();
    for (int b = 0; b < m->batch; b++)
        for (int o = 0; o < m->model; o++) {
            float acc = 0;
            for (int j = 0; j < w; j++)
                acc += hid[(size_t)b * w + j] * value(m, 2, (uint64_t)(h0 + j) * m->model + o);
            out[(size_t)b * m->model + o] = acc;
        }
    *t2 = now_us() - t;
    free(hid);
}

int main(int argc, char **argv)
{
    mlp_t m = {.batch = 8, .model = 256, .hidden = 1024, .bf16 = 0, .seed = 1};
    int iters = 3;
    for (int i = 1; i < argc; i += 2) {
        const char *opt = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        long long v = val ? strtoll(val, &end, 10) : 0;
        int number_ok = val && *val && *end == '\0' && v > 0 && v <= (1 << 24);
        int known = strcmp(opt, "--dtype") == 0 || strcmp(opt, "--batch") == 0 || strcmp(opt, "--model") == 0 ||
                    strcmp(opt, "--hidden") == 0 || strcmp(opt, "--seed") == 0 || strcmp(opt, "--iters") == 0;
        if (!known) {
            fprintf(stderr, "tp_mlp: unknown option %s (usage: tp_mlp [--dtype f32|bf16] [--batch B] [--model D] "
                            "[--hidden H] [--seed S] [--iters K])\n", opt);
            return 2;
        } else if (val == NULL) {
            fprintf(stderr, "tp_mlp: %s needs a value\n", opt);
            return 2;
        } else if (strcmp(opt, "--dtype") == 0) {
            if (strcmp(val, "f32") != 0 && strcmp(val, "bf16") != 0) {
                fprintf(stderr, "tp_mlp: --dtype: expected f32 or bf16, got \"%s\"\n", val);
                return 2;
            }
            m.bf16 = strcmp(val, "bf16") == 0;
            continue;
        } else if (!number_ok) {
            fprintf(stderr, "tp_mlp: %s: expected a positive integer, got \"%s\"\n", opt, val);
            return 2;
        }
        if (strcmp(opt, "--batch") == 0) m.batch = (int)v;
        else if (strcmp(opt, "--model") == 0) m.model = (int)v;
        else if (strcmp(opt, "--hidden") == 0) m.hidden = (int)v;
        else if (strcmp(opt, "--seed") == 0) m.seed = (unsigned long long)v;
        else iters = (int)v;
    }
    tp_comm_t *w;
    tp_status_t s = tp_init(NULL, &w);
    if (s != TP_OK) {
        fprintf(stderr, "tp_mlp: tp_init: %s\n", tp_status_string(s));
        return 1;
    }
    int me = tp_comm_rank(w), n = tp_comm_size(w);
    size_t cells = (size_t)m.batch * (size_t)m.model;
    float *mine = malloc(cells * 4), *sum = malloc(cells * 4), *ref = calloc(cells, 4), *tmp = malloc(cells * 4);
    uint16_t *hmine = malloc(cells * 2), *hsum = malloc(cells * 2);
    double t1 = 0, t2 = 0, tred = 0, a, b;
    for (int it = 0; it < iters; it++) {
        partial(&m, me, n, mine, &a, &b);
        t1 += a, t2 += b;
        double t = now_us();
        if (m.bf16) { /* the engine's activations are bf16: partials are rounded, summed in f32, rounded once */
            for (size_t i = 0; i < cells; i++) hmine[i] = to_bf16(mine[i]);
            s = tp_all_reduce(w, hmine, hsum, cells, TP_BF16, TP_SUM, NULL);
        } else {
            s = tp_all_reduce(w, mine, sum, cells, TP_F32, TP_SUM, NULL);
        }
        tred += now_us() - t;
        if (s != TP_OK) {
            fprintf(stderr, "tp_mlp: rank %d: all_reduce: %s (%s)\n", me, tp_status_string(s), tp_last_error());
            return 1;
        }
    }
    /* The reference: every rank's partial computed here, added in rank order as tp.h documents. */
    for (int r = 0; r < n; r++) {
        partial(&m, r, n, tmp, &a, &b);
        for (size_t i = 0; i < cells; i++) {
            float v = m.bf16 ? from_bf16(to_bf16(tmp[i])) : tmp[i];
            ref[i] = r == 0 ? v : ref[i] + v;
        }
    }
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < cells; i++) {
        int same = m.bf16 ? hsum[i] == to_bf16(ref[i]) : memcmp(&sum[i], &ref[i], 4) == 0;
        if (!same && bad++ == 0) first = i;
    }
    int all_bad = 0;
    tp_all_reduce(w, &(int){bad != 0}, &all_bad, 1, TP_I32, TP_MAX, NULL);
    const char *dtype = m.bf16 ? "bf16" : "f32";
    if (bad)
        printf("tp_mlp rank %d: MISMATCH: %zu of %zu outputs differ from the rank-order reference (first at %zu)\n", me,
               bad, cells, first);
    if (me == 0) {
        printf("tp_mlp: %d ranks, %s, batch %d, model %d, hidden %d (%d per rank), seed %llu, %d iterations\n", n,
               dtype, m.batch, m.model, m.hidden, m.hidden / n, (unsigned long long)m.seed, iters);
        printf("  rank 0, mean per iteration, the three steps one after another:\n");
        printf("    %-58s %10.1f us\n", "layer 1, column-parallel (relu(x W1) on this rank's slice)", t1 / iters);
        printf("    %-58s %10.1f us\n", "layer 2, row-parallel (this rank's partial of h W2)", t2 / iters);
        printf("    %-58s %10.1f us\n", "all_reduce of the partials, waiting for the slowest rank", tred / iters);
        printf("tp_mlp: %d ranks, %s: %d iterations, output (%zu values) equal bit for bit to the rank-order reference "
               "on every rank: %s\n",
               n, dtype, iters, cells, all_bad ? "FAIL" : "PASS");
    }
    free(mine), free(sum), free(ref), free(tmp), free(hmine), free(hsum);
    tp_finalize(w);
    return bad || all_bad ? 1 : 0;
}
