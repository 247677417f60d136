/* tprun_pmix_loop.c: what tprun --pmix changes in a single-host job: start, PMIx_Abort, death notification, end. */
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "runtime_log.h"
#include "tprun_exit.h"
#include "tprun_loop.h"
#include "tprun_pmix.h"

/* Survivors get this long after the death notification went out to act on it before tprun's SIGTERM. */
#define TPRUN_PMIX_EVENT_WINDOW_S 0.2
/* If PMIx never confirms the notification, the teardown starts after this anyway. */
#define TPRUN_PMIX_NOTIFY_LIMIT_S 2.0

static int notify_pending;

int tprun_pmix_prepare(const tprun_plan_t *plan)
{
    char err[1024];
    if (plan->remote) {
        tprun_say("--pmix: ranks on other hosts are not supported yet (PMIx serves single-host jobs)");
        return TPRUN_EXIT_USAGE;
    }
    if (tprun_pmix_load(err, sizeof(err)) != TP_OK) {
        tprun_say("%s", err);
        return TPRUN_EXIT_USAGE;
    }
    return tprun_pmix_tmpdir_create() == TP_OK ? 0 : TPRUN_EXIT_LAUNCH;
}

tp_status_t tprun_pmix_start(tprun_loop_t *L)
{
    tprun_job_t *job = L->job;
    char nspace[256];
    snprintf(nspace, sizeof(nspace), "tprun.%.200s", job->job_id);
    const char *hosts[1] = {job->host};
    tprun_pmix_job_t pj = {.nspace = nspace, .world_size = job->world_size, .num_hosts = 1, .hosts = hosts};
    tp_status_t st = tprun_pmix_server_start(&pj);
    for (int i = 0; i < job->np && st == TP_OK; i++)
        if (job->ranks[i].agent < 0) st = tprun_pmix_rank_env(job->ranks[i].id, job->envp[i], &job->envp[i]);
    if (st != TP_OK) {
        tprun_say("--pmix: could not start the PMIx server (see above); no rank was started");
        return st;
    }
    struct epoll_event e = {.events = EPOLLIN, .data.u32 = ID_PMIX};
    epoll_ctl(L->epfd, EPOLL_CTL_ADD, tprun_pmix_event_fd(), &e);
    tp_log(TP_LOG_DEBUG, "pmix", "PMIx server up for namespace %s, %d ranks", nspace, job->world_size);
    return TP_OK;
}

static int rank_index(const tprun_job_t *job, int id)
{
    for (int i = 0; i < job->np; i++)
        if (job->ranks[i].id == id) return i;
    return -1;
}

/* The job's first failure, unless one was already decided: its status is tprun's (1 when it fits no exit code). */
static void on_abort(tprun_loop_t *L, const tprun_pmix_event_t *ev)
{
    int r = rank_index(L->job, ev->rank);
    if (r < 0 || L->first_failure >= 0 || L->timed_out || L->launch_failed) return;
    L->first_failure = r;
    L->exit_status = ev->status > 0 && ev->status < 256 ? ev->status : 1;
    tprun_say("rank %d (host %s, pid %d) called PMIx_Abort(status %d): %s", ev->rank, L->job->host,
              (int)L->job->ranks[r].pid, ev->status, ev->msg);
    notify_pending = 0;
    tprun_pmix_timer_arm(0);
    tprun_loop_teardown(L);
}

void tprun_pmix_on_ready(tprun_loop_t *L)
{
    tprun_pmix_event_t ev;
    while (tprun_pmix_next_event(&ev)) {
        if (ev.kind == TPRUN_PMIX_ABORT) on_abort(L, &ev);
        else if (ev.kind == TPRUN_PMIX_NOTIFIED && notify_pending) tprun_pmix_timer_arm(TPRUN_PMIX_EVENT_WINDOW_S);
    }
    if (tprun_pmix_timer_fired() && notify_pending) {
        notify_pending = 0;
        tprun_loop_teardown(L);
    }
}

int tprun_pmix_rank_failed(tprun_loop_t *L, int r)
{
    tprun_rank_t *rank = &L->job->ranks[r];
    /* A rank tprun itself signalled is part of a teardown already under way. */
    if (rank->ended_by != 0 || tprun_pmix_notify_aborted(rank->id) != TP_OK) return 0;
    notify_pending = 1;
    tprun_pmix_timer_arm(TPRUN_PMIX_NOTIFY_LIMIT_S);
    return 1;
}

void tprun_pmix_stop(void) { tprun_pmix_server_stop(); }
