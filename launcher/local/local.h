/* local/local.h: the local backend: ranks forked on this host, reaped, signalled and checked for the OOM killer.
 * tprun uses it for the ranks of its own host, and each agent (tprun --agent) for the ranks of its host. */
#ifndef TPRUN_LOCAL_H
#define TPRUN_LOCAL_H

#include "core/backend.h"
#include "core/loop.h"
#include "tprun_spawn.h"

/* Where a local rank's end goes: tprun's job module, or an agent's channel to tprun. */
typedef void (*tprun_local_ended_fn)(void *owner, int r, int wstatus);

typedef struct tprun_local {
    tprun_evloop_t *ev;
    tprun_job_t *job;
    tprun_local_ended_fn ended;
    void *owner;
    const tprun_prefix_t *err_prefix; /* per rank: its stderr lines' prefix; NULL: the rank's own prefix */
    struct tprun_local_end *batch;    /* the ends of one reaping pass, reported causes first */
    int nbatch;
    long long oom_base;
    tprun_stdin_t in;        /* tprun's terminal to rank 0's stdin */
    tprun_ev_t *stdin_ev[2]; /* registrations of fd 0 and the stdin pipe, or NULL */
} tprun_local_t;

/* Takes ownership of the job's local ranks in loop ev; their ends go to ended(owner, r, wstatus). */
tp_status_t tprun_local_init(tprun_local_t *lo, tprun_evloop_t *ev, tprun_job_t *job, tprun_local_ended_fn ended,
                             void *owner);
void tprun_local_free(tprun_local_t *lo);
/* Forks and execs rank r (a local one) and watches its end and its output. */
tp_status_t tprun_local_start(tprun_local_t *lo, int r);
/* Sends sig to every running local rank's process group (SIGCONT first so a stopped rank sees it). */
void tprun_local_signal(tprun_local_t *lo, int sig);
/* Unregisters rank r's output pipes and reads them to their end. */
void tprun_local_drain(tprun_local_t *lo, int r);
/* Waits (blocking) for every running local rank's end, reporting each. */
void tprun_local_wait_all(tprun_local_t *lo);

extern const tprun_backend_ops_t tprun_local_backend;

#endif
