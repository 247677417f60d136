/* tprun_remote.c: tprun's side of the ssh launcher: placement, plans, and starting the agents. */
#include "tprun_remote.h"

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

#include "runtime_config.h"
#include "runtime_log.h"
#include "tprun_exit.h"
#include "services.h"
#include "slurm.h"

extern char **environ;

double tprun_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- plan and placement ---- */

tp_status_t tprun_agents_setup(tprun_agents_t *A, tprun_job_t *job, const tprun_plan_t *plan)
{
    memset(A, 0, sizeof(*A));
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
        a->to_fd = -1;
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

/* The ssh command line that runs "exec 'tprun' --agent" on host a; words holds the split --ssh command. */
static void ssh_argv(const tprun_plan_t *plan, const tprun_agent_t *a, const char *exe, char *words, char **argv,
                     char *timeout, char *remote)
{
    char quoted[4200], *save = NULL;
    int argc = 0;
    for (char *w = strtok_r(words, " \t", &save); w != NULL && argc < 64; w = strtok_r(NULL, " \t", &save))
        argv[argc++] = w;
    snprintf(timeout, 64, "ConnectTimeout=%d", (int)(plan->ssh_timeout_s + 0.999));
    shell_quote(exe, quoted, sizeof(quoted));
    snprintf(remote, 4200, "exec %s --agent", quoted);
    /* Never prompt: a password or host-key question would hang the launch. */
    argv[argc++] = "-T";
    argv[argc++] = "-o";
    argv[argc++] = "BatchMode=yes";
    argv[argc++] = "-o";
    argv[argc++] = timeout;
    argv[argc++] = (char *)a->name;
    argv[argc++] = remote;
    argv[argc] = NULL;
}

static tp_status_t agent_start(tprun_loop_t *L, int ai, const sigset_t *child_mask)
{
    tprun_agent_t *a = &L->agents->a[ai];
    const tprun_plan_t *plan = L->plan;
    char *words = strdup(plan->ssh != NULL ? plan->ssh : "ssh");
    char *argv[80], timeout[64], remote[4200];
    if (words == NULL) return TP_ERR_NO_MEMORY;
    if (plan->slurm) tprun_slurm_agent_argv(a->name, L->agents->exe, argv, remote, sizeof(remote)); /* Slurm backend */
    else ssh_argv(plan, a, L->agents->exe, words, argv, timeout, remote);
    int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
    size_t plan_len = 0;
    a->pending = build_plan(L, ai, &plan_len);
    if (a->pending == NULL || pipe2(in, O_CLOEXEC) != 0 || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0)
        goto err_pipes;
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
        dprintf(STDERR_FILENO, "cannot execute the %s command \"%s\": %s\n", plan->slurm ? "srun" : "ssh", argv[0],
                strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid);
    free(words);
    close(in[0]);
    close(out[1]);
    close(err[1]);
    fcntl(in[1], F_SETFL, O_NONBLOCK);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    a->pid = pid;
    a->to_fd = in[1];
    a->out.fd = out[0];
    a->err.fd = err[0];
    a->pending_len = plan_len;
    a->pending_off = 0;
    a->state = AGENT_CONNECTING;
    a->deadline = tprun_now_s() + plan->ssh_timeout_s;
    tprun_keeper_tell(&L->job->keeper, 'S', pid);
    tp_log(TP_LOG_DEBUG, "ssh", "host %s: started %s (pid %d)", a->name, argv[0], (int)pid);
    return TP_OK;
err_pipes:
    tp_log(TP_LOG_ERROR, "ssh", "cannot start ssh for host %s: %s", a->name, strerror(errno));
    free(words);
    free(a->pending);
    a->pending = NULL;
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0) close(in[i]);
        if (out[i] >= 0) close(out[i]);
        if (err[i] >= 0) close(err[i]);
    }
    return TP_ERR_SYSTEM;
}

/* Writes what is pending (the plan, then messages); 1 when all of it went. */
static int agent_flush(tprun_agent_t *a)
{
    while (a->pending != NULL && a->pending_off < a->pending_len) {
        ssize_t n = write(a->to_fd, a->pending + a->pending_off, a->pending_len - a->pending_off);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return 0;
        if (n < 0) {
            /* EPIPE: the agent is gone; the channel's end says why. */
            tp_log(TP_LOG_DEBUG, "ssh", "host %s: cannot write to the agent: %s", a->name, strerror(errno));
            break;
        }
        a->pending_off += (size_t)n;
    }
    free(a->pending);
    a->pending = NULL;
    return 1;
}

/* The loop's epoll, once the agents run: a channel that is full is written when it drains. */
static int agents_epfd = -1;

/* Queues one message line and writes what the channel takes now; the rest goes when it is writable. */
void tprun_agent_send(tprun_agent_t *a, const char *line)
{
    if (a->to_fd < 0) return;
    size_t len = strlen(line);
    size_t held = a->pending != NULL ? a->pending_len - a->pending_off : 0;
    if (held == 0) {
        free(a->pending);
        a->pending = NULL;
    } else if (a->pending_off > 0) { /* what is still to go moves to the front before the buffer is resized */
        memmove(a->pending, a->pending + a->pending_off, held);
    }
    char *grown = realloc(a->pending, held + len);
    if (grown == NULL) {
        tp_log(TP_LOG_ERROR, "ssh", "host %s: out of memory queueing a message; ending its connection", a->name);
        a->pending_len = held, a->pending_off = 0;
        tprun_agent_close_input(a);
        return;
    }
    memcpy(grown + held, line, len);
    a->pending = grown;
    a->pending_len = held + len;
    a->pending_off = 0;
    if (agent_flush(a) || a->to_fd < 0 || a->writable_wanted || agents_epfd < 0) return;
    struct epoll_event e = {.events = EPOLLOUT, .data.u32 = a->epoll_id + 2};
    if (epoll_ctl(agents_epfd, EPOLL_CTL_ADD, a->to_fd, &e) == 0) a->writable_wanted = 1;
}

void tprun_agent_writable(tprun_agent_t *a)
{
    if (!agent_flush(a) && a->to_fd >= 0) return;
    if (a->writable_wanted && a->to_fd >= 0) epoll_ctl(agents_epfd, EPOLL_CTL_DEL, a->to_fd, NULL);
    a->writable_wanted = 0;
}

void tprun_agent_close_input(tprun_agent_t *a)
{
    if (a->to_fd >= 0 && a->writable_wanted) epoll_ctl(agents_epfd, EPOLL_CTL_DEL, a->to_fd, NULL);
    a->writable_wanted = 0;
    if (a->to_fd >= 0) close(a->to_fd);
    a->to_fd = -1;
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
    if (a->state == AGENT_RUNNING || tp_log_enabled(TP_LOG_DEBUG)) tprun_write_line(STDERR_FILENO, &(tprun_prefix_t){"", 0}, line, len);
}

/* Messages during the launch: "ready IP PORT CLIENT_IP MASTER_PORT" or "error MESSAGE". */
static void on_agent_launch_line(void *ctx, char *line, size_t len)
{
    tprun_agent_t *a = ctx;
    line[len - 1] = '\0';
    if (strncmp(line, "ready ", 6) == 0 && a->state == AGENT_CONNECTING &&
        sscanf(line + 6, "%255s %d %63s %d", a->ready_ip, &a->ready_port, a->client_ip, &a->ready_master) == 4) {
        a->state = AGENT_READY;
    } else if (strncmp(line, "error ", 6) == 0) {
        char q[TP_QUOTE_LEN];
        tprun_wire_unescape(line + 6); /* the agent's own words, quoted: an escaped newline stays one line */
        snprintf(a->error, sizeof(a->error), "error: %s", tp_quote(line + 6, q, sizeof(q)));
    } else {
        char q[TP_QUOTE_LEN];
        snprintf(a->error, sizeof(a->error), "error: unexpected message from the agent: \"%s\"",
                 tp_quote(line, q, sizeof(q)));
    }
    line[len - 1] = '\n';
}

static void agent_reap(tprun_agent_t *a, int wait)
{
    if (a->pid <= 0) return;
    int st;
    pid_t p;
    while ((p = waitpid(a->pid, &st, wait ? 0 : WNOHANG)) < 0 && errno == EINTR) {
    }
    if (p == a->pid) {
        a->wstatus = st;
        a->pid = 0;
    }
}

/* Why an agent failed to start, in ssh's words where it said something. */
static void launch_reason(const tprun_loop_t *L, const tprun_agent_t *a, char *out, size_t len)
{
    char st[160] = "";
    const char *via = L->plan->slurm ? "srun" : "ssh";
    if (a->pid == 0 && a->wstatus != 0) tprun_status_describe(a->wstatus, 0, st, sizeof(st));
    if (strncmp(a->error, "error: ", 7) == 0)
        snprintf(out, len, "%s", a->error + 7);
    else if (a->state == AGENT_CONNECTING)
        snprintf(out, len, "no answer within %g s (TP_SSH_TIMEOUT)%s%s%s%s", L->plan->ssh_timeout_s,
                 a->error[0] ? "; " : "", a->error[0] ? via : "", a->error[0] ? " said: " : "", a->error);
    else if (a->error[0])
        snprintf(out, len, "%s %s: %s", via, st[0] ? st : "ended", a->error);
    else
        snprintf(out, len, "%s %s before the agent answered", via, st[0] ? st : "ended");
}

/* Ends agents that have not started ranks: closing their input is enough, ssh is killed if it lingers. */
void tprun_agents_abort(tprun_loop_t *L, double grace)
{
    tprun_agents_t *A = L->agents;
    for (int i = 0; i < A->n; i++) tprun_agent_close_input(&A->a[i]);
    double deadline = tprun_now_s() + grace;
    for (;;) {
        int alive = 0;
        for (int i = 0; i < A->n; i++) {
            agent_reap(&A->a[i], 0);
            alive += A->a[i].pid > 0;
        }
        if (alive == 0) break;
        if (tprun_now_s() >= deadline) {
            for (int i = 0; i < A->n; i++)
                if (A->a[i].pid > 0) kill(-A->a[i].pid, SIGKILL);
            for (int i = 0; i < A->n; i++) agent_reap(&A->a[i], 1);
            break;
        }
        /* Each ssh's end closes its stderr: wait on those, not on a timer alone. */
        struct pollfd p[TPRUN_SSH_FANOUT];
        int np = 0;
        for (int i = 0; i < A->n && np < TPRUN_SSH_FANOUT; i++)
            if (A->a[i].pid > 0 && A->a[i].err.fd >= 0) p[np++] = (struct pollfd){A->a[i].err.fd, POLLIN, 0};
        int rc = poll(p, (nfds_t)np, 20);
        for (int i = 0; rc > 0 && i < A->n; i++)
            if (A->a[i].err.fd >= 0 && tprun_stream_pump(&A->a[i].err, &(tprun_prefix_t){"", 0}) == 0)
                tprun_stream_close(&A->a[i].err, &(tprun_prefix_t){"", 0});
    }
}

int tprun_agents_launch(tprun_loop_t *L)
{
    tprun_agents_t *A = L->agents;
    tprun_job_t *job = L->job;
    int started = 0, ready = 0, failed = -1;
    struct pollfd *pfd = calloc((size_t)A->n * 3 + 1, sizeof(*pfd));
    int *who = calloc((size_t)A->n * 3 + 1, sizeof(int));
    if (pfd == NULL || who == NULL) {
        free(pfd);
        free(who);
        return TPRUN_EXIT_LAUNCH;
    }
    for (int i = 0; i < A->n; i++) {
        A->a[i].out.on_line = on_agent_launch_line;
        A->a[i].out.ctx = &A->a[i];
        A->a[i].err.on_line = on_agent_err_line;
        A->a[i].err.ctx = &A->a[i];
    }
    int aborted_by = 0;
    while (ready < A->n && failed < 0 && !aborted_by) {
        /* Keep at most TPRUN_SSH_FANOUT connecting. */
        int connecting = 0;
        for (int i = 0; i < A->n; i++) connecting += A->a[i].state == AGENT_CONNECTING;
        while (started < A->n && connecting < TPRUN_SSH_FANOUT) {
            if (agent_start(L, started, &job->child_mask) != TP_OK) {
                failed = started;
                snprintf(A->a[started].error, sizeof(A->a[started].error), "tprun could not start ssh");
                break;
            }
            started++, connecting++;
        }
        if (failed >= 0) break;
        double now = tprun_now_s(), next = 0;
        int n = 0;
        pfd[n] = (struct pollfd){L->sigfd, POLLIN, 0}, who[n++] = -1;
        for (int i = 0; i < started; i++) {
            tprun_agent_t *a = &A->a[i];
            if (a->state != AGENT_CONNECTING) continue;
            if (now >= a->deadline) {
                failed = i;
                break;
            }
            if (next == 0 || a->deadline < next) next = a->deadline;
            if (a->pending != NULL) pfd[n] = (struct pollfd){a->to_fd, POLLOUT, 0}, who[n++] = 3 * i;
            if (a->out.fd >= 0) pfd[n] = (struct pollfd){a->out.fd, POLLIN, 0}, who[n++] = 3 * i + 1;
            if (a->err.fd >= 0) pfd[n] = (struct pollfd){a->err.fd, POLLIN, 0}, who[n++] = 3 * i + 2;
        }
        if (failed >= 0) break;
        int rc = poll(pfd, (nfds_t)n, (int)((next - now) * 1000) + 1);
        if (rc < 0 && errno != EINTR) break;
        for (int k = 0; k < n && rc > 0; k++) {
            if (pfd[k].revents == 0) continue;
            if (who[k] < 0) {
                struct signalfd_siginfo si;
                while (read(L->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
                    if (si.ssi_signo != SIGCHLD) aborted_by = (int)si.ssi_signo;
                continue;
            }
            tprun_agent_t *a = &A->a[who[k] / 3];
            tprun_prefix_t none = {"", 0};
            if (who[k] % 3 == 0) agent_flush(a);
            else if (who[k] % 3 == 2 && tprun_stream_pump(&a->err, &none) == 0) tprun_stream_close(&a->err, &none);
            else if (who[k] % 3 == 1 && tprun_stream_pump(&a->out, &none) == 0) {
                /* The channel closed before "ready": take ssh's last words first, then its status. */
                if (a->err.fd >= 0) tprun_stream_drain(&a->err, &none);
                tprun_stream_close(&a->out, &none);
                agent_reap(a, 1);
                if (a->state == AGENT_CONNECTING) a->state = AGENT_GONE;
            }
            if (a->state == AGENT_READY && a->out.fd >= 0) {
                ready++;
                a->state = AGENT_RUNNING;
            } else if (a->state == AGENT_GONE || strncmp(a->error, "error: ", 7) == 0) {
                failed = who[k] / 3;
                break;
            }
        }
    }
    free(pfd);
    free(who);
    if (failed >= 0 || aborted_by) {
        char why[1100], sig[32];
        if (failed >= 0) {
            tprun_agent_t *a = &A->a[failed];
            launch_reason(L, a, why, sizeof(why));
            tprun_say("host %s: the launch failed: %s", a->name, why);
        } else {
            tprun_say("launch interrupted by %s; ending the agents", tprun_signal_name(aborted_by, sig, sizeof(sig)));
        }
        tprun_agents_abort(L, L->plan->grace_s > 0 ? L->plan->grace_s : 1);
        L->launch_failed = 1;
        return aborted_by ? 128 + aborted_by : TPRUN_EXIT_LAUNCH;
    }
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
    agents_epfd = L->epfd;
    for (int i = 0; i < A->n; i++) {
        tprun_agent_t *a = &A->a[i];
        a->out.on_line = NULL; /* from now on on_agent_event parses the lines */
        a->epoll_id = ID_AGENT_BASE + 3u * (uint32_t)i;
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = a->epoll_id};
        epoll_ctl(L->epfd, EPOLL_CTL_ADD, a->out.fd, &e);
        if (a->err.fd >= 0) {
            e.data.u32 = a->epoll_id + 1;
            epoll_ctl(L->epfd, EPOLL_CTL_ADD, a->err.fd, &e);
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
