/* ssh/launch.c: the ssh backend's start: placement, plans, and starting the agents. */
#include "ssh/ssh.h"

#include <errno.h>
#include <fcntl.h>
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
#include "slurm/slurm.h"
#include "tprun_exit.h"

extern char **environ;

/* ---- plan and placement ---- */

tp_status_t tprun_agents_setup(tprun_agents_t *A, tprun_loop_t *L, tprun_job_t *job, const tprun_plan_t *plan)
{
    memset(A, 0, sizeof(*A));
    A->L = L;
    A->agent_argv = plan->slurm ? tprun_slurm_agent_argv : tprun_ssh_agent_argv; /* Slurm: srun starts it */
    ssize_t n = readlink("/proc/self/exe", A->exe, sizeof(A->exe) - 1);
    if (n <= 0) {
        tp_log(TP_LOG_ERROR, "ssh", "cannot find tprun's own path (/proc/self/exe): %s", strerror(errno));
        return TP_ERR_SYSTEM;
    }
    A->exe[n] = '\0';
    int *agent_of = calloc(plan->num_hosts, sizeof(int));
    A->a = calloc(plan->num_hosts, sizeof(*A->a));
    job->ranks = calloc((size_t)plan->np, sizeof(*job->ranks));
    if (agent_of == NULL || A->a == NULL || job->ranks == NULL) {
        free(agent_of);
        return TP_ERR_NO_MEMORY;
    }
    for (size_t h = 0; h < plan->num_hosts; h++) {
        agent_of[h] = -1;
        if (plan->hosts[h].local || plan->hosts[h].nranks == 0) continue;
        tprun_agent_t *a = &A->a[A->n];
        a->host = (int)h;
        a->name = plan->hosts[h].name;
        a->all = A;
        tprun_link_init(&a->link, L->ev, a->name, -1);
        tprun_stream_init(&a->out, -1, STDOUT_FILENO);
        tprun_stream_init(&a->err, -1, STDERR_FILENO);
        agent_of[h] = A->n++;
    }
    A->stdin_agent = -1;
    job->np = job->world_size = plan->np;
    job->boot_index = job->stdin_index = -1;
    job->defer_envs = 1;
    job->boot_bind = "0.0.0.0";
    for (int r = 0; r < plan->np; r++) {
        int h = plan->rank_host[r];
        tprun_rank_t *rank = &job->ranks[r];
        rank->id = r;
        rank->local_rank = plan->rank_local[r];
        rank->agent = agent_of[h];
        if (rank->agent >= 0) {
            A->a[rank->agent].running++;
            continue;
        }
        if (job->local_size++ == 0) {
            job->node_rank = plan->hosts[h].node;
            job->host_var = plan->hosts[h].name;
        }
    }
    /* srun starts every agent itself; PMIx's hub talks to each agent's channel directly. */
    tprun_tree_shape(A, plan->slurm || plan->pmix ? 0 : plan->launch_fanout);
    if (job->ranks[0].agent < 0) job->listen = 1, job->boot_index = job->stdin_index = 0;
    else A->stdin_agent = job->ranks[0].agent; /* rank 0's stdin travels over its agent's channel */
    free(agent_of);
    return TP_OK;
}

/* Appends "key value\n" with the value escaped to a growing buffer. */
static int plan_add(char **buf, size_t *len, size_t *cap, const char *key, const char *value)
{
    size_t need = strlen(key) + 3 * strlen(value) + 3;
    if (*len + need > *cap) {
        size_t c = (*cap + need) * 2;
        char *b = realloc(*buf, c);
        if (b == NULL) return -1;
        *buf = b, *cap = c;
    }
    *len += (size_t)sprintf(*buf + *len, "%s ", key);
    tprun_wire_escape(value, *buf + *len);
    *len += strlen(*buf + *len);
    (*buf)[(*len)++] = '\n';
    (*buf)[*len] = '\0';
    return 0;
}

typedef struct plan_buf {
    char **buf;
    size_t *len, *cap;
} plan_buf_t;

/* plan_add for the services' plan lines. */
static int plan_add_to(void *ctx, const char *key, const char *value)
{
    plan_buf_t *pb = ctx;
    return plan_add(pb->buf, pb->len, pb->cap, key, value);
}

/* What an agent needs to start its host's ranks: never on a command line (the key travels here). */
static char *build_plan(const tprun_loop_t *L, int ai, size_t *len_out)
{
    const tprun_job_t *job = L->job;
    const tprun_plan_t *plan = L->plan;
    const tprun_agent_t *a = &L->agents->a[ai];
    char *buf = NULL, num[64];
    size_t len = 0, cap = 0;
    int ok = plan_add(&buf, &len, &cap, "hello", TPRUN_AGENT_HELLO) == 0;
    ok = ok && plan_add(&buf, &len, &cap, "host", a->name) == 0;
    snprintf(num, sizeof(num), "%d", plan->hosts[a->host].node);
    ok = ok && plan_add(&buf, &len, &cap, "node", num) == 0;
    snprintf(num, sizeof(num), "%d", plan->np);
    ok = ok && plan_add(&buf, &len, &cap, "world", num) == 0;
    ok = ok && plan_add(&buf, &len, &cap, "job", job->job_id) == 0;
    ok = ok && plan_add(&buf, &len, &cap, "key", job->job_key) == 0;
    snprintf(num, sizeof(num), "%d", plan->torch_env);
    ok = ok && plan_add(&buf, &len, &cap, "torch", num) == 0;
    snprintf(num, sizeof(num), "%d", plan->report_bindings);
    ok = ok && plan_add(&buf, &len, &cap, "report", num) == 0;
    ok = ok && plan_add(&buf, &len, &cap, "prog", plan->program_path) == 0;
    ok = ok && plan_add(&buf, &len, &cap, "wdir", plan->wdir) == 0;
    for (int r = 0; ok && r < plan->np; r++) {
        if (job->ranks[r].agent != ai) continue;
        snprintf(num, sizeof(num), "%d", r);
        ok = plan_add(&buf, &len, &cap, "rank", num) == 0;
    }
    for (char **arg = plan->argv; ok && *arg != NULL; arg++) ok = plan_add(&buf, &len, &cap, "arg", *arg) == 0;
    if (ok && ai == L->agents->stdin_agent) ok = plan_add(&buf, &len, &cap, "stdin", "1") == 0;
    plan_buf_t pb = {&buf, &len, &cap};
    ok = ok && tprun_services_plan_lines((tprun_loop_t *)L, ai, plan_add_to, &pb) == 0; /* what services send */
    ok = ok && tprun_tree_plan_lines(L, ai, plan_add_to, &pb) == 0;                     /* the agents it starts */
    /* The user's TP_* settings must match on every rank; -x variables travel (a later one wins there too). */
    for (char **ep = environ; ok && *ep != NULL; ep++) {
        const char *eq = strchr(*ep, '=');
        if (strncmp(*ep, "TP_", 3) != 0 || eq == NULL || tprun_env_is_launcher_var(*ep, (size_t)(eq - *ep), 0))
            continue;
        ok = plan_add(&buf, &len, &cap, "env", *ep) == 0;
    }
    for (size_t i = 0; ok && i < plan->num_env_set; i++) ok = plan_add(&buf, &len, &cap, "env", plan->env_set[i]) == 0;
    ok = ok && plan_add(&buf, &len, &cap, "end", "") == 0;
    if (!ok) {
        free(buf);
        return NULL;
    }
    *len_out = len;
    return buf;
}

/* ---- starting agents ---- */

/* The remote shell runs "exec 'path' --agent": the path is quoted for it. */
static void shell_quote(const char *in, char *out, size_t out_len)
{
    size_t o = 0;
    if (out_len < 3) return;
    out[o++] = '\'';
    for (; *in != '\0' && o + 6 < out_len; in++) {
        if (*in == '\'') o += (size_t)snprintf(out + o, out_len - o, "'\\''");
        else out[o++] = *in;
    }
    out[o++] = '\'';
    out[o] = '\0';
}

char **tprun_ssh_agent_argv(const tprun_plan_t *plan, const char *exe, const char *host)
{
    enum { MAX_ARGS = 80, QUOTED = 4200 };
    const char *ssh = plan->ssh != NULL ? plan->ssh : "ssh";
    size_t room = strlen(ssh) + 1 + 64 + QUOTED + 16 + strlen(host) + 1;
    char **argv = malloc(sizeof(char *) * MAX_ARGS + room), quoted[QUOTED];
    if (argv == NULL) return NULL;
    char *words = (char *)(argv + MAX_ARGS), *timeout = words + strlen(ssh) + 1, *remote = timeout + 64;
    int argc = 0;
    strcpy(words, ssh);
    char *save = NULL;
    for (char *w = strtok_r(words, " \t", &save); w != NULL && argc < 64; w = strtok_r(NULL, " \t", &save))
        argv[argc++] = w;
    snprintf(timeout, 64, "ConnectTimeout=%d", (int)(plan->ssh_timeout_s + 0.999));
    shell_quote(exe, quoted, sizeof(quoted));
    snprintf(remote, QUOTED + 16, "exec %s --agent", quoted);
    char *name = remote + strlen(remote) + 1;
    strcpy(name, host);
    /* Never prompt: a password or host-key question would hang the launch. */
    argv[argc++] = "-T";
    argv[argc++] = "-o";
    argv[argc++] = "BatchMode=yes";
    argv[argc++] = "-o";
    argv[argc++] = timeout;
    argv[argc++] = name;
    argv[argc++] = remote;
    argv[argc] = NULL;
    return argv;
}

pid_t tprun_ssh_spawn(char **argv, const sigset_t *child_mask, const char *what, int fds[3])
{
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) goto err_pipes;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) goto err_pipes;
    if (pid == 0) {
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* the keeper also kills its group; this covers tprun's own SIGKILL */
        if (getppid() != parent) _exit(TPRUN_EXIT_LAUNCH);
        signal(SIGPIPE, SIG_DFL);
        sigprocmask(SIG_SETMASK, child_mask, NULL);
        dup2(in[0], STDIN_FILENO);
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        execvp(argv[0], argv);
        dprintf(STDERR_FILENO, "cannot execute the %s command \"%s\": %s\n", what, argv[0], strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    close(in[0]);
    close(out[1]);
    close(err[1]);
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    fds[0] = in[1], fds[1] = out[0], fds[2] = err[0];
    return pid;
err_pipes:;
    int why = errno;
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0) close(in[i]);
        if (out[i] >= 0) close(out[i]);
        if (err[i] >= 0) close(err[i]);
    }
    errno = why;
    return -1;
}

/* Agent ai's plan, then those of the agents it starts (wrapped for it to hand on). */
static char *agent_plans(const tprun_loop_t *L, int ai, size_t *len)
{
    char *buf = build_plan(L, ai, len);
    if (buf != NULL && tprun_tree_wrapped_plans(L, ai, build_plan, &buf, len) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

static tp_status_t agent_start(tprun_loop_t *L, int ai, const sigset_t *child_mask)
{
    tprun_agent_t *a = &L->agents->a[ai];
    const tprun_plan_t *plan = L->plan;
    char **argv = L->agents->agent_argv(plan, L->agents->exe, a->name);
    size_t plan_len = 0;
    char *plan_text = argv != NULL ? agent_plans(L, ai, &plan_len) : NULL;
    int fds[3];
    pid_t pid = plan_text != NULL ? tprun_ssh_spawn(argv, child_mask, plan->slurm ? "srun" : "ssh", fds) : -1;
    if (pid < 0) {
        tp_log(TP_LOG_ERROR, "ssh", "cannot start ssh for host %s: %s", a->name, strerror(errno));
        free(argv);
        free(plan_text);
        return TP_ERR_SYSTEM;
    }
    a->pid = pid;
    a->link.out_fd = fds[0];
    tprun_link_queue(&a->link, plan_text, plan_len); /* written as ssh takes it */
    a->out.fd = fds[1];
    a->err.fd = fds[2];
    a->state = AGENT_CONNECTING;
    a->deadline = tprun_now_s() + plan->ssh_timeout_s;
    tprun_tree_started(a, tprun_now_s(), plan->ssh_timeout_s);
    a->child_ev = tprun_ev_child(L->ev, pid, 0, tprun_agent_reaped, a);
    tprun_keeper_tell(&L->job->keeper, 'S', pid);
    tp_log(TP_LOG_DEBUG, "ssh", "host %s: started %s (pid %d)", a->name, argv[0], (int)pid);
    free(argv);
    return TP_OK;
}

void tprun_agent_send(tprun_agent_t *a, const char *line)
{
    if (a->parent < 0) {
        tprun_link_send(&a->link, line);
        return;
    }
    /* Below another agent: its parent hands it on ("c AGENT LINE"). */
    char *wrapped = malloc(strlen(line) + 24);
    if (wrapped == NULL) {
        tp_log(TP_LOG_ERROR, "ssh", "host %s: out of memory queueing a message", a->name);
        return;
    }
    sprintf(wrapped, "c %d %s", (int)(a - a->all->a), line);
    tprun_link_send(&tprun_tree_top(a)->link, wrapped);
    free(wrapped);
}

/* An agent below another one ends when its parent does: only tprun's own channels are closed. */
void tprun_agent_close_input(tprun_agent_t *a)
{
    if (a->parent < 0) tprun_link_close(&a->link);
}

/* Keeps ssh's last stderr line: when the connection fails, it is ssh's own reason. */
static void on_agent_err_line(void *ctx, char *line, size_t len)
{
    tprun_agent_t *a = ctx;
    size_t n = len > 0 && line[len - 1] == '\n' ? len - 1 : len;
    if (n > 0 && a->state != AGENT_RUNNING) {
        if (n >= sizeof(a->error)) n = sizeof(a->error) - 1;
        if (strncmp(a->error, "error: ", 7) != 0) {
            memcpy(a->error, line, n);
            a->error[n] = '\0';
        }
    }
    if (a->state == AGENT_RUNNING || tp_log_enabled(TP_LOG_DEBUG))
        tprun_write_line(STDERR_FILENO, &(tprun_prefix_t){"", 0}, line, len);
}

static void launch_check(tprun_agent_t *a);

/* Messages during the launch: "ready IP PORT CLIENT_IP MASTER_PORT" or "error MESSAGE"; from an agent below this
 * one, "c AGENT" before them, or "c AGENT lost REASON" when its parent's ssh to it ended. */
static void on_agent_launch_line(void *ctx, char *line, size_t len)
{
    tprun_agent_t *a = ctx, *below;
    char *rest, q[TP_QUOTE_LEN];
    size_t rest_len;
    if ((below = tprun_tree_unwrap(a, line, len, &rest, &rest_len)) != NULL) {
        if (strncmp(rest, "lost ", 5) == 0 && below->state != AGENT_GONE) { /* ready or not: it cannot start ranks */
            rest[rest_len - 1] = '\0';
            tprun_wire_unescape(rest + 5);
            snprintf(below->error, sizeof(below->error), "error: %s", rest + 5);
            below->state = AGENT_GONE;
        } else if (below->state == AGENT_CONNECTING) {
            on_agent_launch_line(below, rest, rest_len);
        }
        if (a->all->failed < 0) launch_check(below);
        return;
    }
    line[len - 1] = '\0';
    if (strncmp(line, "ready ", 6) == 0 && a->state == AGENT_CONNECTING &&
        sscanf(line + 6, "%255s %d %63s %d", a->ready_ip, &a->ready_port, a->client_ip, &a->ready_master) == 4) {
        a->state = AGENT_READY;
    } else if (strncmp(line, "error ", 6) == 0) {
        tprun_wire_unescape(line + 6); /* the agent's own words, quoted: an escaped newline stays one line */
        snprintf(a->error, sizeof(a->error), "error: %s", tp_quote(line + 6, q, sizeof(q)));
    } else {
        snprintf(a->error, sizeof(a->error), "error: unexpected message from the agent: \"%s\"",
                 tp_quote(line, q, sizeof(q)));
    }
    line[len - 1] = '\n';
}

void tprun_agent_reaped(void *arg, pid_t pid, int wstatus)
{
    tprun_agent_t *a = arg;
    a->child_ev = NULL;
    a->pid = 0;
    a->wstatus = wstatus;
    tprun_keeper_tell(&a->all->L->job->keeper, 'R', pid);
}

/* Why an agent failed to start, in ssh's words where it said something. */
static void launch_reason(const tprun_loop_t *L, const tprun_agent_t *a, char *out, size_t len)
{
    char st[160] = "";
    const char *via = L->plan->slurm ? "srun" : "ssh";
    if (a->pid == 0 && a->wstatus != 0) tprun_status_describe(a->wstatus, 0, st, sizeof(st));
    if (strncmp(a->error, "error: ", 7) == 0) snprintf(out, len, "%s", a->error + 7);
    else if (a->state == AGENT_CONNECTING)
        snprintf(out, len, "no answer within %g s (TP_SSH_TIMEOUT)%s%s%s%s", L->plan->ssh_timeout_s,
                 a->error[0] ? "; " : "", a->error[0] ? via : "", a->error[0] ? " said: " : "", a->error);
    else if (a->error[0]) snprintf(out, len, "%s %s: %s", via, st[0] ? st : "ended", a->error);
    else snprintf(out, len, "%s %s before the agent answered", via, st[0] ? st : "ended");
}

/* An agent's stderr, from its start to its end: ssh's messages and the agent's own. */

static void on_agent_err(void *arg, unsigned revents)
{
    tprun_agent_t *a = arg;
    tprun_prefix_t none = {"", 0};
    (void)revents;
    if (a->err.fd >= 0 && tprun_stream_pump(&a->err, &none) == 0) {
        tprun_ev_remove(a->err_ev);
        a->err_ev = NULL;
        tprun_stream_close(&a->err, &none);
    }
    if (a->state == AGENT_CONNECTING && a->all->failed < 0) launch_check(a);
}

/* Ends agents that have not started ranks: closing their input is enough, ssh is killed if it lingers. */
void tprun_agents_abort(tprun_loop_t *L, double grace)
{
    tprun_agents_t *A = L->agents;
    for (int i = 0; i < A->n; i++) {
        tprun_agent_close_input(&A->a[i]);
        tprun_ev_remove(A->a[i].out_ev); /* the channel is not read any more: each ssh's end closes its stderr */
        A->a[i].out_ev = NULL;
    }
    double deadline = tprun_now_s() + grace;
    for (;;) {
        int alive = 0;
        for (int i = 0; i < A->n; i++) alive += A->a[i].pid > 0;
        if (alive == 0) break;
        double now = tprun_now_s();
        if (now >= deadline) {
            for (int i = 0; i < A->n; i++)
                if (A->a[i].pid > 0) kill(-A->a[i].pid, SIGKILL);
            for (int i = 0; i < A->n; i++) tprun_ev_child_wait(A->a[i].child_ev);
            break;
        }
        if (tprun_evloop_run_once(L->ev, (int)((deadline - now) * 1000) + 1) != 0) break;
    }
}

/* Which agent failed the launch: it is gone, or said "error". */
static void launch_check(tprun_agent_t *a)
{
    tprun_agents_t *A = a->all;
    if (a->state == AGENT_READY && (a->out.fd >= 0 || a->parent >= 0)) {
        A->ready++;
        a->state = AGENT_RUNNING;
        if (a->subtree > 0) return; /* its channel brings its subtree's answers */
        tprun_ev_remove(a->out_ev); /* read again once every agent is ready */
        a->out_ev = NULL;
    } else if (A->failed < 0 && (a->state == AGENT_GONE || strncmp(a->error, "error: ", 7) == 0)) {
        A->failed = (int)(a - A->a);
        tprun_evloop_stop(A->L->ev);
    }
}

/* An agent's channel during the launch: "ready", "error", or its end before either. */
static void on_launch_out(void *arg, unsigned revents)
{
    tprun_agent_t *a = arg;
    tprun_prefix_t none = {"", 0};
    (void)revents;
    if ((a->state != AGENT_CONNECTING && a->subtree == 0) || a->state == AGENT_GONE || a->all->failed >= 0) return;
    if (tprun_stream_pump(&a->out, &none) == 0) {
        /* The channel closed before "ready": take ssh's last words first, then its status. */
        tprun_ev_remove(a->err_ev);
        a->err_ev = NULL;
        if (a->err.fd >= 0) tprun_stream_drain(&a->err, &none);
        tprun_ev_remove(a->out_ev);
        a->out_ev = NULL;
        tprun_stream_close(&a->out, &none);
        tprun_ev_child_wait(a->child_ev);
        a->state = AGENT_GONE; /* ready or not: its subtree's answers cannot come any more */
    }
    launch_check(a);
}

/* A started agent's channel, stderr and input (its plan) join the loop. */
static void launch_watch(tprun_agent_t *a)
{
    a->out_ev = tprun_ev_fd(a->all->L->ev, a->out.fd, EPOLLIN, 0, on_launch_out, a);
    if (a->err.fd >= 0) a->err_ev = tprun_ev_fd(a->all->L->ev, a->err.fd, EPOLLIN, 0, on_agent_err, a);
}

int tprun_agents_launch(tprun_loop_t *L)
{
    tprun_agents_t *A = L->agents;
    tprun_job_t *job = L->job;
    int started = 0;
    A->ready = 0;
    A->failed = -1;
    for (int i = 0; i < A->n; i++) {
        A->a[i].out.on_line = on_agent_launch_line;
        A->a[i].out.ctx = &A->a[i];
        A->a[i].err.on_line = on_agent_err_line;
        A->a[i].err.ctx = &A->a[i];
    }
    L->signals_held = 1; /* a signal now interrupts the launch (L->interrupted_by) */
    L->interrupted_by = 0;
    while (A->ready < A->n && A->failed < 0 && !L->interrupted_by) {
        /* Keep at most TPRUN_SSH_FANOUT connecting. */
        int connecting = 0;
        for (int i = 0; i < A->ndirect; i++) connecting += A->a[i].state == AGENT_CONNECTING;
        while (started < A->ndirect && connecting < TPRUN_SSH_FANOUT) {
            if (agent_start(L, started, &job->child_mask) != TP_OK) {
                A->failed = started;
                snprintf(A->a[started].error, sizeof(A->a[started].error), "tprun could not start ssh");
                break;
            }
            launch_watch(&A->a[started]);
            started++, connecting++;
        }
        if (A->failed >= 0) break;
        double now = tprun_now_s(), next = 0;
        for (int i = 0; i < A->n && A->failed < 0; i++) {
            tprun_agent_t *a = &A->a[i];
            if (a->state != AGENT_CONNECTING) continue;
            if (now >= a->deadline) A->failed = i;
            else if (next == 0 || a->deadline < next) next = a->deadline;
        }
        if (A->failed >= 0) break;
        if (tprun_evloop_run_once(L->ev, (int)((next - now) * 1000) + 1) != 0) break;
    }
    int aborted_by = L->interrupted_by;
    if (A->failed >= 0 || aborted_by) {
        char why[1100], sig[32];
        if (A->failed >= 0) {
            tprun_agent_t *a = &A->a[A->failed];
            launch_reason(L, a, why, sizeof(why));
            tprun_say("host %s: the launch failed: %s", a->name, why);
        } else {
            tprun_say("launch interrupted by %s; ending the agents", tprun_signal_name(aborted_by, sig, sizeof(sig)));
        }
        tprun_agents_abort(L, L->plan->grace_s > 0 ? L->plan->grace_s : 1);
        L->launch_failed = 1;
        return aborted_by ? 128 + aborted_by : TPRUN_EXIT_LAUNCH;
    }
    L->signals_held = 0;
    /* Rank 0's bootstrap address: its agent's listener, or tprun's own as the remote hosts see this machine. */
    tprun_agent_t *root = job->ranks[0].agent >= 0 ? &A->a[job->ranks[0].agent] : NULL;
    if (root != NULL) {
        snprintf(job->boot_ip, sizeof(job->boot_ip), "%s", root->ready_ip);
        job->boot_port = root->ready_port;
        job->master_port = root->ready_master;
    } else {
        snprintf(job->boot_ip, sizeof(job->boot_ip), "%s", A->a[0].client_ip);
    }
    char go[320];
    snprintf(go, sizeof(go), "go %s:%d %d\n", job->boot_ip, job->boot_port, job->master_port);
    tp_log(TP_LOG_DEBUG, "ssh", "every agent is ready; rank 0's bootstrap at %s:%d", job->boot_ip, job->boot_port);
    for (int i = 0; i < A->n; i++) {
        tprun_agent_t *a = &A->a[i];
        a->out.on_line = NULL; /* from now on tprun_agent_on_channel parses the lines */
        tprun_agent_routes(a);
        if (a->parent < 0) {
            tprun_ev_remove(a->out_ev); /* an agent with a subtree was read through the launch */
            a->out_ev = tprun_ev_fd(L->ev, a->out.fd, EPOLLIN, 0, tprun_agent_on_channel, a);
        }
        tprun_agent_send(a, go);
    }
    for (int r = 0; r < job->np; r++) {
        if (job->ranks[r].agent < 0) continue;
        job->ranks[r].running = 1;
        L->running++;
        L->started++;
    }
    return 0;
}
