/* pmix_fence.c: PMIx_Fence latency under any PMIx server (tprun --pmix, mpirun, srun): p50/p90 by rank 0. */
#include <pmix.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Times iters fences (collecting data or not), each after overwriting one 1 KiB key; fills p50 and p90. */
static int run(const pmix_proc_t *me, int iters, int collect, double *p50, double *p90)
{
    double *t = malloc(sizeof(double) * (size_t)iters);
    char blob[1024];
    pmix_proc_t all;
    PMIX_LOAD_PROCID(&all, me->nspace, PMIX_RANK_WILDCARD);
    bool yes = true;
    pmix_info_t info;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &yes, PMIX_BOOL);
    for (int i = -20; i < iters; i++) {
        memset(blob, 'a' + (i & 15), sizeof(blob) - 1);
        blob[sizeof(blob) - 1] = '\0';
        pmix_value_t v = {.type = PMIX_STRING, .data.string = blob};
        if (PMIx_Put(PMIX_GLOBAL, "bench.blob", &v) != PMIX_SUCCESS || PMIx_Commit() != PMIX_SUCCESS) return -1;
        double t0 = now_us();
        pmix_status_t rc = PMIx_Fence(&all, 1, collect ? &info : NULL, collect ? 1 : 0);
        if (rc != PMIX_SUCCESS) {
            fprintf(stderr, "rank %u: PMIx_Fence: %s\n", me->rank, PMIx_Error_string(rc));
            return -1;
        }
        if (i >= 0) t[i] = now_us() - t0;
    }
    qsort(t, (size_t)iters, sizeof(double), cmp);
    *p50 = t[iters / 2];
    *p90 = t[iters * 9 / 10];
    free(t);
    return 0;
}

int main(int argc, char **argv)
{
    int iters = argc > 1 ? atoi(argv[1]) : 200;
    const char *label = argc > 2 ? argv[2] : "?";
    pmix_proc_t me;
    if (iters < 10 || PMIx_Init(&me, NULL, 0) != PMIX_SUCCESS) {
        fprintf(stderr, "usage: pmix_fence [ITERS>=10] [LABEL], under a PMIx server\n");
        return 2;
    }
    pmix_proc_t job;
    PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
    pmix_value_t *size = NULL;
    if (PMIx_Get(&job, PMIX_JOB_SIZE, NULL, 0, &size) != PMIX_SUCCESS) return 1;
    double c50, c90, b50, b90;
    if (run(&me, iters, 1, &c50, &c90) != 0 || run(&me, iters, 0, &b50, &b90) != 0) return 1;
    if (me.rank == 0)
        printf("| %s | %u | %.0f | %.0f | %.0f | %.0f |\n", label, size->data.uint32, c50, c90, b50, b90);
    PMIX_VALUE_RELEASE(size);
    PMIx_Finalize(NULL, 0);
    return 0;
}
