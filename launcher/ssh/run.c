/* ssh/run.c: the ssh backend while the job runs: agents' messages, signals and ends; its ops table. */
#include "ssh/ssh.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/job.h"
#include "runtime_config.h"
#include "runtime_log.h"
#include "services.h"
#include "tprun_exit.h"
#include "tprun_summary.h"

/* ---- while the job runs ---- */

static void stdin_ack(tprun_loop_t *L, const char *line);

/* The rank field at text (len bytes, within one line): one of this agent's ranks, or -1. */
static int parse_rank_of(const tprun_loop_t *L, const tprun_agent_t *a, const char *text, size_t len, size_t *used)
{
    long r = tprun_wire_parse_uint(text, len, L->job->np - 1, used);
    if (r < 0 || L->job->ranks[r].agent != (int)(a - L->agents->a)) return -1;
    return (int)r;
}

/* "s RANK PID": a rank started. */
static int on_started(void *arg, char *msg, size_t len)
{
    tprun_agent_t *a = arg;
    tprun_loop_t *L = a->all->L;
    size_t used, rest_len = len >= 2 ? len - 2 : 0;
    long pid;
    int r;
    if (len < 2 || msg[1] != ' ' || (r = parse_rank_of(L, a, msg + 2, rest_len, &used)) < 0 ||
        (pid = tprun_wire_parse_uint(msg + 2 + used, rest_len - used, INT_MAX, &used)) <= 0)
        return 0;
    L->job->ranks[r].pid = (pid_t)pid;
    L->job->ranks[r].start_wall = tprun_wall_s();
    return 1;
}

/* "x RANK WSTATUS ERRNO OOM": a rank ended. */
static int on_ended(void *arg, char *msg, size_t len)
{
    tprun_agent_t *a = arg;
    tprun_loop_t *L = a->all->L;
    size_t used;
    int r;
    if (len < 2 || msg[1] != ' ' || (r = parse_rank_of(L, a, msg + 2, len - 2, &used)) < 0) return 0;
    int wstatus = 0, err = 0, oom = 0;
    tprun_rank_t *rank = &L->job->ranks[r];
    if (sscanf(msg + 2 + used, "%d %d %d", &wstatus, &err, &oom) == 3 && rank->running) {
        rank->exec_errno = err;
        rank->oom = oom;
        a->running--;
        tprun_loop_rank_ended(L, r, wstatus);
    }
    return 1;
}

/* "bye": nothing to do: the channel's end follows, and any rank it did not report ended is counted lost there. */
static int on_bye(void *arg, char *msg, size_t len) { return (void)arg, (void)len, strcmp(msg, "bye") == 0; }

/* "ia N", "ie": rank 0's stdin, from its agent. */
static int on_stdin_ack(void *arg, char *msg, size_t len)
{
    tprun_agent_t *a = arg;
    tprun_loop_t *L = a->all->L;
    (void)len;
    if ((int)(a - L->agents->a) != L->agents->stdin_agent || (strcmp(msg, "ie") != 0 && strncmp(msg, "ia ", 3) != 0))
        return 0;
    stdin_ack(L, msg);
    return 1;
}

/* A service's message (PMIx's "p...": the hub matches fences and data requests across hosts). */
static int on_service(void *arg, char *msg, size_t len)
{
    tprun_agent_t *a = arg;
    (void)len;
    return tprun_services_agent_message(a->all->L, (int)(a - a->all->a), msg);
}

/* Who takes a running agent's messages, besides its ranks' output. */
void tprun_agent_routes(tprun_agent_t *a)
{
    tprun_link_route(&a->link, 's', on_started, a);
    tprun_link_route(&a->link, 'x', on_ended, a);
    tprun_link_route(&a->link, 'b', on_bye, a);
    tprun_link_route(&a->link, 'i', on_stdin_ack, a);
    for (const char *t = tprun_services_msg_types(); *t != '\0'; t++) tprun_link_route(&a->link, *t, on_service, a);
}

static void agents_gone(tprun_loop_t *L, tprun_agent_t *a);

/* One message from a running agent: "o|e RANK text" here, the others to their owners; "c AGENT ..." is from an
 * agent below it, "c AGENT lost REASON" its parent's word that its ssh ended. */
static void on_agent_line(void *ctx, char *line, size_t len)
{
    tprun_agent_t *a = ctx, *below;
    tprun_loop_t *L = a->all->L;
    size_t used, rest_len;
    char *rest;
    int r;
    if ((below = tprun_tree_unwrap(a, line, len, &rest, &rest_len)) != NULL) {
        if (strncmp(rest, "lost ", 5) != 0) {
            on_agent_line(below, rest, rest_len);
        } else if (below->state != AGENT_GONE) {
            rest[rest_len - 1] = '\0';
            tprun_wire_unescape(rest + 5);
            snprintf(below->error, sizeof(below->error), "%s", rest + 5);
            agents_gone(L, below);
        }
        return;
    }
    /* Every field is read within the line (newline excluded): a number never runs on into the next one. */
    if (len >= 3 && (line[0] == 'o' || line[0] == 'e') && line[1] == ' ' &&
        (r = parse_rank_of(L, a, line + 2, len - 3, &used)) >= 0 && line[2 + used - 1] == ' ') {
        tprun_write_line(line[0] == 'o' ? STDOUT_FILENO : STDERR_FILENO, &L->job->ranks[r].prefix, line + 2 + used,
                         len - 2 - used);
        return;
    }
    if (tprun_link_dispatch(&a->link, line, len)) return;
    char q[TP_QUOTE_LEN];
    tp_log(TP_LOG_WARN, "ssh", "host %s: unexpected message from the agent: \"%s\"", a->name,
           tp_quote(line, q, sizeof(q)));
}

/* The agent's ranks that were never reported ended count as killed: its end (or its host's, or that of the agent
 * that started it: via) took them. */
static void agent_lost(tprun_loop_t *L, tprun_agent_t *a, const tprun_agent_t *via)
{
    int ai = (int)(a - L->agents->a), *list = malloc(sizeof(int) * (size_t)L->job->np);
    size_t n = 0;
    for (int r = 0; list != NULL && r < L->job->np; r++)
        if (L->job->ranks[r].agent == ai && L->job->ranks[r].running) list[n++] = r;
    if (n == 0 || list == NULL) {
        free(list);
        return;
    }
    char ranks[200];
    tp_format_ranks(list, n, ranks, sizeof(ranks));
    int first = L->first_failure < 0 && !L->timed_out && !L->launch_failed;
    if (first && via == NULL) {
        tprun_say("host %s: the agent's connection ended before rank%s %s there ended%s%s%s; they count as killed",
                  a->name, n > 1 ? "s" : "", ranks, a->error[0] ? " (last message: " : "", a->error[0] ? a->error : "",
                  a->error[0] ? ")" : "");
        L->host_lost = 1;
    } else if (via != NULL) {
        tprun_say("host %s: lost with host %s (whose agent started it); rank%s %s there count%s as killed", a->name,
                  via->name, n > 1 ? "s" : "", ranks, n > 1 ? "" : "s");
        L->host_lost |= first;
    } else {
        tprun_say("host %s: no report from the agent; rank%s %s there count%s as ended", a->name, n > 1 ? "s" : "",
                  ranks, n > 1 ? "" : "s");
    }
    for (size_t i = 0; i < n; i++) {
        a->running--;
        L->job->ranks[list[i]].ended_by = first ? 0 : SIGKILL;
        tprun_loop_rank_ended(L, list[i], SIGKILL); /* a wait status "killed by SIGKILL" */
    }
    free(list);
}

typedef struct gone_arg {
    tprun_loop_t *L;
    tprun_agent_t *via;
} gone_arg_t;

static void gone_below(tprun_agent_t *d, void *arg)
{
    gone_arg_t *g = arg;
    if (d->state == AGENT_GONE) return;
    d->state = AGENT_GONE;
    tprun_services_agent_gone(g->L, (int)(d - d->all->a));
    agent_lost(g->L, d, g->via);
}

/* An agent is gone, and with it every agent it started (their ssh connections died with it). */
static void agents_gone(tprun_loop_t *L, tprun_agent_t *a)
{
    a->state = AGENT_GONE;
    tprun_services_agent_gone(L, (int)(a - a->all->a));
    agent_lost(L, a, NULL); /* ranks never reported ended, "bye" or not, count as killed */
    gone_arg_t g = {L, a};
    tprun_tree_each_below(a, gone_below, &g);
}

void tprun_agent_on_channel(void *arg, unsigned revents)
{
    tprun_agent_t *a = arg;
    tprun_loop_t *L = a->all->L;
    tprun_prefix_t none = {"", 0};
    (void)revents;
    a->out.on_line = on_agent_line;
    a->out.ctx = a;
    if (a->out.fd < 0 || tprun_stream_pump(&a->out, &none) != 0) return;
    tprun_ev_remove(a->out_ev);
    a->out_ev = NULL;
    tprun_stream_close(&a->out, &none);
    if (a->err.fd >= 0) {
        tprun_ev_remove(a->err_ev);
        a->err_ev = NULL;
        tprun_stream_drain(&a->err, &none);
    }
    tprun_agent_close_input(a);
    agents_gone(L, a);
}

void tprun_agents_signal(tprun_agents_t *A, int sig)
{
    char line[32];
    snprintf(line, sizeof(line), "k %d\n", sig);
    for (int i = 0; i < A->n; i++)
        if (A->a[i].running > 0 && A->a[i].state == AGENT_RUNNING) tprun_agent_send(&A->a[i], line);
}

void tprun_agents_cut_off(tprun_loop_t *L)
{
    for (int i = 0; i < L->agents->n; i++) {
        tprun_agent_t *a = &L->agents->a[i];
        if (a->running <= 0 || a->state != AGENT_RUNNING) continue;
        tprun_say("host %s: the agent has not answered since the SIGKILL was sent; ending its ssh connection", a->name);
        if (a->pid > 0) kill(-a->pid, SIGKILL);
        /* Its channel's end follows and counts the ranks; without a process left, count them now. */
        if (a->pid <= 0) {
            a->state = AGENT_GONE;
            agent_lost(L, a, NULL);
        }
    }
}

void tprun_agents_finish(tprun_loop_t *L)
{
    tprun_agents_t *A = L->agents;
    if (A == NULL) return;
    tprun_prefix_t none = {"", 0};
    L->signals_held = 1; /* the job is over: a signal now is not forwarded */
    tprun_ev_remove(A->stdin_ev);
    tprun_ev_remove(A->stdin_timer);
    A->stdin_ev = A->stdin_timer = NULL;
    for (int i = 0; i < A->n; i++) {
        tprun_agent_t *a = &A->a[i];
        tprun_ev_remove(a->out_ev);
        a->out_ev = NULL;
        a->out.on_line = NULL;
        tprun_stream_free(&a->out);
    }
    tprun_agents_abort(L, L->plan->grace_s > 0 ? L->plan->grace_s : 1);
    for (int i = 0; i < A->n; i++) {
        tprun_agent_t *a = &A->a[i];
        tprun_ev_remove(a->err_ev);
        a->err_ev = NULL;
        if (a->err.fd >= 0) tprun_stream_drain(&a->err, &none);
        tprun_stream_free(&a->err);
        tprun_link_free(&a->link);
    }
    free(A->a);
    A->a = NULL;
    A->n = 0;
}

/* ---- tprun's stdin to rank 0 on another host ---- */

static void stdin_pump(tprun_loop_t *L);

/* fd 0 readable while the window has room; a file (never announced by epoll) is read each turn instead. */
static void stdin_watch(tprun_loop_t *L, int on)
{
    tprun_agents_t *A = L->agents;
    if (A->stdin_ev != NULL) tprun_ev_fd_set(A->stdin_ev, on ? EPOLLIN : 0);
    else if (A->stdin_timer != NULL) tprun_ev_timer_set(A->stdin_timer, on ? tprun_now_s() : 0);
}

static void stdin_stop(tprun_loop_t *L)
{
    stdin_watch(L, 0);
    L->agents->stdin_state = 2;
}

static void on_stdin(void *arg, unsigned revents) { (void)revents, stdin_pump(arg); }

static void on_stdin_timer(void *arg) { stdin_pump(arg); }

void tprun_agents_stdin_start(tprun_loop_t *L)
{
    tprun_agents_t *A = L->agents;
    if (A->stdin_agent < 0 || A->stdin_state != 0) return;
    A->stdin_state = 1;
    /* A regular file (or /dev/null) cannot be polled: it is always readable, so it is read while there is room. */
    A->stdin_ev = tprun_ev_fd(L->ev, STDIN_FILENO, EPOLLIN, 0, on_stdin, L);
    A->stdin_pollable = A->stdin_ev != NULL;
    if (!A->stdin_pollable && errno != EPERM) {
        tp_log(TP_LOG_WARN, "ssh", "stdin cannot be watched (%s): rank 0 gets none", strerror(errno));
        stdin_stop(L);
        tprun_agent_send(&A->a[A->stdin_agent], "ie\n");
    } else if (!A->stdin_pollable) {
        A->stdin_timer = tprun_ev_timer(L->ev, tprun_now_s(), on_stdin_timer, L);
    }
}

static void stdin_pump(tprun_loop_t *L)
{
    tprun_agents_t *A = L->agents;
    if (A == NULL || A->stdin_state != 1) return;
    tprun_agent_t *a = &A->a[A->stdin_agent];
    if (a->state != AGENT_RUNNING || tprun_tree_top(a)->link.out_fd < 0) {
        stdin_stop(L);
        return;
    }
    static unsigned char buf[65536];
    char *line = malloc(strlen("i") + tprun_wire_b64_len(sizeof(buf)) + 3);
    while (line != NULL && A->stdin_unacked < TPRUN_STDIN_WINDOW) {
        size_t room = TPRUN_STDIN_WINDOW - A->stdin_unacked;
        ssize_t n = read(STDIN_FILENO, buf, room < sizeof(buf) ? room : sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) break;
        if (n <= 0) { /* end of input (or an error reading it): rank 0 sees its stdin end */
            tprun_agent_send(a, "ie\n");
            stdin_stop(L);
            break;
        }
        tprun_wire_b64_line_into(line, "i", buf, (size_t)n);
        tprun_agent_send(a, line);
        A->stdin_unacked += (size_t)n;
        if (A->stdin_pollable) break; /* one read per wake-up: a terminal is shared with the shell */
    }
    free(line);
    /* A full window waits for the agent's acknowledgements, not for more input. */
    if (A->stdin_state == 1) stdin_watch(L, A->stdin_unacked < TPRUN_STDIN_WINDOW);
}

/* "ia N": N more bytes reached rank 0's stdin; "ie": rank 0 stopped reading it (closed it or ended). */
static void stdin_ack(tprun_loop_t *L, const char *line)
{
    tprun_agents_t *A = L->agents;
    unsigned long n;
    if (strcmp(line, "ie") == 0) {
        if (A->stdin_state == 1) stdin_stop(L);
    } else if (sscanf(line, "ia %lu", &n) == 1 && n <= A->stdin_unacked) {
        A->stdin_unacked -= n;
        if (A->stdin_state == 1) stdin_watch(L, A->stdin_unacked < TPRUN_STDIN_WINDOW);
    }
}

/* ---- the backend's ops ---- */

static int ssh_wanted(const tprun_plan_t *plan) { return plan->remote; }

static void on_cutoff(void *arg) { tprun_agents_cut_off(arg); }

static tp_status_t ssh_setup(tprun_loop_t *L)
{
    L->agents = calloc(1, sizeof(*L->agents));
    if (L->agents == NULL) return TP_ERR_NO_MEMORY;
    tp_status_t st = tprun_agents_setup(L->agents, L, L->job, L->plan);
    if (st == TP_OK && (L->agents->cutoff_timer = tprun_ev_timer(L->ev, 0, on_cutoff, L)) == NULL)
        st = TP_ERR_NO_MEMORY;
    return st;
}

static void ssh_signal(tprun_loop_t *L, int sig)
{
    tprun_agents_signal(L->agents, sig);
    /* An agent that does not report its ranks' end after the SIGKILL is cut off (its host may be gone). */
    if (sig == SIGKILL && tprun_ev_timer_deadline(L->agents->cutoff_timer) == 0)
        tprun_ev_timer_set(L->agents->cutoff_timer, tprun_now_s() + (L->plan->grace_s > 1 ? L->plan->grace_s : 1));
}

static void ssh_stdin_start(tprun_loop_t *L)
{
    if (!L->launch_failed) tprun_agents_stdin_start(L); /* rank 0 on another host */
}

static void ssh_finish(tprun_loop_t *L)
{
    if (L->agents->cutoff_timer != NULL) tprun_ev_timer_set(L->agents->cutoff_timer, 0);
    tprun_agents_finish(L);
    free(L->agents);
    L->agents = NULL;
}

const tprun_backend_ops_t tprun_ssh_backend = {
    .name = "ssh",
    .wanted = ssh_wanted,
    .setup = ssh_setup,
    .launch = tprun_agents_launch,
    .signal = ssh_signal,
    .stdin_start = ssh_stdin_start,
    .finish = ssh_finish,
};
