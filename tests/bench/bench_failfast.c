/* bench_failfast: fails one rank of a running job and times, through pidfds, how long its peers and launcher live on. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <regex.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS   1024
#define CAPTURE_MAX (1 << 20)
#define BOOT_TRIES  5

typedef struct capture {
    int fd;
    size_t len;
    char *buf;
} capture_t;

typedef struct options {
    int n, victim, sig, reps, torchrun, min_right, stages;
    double settle_s, ready_timeout_s, gone_timeout_s;
    const char *label, *name_first, *name_regex;
    char **cmd;
} options_t;

typedef struct job {
    pid_t launcher; /* the exec'd command, or 0 when the driver forks the ranks */
    pid_t rank_pid[MAX_RANKS];
    int pidfd[MAX_RANKS + 1]; /* the ranks', then the launcher's; -1 once gone */
    pid_t child[MAX_RANKS];   /* the driver's own children, to reap */
    int num_children;
    int ready;
    int64_t t0, gone_at[MAX_RANKS + 1]; /* CLOCK_MONOTONIC: the failure, and when each rank (then the launcher) went */
    capture_t out, err;
} job_t;

typedef struct result {
    double gone_ms, launcher_ms, victim_ms;
    int hung, victim_left, launcher_ok, right, wrong, named;
    char status[256];
} result_t;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int pidfd_open(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }

/* Signals through a pidfd, so a recycled pid can never be hit. */
static int pidfd_kill(int fd, int sig) { return (int)syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0); }

static void die(const char *what)
{
    fprintf(stderr, "bench_failfast: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* Reads what is there; returns 0 at EOF. */
static int capture_read(capture_t *c)
{
    char tmp[65536];
    ssize_t r = read(c->fd, tmp, sizeof(tmp));
    if (r < 0) return errno == EAGAIN || errno == EINTR;
    if (r == 0) return 0;
    size_t take = c->len + (size_t)r < CAPTURE_MAX ? (size_t)r : CAPTURE_MAX - c->len;
    memcpy(c->buf + c->len, tmp, take);
    c->len += take;
    c->buf[c->len] = '\0';
    return 1;
}

/* Learns rank pids from complete "ready rank R of N pid P" lines not yet parsed. */
static void parse_ready(job_t *j, const options_t *o, size_t *parsed)
{
    char *line = j->out.buf + *parsed, *nl;
    while ((nl = strchr(line, '\n')) != NULL) {
        int r, size, pid;
        char *at = strstr(line, "ready rank ");
        if (at != NULL && at < nl && sscanf(at, "ready rank %d of %d pid %d", &r, &size, &pid) == 3 && r >= 0 &&
            r < o->n && j->rank_pid[r] == 0) {
            j->rank_pid[r] = pid;
            j->ready++;
        }
        line = nl + 1;
    }
    *parsed = (size_t)(line - j->out.buf);
}

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || getsockname(fd, (struct sockaddr *)&a, &alen) != 0)
        die("finding a free port");
    close(fd);
    return ntohs(a.sin_port);
}

static pid_t spawn(char **cmd, int out_fd, int err_fd, int rank, int size, int port)
{
    pid_t pid = fork();
    if (pid < 0) die("fork");
    if (pid > 0) return pid;
    int devnull = open("/dev/null", O_RDONLY);
    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out_fd, 1) < 0 || dup2(err_fd, 2) < 0) _exit(127);
    if (rank >= 0) {
        char v[32];
        static const char *unset[] = {
            "TP_RANK", "TP_WORLD_SIZE", "TP_BOOT_ADDR", "TP_BOOT_FD", "TP_JOB_ID", "TORCHELASTIC_RUN_ID", NULL};
        for (int i = 0; unset[i]; i++) unsetenv(unset[i]);
        snprintf(v, sizeof(v), "%d", rank);
        setenv("RANK", v, 1);
        setenv("LOCAL_RANK", v, 1);
        snprintf(v, sizeof(v), "%d", size);
        setenv("WORLD_SIZE", v, 1);
        setenv("LOCAL_WORLD_SIZE", v, 1);
        setenv("GROUP_RANK", "0", 1);
        setenv("MASTER_ADDR", "127.0.0.1", 1);
        snprintf(v, sizeof(v), "%d", port);
        setenv("MASTER_PORT", v, 1);
    } else {
        setpgid(0, 0); /* so a hung launcher's helpers can be ended with it */
    }
    execvp(cmd[0], cmd);
    fprintf(stderr, "bench_failfast: %s: %s\n", cmd[0], strerror(errno));
    _exit(127);
}

/* Ends what is left of a job: ranks through their pidfds, the launcher with its process group. */
static void end_job(job_t *j, const options_t *o)
{
    for (int r = 0; r <= o->n; r++)
        if (j->pidfd[r] >= 0) pidfd_kill(j->pidfd[r], SIGKILL);
    if (j->launcher > 0) kill(-j->launcher, SIGKILL), kill(j->launcher, SIGKILL);
    for (int i = 0; i < j->num_children; i++) kill(j->child[i], SIGKILL); /* unreaped: the pids are still theirs */
}

static void close_job(job_t *j, const options_t *o)
{
    for (int r = 0; r <= o->n; r++)
        if (j->pidfd[r] >= 0) close(j->pidfd[r]), j->pidfd[r] = -1;
    free(j->out.buf);
    free(j->err.buf);
    close(j->out.fd);
    close(j->err.fd);
}

/* Starts the job and reads until every rank said ready; returns 0 when the job came up. */
static int start_job(job_t *j, const options_t *o)
{
    int out[2], err[2];
    memset(j, 0, sizeof(*j));
    for (int r = 0; r <= MAX_RANKS; r++) j->pidfd[r] = -1;
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) die("pipe");
    j->out = (capture_t){.fd = out[0], .buf = malloc(CAPTURE_MAX + 1)};
    j->err = (capture_t){.fd = err[0], .buf = malloc(CAPTURE_MAX + 1)};
    if (j->out.buf == NULL || j->err.buf == NULL) die("malloc");
    j->out.buf[0] = j->err.buf[0] = '\0';
    if (o->torchrun) {
        int port = free_port();
        for (int r = 0; r < o->n; r++) j->child[j->num_children++] = spawn(o->cmd, out[1], err[1], r, o->n, port);
    } else {
        j->launcher = j->child[j->num_children++] = spawn(o->cmd, out[1], err[1], -1, 0, 0);
    }
    close(out[1]);
    close(err[1]);
    fcntl(j->out.fd, F_SETFL, O_NONBLOCK);
    fcntl(j->err.fd, F_SETFL, O_NONBLOCK);
    int64_t deadline = now_ns() + (int64_t)(o->ready_timeout_s * 1e9);
    size_t parsed = 0;
    int open_out = 1, open_err = 1;
    while (j->ready < o->n && open_out && now_ns() < deadline) {
        struct pollfd p[2] = {{.fd = j->out.fd, .events = POLLIN}, {.fd = open_err ? j->err.fd : -1, .events = POLLIN}};
        int ms = (int)((deadline - now_ns()) / 1000000) + 1;
        if (poll(p, 2, ms) < 0 && errno != EINTR) die("poll");
        if (p[0].revents && !(open_out = capture_read(&j->out))) break;
        if (p[1].revents) open_err = capture_read(&j->err);
        parse_ready(j, o, &parsed);
    }
    if (j->ready < o->n) return -1;
    for (int r = 0; r < o->n; r++)
        if ((j->pidfd[r] = pidfd_open(j->rank_pid[r])) < 0) {
            fprintf(stderr, "bench_failfast: %s: rank %d (pid %d) is gone before the failure\n", o->label, r,
                    (int)j->rank_pid[r]);
            return -1;
        }
    if (j->launcher > 0 && (j->pidfd[o->n] = pidfd_open(j->launcher)) < 0) die("pidfd_open");
    return 0;
}

static void reap(job_t *j, const options_t *o, char *status, size_t len)
{
    int counts[512] = {0}; /* 0-255 exit codes, 256+ signals */
    for (int i = 0; i < j->num_children; i++) {
        int st;
        if (j->launcher == 0 && j->child[i] == j->rank_pid[o->victim]) {
            waitpid(j->child[i], &st, 0); /* the victim's end is the cause, not a result */
            continue;
        }
        if (waitpid(j->child[i], &st, 0) < 0) continue;
        counts[WIFEXITED(st) ? WEXITSTATUS(st) : 256 + (WTERMSIG(st) & 255)]++;
    }
    size_t used = 0;
    status[0] = '\0';
    for (int k = 0; k < 512 && used < len; k++) {
        if (!counts[k]) continue;
        char name[32];
        if (k < 256) snprintf(name, sizeof(name), "%d", k);
        else snprintf(name, sizeof(name), "SIG%s", sigabbrev_np(k - 256) ? sigabbrev_np(k - 256) : "?");
        used += (size_t)snprintf(status + used, len - used, "%s%s", used ? "," : "", name);
        if (counts[k] > 1 && used < len) used += (size_t)snprintf(status + used, len - used, "x%d", counts[k]);
    }
}

/* Counts survivors' libtp lines "rank R (host:pid) fate: ... peer rank V (host H, pid P) failed" by whether they
 * name the victim; a stopped victim woken by its launcher may log a peer's end too, and that is not a survivor's. */
static void check_survivor_lines(const job_t *j, const options_t *o, result_t *res)
{
    const char *line = j->err.buf;
    while (*line) {
        const char *nl = strchrnul(line, '\n'), *at = strstr(line, "peer rank "), *paren = strchr(line, '(');
        int r, pid, writer = 0;
        if (paren != NULL && paren < at) sscanf(paren, "(%*[^:]:%d)", &writer);
        if (at != NULL && at < nl && writer != j->rank_pid[o->victim] &&
            sscanf(at, "peer rank %d (host %*[^,], pid %d) failed", &r, &pid) == 2) {
            if (r == o->victim && pid == j->rank_pid[o->victim]) res->right++;
            else res->wrong++;
        }
        line = *nl ? nl + 1 : nl;
    }
}

/* Whether the first line of buf starting with prefix (or any line, without one) matches re. */
static int match_line(const char *buf, const char *prefix, const regex_t *re)
{
    for (const char *line = buf; *line;) {
        const char *nl = strchrnul(line, '\n');
        char one[4096];
        snprintf(one, sizeof(one), "%.*s", (int)(nl - line < 4095 ? nl - line : 4095), line);
        if (prefix == NULL || strncmp(one, prefix, strlen(prefix)) == 0) {
            int ok = regexec(re, one, 0, NULL, 0) == 0;
            if (prefix != NULL || ok) return ok;
        }
        line = *nl ? nl + 1 : nl;
    }
    return 0;
}

/* The launcher's message must match name_regex (%p: the victim's pid): the first stderr line starting with
 * name_first, or else any line of stderr or stdout (Hydra writes its report to stdout). */
static int check_launcher_line(const job_t *j, const options_t *o)
{
    char re_text[512], pid_text[16];
    size_t used = 0;
    snprintf(pid_text, sizeof(pid_text), "%d", (int)j->rank_pid[o->victim]);
    for (const char *s = o->name_regex; *s && used + 16 < sizeof(re_text); s++) {
        if (s[0] == '%' && s[1] == 'p')
            used += (size_t)snprintf(re_text + used, sizeof(re_text) - used, "%s", pid_text), s++;
        else re_text[used++] = *s;
    }
    re_text[used] = '\0';
    regex_t re;
    if (regcomp(&re, re_text, REG_EXTENDED | REG_NOSUB) != 0) {
        fprintf(stderr, "bench_failfast: --name-regex: cannot compile \"%s\"\n", re_text);
        exit(2);
    }
    int ok = match_line(j->err.buf, o->name_first, &re) || (o->name_first == NULL && match_line(j->out.buf, NULL, &re));
    regfree(&re);
    return ok;
}

/* One repetition: start, settle, fail the victim at t0, watch survivors, victim and launcher go. */
static int run_once(const options_t *o, result_t *res, job_t *j)
{
    for (int tries = 1; start_job(j, o) != 0; tries++) {
        end_job(j, o);
        reap(j, o, res->status, sizeof(res->status));
        if (!o->torchrun || tries >= BOOT_TRIES) {
            fprintf(stderr, "bench_failfast: %s: only %d of %d ranks said ready; stderr:\n%s\n", o->label, j->ready,
                    o->n, j->err.buf);
            close_job(j, o);
            return -1;
        }
        close_job(j, o); /* a port taken between the probe and the bind: try another */
    }
    int n = o->n, *fds = j->pidfd;
    int64_t *gone_at = j->gone_at;
    int open_out = 1, open_err = 1;
    int64_t settle_end = now_ns() + (int64_t)(o->settle_s * 1e9), t0 = 0, deadline = INT64_MAX;
    for (;;) {
        int64_t now = now_ns();
        if (t0 == 0 && now >= settle_end) {
            t0 = now_ns();
            if (pidfd_kill(fds[o->victim], o->sig) != 0) die("signalling the victim");
            deadline = t0 + (int64_t)(o->gone_timeout_s * 1e9);
        }
        int alive = 0;
        for (int i = 0; i <= n; i++) alive += fds[i] >= 0 && i != o->victim;
        if (t0 && (!alive || now >= deadline)) break;
        struct pollfd p[MAX_RANKS + 3];
        int who[MAX_RANKS + 3], k = 0;
        for (int i = 0; i <= n; i++)
            if (fds[i] >= 0) p[k] = (struct pollfd){.fd = fds[i], .events = POLLIN}, who[k++] = i;
        if (open_out) p[k] = (struct pollfd){.fd = j->out.fd, .events = POLLIN}, who[k++] = -1;
        if (open_err) p[k] = (struct pollfd){.fd = j->err.fd, .events = POLLIN}, who[k++] = -2;
        int64_t until = t0 ? deadline : settle_end;
        int rc = poll(p, (nfds_t)k, (int)((until - now) / 1000000) + 1);
        int64_t seen = now_ns();
        if (rc < 0 && errno != EINTR) die("poll");
        for (int i = 0; rc > 0 && i < k; i++) {
            if (!p[i].revents) continue;
            if (who[i] == -1) open_out = capture_read(&j->out);
            else if (who[i] == -2) open_err = capture_read(&j->err);
            else if (t0 == 0) {
                fprintf(stderr, "bench_failfast: %s: %s %d ended before the failure; stderr:\n%s\n", o->label,
                        who[i] == n ? "the launcher, pid" : "rank", who[i] == n ? (int)j->launcher : who[i],
                        j->err.buf);
                end_job(j, o);
                reap(j, o, res->status, sizeof(res->status));
                close_job(j, o);
                return -1;
            } else {
                gone_at[who[i]] = seen;
                close(fds[who[i]]);
                fds[who[i]] = -1;
            }
        }
    }
    j->t0 = t0;
    if (fds[o->victim] >= 0) {
        struct pollfd p = {.fd = fds[o->victim], .events = POLLIN};
        if (poll(&p, 1, 0) == 1) gone_at[o->victim] = now_ns(), close(fds[o->victim]), fds[o->victim] = -1;
    }
    res->hung = 0;
    res->gone_ms = 0;
    for (int r = 0; r < n; r++) {
        if (r == o->victim) continue;
        if (fds[r] >= 0) res->hung = 1;
        else if ((double)(gone_at[r] - t0) / 1e6 > res->gone_ms) res->gone_ms = (double)(gone_at[r] - t0) / 1e6;
    }
    res->launcher_ms = -1;
    if (j->launcher != 0 && fds[n] >= 0) res->hung = 1;
    else if (j->launcher != 0) res->launcher_ms = (double)(gone_at[n] - t0) / 1e6;
    res->victim_ms = fds[o->victim] < 0 ? (double)(gone_at[o->victim] - t0) / 1e6 : -1;
    /* A stopped victim still there once the launcher is gone was left behind by it. */
    res->victim_left = j->launcher != 0 && fds[n] < 0 && fds[o->victim] >= 0;
    end_job(j, o); /* only what is left: a hung job, or a stopped victim nobody ended */
    int64_t drain_end = now_ns() + 500000000;
    while ((open_out || open_err) && now_ns() < drain_end) {
        struct pollfd p[2] = {{.fd = open_out ? j->out.fd : -1, .events = POLLIN},
                              {.fd = open_err ? j->err.fd : -1, .events = POLLIN}};
        if (poll(p, 2, 50) < 0 && errno != EINTR) break;
        if (p[0].revents) open_out = capture_read(&j->out);
        if (p[1].revents) open_err = capture_read(&j->err);
    }
    reap(j, o, res->status, sizeof(res->status));
    check_survivor_lines(j, o, res);
    res->launcher_ok = o->name_regex ? check_launcher_line(j, o) : -1;
    res->named = res->launcher_ok != 0 && res->wrong == 0 && res->right >= o->min_right;
    return 0;
}

enum { ST_WOKE, ST_DECIDED, ST_SENT_FIRST, ST_SENT_LAST, ST_QUIESCED, ST_LOGGED, ST_CALLED, ST_EXIT, ST_GONE, ST_N };
static const char *const stage_names[ST_N] = {"woke",   "decided", "sent",   "sent-all", "quiesced",
                                              "logged", "called",  "exit()", "gone"};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* --stages: the ranks' "fate: stages" debug lines (TP_LOG_LEVEL=debug), as ms after the failure: rank 0's own, then
 * the survivors' median and worst of each stage, so where the time between the kill and the last exit goes shows. */
static void print_stages(const job_t *j, const options_t *o, int rep)
{
    static double surv[ST_N][MAX_RANKS];
    double zero[ST_N];
    char zero_via[16] = "-";
    int k = 0, have_zero = 0;
    for (const char *line = j->err.buf; *line;) {
        const char *nl = strchrnul(line, '\n'), *at = strstr(line, "fate: stages (monotonic ns): ");
        long long v[ST_N] = {0};
        char via[16];
        int r;
        if (at != NULL && at < nl && sscanf(line, "%*s rank %d", &r) == 1 && r >= 0 && r < o->n && r != o->victim &&
            sscanf(at, "fate: stages (monotonic ns): woke %lld via %15s decided %lld sent %lld-%lld quiesced %lld "
                       "logged %lld called %lld exit %lld",
                   &v[ST_WOKE], via, &v[ST_DECIDED], &v[ST_SENT_FIRST], &v[ST_SENT_LAST], &v[ST_QUIESCED],
                   &v[ST_LOGGED], &v[ST_CALLED], &v[ST_EXIT]) == 9) {
            v[ST_GONE] = j->gone_at[r];
            double *dst = r == 0 ? zero : (double *)NULL;
            for (int s = 0; s < ST_N; s++) {
                double ms = v[s] > 0 ? (double)(v[s] - j->t0) / 1e6 : -1;
                if (dst != NULL) dst[s] = ms;
                else surv[s][k] = ms;
            }
            if (r == 0) have_zero = 1, snprintf(zero_via, sizeof(zero_via), "%s", via);
            else k++;
        }
        line = *nl ? nl + 1 : nl;
    }
    fprintf(stderr, "stages %s N=%d rep %d: victim gone %.2f ms", o->label, o->n, rep,
            j->gone_at[o->victim] ? (double)(j->gone_at[o->victim] - j->t0) / 1e6 : -1.0);
    if (have_zero) {
        fprintf(stderr, "; rank 0 (via %s):", zero_via);
        for (int s = 0; s < ST_N; s++) fprintf(stderr, " %s %.2f", stage_names[s], zero[s]);
    }
    fprintf(stderr, "; %d survivors, median/worst:", k);
    for (int s = 0; s < ST_N && k > 0; s++) {
        qsort(surv[s], (size_t)k, sizeof(double), cmp_double);
        fprintf(stderr, " %s %.2f/%.2f", stage_names[s], surv[s][k / 2], surv[s][k - 1]);
    }
    fprintf(stderr, "\n");
}

/* The job's output for the record: stderr whole, stdout without the ready lines. */
static void log_output(const job_t *j, const options_t *o, int rep)
{
    fprintf(stderr, "---- %s N=%d rep %d: victim pid %d\n%s", o->label, o->n, rep, (int)j->rank_pid[o->victim],
            j->err.buf);
    for (const char *line = j->out.buf; *line;) {
        const char *nl = strchrnul(line, '\n');
        if (strncmp(line, "ready rank ", 11) != 0) fprintf(stderr, "stdout: %.*s\n", (int)(nl - line), line);
        line = *nl ? nl + 1 : nl;
    }
}

static void usage(void)
{
    fprintf(stderr,
            "usage: bench_failfast -n N [options] -- command [args...]\n"
            "  -n N                 ranks in the job (each prints \"ready rank R of N pid P\" on stdout)\n"
            "  --torchrun           fork the N ranks here with RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT\n"
            "  --signal KILL|STOP   what the victim gets (default KILL)\n"
            "  --victim R           the rank that fails (default 1)\n"
            "  --reps R             repetitions, one result line each (default 1)\n"
            "  --label NAME         first column of the result lines\n"
            "  --settle S           seconds between the last ready line and the failure (default 0.05)\n"
            "  --ready-timeout S    give up starting the job after S seconds (default 30)\n"
            "  --gone-timeout S     count a hang when peers or launcher outlive the failure by S (default 5)\n"
            "  --name-first PREFIX  check only the first stderr line starting with PREFIX against --name-regex\n"
            "  --name-regex RE      the launcher's message must match RE (POSIX ERE; %%p is the victim's pid)\n"
            "  --min-right K        named correctly needs K survivor lines naming the victim (default 0)\n"
            "  --stages             run the ranks with TP_LOG_LEVEL=debug and print, per repetition, when each stage\n"
            "                       of the survivors' end ran (ms after the failure: rank 0, then median/worst)\n"
            "Prints: label N signal rep gone_ms launcher_ms victim_ms hung victim_left status launcher_ok right wrong "
            "named\n");
    exit(2);
}

static double parse_double(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (*s == '\0' || *end != '\0' || v < 0) usage();
    return v;
}

int main(int argc, char **argv)
{
    options_t o = {.victim = 1,
                   .sig = SIGKILL,
                   .reps = 1,
                   .settle_s = 0.05,
                   .ready_timeout_s = 30,
                   .gone_timeout_s = 5,
                   .label = "job"};
    int i = 1;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--torchrun") == 0 || strcmp(a, "--stages") == 0) {
            *(a[2] == 't' ? &o.torchrun : &o.stages) = 1;
            continue;
        }
        if (v == NULL) usage();
        i++;
        if (strcmp(a, "-n") == 0) o.n = atoi(v);
        else if (strcmp(a, "--signal") == 0)
            o.sig = strcmp(v, "STOP") == 0 ? SIGSTOP : strcmp(v, "KILL") == 0 ? SIGKILL : -1;
        else if (strcmp(a, "--victim") == 0) o.victim = atoi(v);
        else if (strcmp(a, "--reps") == 0) o.reps = atoi(v);
        else if (strcmp(a, "--label") == 0) o.label = v;
        else if (strcmp(a, "--settle") == 0) o.settle_s = parse_double(v);
        else if (strcmp(a, "--ready-timeout") == 0) o.ready_timeout_s = parse_double(v);
        else if (strcmp(a, "--gone-timeout") == 0) o.gone_timeout_s = parse_double(v);
        else if (strcmp(a, "--name-first") == 0) o.name_first = v;
        else if (strcmp(a, "--name-regex") == 0) o.name_regex = v;
        else if (strcmp(a, "--min-right") == 0) o.min_right = atoi(v);
        else usage();
    }
    if (i + 1 >= argc || o.n < 2 || o.n > MAX_RANKS || o.victim < 0 || o.victim >= o.n || o.sig < 0 || o.reps < 1)
        usage();
    o.cmd = argv + i + 1;
    if (o.stages) setenv("TP_LOG_LEVEL", "debug", 1);
    signal(SIGPIPE, SIG_IGN);
    int failed = 0;
    for (int rep = 0; rep < o.reps; rep++) {
        result_t res = {0};
        job_t *j = calloc(1, sizeof(*j));
        if (j == NULL) die("calloc");
        if (run_once(&o, &res, j) != 0) {
            failed++;
            printf("%s\t%d\t%s\t%d\tstart-failed\n", o.label, o.n, o.sig == SIGKILL ? "KILL" : "STOP", rep);
        } else {
            printf("%s\t%d\t%s\t%d\t%.3f\t%.3f\t%.3f\t%d\t%d\t%s\t%d\t%d\t%d\t%d\n", o.label, o.n,
                   o.sig == SIGKILL ? "KILL" : "STOP", rep, res.gone_ms, res.launcher_ms, res.victim_ms, res.hung,
                   res.victim_left, res.status[0] ? res.status : "-", res.launcher_ok, res.right, res.wrong, res.named);
            if (getenv("BENCH_FAILFAST_LOG")) log_output(j, &o, rep);
            if (o.stages) print_stages(j, &o, rep);
            close_job(j, &o);
        }
        fflush(stdout);
        free(j);
    }
    return failed ? 1 : 0;
}
