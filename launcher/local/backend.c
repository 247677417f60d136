/* local/backend.c: the local backend as tprun's job sees it: its ranks' ends go to the job module, and tprun's
 * terminal is forwarded to rank 0's stdin. */
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "core/job.h"
#include "local/local.h"
#include "services.h"
#include "tprun_exit.h"

extern char **environ;

static int local_wanted(const tprun_plan_t *plan) { return (void)plan, 1; }

static void job_rank_ended(void *owner, int r, int wstatus) { tprun_loop_rank_ended(owner, r, wstatus); }

static tp_status_t local_setup(tprun_loop_t *L)
{
    L->local = malloc(sizeof(*L->local));
    if (L->local == NULL) return TP_ERR_NO_MEMORY;
    return tprun_local_init(L->local, L->ev, L->job, job_rank_ended, L);
}

static int local_launch(tprun_loop_t *L)
{
    tprun_job_t *job = L->job;
    if (job->defer_envs && tprun_job_build_envs(job, environ) != TP_OK) { /* the agents' ranks run already */
        tprun_say("could not build the local ranks' environments; ending the agents");
        tprun_job_launch_failed(L);
        return 0;
    }
    if (tprun_services_rank_envs(job) != TP_OK) {
        tprun_job_launch_failed(L);
        return 0;
    }
    for (int r = 0; r < job->np; r++) {
        if (job->ranks[r].agent >= 0) continue;
        if (tprun_local_start(L->local, r) != TP_OK) {
            tprun_say("could not start rank %d of %d; ending the %d started", r, job->np, L->started);
            tprun_job_launch_failed(L);
            return 0;
        }
        tprun_job_rank_started(L, r);
    }
    return 0;
}

static void local_signal(tprun_loop_t *L, int sig) { tprun_local_signal(L->local, sig); }

static void stdin_stop(tprun_local_t *lo)
{
    if (lo->in.pipe_fd < 0 && lo->in.in_fd < 0) return;
    for (int i = 0; i < 2; i++) {
        tprun_ev_remove(lo->stdin_ev[i]);
        lo->stdin_ev[i] = NULL;
    }
    tprun_stdin_close(&lo->in);
}

static void on_stdin_in(void *arg, unsigned revents);
static void on_stdin_out(void *arg, unsigned revents);

/* Moves stdin to rank 0 and registers for what the forwarder waits on next. */
static void stdin_step(tprun_local_t *lo, int in_ready)
{
    int want = tprun_stdin_pump(&lo->in, in_ready);
    if (want == 0) {
        stdin_stop(lo);
        return;
    }
    unsigned ev[2] = {want == 1 ? EPOLLIN : 0, want == 2 ? EPOLLOUT : 0};
    int fds[2] = {lo->in.in_fd, lo->in.pipe_fd};
    const tprun_ev_fd_fn fns[2] = {on_stdin_in, on_stdin_out};
    for (int i = 0; i < 2; i++) {
        if (lo->stdin_ev[i] != NULL && ev[i] == 0) {
            tprun_ev_remove(lo->stdin_ev[i]);
            lo->stdin_ev[i] = NULL;
        } else if (lo->stdin_ev[i] != NULL) {
            tprun_ev_fd_set(lo->stdin_ev[i], ev[i]);
        } else if (ev[i] != 0) {
            lo->stdin_ev[i] = tprun_ev_fd(lo->ev, fds[i], ev[i], 0, fns[i], lo);
        }
    }
}

static void on_stdin_in(void *arg, unsigned revents) { (void)revents, stdin_step(arg, 1); }

static void on_stdin_out(void *arg, unsigned revents) { (void)revents, stdin_step(arg, 0); }

/* tprun's terminal to rank 0, when rank 0 is started here. */
static void local_stdin_start(tprun_loop_t *L)
{
    tprun_job_t *job = L->job;
    if (!job->stdin_tty || L->started == 0) return;
    L->local->in.in_fd = STDIN_FILENO;
    L->local->in.pipe_fd = job->stdin_pipe[1];
    job->stdin_pipe[1] = -1;
    stdin_step(L->local, 0);
}

static void local_rank_ended(tprun_loop_t *L, int r)
{
    if (r == L->job->stdin_index) stdin_stop(L->local);
}

static void local_drain(tprun_loop_t *L, int r)
{
    if (L->job->ranks[r].agent < 0) tprun_local_drain(L->local, r);
}

static void local_finish(tprun_loop_t *L)
{
    stdin_stop(L->local);
    tprun_local_free(L->local);
    free(L->local);
    L->local = NULL;
}

const tprun_backend_ops_t tprun_local_backend = {
    .name = "local",
    .wanted = local_wanted,
    .setup = local_setup,
    .launch = local_launch,
    .signal = local_signal,
    .stdin_start = local_stdin_start,
    .rank_ended = local_rank_ended,
    .drain = local_drain,
    .finish = local_finish,
};
