/* bench_schedule.h: what tp-bench and its MPI twin share, so both time the same calls the same way. */
#ifndef BENCH_SCHEDULE_H
#define BENCH_SCHEDULE_H

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* The ops by their index in op_names, as every program and --ops number them. */
enum {
    BENCH_ALL_REDUCE,
    BENCH_ALL_GATHER,
    BENCH_REDUCE_SCATTER,
    BENCH_BROADCAST,
    BENCH_SENDRECV,
    BENCH_ALL_TO_ALL,
    BENCH_OPS
};
enum { BENCH_MAX_ITERS = 500, BENCH_MAX_SIZES = 32 };
static const char *const op_names[BENCH_OPS] = {"allreduce", "allgather", "reduce_scatter",
                                                "bcast",     "sendrecv",  "alltoall"};
#define BENCH_DEFAULT_OPS "allreduce,allgather,reduce_scatter,bcast,sendrecv"

/* Iterations per size: 500 up to 1 MiB, then fewer so a 64 MiB row stays seconds long. */
static inline int iterations_for(size_t bytes)
{
    if (bytes <= ((size_t)1 << 20)) return 500;
    if (bytes <= ((size_t)4 << 20)) return 100;
    if (bytes <= ((size_t)16 << 20)) return 20;
    return 10;
}

/* qsort order for the per-iteration times whose p50 and p90 are printed. */
static inline int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct bench_opts {
    int json, help;
    int iters;                     /* timed calls per size; 0: iterations_for */
    size_t max_bytes;              /* sizes run 16, 64, 256, ... up to this */
    size_t sizes[BENCH_MAX_SIZES]; /* --sizes: these instead, in this order (max_bytes their largest) */
    int nsizes;
    unsigned ops;     /* bit i: op_names[i] */
    const char *impl; /* the MPI twin's name in its JSON rows */
    int mem_tp;       /* tp-bench --mem tp: buffers from tp_mem_alloc */
    int rewrite;      /* --rewrite: each call's send bytes are written first, inside its time */
    int no_barrier;   /* --no-barrier: one barrier before a size's timed calls, none between them */
} bench_opts_t;

static inline void bench_usage(FILE *f, const char *prog, int with_impl)
{
    fprintf(
        f,
        "usage: %s [--json] [--ops LIST] [--max-bytes N | --sizes LIST] [--iters N] [--rewrite] [--no-barrier] %s\n"
        "  --ops LIST     comma-separated, from allreduce,allgather,reduce_scatter,bcast,sendrecv,alltoall\n"
        "                 (default " BENCH_DEFAULT_OPS ")\n"
        "  --max-bytes N  largest size per rank in bytes, 16 to 1073741824; sizes run 16, 64, 256, ... (default "
        "67108864)\n"
        "  --sizes LIST   comma-separated byte counts to run instead, e.g. 1048576,1572864,2097152\n"
        "  --iters N      timed calls per size, 1 to %d (default 500 up to 1 MiB, 100 at 4 MiB, 20 at 16 MiB, 10 "
        "above)\n"
        "  --rewrite      write the send buffer (memset) before each call, as an engine's compute would, and count\n"
        "                 that write in the call's time (where peers read it in place, the write pays for that)\n"
        "  --no-barrier   one barrier before each size's timed calls instead of one before each call, as an engine\n"
        "                 calls them between its own work; a row is then the slowest rank's mean (p50 = p90)\n"
        "  --json         one JSON object per size instead of the table (\"switches\": context switches per\n"
        "                 call, with its barrier unless --no-barrier, the mean over ranks)\n%s",
        prog, with_impl ? "[--impl NAME]" : "[--mem malloc|tp]", BENCH_MAX_ITERS,
        with_impl ? "  --impl NAME    the name in the JSON rows (default mpi)\n"
                  : "  --mem KIND     where the buffers come from: malloc (default), or tp (tp_mem_alloc: same-host\n"
                    "                 peers read them in place; JSON rows then name the impl tprun-mem)\n");
}

/* A decimal integer in [lo, hi], digits only. */
static inline int bench_parse_count(const char *text, unsigned long long lo, unsigned long long hi,
                                    unsigned long long *out)
{
    char *end;
    if (text[0] < '0' || text[0] > '9') return -1;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end != '\0' || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

static inline int bench_parse_ops(const char *list, unsigned *out)
{
    unsigned ops = 0;
    for (const char *p = list; *p != '\0';) {
        size_t len = strcspn(p, ",");
        int found = -1;
        for (int i = 0; i < BENCH_OPS; i++)
            if (strlen(op_names[i]) == len && strncmp(op_names[i], p, len) == 0) found = i;
        if (found < 0) return -1;
        ops |= 1u << found;
        p += len + (p[len] == ',');
    }
    *out = ops;
    return ops != 0 ? 0 : -1;
}

/* Bytes of send a call of op (an index of op_names) reads at bytes per rank in a world of n: reduce_scatter's n blocks,
 * else bytes. */
static inline size_t bench_send_bytes(int op, size_t bytes, int n)
{
    return op == BENCH_REDUCE_SCATTER ? bytes * (size_t)n : bytes;
}

/* Whether op runs at bytes per rank in a world of n: all_to_all needs an f32 for every rank. */
static inline int bench_op_fits(int op, size_t bytes, int n)
{
    return op != BENCH_ALL_TO_ALL || bytes >= (size_t)4 * n;
}

/* What one size's timing loop needs from its program: a barrier and one call (each 0 on success), its clock in µs,
 * and the send bytes --rewrite writes before each call. */
typedef struct bench_calls {
    int (*barrier)(void *ctx);
    int (*call)(void *ctx);
    double (*now_us)(void);
    void *ctx;
    void *send;
    size_t send_bytes;
} bench_calls_t;

/* Untimed calls before a size's timed ones: enough to move BENCH_WARM_BYTES of send bytes (at least 5, at most 200),
 * so the timed calls find the transports' pages touched. The first touch of each page through each mapping is paid
 * once per process, and in a VM dearly: 4 ranks on this project's 2-vCPU VM took ~10 ms (60-80 calls) to get their
 * shm rings' pages for 1 KiB calls, which 5 calls left inside the timed ones (docs/BENCHMARKS.md, "Tenth pass"). */
#define BENCH_WARM_BYTES ((size_t)256 << 10)
static inline int bench_warm_calls(size_t send_bytes)
{
    size_t k = send_bytes > 0 ? (BENCH_WARM_BYTES + send_bytes - 1) / send_bytes : 200;
    return k < 5 ? 5 : k > 200 ? 200 : (int)k;
}

/* warm untimed calls, then iters (at least 1) timed into t (µs), each after a barrier; with --no-barrier one barrier
 * before them and each call's time the mean, as no single call's time means anything alone. *switches: this rank's
 * context switches (voluntary and not) per timed call. -1 as soon as a barrier or a call fails. */
static inline int bench_time_block(const bench_opts_t *o, const bench_calls_t *c, int warm, int iters, double *t,
                                   double *switches)
{
    struct rusage r0, r1;
    double first = 0;
    for (int i = -warm; i < iters; i++) {
        if ((!o->no_barrier || i <= 0) && c->barrier(c->ctx) != 0) return -1;
        if (i == 0) getrusage(RUSAGE_SELF, &r0);
        double t0 = c->now_us();
        if (i == 0) first = t0;
        if (o->rewrite) memset(c->send, i & 0x3f, c->send_bytes);
        if (c->call(c->ctx) != 0) return -1;
        if (i >= 0) t[i] = c->now_us() - t0;
    }
    getrusage(RUSAGE_SELF, &r1);
    double total = c->now_us() - first;
    for (int i = 0; o->no_barrier && i < iters; i++) t[i] = total / iters;
    *switches = ((double)(r1.ru_nvcsw - r0.ru_nvcsw) + (double)(r1.ru_nivcsw - r0.ru_nivcsw)) / iters;
    return 0;
}

/* One size: bench_warm_calls untimed calls, then iters timed (bench_time_block). */
static inline int bench_time_calls(const bench_opts_t *o, const bench_calls_t *c, int iters, double *t,
                                   double *switches)
{
    return bench_time_block(o, c, bench_warm_calls(c->send_bytes), iters, t, switches);
}

/* One JSON row (--json), the form coll_bench.sh and plot_bench.py read: tmax the slowest rank's times, sorted;
 * switches the mean over ranks. */
static inline void bench_print_json(const char *impl, int n, int op, size_t bytes, int iters, const double *tmax,
                                    double switches)
{
    printf("{\"impl\":\"%s\",\"ranks\":%d,\"op\":\"%s\",\"bytes\":%zu,\"iters\":%d,\"p50_us\":%.2f,\"p90_us\":%.2f,"
           "\"min_us\":%.2f,\"p10_us\":%.2f,\"switches\":%.2f}\n",
           impl, n, op_names[op], bytes, iters, tmax[iters / 2], tmax[(iters * 9) / 10], tmax[0], tmax[iters / 10],
           switches);
}

/* The i-th size to run (0 after the last): --sizes in order, else 16, 64, 256, ... up to max_bytes. */
static inline size_t bench_size(const bench_opts_t *o, int i)
{
    if (o->nsizes > 0) return i < o->nsizes ? o->sizes[i] : 0;
    size_t b = (size_t)16 << (2 * i);
    return i < 16 && b <= o->max_bytes ? b : 0;
}

/* "1048576,2097152": each from 16 to 1G, at most BENCH_MAX_SIZES; max_bytes becomes the largest. */
static inline int bench_parse_sizes(const char *list, bench_opts_t *o)
{
    o->nsizes = 0;
    o->max_bytes = 0;
    for (const char *p = list; *p != '\0';) {
        char one[24];
        size_t len = strcspn(p, ",");
        unsigned long long n;
        if (len == 0 || len >= sizeof(one) || o->nsizes == BENCH_MAX_SIZES) return -1;
        memcpy(one, p, len);
        one[len] = '\0';
        if (bench_parse_count(one, 16, (unsigned long long)1 << 30, &n) != 0) return -1;
        o->sizes[o->nsizes++] = (size_t)n;
        if ((size_t)n > o->max_bytes) o->max_bytes = (size_t)n;
        p += len + (p[len] == ',');
    }
    return o->nsizes > 0 ? 0 : -1;
}

/* Parses both programs' options (--impl only when with_impl); on error writes one line naming the option. */
static inline int bench_parse_args(int argc, char **argv, int with_impl, bench_opts_t *o, char *err, size_t len)
{
    *o = (bench_opts_t){.max_bytes = (size_t)64 << 20, .impl = "mpi"};
    bench_parse_ops(BENCH_DEFAULT_OPS, &o->ops);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        unsigned long long n;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            o->help = 1;
        } else if (strcmp(a, "--json") == 0) {
            o->json = 1;
        } else if (strcmp(a, "--rewrite") == 0) {
            o->rewrite = 1;
        } else if (strcmp(a, "--no-barrier") == 0) {
            o->no_barrier = 1;
        } else if (strcmp(a, "--ops") == 0 || strcmp(a, "--max-bytes") == 0 || strcmp(a, "--iters") == 0 ||
                   strcmp(a, "--sizes") == 0 || (with_impl && strcmp(a, "--impl") == 0) ||
                   (!with_impl && strcmp(a, "--mem") == 0)) {
            if (v == NULL) return snprintf(err, len, "%s: needs a value (--help lists the options)", a), -1;
            i++;
            if (strcmp(a, "--impl") == 0) {
                o->impl = v;
            } else if (strcmp(a, "--mem") == 0) {
                if (strcmp(v, "malloc") != 0 && strcmp(v, "tp") != 0)
                    return snprintf(err, len, "--mem: expected malloc or tp, got \"%s\"", v), -1;
                o->mem_tp = strcmp(v, "tp") == 0;
            } else if (strcmp(a, "--ops") == 0) {
                if (bench_parse_ops(v, &o->ops) != 0)
                    return snprintf(err, len,
                                    "--ops: expected a comma-separated list of allreduce, allgather, "
                                    "reduce_scatter, bcast, sendrecv, alltoall, got \"%s\"",
                                    v),
                           -1;
            } else if (strcmp(a, "--sizes") == 0) {
                if (bench_parse_sizes(v, o) != 0)
                    return snprintf(err, len,
                                    "--sizes: expected up to %d comma-separated byte counts from 16 to 1073741824, "
                                    "got \"%s\"",
                                    BENCH_MAX_SIZES, v),
                           -1;
            } else if (strcmp(a, "--max-bytes") == 0) {
                if (bench_parse_count(v, 16, (unsigned long long)1 << 30, &n) != 0)
                    return snprintf(err, len, "--max-bytes: expected a byte count from 16 to 1073741824, got \"%s\"",
                                    v),
                           -1;
                o->max_bytes = (size_t)n;
            } else {
                if (bench_parse_count(v, 1, BENCH_MAX_ITERS, &n) != 0)
                    return snprintf(err, len, "--iters: expected an integer from 1 to %d, got \"%s\"", BENCH_MAX_ITERS,
                                    v),
                           -1;
                o->iters = (int)n;
            }
        } else {
            return snprintf(err, len, "unknown option \"%s\" (--help lists the options)", a), -1;
        }
    }
    for (int i = 0; i < o->nsizes; i++) /* buffers are sized by max_bytes, whatever order the options came in */
        if (o->sizes[i] > o->max_bytes) o->max_bytes = o->sizes[i];
    return 0;
}

#endif
