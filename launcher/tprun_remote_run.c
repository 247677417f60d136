/* tprun_remote_run.c: tprun's side of the ssh launcher while the job runs: agents' messages, signals and ends. */
#include "tprun_remote.h"

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

#include "runtime_config.h"
#include "runtime_log.h"
#include "tprun_exit.h"
#include "services.h"
#include "tprun_summary.h"

/* ---- while the job runs ---- */

static tprun_loop_t *agents_loop; /* the loop the agents' line handler reports to (one job per tprun) */
static void stdin_ack(tprun_loop_t *L, const char *line);

/* The rank field at text (len bytes, within one line): one of this agent's ranks, or -1. */
static int parse_rank_of(const tprun_loop_t *L, const tprun_agent_t *a, const char *text, size_t len, size_t *used)
{
    long r = tprun_wire_parse_uint(text, len, L->job->np - 1, used);
    if (r < 0 || L->job->ranks[r].agent != (int)(a - L->agents->a)) return -1;
    return (int)r;
}

/* One message from a running agent: "o|e RANK text", "s RANK PID", "x RANK WSTATUS ERRNO OOM", "bye". */
static void on_agent_line(void *ctx, char *line, size_t len)
{
    tprun_agent_t *a = ctx;
    tprun_loop_t *L = agents_loop;
    size_t used;
    long pid;
    int r;
    /* Every field is read within the line (newline excluded): a number never runs on into the next one. */
    if (len >= 3 && (line[0] == 'o' || line[0] == 'e') && line[1] == ' ' &&
        (r = parse_rank_of(L, a, line + 2, len - 3, &used)) >= 0 && line[2 + used - 1] == ' ') {
        tprun_write_line(line[0] == 'o' ? STDOUT_FILENO : STDERR_FILENO, &L->job->ranks[r].prefix, line + 2 + used,
                         len - 2 - used);
        return;
    }
    line[len - 1] = '\0';
    char *rest = line + 2;
    size_t rest_len = len >= 3 ? len - 3 : 0;
    if (line[0] == 's' && line[1] == ' ' && (r = parse_rank_of(L, a, rest, rest_len, &used)) >= 0 &&
        (pid = tprun_wire_parse_uint(rest + used, rest_len - used, INT_MAX, &used)) > 0) {
        L->job->ranks[r].pid = (pid_t)pid;
        L->job->ranks[r].start_wall = tprun_wall_s();
    } else if (line[0] == 'x' && line[1] == ' ' && (r = parse_rank_of(L, a, rest, rest_len, &used)) >= 0) {
        int wstatus = 0, err = 0, oom = 0;
        tprun_rank_t *rank = &L->job->ranks[r];
        if (sscanf(rest + used, "%d %d %d", &wstatus, &err, &oom) == 3 && rank->running) {
            rank->exec_errno = err;
            rank->oom = oom;
            a->running--;
            tprun_loop_rank_ended(L, r, wstatus);
        }
    } else if (strcmp(line, "bye") == 0) {
        /* Nothing to do: the channel's end follows, and any rank it did not report ended is counted lost there. */
    } else if (line[0] == 'i' && (int)(a - L->agents->a) == L->agents->stdin_agent &&
               (strcmp(line, "ie") == 0 || strncmp(line, "ia ", 3) == 0)) {
        stdin_ack(L, line);
    } else if (tprun_services_agent_message(L, (int)(a - L->agents->a), line)) {
        /* a service's message (PMIx: "p...") */
    } else {
        char q[TP_QUOTE_LEN];
        tp_log(TP_LOG_WARN, "ssh", "host %s: unexpected message from the agent: \"%s\"", a->name,
               tp_quote(line, q, sizeof(q)));
    }
}

/* The agent's ranks that were never reported ended count as killed: its end (or its host's) took them. */
static void agent_lost(tprun_loop_t *L, tprun_agent_t *a)
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
    if (first) {
        tprun_say("host %s: the agent's connection ended before rank%s %s there ended%s%s; they count as killed",
                  a->name, n > 1 ? "s" : "", ranks, a->error[0] ? " (last message: " : "", a->error[0] ? a->error : "");
        L->host_lost = 1;
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

void tprun_agents_on_event(tprun_loop_t *L, uint32_t id)
{
    tprun_agents_t *A = L->agents;
    int ai = (int)(id / 3);
    if (ai >= A->n) return;
    tprun_agent_t *a = &A->a[ai];
    tprun_prefix_t none = {"", 0};
    agents_loop = L;
    if (id % 3 == 2) {
        tprun_agent_writable(a);
        return;
    }
    if (id % 3 == 1) {
        if (a->err.fd >= 0 && tprun_stream_pump(&a->err, &none) == 0) {
            tprun_loop_epoll_del(L, a->err.fd);
            tprun_stream_close(&a->err, &none);
        }
        return;
    }
    a->out.on_line = on_agent_line;
    a->out.ctx = a;
    if (a->out.fd < 0 || tprun_stream_pump(&a->out, &none) != 0) return;
    tprun_loop_epoll_del(L, a->out.fd);
    tprun_stream_close(&a->out, &none);
    if (a->err.fd >= 0) {
        tprun_loop_epoll_del(L, a->err.fd);
        tprun_stream_drain(&a->err, &none);
    }
    tprun_agent_close_input(a);
    a->state = AGENT_GONE;
    tprun_services_agent_gone(L, ai);
    agent_lost(L, a); /* ranks never reported ended, "bye" or not, count as killed */
}

void tprun_agents_signal(tprun_agents_t *A, int sig)
{
    char line[32];
    snprintf(line, sizeof(line), "k %d\n", sig);
    for (int i = 0; i < A->n; i++)
        if (A->a[i].running > 0 && A->a[i].state == AGENT_RUNNING) tprun_agent_send(&A->a[i], line);
}

int tprun_agents_reaped(tprun_loop_t *L, pid_t pid, int wstatus)
{
    for (int i = 0; i < L->agents->n; i++) {
        tprun_agent_t *a = &L->agents->a[i];
        if (a->pid != pid) continue;
        a->pid = 0;
        a->wstatus = wstatus;
        tprun_keeper_tell(&L->job->keeper, 'R', pid);
        return 1;
    }
    return 0;
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
            agent_lost(L, a);
        }
    }
}

void tprun_agents_finish(tprun_loop_t *L)
{
    tprun_agents_t *A = L->agents;
    if (A == NULL) return;
    tprun_prefix_t none = {"", 0};
    for (int i = 0; i < A->n; i++) {
        tprun_agent_t *a = &A->a[i];
        if (a->out.fd >= 0) tprun_loop_epoll_del(L, a->out.fd);
        if (a->err.fd >= 0) tprun_loop_epoll_del(L, a->err.fd);
        a->out.on_line = NULL;
        tprun_stream_free(&a->out);
    }
    tprun_agents_abort(L, L->plan->grace_s > 0 ? L->plan->grace_s : 1);
    for (int i = 0; i < A->n; i++) {
        tprun_agent_t *a = &A->a[i];
        if (a->err.fd >= 0) tprun_stream_drain(&a->err, &none);
        tprun_stream_free(&a->err);
        free(a->pending);
    }
    free(A->a);
    A->a = NULL;
    A->n = 0;
}

/* ---- tprun's stdin to rank 0 on another host ---- */

static void stdin_watch(tprun_loop_t *L, int on)
{
    tprun_agents_t *A = L->agents;
    if (!A->stdin_pollable || A->stdin_watched == on) return;
    struct epoll_event e = {.events = EPOLLIN, .data.u32 = ID_STDIN_IN};
    epoll_ctl(L->epfd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, STDIN_FILENO, &e);
    A->stdin_watched = on;
}

static void stdin_stop(tprun_loop_t *L)
{
    stdin_watch(L, 0);
    L->agents->stdin_state = 2;
}

void tprun_agents_stdin_start(tprun_loop_t *L)
{
    tprun_agents_t *A = L->agents;
    if (A->stdin_agent < 0 || A->stdin_state != 0) return;
    A->stdin_state = 1;
    struct epoll_event e = {.events = EPOLLIN, .data.u32 = ID_STDIN_IN};
    /* A regular file (or /dev/null) cannot be polled: it is always readable, so it is read while there is room. */
    A->stdin_pollable = epoll_ctl(L->epfd, EPOLL_CTL_ADD, STDIN_FILENO, &e) == 0;
    A->stdin_watched = A->stdin_pollable;
    if (!A->stdin_pollable && errno != EPERM) {
        tp_log(TP_LOG_WARN, "ssh", "stdin cannot be watched (%s): rank 0 gets none", strerror(errno));
        stdin_stop(L);
        tprun_agent_send(&A->a[A->stdin_agent], "ie\n");
    }
}

int tprun_agents_stdin_ready(const tprun_loop_t *L)
{
    const tprun_agents_t *A = L->agents;
    return A != NULL && A->stdin_state == 1 && !A->stdin_pollable && A->stdin_unacked < TPRUN_STDIN_WINDOW;
}

void tprun_agents_stdin_pump(tprun_loop_t *L)
{
    tprun_agents_t *A = L->agents;
    if (A == NULL || A->stdin_state != 1) return;
    tprun_agent_t *a = &A->a[A->stdin_agent];
    if (a->state != AGENT_RUNNING || a->to_fd < 0) {
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
