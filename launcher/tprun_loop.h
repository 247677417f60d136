/* tprun_loop.h: tprun's event loop state, shared by tprun_main.c (local ranks) and tprun_remote.c (agents). */
#ifndef TPRUN_LOOP_H
#define TPRUN_LOOP_H

#include "core/loop.h"
#include "tprun_args.h"
#include "tprun_output.h"
#include "tprun_spawn.h"

struct tprun_agents;

typedef struct tprun_loop {
    tprun_job_t *job;
    const tprun_plan_t *plan;
    struct tprun_agents *agents; /* NULL on a single-host job */
    tprun_evloop_t *ev;
    int running;       /* ranks started and not reaped */
    int started;       /* ranks started */
    int first_failure; /* the rank whose failure decides the exit status, or -1 */
    int exit_status;
    int timed_out;
    int launch_failed;
    int host_lost;             /* first failure: a host's agent was lost (named by tprun_remote.c) */
    int signals_seen;          /* SIGINT, SIGTERM, SIGHUP received */
    int signals_held;          /* the agents are starting or ending: a signal is recorded, not forwarded */
    int interrupted_by;        /* the last signal recorded so, or 0 */
    tprun_ev_t *kill_timer;    /* when tprun SIGKILLs what is left */
    tprun_ev_t *timeout_timer; /* --timeout */
    tprun_ev_t *held_timer;    /* a rank ended with 70 on another host: wait this long for the cause's report */
    int held_rank;             /* that rank, or -1 */
    tprun_ev_t *agents_timer;  /* after the SIGKILL: agents still silent then are cut off */
    long long oom_base;
    struct reaped *batch; /* room for every rank, for one pass of reaping */
    int nbatch;
    tprun_stdin_t in;
    tprun_ev_t *stdin_ev[2]; /* registrations of fd 0 and the stdin pipe, or NULL */
} tprun_loop_t;

/* A rank (local or remote) ended with a wait status: the failure rules, teardown and its output. */
void tprun_loop_rank_ended(tprun_loop_t *L, int r, int wstatus);
/* Reaps every local rank that has ended (causes before consequences). */
void tprun_loop_reap(tprun_loop_t *L);
/* The host a rank runs on, as the command line named it (this machine's name on a single-host job). */
const char *tprun_loop_rank_host(const tprun_loop_t *L, int r);
/* Why an ended rank ended, as its failure line says: "killed by signal 9 (SIGKILL), sent by tprun ...". */
void tprun_loop_rank_cause(const tprun_loop_t *L, int r, char *buf, size_t len);
/* The teardown: SIGTERM now (through the agents for remote ranks), SIGKILL after the grace. */
void tprun_loop_teardown(tprun_loop_t *L);

#endif
