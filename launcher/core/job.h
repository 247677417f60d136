/* core/job.h: the job module: the failure policy every backend reports into (rank started, rank ended with its
 * wait status, host lost), the teardown, --timeout, the exit status and the summary line. */
#ifndef TPRUN_CORE_JOB_H
#define TPRUN_CORE_JOB_H

#include "core/backend.h"
#include "core/state.h"

/*
 * How long a peer-failed exit (70) waits for its cause's report: across hosts the cause's report comes later;
 * on this host the cause's exit is visible within microseconds of its consequences'. The one place of that rule.
 */
#define TPRUN_CAUSE_WAIT_S       0.25
#define TPRUN_LOCAL_CAUSE_WAIT_S 0.02
/* How long, after the first failure, the other ranks get to end on their own before the teardown's SIGTERM. */
#define TPRUN_FATE_WAIT_S 0.25

/* Runs the job from the checked plan with the backends (a NULL-ended list) that want it; tprun's exit status. */
int tprun_job_run(const tprun_plan_t *plan, const char *host, const tprun_backend_ops_t *const *backends);
/* A rank (local or remote) started: counted running. */
void tprun_job_rank_started(tprun_loop_t *L, int r);
/* A rank (local or remote) ended with a wait status: the failure rules, teardown and its output. */
void tprun_loop_rank_ended(tprun_loop_t *L, int r, int wstatus);
/* The launch failed after some ranks may run: the exit status says so and they are ended. */
void tprun_job_launch_failed(tprun_loop_t *L);
/* The teardown: SIGTERM now (through the agents for remote ranks), SIGKILL after the grace. */
void tprun_loop_teardown(tprun_loop_t *L);
/* A rank's output pipes: unregistered and read to their end (its output comes after its failure line). */
void tprun_job_drain_rank(tprun_loop_t *L, int r);

#endif
