/* local/local.c: the local backend: fork, reap, kill and OOM detection of the ranks on this host (the one path for
 * tprun's own ranks and every agent's). */
#include "local/local.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tprun_exit.h"

typedef struct tprun_local_end {
    int rank;
    int wstatus;
} tprun_local_end_t;

tp_status_t tprun_local_init(tprun_local_t *lo, tprun_evloop_t *ev, tprun_job_t *job, tprun_local_ended_fn ended,
                             void *owner)
{
    memset(lo, 0, sizeof(*lo));
    lo->ev = ev;
    lo->job = job;
    lo->ended = ended;
    lo->owner = owner;
    lo->in.in_fd = lo->in.pipe_fd = -1;
    tprun_oom_init();
    lo->oom_base = tprun_oom_count();
    return TP_OK;
}

static int find_rank(const tprun_job_t *job, pid_t pid)
{
    for (int i = 0; i < job->np; i++)
        if (job->ranks[i].pid == pid && job->ranks[i].running && job->ranks[i].agent < 0) return i;
    return -1;
}

/* A rank's end as its owner sees it: the keeper forgets its group, exec failures and the OOM killer are named. */
static void report_end(tprun_local_t *lo, int r, int wstatus)
{
    tprun_rank_t *rank = &lo->job->ranks[r];
    tprun_keeper_tell(&lo->job->keeper, 'R', rank->pid);
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 127) tprun_exec_reports(lo->job);
    if (WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL && rank->ended_by != SIGKILL) {
        long long count = tprun_oom_count();
        rank->oom = count >= 0 && lo->oom_base >= 0 && count > lo->oom_base;
        lo->oom_base = count;
    }
    lo->ended(lo->owner, r, wstatus);
}

/* A rank's end or stop: ends are collected for one pass of reaping (on_reaped orders them). */
static void on_rank_child(void *arg, pid_t pid, int wstatus)
{
    tprun_local_t *lo = arg;
    int r = find_rank(lo->job, pid);
    if (r < 0) return;
    tprun_rank_t *rank = &lo->job->ranks[r];
    if (WIFSTOPPED(wstatus) || WIFCONTINUED(wstatus)) { /* a stopped rank is the likely cause when peers give up */
        rank->stopped_by = WIFCONTINUED(wstatus) ? 0 : WSTOPSIG(wstatus);
        return;
    }
    rank->child_ev = NULL;
    rank->running = 0; /* so find_rank skips it; the owner does the rest */
    lo->batch[lo->nbatch].rank = r;
    lo->batch[lo->nbatch++].wstatus = wstatus;
}

/* Every rank that ended in this pass, causes before consequences: the killed rank before those its death ended. */
static void on_reaped(void *arg)
{
    tprun_local_t *lo = arg;
    int n = lo->nbatch;
    lo->nbatch = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            if (tprun_status_is_consequence(lo->batch[i].wstatus) == pass) {
                lo->job->ranks[lo->batch[i].rank].running = 1;
                report_end(lo, lo->batch[i].rank, lo->batch[i].wstatus);
            }
}

static const tprun_prefix_t *err_prefix(const tprun_local_t *lo, int r)
{
    return lo->err_prefix != NULL ? &lo->err_prefix[r] : &lo->job->ranks[r].prefix;
}

static void pump_stream(tprun_stream_t *s, const tprun_prefix_t *prefix, tprun_ev_t **ev)
{
    if (s->fd < 0) return;
    if (tprun_stream_pump(s, prefix) == 0) {
        tprun_ev_remove(*ev);
        *ev = NULL;
        tprun_stream_close(s, prefix);
    }
}

static void on_rank_out(void *arg, unsigned revents)
{
    tprun_rank_t *rank = arg;
    (void)revents;
    pump_stream(&rank->out, &rank->prefix, &rank->out_ev);
}

static void on_rank_err(void *arg, unsigned revents)
{
    tprun_rank_t *rank = arg;
    tprun_local_t *lo = rank->local;
    (void)revents;
    pump_stream(&rank->err, err_prefix(lo, (int)(rank - lo->job->ranks)), &rank->err_ev);
}

tp_status_t tprun_local_start(tprun_local_t *lo, int r)
{
    if (lo->batch == NULL) {
        lo->batch = calloc((size_t)lo->job->np, sizeof(*lo->batch));
        if (lo->batch == NULL) return TP_ERR_NO_MEMORY;
        tprun_evloop_on_reaped(lo->ev, on_reaped, lo);
    }
    tp_status_t st = tprun_rank_start(lo->job, r);
    if (st != TP_OK) return st;
    tprun_rank_t *rank = &lo->job->ranks[r];
    rank->local = lo;
    rank->child_ev =
        tprun_ev_child(lo->ev, rank->pid, TPRUN_EV_CHILD_KILL_GROUP | TPRUN_EV_CHILD_STOPS, on_rank_child, lo);
    rank->out_ev = tprun_ev_fd(lo->ev, rank->out.fd, EPOLLIN, 0, on_rank_out, rank);
    rank->err_ev = tprun_ev_fd(lo->ev, rank->err.fd, EPOLLIN, 0, on_rank_err, rank);
    return TP_OK;
}

void tprun_local_signal(tprun_local_t *lo, int sig)
{
    for (int r = 0; r < lo->job->np; r++) {
        tprun_rank_t *rank = &lo->job->ranks[r];
        if (!rank->running || rank->agent >= 0) continue;
        rank->ended_by = sig;
        /* sig before SIGCONT: a stopped rank meets it as it resumes, before it runs (and blames a peer) again. */
        kill(-rank->pid, sig);
        kill(-rank->pid, SIGCONT);
    }
}

void tprun_local_drain(tprun_local_t *lo, int r)
{
    tprun_rank_t *rank = &lo->job->ranks[r];
    tprun_ev_remove(rank->out_ev);
    tprun_ev_remove(rank->err_ev);
    rank->out_ev = rank->err_ev = NULL;
    tprun_stream_drain(&rank->out, &rank->prefix);
    tprun_stream_drain(&rank->err, err_prefix(lo, r));
}

void tprun_local_wait_all(tprun_local_t *lo)
{
    for (int r = 0; r < lo->job->np; r++) {
        tprun_rank_t *rank = &lo->job->ranks[r];
        if (!rank->running || rank->agent >= 0 || rank->child_ev == NULL) continue;
        tprun_ev_child_wait(rank->child_ev);
        on_reaped(lo);
    }
}

void tprun_local_free(tprun_local_t *lo)
{
    if (lo->ev != NULL) tprun_evloop_on_reaped(lo->ev, NULL, NULL);
    free(lo->batch);
    lo->batch = NULL;
}
