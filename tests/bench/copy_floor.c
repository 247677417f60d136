/*
 * copy_floor: what a rank's share of a 2-rank all_gather of malloc'd buffers costs at least on the single-copy path
 * (Open MPI vader's, and ours with TP_SHM_CMA_BYTES): the own block into place (memcpy between two private buffers)
 * plus the peer's block read with process_vm_readv, in one call and in 64 KiB pieces. Two processes pinned to CPUs
 * 0 and 1; medians of 51 passes, µs.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pinned_pair.h"

#define PASSES 51
#define PIECE  65536

static double median(double *v)
{
    qsort(v, PASSES, sizeof(double), cmp_double);
    return v[PASSES / 2];
}

/* Reads len bytes of pid's memory at remote into local, piece bytes a call; 0 on success. */
static int cma_read(pid_t pid, void *local, const void *remote, size_t len, size_t piece)
{
    for (size_t off = 0; off < len; off += piece) {
        size_t n = len - off < piece ? len - off : piece;
        struct iovec l = {(char *)local + off, n}, r = {(char *)remote + off, n};
        if (process_vm_readv(pid, &l, 1, &r, 1, 0) != (ssize_t)n) return -1;
    }
    return 0;
}

int main(void)
{
    static const size_t sizes[] = {65536, 262144, 1048576, 4194304};
    size_t max = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
    char *src = malloc(max), *dst = malloc(max);
    if (src == NULL || dst == NULL) return 1;
    memset(src, 7, max), memset(dst, 0, max);
    pid_t child = fork(); /* its copy of src is what the reads fetch */
    if (child < 0) {
        perror("copy_floor: fork");
        return 1;
    }
    if (child == 0) {
        pin(1);
        for (;;) pause();
    }
    if (pin(0) != 0) {
        fprintf(stderr, "copy_floor: cannot pin to CPU 0\n");
        kill(child, SIGKILL);
        return 77;
    }
    printf("copy_floor: medians of %d passes, us (CPUs 0 and 1)\n", PASSES);
    printf("%10s %9s %9s %9s %12s\n", "bytes", "memcpy", "cma", "cma_64K", "single_copy");
    int rc = 0;
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]) && rc == 0; i++) {
        size_t len = sizes[i];
        double m[PASSES], c1[PASSES], c64[PASSES];
        for (int p = 0; p < PASSES && rc == 0; p++) {
            double t0 = now_us();
            memcpy(dst, src, len);
            double t1 = now_us();
            rc = cma_read(child, dst, src, len, len);
            double t2 = now_us();
            rc = rc != 0 ? rc : cma_read(child, dst, src, len, PIECE);
            m[p] = t1 - t0, c1[p] = t2 - t1, c64[p] = now_us() - t2;
        }
        if (rc != 0) {
            perror("copy_floor: process_vm_readv");
            break;
        }
        double mm = median(m), c = median(c1), cp = median(c64);
        printf("%10zu %9.1f %9.1f %9.1f %12.1f\n", len, mm, c, cp, mm + (c < cp ? c : cp));
    }
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    return rc != 0;
}
