/* tprun_main.c: tprun's main and its one event loop (epoll over output pipes, a signalfd and the terminal). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime_config.h"
#include "runtime_log.h"
#include "tprun_args.h"
#include "tprun_exit.h"
#include "tprun_loop.h"
#include "tprun_output.h"
#include "services.h"
#include "slurm.h"
#include "tprun_remote.h"
#include "tprun_spawn.h"
#include "tprun_summary.h"

extern char **environ;

static double now_s(void) { return tprun_now_s(); }

static void epoll_del(tprun_loop_t *L, int fd)
{
    if (fd >= 0) epoll_ctl(L->epfd, EPOLL_CTL_DEL, fd, NULL);
}

void tprun_loop_epoll_del(tprun_loop_t *L, int fd) { epoll_del(L, fd); }

/* Signals every running rank's process group; SIGCONT first so a stopped rank sees the signal. */
static void signal_ranks(tprun_loop_t *L, int sig)
{
    for (int r = 0; r < L->job->np; r++) {
        tprun_rank_t *rank = &L->job->ranks[r];
        if (!rank->running) continue;
        rank->ended_by = sig;
        if (rank->agent >= 0) continue;
        kill(-rank->pid, SIGCONT);
        kill(-rank->pid, sig);
    }
    if (L->agents != NULL) tprun_agents_signal(L->agents, sig);
}

static void kill_now(tprun_loop_t *L)
{
    signal_ranks(L, SIGKILL);
    L->kill_deadline = 0;
    /* An agent that does not report its ranks' end after the SIGKILL is cut off (its host may be gone). */
    if (L->agents != NULL && L->agents_deadline == 0)
        L->agents_deadline = now_s() + (L->plan->grace_s > 1 ? L->plan->grace_s : 1);
}

/* SIGTERM now, SIGKILL after the grace (or at once with --grace 0). */
static void teardown(tprun_loop_t *L)
{
    if (L->plan->grace_s <= 0) {
        kill_now(L);
        return;
    }
    signal_ranks(L, SIGTERM);
    double deadline = now_s() + L->plan->grace_s;
    if (L->kill_deadline == 0 || deadline < L->kill_deadline) L->kill_deadline = deadline;
}

void tprun_loop_teardown(tprun_loop_t *L) { teardown(L); }

static void running_ranks(tprun_loop_t *L, char *buf, size_t len)
{
    int *list = malloc(sizeof(int) * (size_t)L->job->np);
    size_t n = 0;
    for (int r = 0; list != NULL && r < L->job->np; r++)
        if (L->job->ranks[r].running) list[n++] = r;
    tp_format_ranks(list, n, buf, len);
    free(list);
}

static void stdin_stop(tprun_loop_t *L)
{
    if (L->in.pipe_fd < 0 && L->in.in_fd < 0) return;
    if (L->stdin_events[0]) epoll_del(L, L->in.in_fd);
    if (L->stdin_events[1]) epoll_del(L, L->in.pipe_fd);
    L->stdin_events[0] = L->stdin_events[1] = 0;
    tprun_stdin_close(&L->in);
}

/* Moves stdin to rank 0 and registers for what the forwarder waits on next. */
static void stdin_step(tprun_loop_t *L, int in_ready)
{
    int want = tprun_stdin_pump(&L->in, in_ready);
    if (want == 0) {
        stdin_stop(L);
        return;
    }
    unsigned ev[2] = {want == 1 ? EPOLLIN : 0, want == 2 ? EPOLLOUT : 0};
    int fds[2] = {L->in.in_fd, L->in.pipe_fd};
    uint32_t ids[2] = {ID_STDIN_IN, ID_STDIN_OUT};
    for (int i = 0; i < 2; i++) {
        if (ev[i] == L->stdin_events[i]) continue;
        struct epoll_event e = {.events = ev[i], .data.u32 = ids[i]};
        if (L->stdin_events[i] == 0) epoll_ctl(L->epfd, EPOLL_CTL_ADD, fds[i], &e);
        else if (ev[i] == 0) epoll_del(L, fds[i]);
        else epoll_ctl(L->epfd, EPOLL_CTL_MOD, fds[i], &e);
        L->stdin_events[i] = ev[i];
    }
}

/* The host a rank runs on, as the command line named it (this machine's name on a single-host job). */
static const char *rank_host(const tprun_loop_t *L, int r)
{
    return L->plan->rank_host != NULL && L->agents != NULL ? L->plan->hosts[L->plan->rank_host[r]].name : L->job->host;
}

/* A rank that is stopped (SIGSTOP) cannot answer its peers: when they end with TP_EXIT_PEER_FAILED, it is the cause. */
static void print_stopped_cause(tprun_loop_t *L)
{
    char sig[32];
    for (int r = 0; r < L->job->np; r++) {
        tprun_rank_t *rank = &L->job->ranks[r];
        if (!rank->running || rank->stopped_by == 0) continue;
        tprun_say("rank %d (host %s, pid %d) stopped answering: it is stopped by signal %d (%s)", r, rank_host(L, r),
                  (int)rank->pid, rank->stopped_by, tprun_signal_name(rank->stopped_by, sig, sizeof(sig)));
        return;
    }
}

/* Whether a rank's end is a consequence, not a cause: libtp's fate path ends a rank whose peer failed with 70. */
static int is_consequence(int wstatus)
{
    return !tprun_status_failed(wstatus) || (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == TP_EXIT_PEER_FAILED);
}

const char *tprun_loop_rank_host(const tprun_loop_t *L, int r) { return rank_host(L, r); }

static void print_failure(tprun_loop_t *L, int r)
{
    tprun_rank_t *rank = &L->job->ranks[r];
    int st = rank->wstatus;
    char cause[400];
    if (rank->agent < 0 && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && rank->ended_by != SIGKILL) {
        long long count = tprun_oom_count();
        rank->oom = count >= 0 && L->oom_base >= 0 && count > L->oom_base;
        L->oom_base = count;
    }
    tprun_loop_rank_cause(L, r, cause, sizeof(cause));
    if (WIFEXITED(st) && WEXITSTATUS(st) == TP_EXIT_PEER_FAILED) print_stopped_cause(L);
    tprun_say("rank %d (host %s, pid %d) %s", r, rank_host(L, r), (int)rank->pid, cause);
}

static void drain_rank(tprun_loop_t *L, int r);

static void rank_ended(tprun_loop_t *L, int r, int wstatus)
{
    tprun_job_t *job = L->job;
    tprun_rank_t *rank = &job->ranks[r];
    rank->running = 0;
    rank->wstatus = wstatus;
    rank->end_wall = tprun_wall_s();
    L->running--;
    tprun_services_rank_ended(L, r);
    if (rank->agent < 0) tprun_keeper_tell(&job->keeper, 'R', rank->pid);
    if (r == job->stdin_index) stdin_stop(L);
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 127) tprun_exec_reports(job);
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
    if (candidate && is_consequence(wstatus)) {
        if (L->held_rank < 0) {
            L->held_rank = r;
            L->held_deadline = now_s() + (L->agents != NULL ? TPRUN_CAUSE_WAIT_S : TPRUN_LOCAL_CAUSE_WAIT_S);
        }
        candidate = 0;
    }
    int held = L->held_rank;
    if (candidate) {
        L->held_rank = -1;
        L->held_deadline = 0;
        L->first_failure = r;
        L->exit_status = tprun_status_code(wstatus);
        print_failure(L, r);
        if (!tprun_services_rank_failed(L, r)) teardown(L); /* a service (PMIx) may notify the survivors first */
    }
    /* Its output was written before it ended: take it all now (after the failure line, which comes first). */
    if (L->held_rank == r) return; /* release_held or the cause's failure line comes first */
    drain_rank(L, r);
    if (candidate && held >= 0) drain_rank(L, held);
}

static void drain_rank(tprun_loop_t *L, int r)
{
    tprun_rank_t *rank = &L->job->ranks[r];
    epoll_del(L, rank->out.fd);
    epoll_del(L, rank->err.fd);
    tprun_stream_drain(&rank->out, &rank->prefix);
    tprun_stream_drain(&rank->err, &rank->prefix);
}

void tprun_loop_rank_ended(tprun_loop_t *L, int r, int wstatus) { rank_ended(L, r, wstatus); }

/* The held consequence becomes the first failure when no cause was reported in time. */
static void release_held(tprun_loop_t *L)
{
    int r = L->held_rank;
    L->held_rank = -1;
    L->held_deadline = 0;
    if (r < 0) return;
    if (L->first_failure < 0 && !L->timed_out && !L->launch_failed) {
        L->first_failure = r;
        L->exit_status = tprun_status_code(L->job->ranks[r].wstatus);
        print_failure(L, r);
        teardown(L);
    }
    drain_rank(L, r);
}

static int find_rank(const tprun_job_t *job, pid_t pid)
{
    for (int i = 0; i < job->np; i++)
        if (job->ranks[i].pid == pid && job->ranks[i].running && job->ranks[i].agent < 0) return i;
    return -1;
}

typedef struct reaped {
    int rank;
    int wstatus;
} reaped_t;

static void reap(tprun_loop_t *L)
{
    tprun_job_t *job = L->job;
    siginfo_t si;
    /* Stops and continues: a stopped rank is the likely cause when its peers give up on it. */
    for (;;) {
        si.si_pid = 0;
        if (waitid(P_ALL, 0, &si, WSTOPPED | WCONTINUED | WNOHANG) != 0 || si.si_pid == 0) break;
        int r = find_rank(job, si.si_pid);
        if (r >= 0) job->ranks[r].stopped_by = si.si_code == CLD_CONTINUED ? 0 : si.si_status;
    }
    /* Every rank that has ended, then causes before consequences: the killed rank before those its death ended. */
    reaped_t *batch = L->batch;
    int n = 0;
    for (;;) {
        si.si_pid = 0;
        if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) != 0 || si.si_pid == 0) break;
        pid_t pid = si.si_pid;
        int r = find_rank(job, pid);
        /* Whatever the rank started dies with it; its unreaped zombie keeps the group id from being reused. */
        if (r >= 0) kill(-pid, SIGKILL);
        int st;
        while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
        }
        if (L->agents != NULL && tprun_agents_reaped(L, pid, st)) {
            continue;
        } else if (pid == job->keeper.pid) {
            tp_log(TP_LOG_WARN, "keeper",
                   "the keeper (pid %d) ended early; ranks are not cleaned up if tprun is killed", (int)pid);
            job->keeper.pid = 0;
            if (job->keeper.fd >= 0) close(job->keeper.fd);
            job->keeper.fd = -1;
        } else if (r >= 0) {
            job->ranks[r].running = 0; /* so find_rank skips it; rank_ended does the rest */
            batch[n].rank = r;
            batch[n++].wstatus = st;
        }
    }
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++)
            if (is_consequence(batch[i].wstatus) == pass) {
                job->ranks[batch[i].rank].running = 1;
                rank_ended(L, batch[i].rank, batch[i].wstatus);
            }
}

void tprun_loop_reap(tprun_loop_t *L) { reap(L); }

static void on_signals(tprun_loop_t *L)
{
    struct signalfd_siginfo si;
    while (read(L->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        int sig = (int)si.ssi_signo;
        if (sig == SIGCHLD) {
            reap(L);
            continue;
        }
        L->signals_seen++;
        if (sig == SIGINT && L->signals_seen > 1) {
            tp_log(TP_LOG_INFO, "fate", "second signal (SIGINT): killing every rank now");
            kill_now(L);
            continue;
        }
        /* Forward it; what does not end within the grace is killed. */
        signal_ranks(L, sig);
        double deadline = now_s() + L->plan->grace_s;
        if (L->kill_deadline == 0 || deadline < L->kill_deadline) L->kill_deadline = deadline;
        if (L->plan->grace_s <= 0) kill_now(L);
    }
    reap(L);
}

static void on_timeout(tprun_loop_t *L)
{
    L->timeout_deadline = 0;
    if (L->first_failure >= 0 || L->launch_failed) return;
    char ranks[256];
    running_ranks(L, ranks, sizeof(ranks));
    L->timed_out = 1;
    L->exit_status = TP_EXIT_TIMEOUT;
    tprun_say("timeout: the job ran longer than %g s (--timeout); ranks still running: %s", L->plan->timeout_s, ranks);
    teardown(L);
}

static void on_stream(tprun_loop_t *L, uint32_t id)
{
    int r = (int)(id / 2);
    if (r >= L->job->np) return;
    tprun_rank_t *rank = &L->job->ranks[r];
    tprun_stream_t *s = id % 2 ? &rank->err : &rank->out;
    if (s->fd < 0) return;
    if (tprun_stream_pump(s, &rank->prefix) == 0) {
        epoll_del(L, s->fd);
        tprun_stream_close(s, &rank->prefix);
    }
}

static void loop_run(tprun_loop_t *L)
{
    struct epoll_event events[64];
    while (L->running > 0) {
        double now = now_s();
        if (L->timeout_deadline > 0 && now >= L->timeout_deadline) on_timeout(L);
        if (L->kill_deadline > 0 && now >= L->kill_deadline) kill_now(L);
        if (L->held_deadline > 0 && now >= L->held_deadline) release_held(L);
        if (L->agents_deadline > 0 && now >= L->agents_deadline) {
            L->agents_deadline = 0;
            tprun_agents_cut_off(L);
            continue;
        }
        double next = L->timeout_deadline;
        const double others[] = {L->kill_deadline, L->held_deadline, L->agents_deadline};
        for (size_t k = 0; k < sizeof(others) / sizeof(others[0]); k++)
            if (others[k] > 0 && (next == 0 || others[k] < next)) next = others[k];
        int wait_ms = next > 0 ? (int)ceil((next - now) * 1000.0) : -1;
        if (next > 0 && wait_ms < 1) wait_ms = 1;
        if (tprun_agents_stdin_ready(L)) { /* a file on stdin: read it while the window has room */
            tprun_agents_stdin_pump(L);
            if (tprun_agents_stdin_ready(L)) wait_ms = 0;
        }
        int n = epoll_wait(L->epfd, events, 64, wait_ms);
        if (n < 0 && errno != EINTR) {
            tp_log(TP_LOG_ERROR, "fate", "epoll_wait failed: %s; killing the job", strerror(errno));
            kill_now(L);
            reap(L);
            break;
        }
        tprun_services_loop_ready(L); /* a service's event (a PMIx abort) before the exit it causes */
        for (int i = 0; i < n; i++) {
            uint32_t id = events[i].data.u32;
            if (id == ID_SERVICES) continue; /* handled above */
            if (id == ID_SIGNALS) on_signals(L);
            else if (id == ID_STDIN_IN && L->agents != NULL && L->agents->stdin_state == 1) tprun_agents_stdin_pump(L);
            else if (id == ID_STDIN_IN) stdin_step(L, 1);
            else if (id == ID_STDIN_OUT) stdin_step(L, 0);
            else if (id >= ID_AGENT_BASE) tprun_agents_on_event(L, id - ID_AGENT_BASE);
            else on_stream(L, id);
        }
    }
}

static void start_ranks(tprun_loop_t *L)
{
    tprun_job_t *job = L->job;
    for (int r = 0; r < job->np; r++) {
        if (job->ranks[r].agent >= 0) continue;
        if (tprun_rank_start(job, r) != TP_OK) {
            L->launch_failed = 1;
            L->exit_status = TPRUN_EXIT_LAUNCH;
            tprun_say("could not start rank %d of %d; ending the %d started", r, job->np, L->started);
            teardown(L);
            return;
        }
        L->started++;
        L->running++;
        tprun_rank_t *rank = &job->ranks[r];
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)(2 * r)};
        epoll_ctl(L->epfd, EPOLL_CTL_ADD, rank->out.fd, &e);
        e.data.u32 = (uint32_t)(2 * r + 1);
        epoll_ctl(L->epfd, EPOLL_CTL_ADD, rank->err.fd, &e);
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

/* Runs the job from the checked plan; returns tprun's exit status. */
static int run_job(const tprun_plan_t *plan, const char *host)
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
    tprun_agents_t agents;
    int service_status = tprun_services_prepare(plan); /* job starting: before anything starts */
    if (service_status != 0) return service_status;
    L.epfd = L.sigfd = -1;
    L.in.in_fd = L.in.pipe_fd = -1;

    /* Signals arrive on a signalfd; one ignored at start (nohup, a background job) stays ignored, ranks included. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGCHLD);
    signal(SIGCHLD, SIG_DFL);
    static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) {
        struct sigaction old;
        if (sigaction(forwarded[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaddset(&sigs, forwarded[i]);
    }
    sigprocmask(SIG_BLOCK, &sigs, &job.child_mask);
    struct sigaction old_pipe;
    if (sigaction(SIGPIPE, NULL, &old_pipe) == 0 && old_pipe.sa_handler != SIG_IGN) {
        signal(SIGPIPE, SIG_IGN);
        job.reset_sigpipe = 1;
    }
    int status = TPRUN_EXIT_LAUNCH;
    L.sigfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    L.epfd = epoll_create1(EPOLL_CLOEXEC);
    if (L.sigfd < 0 || L.epfd < 0) {
        tp_log(TP_LOG_ERROR, "fate", "cannot create the signalfd or epoll: %s", strerror(errno));
        goto err_loop;
    }
    struct epoll_event e = {.events = EPOLLIN, .data.u32 = ID_SIGNALS};
    epoll_ctl(L.epfd, EPOLL_CTL_ADD, L.sigfd, &e);
    if (tprun_keeper_start(&job.keeper, plan->np) != TP_OK) goto err_loop;
    tprun_oom_init();
    L.oom_base = tprun_oom_count();
    tp_log(TP_LOG_DEBUG, "fate", "OOM kills counted from %s",
           tprun_oom_source()[0] ? tprun_oom_source() : "nowhere (not readable)");
    if (plan->remote) {
        L.agents = &agents;
        if (tprun_agents_setup(&agents, &job, plan) != TP_OK) goto err_job;
    }
    if (tprun_job_prepare(&job, plan, environ) != TP_OK) goto err_job;
    if (tprun_services_start(&L) != TP_OK) goto err_job;
    L.batch = calloc((size_t)plan->np, sizeof(*L.batch));
    if (L.batch == NULL) goto err_job;
    tp_log(TP_LOG_DEBUG, "boot", "job %s: %d ranks, bootstrap listener on 127.0.0.1:%d", job.job_id, job.np,
           job.boot_port);
    if (plan->timeout_s > 0) L.timeout_deadline = now_s() + plan->timeout_s;
    if (L.agents != NULL) {
        /* Every host's agent first: a host that cannot start its ranks fails the launch before any rank runs. */
        if ((status = tprun_agents_launch(&L)) != 0) goto err_job;
        if (tprun_job_build_envs(&job, environ) != TP_OK) {
            tprun_say("could not build the local ranks' environments; ending the agents");
            L.launch_failed = 1;
            L.exit_status = TPRUN_EXIT_LAUNCH;
            teardown(&L);
        }
    }
    if (!L.launch_failed && tprun_services_rank_envs(&job) != TP_OK) {
        L.launch_failed = 1;
        L.exit_status = TPRUN_EXIT_LAUNCH;
        teardown(&L);
    }
    if (!L.launch_failed) start_ranks(&L);
    if (L.agents != NULL && !L.launch_failed) tprun_agents_stdin_start(&L); /* rank 0 on another host */
    if (job.stdin_tty && L.started > 0) {
        L.in.in_fd = STDIN_FILENO;
        L.in.pipe_fd = job.stdin_pipe[1];
        job.stdin_pipe[1] = -1;
        stdin_step(&L, 0);
    }
    loop_run(&L);
    release_held(&L); /* every rank ended before the held one's wait was over */
    print_summary(&L);
    status = L.exit_status;
err_job:
    tprun_services_job_over(); /* before the keeper is told "done" */
    if (L.agents != NULL) tprun_agents_finish(&L);
    stdin_stop(&L);
    tprun_keeper_finish(&job.keeper);
    if (plan->json_summary != NULL) tprun_summary_write(&L, status);
    tprun_job_release(&job);
    free(L.batch);
err_loop:
    tprun_services_job_over();
    if (L.epfd >= 0) close(L.epfd);
    if (L.sigfd >= 0) close(L.sigfd);
    return status;
}

/* Closed stdio would let a pipe or the listener take fd 0-2 and a rank write into it. */
static void ensure_stdio(void)
{
    for (int fd = 0; fd < 3; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int n = open("/dev/null", O_RDWR);
            if (n >= 0 && n != fd) close(n);
        }
}

int main(int argc, char **argv)
{
    tp_log_set_program("tprun");
    int level = tp_log_level_parse(tp_config_value("TP_LOG_LEVEL"));
    if (level >= 0) tp_log_set_level((tp_log_level_t)level);
    ensure_stdio();
    char host[256];
    if (gethostname(host, sizeof(host)) != 0) strcpy(host, "localhost");
    host[sizeof(host) - 1] = '\0';

    /* The ssh launcher's agent on a remote host (hidden: tprun starts it, with its plan on stdin). */
    if (argc == 2 && strcmp(argv[1], "--agent") == 0) return tprun_agent_main();
    tprun_plan_t plan;
    char err[1024];
    if (tprun_args_parse(argc, argv, environ, host, &plan, err, sizeof(err)) != TP_OK) {
        tprun_say("%s", err);
        return TPRUN_EXIT_USAGE;
    }
    int status = 0;
    if (plan.want_help) {
        tprun_usage(STDOUT_FILENO);
    } else if (plan.want_version) {
        dprintf(STDOUT_FILENO, "tprun %s\n", PACKAGE_VERSION);
    } else if (plan.want_info) {
        tp_config_print(STDOUT_FILENO);
    } else if (tp_config_check_environ(environ, err, sizeof(err)) != TP_OK) {
        tprun_say("%s", err);
        status = TPRUN_EXIT_USAGE;
    } else if (plan.env_set != NULL && tp_config_check_environ(plan.env_set, err, sizeof(err)) != TP_OK) {
        tprun_say("-x %s", err);
        status = TPRUN_EXIT_USAGE;
    } else if (plan.json_summary != NULL &&
               tprun_summary_check(&plan, err, sizeof(err)) != TP_OK) {
        tprun_say("%s", err);
        status = TPRUN_EXIT_USAGE;
    } else {
        /* One warning per job: the ranks (local, remote or under srun) inherit TP_ENV_CHECKED and stay quiet. */
        tp_config_warn_unknown(environ);
        if (plan.env_set != NULL) tp_config_warn_unknown(plan.env_set);
        setenv("TP_ENV_CHECKED", "1", 1);
        if (tprun_slurm_wanted(plan.launcher, environ) && (status = tprun_slurm_check(&plan, environ)) == 0)
            status = tprun_slurm_plan(&plan, environ); /* Slurm backend: srun starts every node's agent */
        if (status == 0) status = run_job(&plan, host);
    }
    tprun_plan_free(&plan);
    return status;
}
