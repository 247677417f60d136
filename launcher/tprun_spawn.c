/* tprun_spawn.c: job ids, the bootstrap listener, per-rank environments, fork/exec of ranks, and the keeper. */
#include "tprun_spawn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime_log.h"
#include "runtime_proc.h"

/*
 * The per-rank variables on top of the inherited environment and -x: 9 TP_* (TP_BOOT_FD on one rank), TP_HOST,
 * TP_REPORT_BINDINGS and the 6 torchrun variables.
 */
#define TPRUN_RANK_VARS 17
/* Room for one per-rank or shared "NAME=value" string (the job id aside). */
#define TPRUN_VAR_LEN 64
#define TPRUN_BOOT_ADDRS_MAX 16 /* addresses of rank 0's host in TP_BOOT_ADDR, at most */

static tp_status_t random_hex(char *out, size_t bytes)
{
    unsigned char raw[32];
    size_t got = 0;
    while (got < bytes) {
        ssize_t n = getrandom(raw + got, bytes - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return TP_ERR_SYSTEM;
        got += (size_t)n;
    }
    for (size_t i = 0; i < bytes; i++) sprintf(out + 2 * i, "%02x", raw[i]);
    return TP_OK;
}

/* The listener is rank 0's; binding port 0 here means no port is ever guessed and jobs never collide. */
static tp_status_t open_boot_listener(tprun_job_t *job)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0, .sin_addr = {htonl(INADDR_LOOPBACK)}};
    if (job->boot_bind != NULL && inet_pton(AF_INET, job->boot_bind, &sa.sin_addr) != 1) {
        tp_log(TP_LOG_ERROR, "boot", "cannot bind the bootstrap listener to \"%s\": not an IPv4 address",
               job->boot_bind);
        return TP_ERR_INVALID;
    }
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        tp_log(TP_LOG_ERROR, "boot", "cannot create the bootstrap socket: %s", strerror(errno));
        return TP_ERR_SYSTEM;
    }
    int backlog = job->world_size > 4096 ? job->world_size : 4096;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, backlog) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        tp_log(TP_LOG_ERROR, "boot", "cannot listen on %s port 0 for the bootstrap: %s",
               job->boot_bind ? job->boot_bind : "127.0.0.1", strerror(errno));
        close(fd);
        return TP_ERR_SYSTEM;
    }
    job->boot_fd = fd;
    job->boot_port = ntohs(sa.sin_port);
    return TP_OK;
}

/* Bound with SO_REUSEADDR, never listening: TCPStore (SO_REUSEADDR) binds the port; bind(0) and connect() never do. */
static tp_status_t reserve_master_port(tprun_job_t *job)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0, .sin_addr = {htonl(INADDR_ANY)}};
    socklen_t sl = sizeof(sa);
    int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || getsockname(fd, (struct sockaddr *)&sa, &sl) != 0) {
        tp_log(TP_LOG_ERROR, "boot", "cannot reserve MASTER_PORT (a socket bound to 0.0.0.0 port 0): %s",
               strerror(errno));
        if (fd >= 0) close(fd);
        return TP_ERR_SYSTEM;
    }
    job->master_fd = fd;
    job->master_port = ntohs(sa.sin_port);
    return TP_OK;
}

static int env_name_len(const char *entry)
{
    const char *eq = strchr(entry, '=');
    return eq != NULL ? (int)(eq - entry) : (int)strlen(entry);
}

/* Whether a later -x entry (or any, for environ) sets the same name. */
static int overridden(const char *entry, char *const *set, size_t from, size_t n)
{
    int len = env_name_len(entry);
    for (size_t i = from; i < n; i++)
        if (env_name_len(set[i]) == len && strncmp(set[i], entry, (size_t)len) == 0) return 1;
    return 0;
}

tp_status_t tprun_job_build_envs(tprun_job_t *job, char *const *environ_)
{
    const tprun_plan_t *plan = job->plan;
    size_t nbase = 0;
    for (char *const *ep = environ_; ep != NULL && *ep != NULL; ep++) nbase++;
    size_t per_rank = nbase + plan->num_env_set + TPRUN_RANK_VARS + 1;
    size_t np = (size_t)job->np;
    job->envp = calloc(np, sizeof(*job->envp));
    job->envp_mem = calloc(np * per_rank, sizeof(char *));
    /* Shared strings first (11 of them, one the job id), then 4 numbers per rank. */
    job->env_strings = malloc((13 + 4 * np) * TPRUN_VAR_LEN + sizeof(job->job_id) + sizeof(job->host) +
                              2 * (sizeof(job->boot_ip) + 8 * TPRUN_BOOT_ADDRS_MAX));
    if (job->envp == NULL || job->envp_mem == NULL || job->env_strings == NULL) {
        tp_log(TP_LOG_ERROR, "spawn", "out of memory for %d ranks' environments", job->np);
        return TP_ERR_NO_MEMORY;
    }
    char *s = job->env_strings;
#define TPRUN_ADD_STRING(var, ...) (var = s, s += sprintf(s, __VA_ARGS__) + 1)
    char *world, *node, *job_id, *key, *addr, *boot_fd, *t_world, *t_local_world, *t_addr, *t_port, *local_world;
    char *host_var = NULL, *report = NULL;
    TPRUN_ADD_STRING(world, "TP_WORLD_SIZE=%d", job->world_size);
    TPRUN_ADD_STRING(local_world, "TP_LOCAL_WORLD_SIZE=%d", job->local_size);
    TPRUN_ADD_STRING(node, "TP_NODE_RANK=%d", job->node_rank);
    TPRUN_ADD_STRING(job_id, "TP_JOB_ID=%s", job->job_id);
    TPRUN_ADD_STRING(key, "TP_JOB_KEY=%s", job->job_key);
    /* TP_BOOT_ADDR: every address of rank 0's host to try, best first, each with the port. */
    addr = s;
    s += sprintf(s, "TP_BOOT_ADDR=");
    for (const char *ip = job->boot_ip; *ip != '\0';) {
        size_t l = strcspn(ip, ",");
        s += sprintf(s, "%s%.*s:%d", ip == job->boot_ip ? "" : ",", (int)l, ip, job->boot_port);
        ip += l + (ip[l] == ',');
    }
    s++;
    TPRUN_ADD_STRING(boot_fd, "TP_BOOT_FD=%d", TPRUN_BOOT_FD);
    TPRUN_ADD_STRING(t_world, "WORLD_SIZE=%d", job->world_size);
    TPRUN_ADD_STRING(t_local_world, "LOCAL_WORLD_SIZE=%d", job->local_size);
    TPRUN_ADD_STRING(t_addr, "MASTER_ADDR=%.*s", (int)strcspn(job->boot_ip, ","), job->boot_ip);
    if (job->host_var != NULL) TPRUN_ADD_STRING(host_var, "TP_HOST=%.255s", job->host_var);
    if (plan->report_bindings) TPRUN_ADD_STRING(report, "TP_REPORT_BINDINGS=1");
    TPRUN_ADD_STRING(t_port, "MASTER_PORT=%d", job->master_port);

    /* The inherited part is the same for every rank: filter it once. */
    char **base = job->envp_mem;
    size_t nb = 0;
    for (char *const *ep = environ_; ep != NULL && *ep != NULL; ep++) {
        int len = env_name_len(*ep);
        if (tprun_env_is_launcher_var(*ep, (size_t)len, plan->torch_env)) continue;
        if (overridden(*ep, plan->env_set, 0, plan->num_env_set)) continue;
        base[nb++] = *ep;
    }
    for (size_t i = 0; i < plan->num_env_set; i++)
        if (!overridden(plan->env_set[i], plan->env_set, i + 1, plan->num_env_set)) base[nb++] = plan->env_set[i];

    for (size_t r = 0; r < np; r++) {
        char **e = job->envp_mem + r * per_rank;
        if (job->ranks[r].agent >= 0) continue;
        if (e != base) memcpy(e, base, nb * sizeof(char *));
        size_t k = nb;
        char *v;
        int id = job->ranks[r].id, local = job->ranks[r].local_rank;
        /* Under --pmix, libtp takes its world from PMIx and bootstraps through it: no TP_* rank contract. */
        if (!plan->pmix) {
            TPRUN_ADD_STRING(v, "TP_RANK=%d", id), e[k++] = v;
            TPRUN_ADD_STRING(v, "TP_LOCAL_RANK=%d", local), e[k++] = v;
            e[k++] = world, e[k++] = local_world, e[k++] = node, e[k++] = job_id, e[k++] = key, e[k++] = addr;
            if ((int)r == job->boot_index) e[k++] = boot_fd;
        }
        if (host_var != NULL) e[k++] = host_var;
        if (report != NULL) e[k++] = report;
        if (plan->torch_env) {
            TPRUN_ADD_STRING(v, "RANK=%d", id), e[k++] = v;
            TPRUN_ADD_STRING(v, "LOCAL_RANK=%d", local), e[k++] = v;
            e[k++] = t_world, e[k++] = t_local_world, e[k++] = t_addr, e[k++] = t_port;
        }
        e[k] = NULL;
        job->envp[r] = e;
    }
#undef TPRUN_ADD_STRING
    return TP_OK;
}

double tprun_wall_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

tp_status_t tprun_job_prepare(tprun_job_t *job, const tprun_plan_t *plan, char *const *environ_)
{
    job->plan = plan;
    if (job->np == 0) { /* a single-host job: every rank here, rank 0 first */
        job->np = job->world_size = job->local_size = plan->np;
        job->listen = 1;
        job->stdin_index = job->boot_index = 0;
    }
    if (job->boot_ip[0] == '\0') snprintf(job->boot_ip, sizeof(job->boot_ip), "127.0.0.1");
    job->boot_fd = job->master_fd = job->devnull_fd = -1;
    job->stdin_pipe[0] = job->stdin_pipe[1] = job->exec_pipe[0] = job->exec_pipe[1] = -1;
    char nonce[9];
    /* An agent is given the job's id and key; tprun makes them. */
    if (random_hex(nonce, 4) != TP_OK || (job->job_key[0] == '\0' && random_hex(job->job_key, 16) != TP_OK)) {
        tp_log(TP_LOG_ERROR, "spawn", "getrandom failed: %s", strerror(errno));
        return TP_ERR_SYSTEM;
    }
    if (job->job_id[0] == '\0') snprintf(job->job_id, sizeof(job->job_id), "%s-%d-%s", job->host, (int)getpid(), nonce);
    tp_status_t st = job->listen ? open_boot_listener(job) : TP_OK;
    if (st == TP_OK && job->listen && plan->torch_env) st = reserve_master_port(job);
    if (st != TP_OK) return st;
    if (job->ranks == NULL) {
        job->ranks = calloc((size_t)job->np, sizeof(*job->ranks));
        if (job->ranks == NULL) return TP_ERR_NO_MEMORY;
        for (int r = 0; r < job->np; r++) {
            job->ranks[r].id = job->ranks[r].local_rank = r;
            job->ranks[r].agent = -1;
        }
    }
    if (!job->defer_envs && (st = tprun_job_build_envs(job, environ_)) != TP_OK) return st;
    for (int r = 0; r < job->np; r++) {
        tprun_stream_init(&job->ranks[r].out, -1, STDOUT_FILENO);
        tprun_stream_init(&job->ranks[r].err, -1, STDERR_FILENO);
        if (plan->tag_output)
            job->ranks[r].prefix.len =
                (size_t)snprintf(job->ranks[r].prefix.text, sizeof(job->ranks[r].prefix.text), "[%d] ",
                                 job->ranks[r].id);
    }
    job->devnull_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (job->devnull_fd < 0 || pipe2(job->exec_pipe, O_CLOEXEC) != 0) {
        tp_log(TP_LOG_ERROR, "spawn", "cannot open /dev/null or a pipe: %s", strerror(errno));
        return TP_ERR_SYSTEM;
    }
    fcntl(job->exec_pipe[0], F_SETFL, O_NONBLOCK);
    /* A rank in its own process group that reads the terminal would be stopped (SIGTTIN): tprun reads it instead. */
    job->stdin_tty = job->stdin_index >= 0 && (job->stdin_forwarded || isatty(STDIN_FILENO));
    if (job->stdin_tty) {
        if (pipe2(job->stdin_pipe, O_CLOEXEC) != 0) {
            tp_log(TP_LOG_ERROR, "spawn", "cannot create the stdin pipe: %s", strerror(errno));
            return TP_ERR_SYSTEM;
        }
        fcntl(job->stdin_pipe[1], F_SETFL, O_NONBLOCK);
    }
    return TP_OK;
}

static void close_fd(int *fd)
{
    if (*fd >= 0) close(*fd);
    *fd = -1;
}

void tprun_job_release(tprun_job_t *job)
{
    for (int r = 0; job->ranks != NULL && r < job->np; r++) {
        tprun_stream_free(&job->ranks[r].out);
        tprun_stream_free(&job->ranks[r].err);
    }
    free(job->ranks);
    free(job->envp);
    free(job->envp_mem);
    free(job->env_strings);
    close_fd(&job->boot_fd);
    close_fd(&job->master_fd);
    close_fd(&job->devnull_fd);
    close_fd(&job->stdin_pipe[0]);
    close_fd(&job->stdin_pipe[1]);
    close_fd(&job->exec_pipe[0]);
    close_fd(&job->exec_pipe[1]);
    job->ranks = NULL;
    job->envp = NULL;
    job->envp_mem = NULL;
    job->env_strings = NULL;
}

/* In the vforked child: only system calls (it shares tprun's memory until execve); everything was prepared. */
static void __attribute__((noreturn)) child_exec(tprun_job_t *job, int r, int out_w, int err_w, pid_t parent)
{
    if (job->reset_sigpipe) signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, &job->child_mask, NULL);
    setpgid(0, 0);
    /* Dies with tprun; the getppid check covers tprun dying before prctl. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(TPRUN_EXIT_LAUNCH);
    if (r != job->stdin_index) dup2(job->devnull_fd, STDIN_FILENO);
    else if (job->stdin_tty) dup2(job->stdin_pipe[0], STDIN_FILENO);
    dup2(out_w, STDOUT_FILENO);
    dup2(err_w, STDERR_FILENO);
    /* Under --pmix rank 0 binds its own listener (PMIx carries its address). */
    if (r == job->boot_index && !job->plan->pmix) {
        if (job->boot_fd == TPRUN_BOOT_FD) fcntl(TPRUN_BOOT_FD, F_SETFD, 0);
        else dup2(job->boot_fd, TPRUN_BOOT_FD);
    }
    /* An agent has entered --wdir itself; a failed chdir is reported as -errno. */
    int failed_chdir = job->plan->wdir != NULL && chdir(job->plan->wdir) != 0;
    if (job->child_exec != NULL) job->child_exec(job, r); /* a service's affinity or limits */
    if (!failed_chdir) execve(job->plan->program_path, job->plan->argv, job->envp[r]);
    int report[2] = {r, failed_chdir ? -errno : errno}; /* on the child's own part of the stack, below tprun's */
    ssize_t n = write(job->exec_pipe[1], report, sizeof(report));
    (void)n;
    _exit(127);
}

tp_status_t tprun_rank_start(tprun_job_t *job, int r)
{
    tprun_rank_t *rank = &job->ranks[r];
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0) goto err_pipe;
    if (pipe2(err, O_CLOEXEC) != 0) goto err_pipe_out;
    pid_t parent = getpid();
    /* vfork: no page tables copied and tprun waits only until the child's execve; the child writes no memory. */
    pid_t pid = vfork();
    if (pid < 0) goto err_fork;
    if (pid == 0) child_exec(job, r, out[1], err[1], parent);
    /* Also here, so the group exists before tprun might signal it. */
    setpgid(pid, pid);
    close(out[1]);
    close(err[1]);
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    rank->out.fd = out[0];
    rank->err.fd = err[0];
    rank->pid = pid;
    rank->running = 1;
    rank->start_wall = tprun_wall_s();
    tprun_keeper_tell(&job->keeper, 'S', pid);
    if (r == job->boot_index) close_fd(&job->boot_fd);
    if (r == job->stdin_index) close_fd(&job->stdin_pipe[0]);
    return TP_OK;

err_fork:
    tp_log(TP_LOG_ERROR, "spawn", "cannot start rank %d: fork: %s", r, strerror(errno));
    close(err[0]);
    close(err[1]);
    close(out[0]);
    close(out[1]);
    return TP_ERR_SYSTEM;
err_pipe_out:
    close(out[0]);
    close(out[1]);
err_pipe:
    tp_log(TP_LOG_ERROR, "spawn", "cannot start rank %d: pipe: %s", r, strerror(errno));
    return TP_ERR_SYSTEM;
}

#define TPRUN_EXITING_WAIT_MS 200

/* Inside exit(): its fds (its PMIx socket) maybe closed already. */
static int pid_exiting(pid_t pid)
{
    tp_proc_stat_t ps;
    return tp_proc_stat(pid, &ps) == 0 && (ps.flags & TP_PROC_PF_EXITING) != 0;
}

void tprun_wait_exiting(const tprun_job_t *job)
{
    for (int i = 0; i < job->np; i++) {
        const tprun_rank_t *r = &job->ranks[i];
        if (!r->running || r->agent >= 0 || !pid_exiting(r->pid)) continue;
        int fd = (int)syscall(SYS_pidfd_open, r->pid, 0);
        if (fd < 0) continue;
        struct pollfd p = {fd, POLLIN, 0};
        while (poll(&p, 1, TPRUN_EXITING_WAIT_MS) < 0 && errno == EINTR) {
        }
        close(fd);
    }
}

int tprun_ranks_running(const tprun_job_t *job)
{
    for (int i = 0; i < job->np; i++) {
        const tprun_rank_t *r = &job->ranks[i];
        tp_proc_stat_t ps;
        if (r->running && r->agent < 0 && tp_proc_stat(r->pid, &ps) == 0 && ps.state != 'T' && ps.state != 't')
            return 1;
    }
    return 0;
}

void tprun_exec_reports(tprun_job_t *job)
{
    int report[2];
    while (job->exec_pipe[0] >= 0 && read(job->exec_pipe[0], report, sizeof(report)) == (ssize_t)sizeof(report))
        if (report[0] >= 0 && report[0] < job->np) job->ranks[report[0]].exec_errno = report[1];
}

/* ---- The keeper ---- */

typedef struct keeper_msg {
    int32_t op;
    int32_t pgid;
} keeper_msg_t;

static void __attribute__((noreturn)) keeper_main(int fd, int np, void (*cleanup)(void))
{
    pid_t tprun = getppid();
    prctl(PR_SET_NAME, "tprun-keeper");
    /* Its own group and deaf to job-control and terminal signals: only tprun's end may end it. */
    setpgid(0, 0);
    static const int ignored[] = {SIGINT, SIGQUIT, SIGTERM, SIGHUP, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU};
    for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++) signal(ignored[i], SIG_IGN);
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        close(null);
    }
    pid_t *groups = calloc((size_t)np, sizeof(*groups));
    int ngroups = 0;
    keeper_msg_t msg;
    size_t have = 0;
    for (;;) {
        ssize_t n = read(fd, (char *)&msg + have, sizeof(msg) - have);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        have += (size_t)n;
        if (have < sizeof(msg)) continue;
        have = 0;
        if (msg.op == 'D') _exit(0);
        if (msg.op == 'S' && groups != NULL && ngroups < np) groups[ngroups++] = msg.pgid;
        for (int i = 0; msg.op == 'R' && i < ngroups; i++)
            if (groups[i] == msg.pgid) groups[i] = groups[--ngroups];
    }
    if (ngroups > 0) {
        char line[160];
        int len = snprintf(line, sizeof(line),
                           "tprun-keeper: tprun (pid %d) ended without finishing the job; killing %d ranks' process "
                           "groups\n",
                           (int)tprun, ngroups);
        for (int i = 0; i < ngroups; i++) kill(-groups[i], SIGKILL);
        tp_log_write_all(STDERR_FILENO, line, (size_t)len);
    }
    if (cleanup != NULL) cleanup(); /* tprun died: what the services registered goes too (PMIx's tmpdir) */
    _exit(0);
}

tp_status_t tprun_keeper_start(tprun_keeper_t *k, int np, void (*cleanup)(void))
{
    int p[2];
    k->pid = 0;
    k->fd = -1;
    if (pipe2(p, O_CLOEXEC) != 0) {
        tp_log(TP_LOG_ERROR, "keeper", "cannot create the keeper's pipe: %s", strerror(errno));
        return TP_ERR_SYSTEM;
    }
    pid_t pid = fork();
    if (pid < 0) {
        tp_log(TP_LOG_ERROR, "keeper", "cannot start the keeper: fork: %s", strerror(errno));
        close(p[0]);
        close(p[1]);
        return TP_ERR_SYSTEM;
    }
    if (pid == 0) {
        close(p[1]);
        keeper_main(p[0], np, cleanup);
    }
    close(p[0]);
    k->pid = pid;
    k->fd = p[1];
    return TP_OK;
}

void tprun_keeper_tell(tprun_keeper_t *k, char op, pid_t pgid)
{
    if (k->fd < 0) return;
    keeper_msg_t msg = {op, (int32_t)pgid};
    ssize_t n;
    do n = write(k->fd, &msg, sizeof(msg));
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(msg)) {
        tp_log(TP_LOG_WARN, "keeper", "the keeper is gone (%s); ranks are not cleaned up if tprun is killed",
               n < 0 ? strerror(errno) : "short write");
        close(k->fd);
        k->fd = -1;
    }
}

void tprun_keeper_finish(tprun_keeper_t *k)
{
    tprun_keeper_tell(k, 'D', 0);
    if (k->fd >= 0) close(k->fd);
    k->fd = -1;
    if (k->pid > 0) {
        int st;
        while (waitpid(k->pid, &st, 0) < 0 && errno == EINTR) {
        }
    }
    k->pid = 0;
}
