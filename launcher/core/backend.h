/* core/backend.h: a launcher backend: how a job's ranks get started, signalled and ended (local fork, ssh agents).
 * One const ops table per backend, listed in main.c; the job module calls the active ones in list order. */
#ifndef TPRUN_CORE_BACKEND_H
#define TPRUN_CORE_BACKEND_H

#include "core/state.h"

typedef struct tprun_backend_ops {
    const char *name;
    /* Whether this job needs it. */
    int (*wanted)(const tprun_plan_t *plan);
    /* Before the job's resources are taken: placement, its own state. */
    tp_status_t (*setup)(tprun_loop_t *L);
    /* Starts its ranks; returns 0, or tprun's exit status when the job cannot go on (nothing of it is left). */
    int (*launch)(tprun_loop_t *L);
    /* Sends sig to its running ranks (ended_by is already set). */
    void (*signal)(tprun_loop_t *L, int sig);
    /* Starts forwarding tprun's stdin when rank 0 is its. */
    void (*stdin_start)(tprun_loop_t *L);
    /* Rank r ended (reported by whichever backend ran it). */
    void (*rank_ended)(tprun_loop_t *L, int r);
    /* Rank r's output, read to its end now (it comes after its failure line); ranks of other backends ignored. */
    void (*drain)(tprun_loop_t *L, int r);
    /* After the job, in reverse list order: ends what it started and frees its state. */
    void (*finish)(tprun_loop_t *L);
} tprun_backend_ops_t;

#endif
