/* core/state.h: a running job as tprun sees it: the state the job module (core/job.c) keeps and every backend
 * reports into. Types only: who reports calls core/job.h. */
#ifndef TPRUN_CORE_STATE_H
#define TPRUN_CORE_STATE_H

#include "core/loop.h"
#include "tprun_args.h"
#include "tprun_output.h"
#include "tprun_spawn.h"

/* Backends a job can have active at once (ssh's agents and tprun's own local ranks). */
#define TPRUN_BACKENDS_MAX 4

struct tprun_agents;
struct tprun_local;
struct tprun_backend_ops;

typedef struct tprun_loop {
    tprun_job_t *job;
    const tprun_plan_t *plan;
    tprun_evloop_t *ev;
    const struct tprun_backend_ops *backends[TPRUN_BACKENDS_MAX]; /* active for this job, in the list's order */
    int nbackends;
    struct tprun_local *local;   /* the local backend's state */
    struct tprun_agents *agents; /* the ssh backend's state; NULL on a single-host job */
    int running;                 /* ranks started and not reaped */
    int started;                 /* ranks started */
    int first_failure;           /* the rank whose failure decides the exit status, or -1 */
    int exit_status;
    int timed_out;
    int launch_failed;
    int host_lost;             /* first failure: a host's agent was lost (named by the ssh backend) */
    int signals_seen;          /* SIGINT, SIGTERM, SIGHUP received */
    int signals_held;          /* the agents are starting or ending: a signal is recorded, not forwarded */
    int interrupted_by;        /* the last signal recorded so, or 0 */
    tprun_ev_t *kill_timer;    /* when tprun SIGKILLs what is left */
    tprun_ev_t *timeout_timer; /* --timeout */
    tprun_ev_t *held_timer;    /* a rank ended with 70 on another host: wait this long for the cause's report */
    int held_rank;             /* that rank, or -1 */
    double held_since;         /* when it was held (now_s) */
    tprun_ev_t *fate_timer;    /* after the first failure: when the ranks not yet ended on their own get the SIGTERM */
} tprun_loop_t;

#endif
