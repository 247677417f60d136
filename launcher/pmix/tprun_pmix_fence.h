/* tprun_pmix_fence.h: matching each host's part of a PMIx fence across hosts (no PMIx calls, no I/O). */
#ifndef TPRUN_PMIX_FENCE_H
#define TPRUN_PMIX_FENCE_H

#include <stddef.h>

/*
 * A fence is named by its participants' signature ("*" for the whole namespace, else ascending ranks "0,2,5")
 * and by its sequence number among that host's fences of the same signature: the n-th fence over a set of ranks
 * on one host is the n-th on every other host, because a fence is collective.
 */
typedef enum { TPRUN_FENCE_OK = 0, TPRUN_FENCE_RANK_FAILED, TPRUN_FENCE_TIMEOUT } tprun_fence_status_t;

typedef struct tprun_fence_result {
    char sig[4096];
    unsigned seq;
    tprun_fence_status_t status;
    unsigned char *data; /* OK: every contribution, concatenated in host order (malloc'd, or NULL when empty) */
    size_t len;
    int *nodes; /* the hosts to answer: those whose part arrived (malloc'd) */
    int nnodes;
    int failed_rank;   /* RANK_FAILED: the rank */
    char missing[256]; /* not OK: the hosts whose part never arrived, as "1,3" */
} tprun_fence_result_t;

typedef struct tprun_fence_table tprun_fence_table_t;
typedef void (*tprun_fence_done_fn)(void *ctx, tprun_fence_result_t *res);

/* rank_node: world_size entries, each rank's host index (0 .. num_nodes-1). NULL when out of memory. */
tprun_fence_table_t *tprun_fence_table_create(int world_size, int num_nodes, const int *rank_node);
void tprun_fence_table_destroy(tprun_fence_table_t *t);

/*
 * Host node's part of fence (sig, seq), due by deadline (0: none). Returns 1 with *res filled when the fence is
 * complete (or had already failed: then res names only this host), 0 while other hosts' parts are missing, and
 * -1 with err set for a part that cannot be (a malformed signature, a host not taking part, a second part).
 */
int tprun_fence_contribute(tprun_fence_table_t *t, int node, const char *sig, unsigned seq, const void *data,
                           size_t len, double deadline, tprun_fence_result_t *res, char *err, size_t err_len);
/* Rank ended: every fence it takes part in, pending or still to come, ends with RANK_FAILED (done is called for
 * each pending one). */
void tprun_fence_fail_rank(tprun_fence_table_t *t, int rank, tprun_fence_done_fn done, void *ctx);
/* Ends every pending fence whose deadline is at or before now with TIMEOUT, calling done for each. */
void tprun_fence_expire(tprun_fence_table_t *t, double now, tprun_fence_done_fn done, void *ctx);
/* The earliest deadline of a pending fence, or 0. */
double tprun_fence_next_deadline(const tprun_fence_table_t *t);
/* Pending fences (for tests and the debug log). */
int tprun_fence_pending(const tprun_fence_table_t *t);
void tprun_fence_result_free(tprun_fence_result_t *res);

#endif
