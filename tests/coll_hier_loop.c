/*
 * coll_hier_loop: all_reduce, all_gather, reduce_scatter (COUNT / size a rank) and broadcast (from a root that moves)
 * of COUNT floats (default 1 Mi) in a loop until killed, so a test can SIGKILL a rank in the middle of a hierarchical
 * call (tests/coll_hier_fate.sh); "ready" once the first round is done.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <tp.h>

int main(int argc, char **argv)
{
    size_t count = argc > 1 ? strtoull(argv[1], NULL, 10) : (size_t)1 << 20;
    tp_comm_t *w;
    if (tp_init(NULL, &w) != TP_OK) {
        fprintf(stderr, "coll_hier_loop: tp_init: %s\n", tp_last_error());
        return 1;
    }
    int n = tp_comm_size(w);
    float *send = calloc(count, sizeof(float)), *recv = malloc(count * sizeof(float) * (size_t)n);
    if (send == NULL || recv == NULL) return 1;
    for (unsigned long i = 0;; i++) {
        tp_status_t s = tp_all_reduce(w, send, recv, count, TP_F32, TP_SUM, NULL);
        if (s == TP_OK) s = tp_all_gather(w, send, recv, count, TP_F32, NULL);
        if (s == TP_OK) s = tp_reduce_scatter(w, send, recv, count / (size_t)n, TP_F32, TP_SUM, NULL);
        if (s == TP_OK) s = tp_broadcast(w, recv, count, TP_F32, (int)(i % (unsigned long)n), NULL);
        if (s != TP_OK) {
            fprintf(stderr, "coll_hier_loop: rank %d: %s\n", tp_comm_rank(w), tp_last_error());
            return 1;
        }
        if (i == 0) {
            printf("ready rank %d of %d pid %d\n", tp_comm_rank(w), n, (int)getpid());
            fflush(stdout);
        }
    }
}
