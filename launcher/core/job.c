/* core/job.c: the job module: the failure policy every backend reports into, the teardown, --timeout and the
 * exit status; tprun_job_run drives the active backends and runs the loop. */
#include "core/job.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "runtime_log.h"
#include "services.h"
#include "tprun_exit.h"
#include "tprun_summary.h"

extern char **environ;

static double now_s(void) { return tprun_now_s(); }

/* Moves a timer earlier (never later): the first deadline set wins. */
static void arm_by(tprun_ev_t *timer, double deadline)
{
    double at = tprun_ev_timer_deadline(timer);
    if (at == 0 || deadline < at) tprun_ev_timer_set(timer, deadline);
}

/* Every running rank counts as ended by sig; each backend sends it to its own. */
static void signal_ranks(tprun_loop_t *L, int sig)
{
    for (int r = 0; r < L->job->np; r++)
        if (L->job->ranks[r].running) L->job->ranks[r].ended_by = sig;
    for (int b = 0; b < L->nbackends; b++)
        if (L->backends[b]->signal != NULL) L->backends[b]->signal(L, sig);
}

static void kill_now(tprun_loop_t *L)
{
    signal_ranks(L, SIGKILL);
    tprun_ev_timer_set(L->kill_timer, 0);
}

static void on_kill_timer(void *arg) { kill_now(arg); }

/* SIGTERM now, SIGKILL after the grace (or at once with --grace 0). */
static void teardown(tprun_loop_t *L)
{
    tprun_ev_timer_set(L->fate_timer, 0);
    if (L->plan->grace_s <= 0) {
        kill_now(L);
        return;
    }
    signal_ranks(L, SIGTERM);
    arm_by(L->kill_timer, now_s() + L->plan->grace_s);
}

void tprun_loop_teardown(tprun_loop_t *L) { teardown(L); }

/* Whether no running rank can still end on its own: each is stopped (SIGSTOP), or none is left. */
static int only_stopped_left(const tprun_loop_t *L)
{
    for (int r = 0; r < L->job->np; r++)
        if (L->job->ranks[r].running && L->job->ranks[r].stopped_by == 0) return 0;
    return 1;
}

/*
 * After the first failure the other ranks are usually ending on their own (libtp's fate path logs the cause, runs
 * the engine's callbacks, exits 70): a SIGTERM at once could end them before that. The teardown waits the fate
 * window for them, not for a stopped rank, and not at all with --grace 0.
 */
static void end_after_failure(tprun_loop_t *L)
{
    if (L->plan->grace_s <= 0 || only_stopped_left(L)) {
        teardown(L);
        return;
    }
    arm_by(L->fate_timer, now_s() + TPRUN_FATE_WAIT_S);
}

static void on_fate_timer(void *arg) { teardown(arg); }

void tprun_job_launch_failed(tprun_loop_t *L)
{
    L->launch_failed = 1;
    L->exit_status = TPRUN_EXIT_LAUNCH;
    teardown(L);
}

void tprun_job_rank_started(tprun_loop_t *L, int r)
{
    L->job->ranks[r].running = 1;
    L->started++;
    L->running++;
}

static void running_ranks(tprun_loop_t *L, char *buf, size_t len)
{
    int *list = malloc(sizeof(int) * (size_t)L->job->np);
    size_t n = 0;
    for (int r = 0; list != NULL && r < L->job->np; r++)
        if (L->job->ranks[r].running) list[n++] = r;
    tp_format_ranks(list, n, buf, len);
    free(list);
}

/* A rank that is stopped (SIGSTOP) cannot answer its peers: when they end with TP_EXIT_PEER_FAILED, it is the cause. */
static void print_stopped_cause(tprun_loop_t *L)
{
    char sig[32];
    for (int r = 0; r < L->job->np; r++) {
        tprun_rank_t *rank = &L->job->ranks[r];
        if (!rank->running || rank->stopped_by == 0) continue;
        tprun_say("rank %d (host %s, pid %d) stopped answering: it is stopped by signal %d (%s)", r,
                  tprun_loop_rank_host(L, r), (int)rank->pid, rank->stopped_by,
                  tprun_signal_name(rank->stopped_by, sig, sizeof(sig)));
        return;
    }
}

static void print_failure(tprun_loop_t *L, int r)
{
    tprun_rank_t *rank = &L->job->ranks[r];
    int st = rank->wstatus;
    char cause[400];
    tprun_loop_rank_cause(L, r, cause, sizeof(cause));
    if (WIFEXITED(st) && WEXITSTATUS(st) == TP_EXIT_PEER_FAILED) print_stopped_cause(L);
    tprun_say("rank %d (host %s, pid %d) %s", r, tprun_loop_rank_host(L, r), (int)rank->pid, cause);
}

void tprun_loop_rank_ended(tprun_loop_t *L, int r, int wstatus)
{
    tprun_job_t *job = L->job;
    tprun_rank_t *rank = &job->ranks[r];
    rank->running = 0;
    rank->wstatus = wstatus;
    rank->end_wall = tprun_wall_s();
    L->running--;
    tprun_services_rank_ended(L, r);
    for (int b = 0; b < L->nbackends; b++)
        if (L->backends[b]->rank_ended != NULL) L->backends[b]->rank_ended(L, r);
    if (tp_log_enabled(TP_LOG_DEBUG)) {
        char cause[160];
        tprun_status_describe(wstatus, 0, cause, sizeof(cause));
        tp_log(TP_LOG_DEBUG, "fate", "rank %d (pid %d) %s", r, (int)rank->pid, cause);
    }
    /* Only a failure of the job's own making counts: not one caused by a teardown already under way. */
    int candidate = tprun_status_failed(wstatus) && L->first_failure < 0 && !L->timed_out && !L->launch_failed;
    /*
     * The cause may be reported after its consequences (70): across hosts its report comes later, and on this
     * host libtp can end the peers before the killed rank's exit is visible to tprun. Hold those back a moment.
     */
    if (candidate && tprun_status_is_consequence(wstatus)) {
        if (L->held_rank < 0) {
            L->held_rank = r;
            L->held_since = now_s();
            tprun_ev_timer_set(L->held_timer,
                               L->held_since + (L->agents != NULL ? TPRUN_CAUSE_WAIT_S : TPRUN_LOCAL_CAUSE_WAIT_S));
        }
        candidate = 0;
    }
    int held = L->held_rank;
    if (candidate) {
        L->held_rank = -1;
        tprun_ev_timer_set(L->held_timer, 0);
        L->first_failure = r;
        L->exit_status = tprun_status_code(wstatus);
        print_failure(L, r);
        if (!tprun_services_rank_failed(L, r)) end_after_failure(L); /* a service (PMIx) may notify them first */
    }
    if (tprun_ev_timer_deadline(L->fate_timer) > 0 && only_stopped_left(L)) teardown(L); /* nothing to wait for */
    /* Its output was written before it ended: take it all now (after the failure line, which comes first). */
    if (L->held_rank == r) return; /* release_held or the cause's failure line comes first */
    tprun_job_drain_rank(L, r);
    if (candidate && held >= 0) tprun_job_drain_rank(L, held);
}

void tprun_job_drain_rank(tprun_loop_t *L, int r)
{
    for (int b = 0; b < L->nbackends; b++)
        if (L->backends[b]->drain != NULL) L->backends[b]->drain(L, r);
}

/* The held consequence becomes the first failure when no cause was reported in time. */
static void release_held(tprun_loop_t *L)
{
    int r = L->held_rank;
    L->held_rank = -1;
    tprun_ev_timer_set(L->held_timer, 0);
    if (r < 0) return;
    /* A SIGKILLed rank's sockets close before its exit is reported: on a loaded machine its peers' 70 can come
     * that much earlier. A rank of this host still inside exit() is reaped first, so that it is the cause. */
    tprun_wait_exiting(L->job);
    tprun_evloop_reap(L->ev);
    if (L->first_failure < 0 && !L->timed_out && !L->launch_failed) {
        L->first_failure = r;
        L->exit_status = tprun_status_code(L->job->ranks[r].wstatus);
        print_failure(L, r);
        end_after_failure(L);
    }
    tprun_job_drain_rank(L, r);
}

/* The keeper is tprun's own child, whatever the backends. */
static void on_keeper_child(void *arg, pid_t pid, int wstatus)
{
    tprun_job_t *job = arg;
    (void)wstatus;
    tp_log(TP_LOG_WARN, "keeper", "the keeper (pid %d) ended early; ranks are not cleaned up if tprun is killed",
           (int)pid);
    job->keeper.pid = 0;
    if (job->keeper.fd >= 0) close(job->keeper.fd);
    job->keeper.fd = -1;
}

static void on_signal(void *arg, int sig)
{
    tprun_loop_t *L = arg;
    if (L->signals_held) { /* the agents are starting (the launch ends, naming it) or ending */
        L->interrupted_by = sig;
        return;
    }
    L->signals_seen++;
    if (sig == SIGINT && L->signals_seen > 1) {
        tp_log(TP_LOG_INFO, "fate", "second signal (SIGINT): killing every rank now");
        kill_now(L);
        return;
    }
    /* Forward it; what does not end within the grace is killed. */
    tprun_ev_timer_set(L->fate_timer, 0);
    signal_ranks(L, sig);
    arm_by(L->kill_timer, now_s() + L->plan->grace_s);
    if (L->plan->grace_s <= 0) kill_now(L);
}

static void on_timeout(void *arg)
{
    tprun_loop_t *L = arg;
    if (L->first_failure >= 0 || L->launch_failed) return;
    char ranks[256];
    running_ranks(L, ranks, sizeof(ranks));
    L->timed_out = 1;
    L->exit_status = TP_EXIT_TIMEOUT;
    tprun_say("timeout: the job ran longer than %g s (--timeout); ranks still running: %s", L->plan->timeout_s, ranks);
    teardown(L);
}

static void on_held_timer(void *arg)
{
    tprun_loop_t *L = arg;
    /* On this host a rank still running (not stopped) may be the cause, its exit late on a busy CPU (4 ranks on 2
     * busy vCPUs: a rank whose tp_init failed ended 58 ms after the peers it had told): look again, up to the wait
     * for another host's report. A stopped rank (a hang) does not hold the failure back. */
    if (L->held_rank >= 0 && L->agents == NULL && now_s() < L->held_since + TPRUN_CAUSE_WAIT_S &&
        tprun_ranks_running(L->job)) {
        tprun_ev_timer_set(L->held_timer, now_s() + TPRUN_LOCAL_CAUSE_WAIT_S);
        return;
    }
    release_held(L);
}

static void loop_run(tprun_loop_t *L)
{
    while (L->running > 0) {
        if (tprun_evloop_run_once(L->ev, -1) != 0) {
            tp_log(TP_LOG_ERROR, "fate", "epoll_wait failed: %s; killing the job", strerror(errno));
            kill_now(L);
            tprun_evloop_reap(L->ev);
            break;
        }
    }
}

static void print_summary(tprun_loop_t *L)
{
    char what[200], stopped[240] = "";
    if (L->first_failure >= 0) snprintf(what, sizeof(what), "rank %d failed first", L->first_failure);
    else if (L->timed_out) snprintf(what, sizeof(what), "timeout after %g s", L->plan->timeout_s);
    else if (L->launch_failed) snprintf(what, sizeof(what), "tprun could not start every rank");
    else return;
    int *list = malloc(sizeof(int) * (size_t)L->job->np);
    size_t n = 0;
    for (int r = 0; list != NULL && r < L->job->np; r++)
        if (L->job->ranks[r].ended_by != 0 && r != L->first_failure) list[n++] = r;
    if (n > 0) {
        char ranks[200];
        tp_format_ranks(list, n, ranks, sizeof(ranks));
        snprintf(stopped, sizeof(stopped), "; tprun ended rank%s %s", n > 1 ? "s" : "", ranks);
    }
    free(list);
    tprun_say("job %s: exit status %d (%s%s)", L->job->job_id, L->exit_status, what, stopped);
}

/* The job's signals, timers and keeper, before any backend starts anything. */
static int job_open(tprun_loop_t *L)
{
    /* Signals arrive on the loop's signalfd; one ignored at start (nohup, a background job) stays ignored, ranks
     * included. */
    signal(SIGCHLD, SIG_DFL);
    L->ev = tprun_evloop_create();
    if (L->ev == NULL) {
        tp_log(TP_LOG_ERROR, "fate", "cannot create the signalfd or epoll: %s", strerror(errno));
        return -1;
    }
    L->job->child_mask = *tprun_evloop_child_mask(L->ev);
    static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) {
        struct sigaction old;
        if (sigaction(forwarded[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN &&
            tprun_ev_signal(L->ev, forwarded[i], on_signal, L) == NULL)
            return -1;
    }
    L->kill_timer = tprun_ev_timer(L->ev, 0, on_kill_timer, L);
    L->timeout_timer = tprun_ev_timer(L->ev, 0, on_timeout, L);
    L->held_timer = tprun_ev_timer(L->ev, 0, on_held_timer, L);
    L->fate_timer = tprun_ev_timer(L->ev, 0, on_fate_timer, L);
    if (L->kill_timer == NULL || L->timeout_timer == NULL || L->held_timer == NULL || L->fate_timer == NULL) return -1;
    struct sigaction old_pipe;
    if (sigaction(SIGPIPE, NULL, &old_pipe) == 0 && old_pipe.sa_handler != SIG_IGN) {
        signal(SIGPIPE, SIG_IGN);
        L->job->reset_sigpipe = 1;
    }
    if (tprun_keeper_start(&L->job->keeper, L->plan->np, tprun_services_keeper_cleanup) != TP_OK) return -1;
    tprun_ev_child(L->ev, L->job->keeper.pid, 0, on_keeper_child, L->job);
    tprun_oom_init();
    tp_log(TP_LOG_DEBUG, "fate", "OOM kills counted from %s",
           tprun_oom_source()[0] ? tprun_oom_source() : "nowhere (not readable)");
    return 0;
}

/* Each active backend starts its ranks, in list order (the agents before tprun's own ranks). */
static int job_launch(tprun_loop_t *L)
{
    for (int b = 0; b < L->nbackends && !L->launch_failed; b++) {
        int status = L->backends[b]->launch(L);
        if (status != 0) return status;
    }
    for (int b = 0; b < L->nbackends; b++)
        if (L->backends[b]->stdin_start != NULL) L->backends[b]->stdin_start(L);
    return 0;
}

int tprun_job_run(const tprun_plan_t *plan, const char *host, const tprun_backend_ops_t *const *backends)
{
    tprun_job_t job;
    memset(&job, 0, sizeof(job));
    job.keeper.fd = -1;
    snprintf(job.host, sizeof(job.host), "%s", host);
    tprun_loop_t L;
    memset(&L, 0, sizeof(L));
    L.job = &job;
    L.plan = plan;
    L.first_failure = -1;
    L.held_rank = -1;
    for (; *backends != NULL && L.nbackends < TPRUN_BACKENDS_MAX; backends++)
        if ((*backends)->wanted(plan)) L.backends[L.nbackends++] = *backends;
    int service_status = tprun_services_prepare(plan); /* job starting: before anything starts */
    if (service_status != 0) return service_status;
    int status = TPRUN_EXIT_LAUNCH, set_up = 0;
    if (job_open(&L) != 0) goto err_loop;
    for (; set_up < L.nbackends; set_up++)
        if (L.backends[set_up]->setup != NULL && L.backends[set_up]->setup(&L) != TP_OK) goto err_job;
    job.child_exec = tprun_services_child_exec;
    if (tprun_job_prepare(&job, plan, environ) != TP_OK) goto err_job;
    if (tprun_services_start(&L) != TP_OK) goto err_job;
    tp_log(TP_LOG_DEBUG, "boot", "job %s: %d ranks, bootstrap listener on 127.0.0.1:%d", job.job_id, job.np,
           job.boot_port);
    double timeout_at = plan->timeout_s > 0 ? now_s() + plan->timeout_s : 0; /* armed once the agents run */
    /* Every host's agent first: a host that cannot start its ranks fails the launch before any rank runs. */
    if ((status = job_launch(&L)) != 0) goto err_job;
    tprun_ev_timer_set(L.timeout_timer, timeout_at);
    loop_run(&L);
    release_held(&L); /* every rank ended before the held one's wait was over */
    print_summary(&L);
    tprun_ev_timer_set(L.kill_timer, 0); /* the job is over: nothing of it fires while the backends end */
    tprun_ev_timer_set(L.timeout_timer, 0);
    tprun_ev_timer_set(L.fate_timer, 0);
    status = L.exit_status;
err_job:
    tprun_services_job_over(); /* before the keeper is told "done" */
    while (set_up-- > 0)
        if (L.backends[set_up]->finish != NULL) L.backends[set_up]->finish(&L);
    tprun_keeper_finish(&job.keeper);
    if (plan->json_summary != NULL) tprun_summary_write(&L, status);
    tprun_job_release(&job);
err_loop:
    tprun_services_job_over();
    tprun_evloop_free(L.ev);
    return status;
}
