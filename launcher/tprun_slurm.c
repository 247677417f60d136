/* tprun_slurm.c: the Slurm launcher: one `srun --mpi=pmix` step; libtp's ranks learn the world from PMIx. */
#include "tprun_slurm.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime_config.h"
#include "runtime_log.h"
#include "tprun_exit.h"
#include "core/loop.h"
#include "tprun_output.h"

#define SRUN_FIXED_ARGS 16
/* What each task wrapper writes on its stderr when its rank ended; srun may put "N: " in front (--label). */
#define TASK_REPORT_MARK "\036tprun-task "
/* The wrapper reads the token from here and removes it before the program starts (no rank can report for one). */
#define TASK_TOKEN_VAR "TPRUN_SLURM_TASK_TOKEN"
/* A peer-failed exit (70) waits this long for its cause's report from another task. */
#define CAUSE_WAIT_S 0.25

static const char *env_get(char *const *envp, const char *name)
{
    size_t n = strlen(name);
    for (char *const *ep = envp; ep != NULL && *ep != NULL; ep++)
        if (strncmp(*ep, name, n) == 0 && (*ep)[n] == '=') return *ep + n + 1;
    return NULL;
}

int tprun_slurm_wanted(const char *how, char *const *envp)
{
    if (how != NULL && strcmp(how, "slurm") == 0) return 1;
    if (how != NULL && strcmp(how, "local") == 0) return 0;
    return env_get(envp, "SLURM_JOB_ID") != NULL;
}

int tprun_slurm_check(const tprun_plan_t *plan, char *const *envp)
{
    const char *how = plan->launcher != NULL && plan->launcher == env_get(envp, "TP_LAUNCHER") ? "TP_LAUNCHER=slurm"
                                                                                               : "--launcher slurm";
    if (env_get(envp, "SLURM_JOB_ID") == NULL) {
        tprun_say("%s: not inside a Slurm allocation (SLURM_JOB_ID is not set); run tprun under salloc or sbatch, or "
                  "use --launcher local",
                  how);
        return TPRUN_EXIT_USAGE;
    }
    char *path = NULL, err[600];
    if (tprun_find_program("srun", env_get(envp, "PATH"), &path, err, sizeof(err)) != TP_OK) {
        tprun_say("Slurm allocation %s: cannot start srun: %s (set TP_LAUNCHER=local to start the ranks here)",
                  env_get(envp, "SLURM_JOB_ID"), err);
        return TPRUN_EXIT_LAUNCH;
    }
    free(path);
    return 0;
}

/* ---- the task wrapper: `tprun --slurm-task PROGRAM ARGS...`, one per rank, started by srun ---- */

int tprun_slurm_task(char **argv)
{
    const char *rank = getenv("SLURM_PROCID"), *host = getenv("SLURMD_NODENAME");
    char token[64] = "";
    const char *t = getenv(TASK_TOKEN_VAR);
    if (t != NULL) snprintf(token, sizeof(token), "%s", t);
    unsetenv(TASK_TOKEN_VAR);
    sigset_t sigs, old;
    sigemptyset(&sigs);
    static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2, SIGCONT};
    for (size_t i = 0; i < sizeof(forwarded) / sizeof(forwarded[0]); i++) sigaddset(&sigs, forwarded[i]);
    sigaddset(&sigs, SIGCHLD);
    sigprocmask(SIG_BLOCK, &sigs, &old);
    int sfd = signalfd(-1, &sigs, SFD_CLOEXEC);
    pid_t parent = getpid(), pid = sfd < 0 ? -1 : fork();
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* the wrapper's end (slurmstepd's kill) is the rank's */
        if (getppid() != parent) _exit(TPRUN_EXIT_LAUNCH);
        execvp(argv[0], argv);
        dprintf(STDERR_FILENO, "tprun: rank %s: cannot execute %s: %s\n", rank ? rank : "?", argv[0], strerror(errno));
        _exit(127);
    }
    int st = TPRUN_EXIT_LAUNCH << 8;
    while (pid > 0) {
        struct signalfd_siginfo si;
        if (read(sfd, &si, sizeof(si)) != (ssize_t)sizeof(si)) {
            if (errno == EINTR) continue;
            break;
        }
        if (si.ssi_signo != SIGCHLD) kill(pid, (int)si.ssi_signo);
        else if (waitpid(pid, &st, WNOHANG) == pid) break;
    }
    if (token[0] != '\0')
        dprintf(STDERR_FILENO, TASK_REPORT_MARK "%s %s %d %s\n", token, rank ? rank : "-1", st, host ? host : "?");
    if (WIFSIGNALED(st)) {
        /* srun (and --kill-on-bad-exit) see what the rank saw. */
        signal(WTERMSIG(st), SIG_DFL);
        sigprocmask(SIG_SETMASK, &old, NULL);
        raise(WTERMSIG(st));
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : TPRUN_EXIT_LAUNCH;
}

/* ---- tprun's side: srun, its output, and the tasks' reports ---- */

/* One line per rank naming its host, from tprun's placement; an fd srun inherits (not close-on-exec). */
static int placement_file(const tprun_plan_t *plan)
{
    int fd = memfd_create("tprun-placement", 0);
    if (fd < 0) return -1;
    for (int r = 0; r < plan->np; r++)
        if (dprintf(fd, "%s\n", plan->hosts[plan->rank_host[r]].name) < 0) {
            close(fd);
            return -1;
        }
    lseek(fd, 0, SEEK_SET);
    return fd;
}

typedef struct slurm_run {
    const tprun_plan_t *plan;
    char token[33];
    int *reported; /* per rank: its report arrived */
    int nreported;
    int first;        /* the rank that failed first, or -1 */
    int first_status; /* its wait status */
    char first_host[256];
    int held; /* a rank that exited 70: the cause's report may follow, or -1 */
    int held_status;
    char held_host[256];
    double held_until;
} slurm_run_t;

static void decide(slurm_run_t *R, int rank, int wstatus, const char *host)
{
    R->first = rank;
    R->first_status = wstatus;
    snprintf(R->first_host, sizeof(R->first_host), "%s", host);
    R->held = -1;
    R->held_until = 0;
    char cause[160];
    tprun_status_describe(wstatus, 0, cause, sizeof(cause));
    tprun_say("rank %d (host %s) %s", rank, host, cause);
}

/* One task's report: the first failure decides tprun's status; a peer-failed exit waits a moment for its cause. */
static void on_report(slurm_run_t *R, const char *text)
{
    char token[64], host[256];
    int rank, wstatus;
    if (sscanf(text, "%63s %d %d %255s", token, &rank, &wstatus, host) != 4 || strcmp(token, R->token) != 0 ||
        rank < 0 || rank >= R->plan->np || R->reported[rank]) {
        tp_log(TP_LOG_WARN, "spawn", "srun: ignoring a task report that is not one of this job's: \"%.80s\"", text);
        return;
    }
    R->reported[rank] = 1;
    R->nreported++;
    if (R->first >= 0 || !tprun_status_failed(wstatus)) return;
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == TP_EXIT_PEER_FAILED) {
        if (R->held < 0) {
            R->held = rank, R->held_status = wstatus, R->held_until = tprun_now_s() + CAUSE_WAIT_S;
            snprintf(R->held_host, sizeof(R->held_host), "%s", host);
        }
        return;
    }
    decide(R, rank, wstatus, host);
}

/* srun's stderr, line by line: reports are taken out, everything else goes on to tprun's stderr. */
static void on_err_line(void *ctx, char *line, size_t len)
{
    slurm_run_t *R = ctx;
    char *mark = memmem(line, len, TASK_REPORT_MARK, strlen(TASK_REPORT_MARK));
    /* A report is the whole line, after srun's "N: " label at most. */
    if (mark != NULL &&
        (mark == line || (mark - line >= 2 && mark - line < 16 && mark[-1] == ' ' && mark[-2] == ':'))) {
        line[len - 1] = '\0';
        on_report(R, mark + strlen(TASK_REPORT_MARK));
        return;
    }
    tprun_write_line(STDERR_FILENO, &(tprun_prefix_t){"", 0}, line, len);
}

/* srun's environment: tprun's own, minus the TP_* rank contract (the ranks take PMIx's), plus -x and the extras
 * (the report token, the placement file, --report-bindings). */
static char **srun_env(const tprun_plan_t *plan, char *const *envp, char **extra, size_t nextra)
{
    size_t n = 0;
    for (char *const *ep = envp; ep != NULL && *ep != NULL; ep++) n++;
    char **env = calloc(n + plan->num_env_set + nextra + 1, sizeof(char *));
    if (env == NULL) return NULL;
    size_t k = 0;
    for (char *const *ep = envp; ep != NULL && *ep != NULL; ep++) {
        const char *eq = strchr(*ep, '=');
        size_t len = eq ? (size_t)(eq - *ep) : strlen(*ep);
        if (tprun_env_is_launcher_var(*ep, len, 1) || (len == 11 && strncmp(*ep, "TP_LAUNCHER", 11) == 0)) continue;
        env[k++] = *ep;
    }
    for (size_t i = 0; i < plan->num_env_set; i++) env[k++] = plan->env_set[i];
    for (size_t i = 0; i < nextra; i++) env[k++] = extra[i];
    env[k] = NULL;
    return env;
}

int tprun_slurm_run(const tprun_plan_t *plan, char *const *envp)
{
    const char *srun = "srun";
    slurm_run_t R = {.plan = plan, .first = -1, .held = -1};
    size_t nargs = 0;
    while (plan->argv[nargs] != NULL) nargs++;
    char np[32], self[4096], token_var[80];
    ssize_t self_len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    snprintf(np, sizeof(np), "%d", plan->np);
    unsigned char raw[16];
    if (self_len <= 0 || getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
        tprun_say("cannot prepare the srun step: %s", strerror(errno));
        return TPRUN_EXIT_LAUNCH;
    }
    self[self_len] = '\0';
    for (size_t i = 0; i < sizeof(raw); i++) snprintf(R.token + 2 * i, 3, "%02x", raw[i]);
    snprintf(token_var, sizeof(token_var), TASK_TOKEN_VAR "=%s", R.token);
    /* -H/--hostfile inside an allocation: tprun's own placement, one host per rank, as srun's arbitrary
     * distribution (names must be the allocation's node names); the file is a memfd srun reads as /dev/fd/N. */
    char hostfile_var[64], chdir_arg[4200];
    char *extra[3] = {token_var, NULL, NULL};
    size_t nextra = 1;
    int hostfile = plan->hosts != NULL ? placement_file(plan) : -1;
    if (plan->hosts != NULL && hostfile < 0) {
        tprun_say("cannot prepare the srun step's placement: %s", strerror(errno));
        return TPRUN_EXIT_LAUNCH;
    }
    if (hostfile >= 0) {
        snprintf(hostfile_var, sizeof(hostfile_var), "SLURM_HOSTFILE=/dev/fd/%d", hostfile);
        extra[nextra++] = hostfile_var;
    }
    if (plan->report_bindings) extra[nextra++] = "TP_REPORT_BINDINGS=1";
    snprintf(chdir_arg, sizeof(chdir_arg), "--chdir=%s", plan->wdir);
    char **argv = calloc(nargs + SRUN_FIXED_ARGS + 1, sizeof(char *));
    char **env = srun_env(plan, envp, extra, nextra);
    R.reported = calloc((size_t)plan->np, sizeof(int));
    int out[2] = {-1, -1}, err[2] = {-1, -1};
    if (argv == NULL || env == NULL || R.reported == NULL || pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) {
        tprun_say("cannot prepare the srun step: %s", strerror(errno));
        if (hostfile >= 0) close(hostfile);
        free(argv);
        free(env);
        free(R.reported);
        for (int i = 0; i < 2; i++) {
            if (out[i] >= 0) close(out[i]);
            if (err[i] >= 0) close(err[i]);
        }
        return TPRUN_EXIT_LAUNCH;
    }
    size_t k = 0;
    argv[k++] = (char *)srun;
    argv[k++] = "--mpi=pmix";
    argv[k++] = "--kill-on-bad-exit=1";
    argv[k++] = "--overcommit"; /* like tprun's own launcher: N ranks even on fewer CPUs */
    argv[k++] = "--quit-on-interrupt";
    if (plan->tag_output) argv[k++] = "--label";
    if (hostfile >= 0) argv[k++] = "--distribution=arbitrary";
    else if (plan->map_by == TPRUN_MAP_NODE) argv[k++] = "--distribution=cyclic";
    if (plan->wdir != NULL) argv[k++] = chdir_arg;
    argv[k++] = "-n";
    argv[k++] = np;
    argv[k++] = "--";
    /* Each rank runs under tprun's task wrapper, which reports its end: tprun names the first failure. */
    argv[k++] = self;
    argv[k++] = "--slurm-task";
    argv[k++] = plan->program_path;
    for (size_t i = 1; i < nargs; i++) argv[k++] = plan->argv[i];
    argv[k] = NULL;
    if (tp_log_enabled(TP_LOG_DEBUG))
        tp_log(TP_LOG_DEBUG, "spawn", "Slurm allocation: %s --mpi=pmix -n %d %s", srun, plan->np, plan->program_path);

    sigset_t sigs, old;
    sigemptyset(&sigs);
    static const int handled[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof(handled) / sizeof(handled[0]); i++) sigaddset(&sigs, handled[i]);
    sigprocmask(SIG_BLOCK, &sigs, &old);
    int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    pid_t parent = getpid(), pid = sfd < 0 ? -1 : fork();
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        setpgid(0, 0);                    /* a terminal's ^C reaches tprun, which forwards it once */
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* srun then cancels the step */
        if (getppid() != parent) _exit(TPRUN_EXIT_LAUNCH);
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        execvpe(srun, argv, env);
        dprintf(STDERR_FILENO,
                "tprun: cannot run %s for the Slurm allocation: %s (set TP_LAUNCHER=local to start the "
                "ranks here)\n",
                srun, strerror(errno));
        _exit(TPRUN_EXIT_LAUNCH);
    }
    free(argv);
    free(env);
    close(out[1]);
    close(err[1]);
    if (hostfile >= 0) close(hostfile);
    if (pid < 0) {
        tprun_say("cannot start srun: %s", strerror(errno));
        if (sfd >= 0) close(sfd);
        close(out[0]);
        close(err[0]);
        free(R.reported);
        sigprocmask(SIG_SETMASK, &old, NULL);
        return TPRUN_EXIT_LAUNCH;
    }
    tprun_stream_t so, se;
    tprun_prefix_t none = {"", 0};
    tprun_stream_init(&so, out[0], STDOUT_FILENO);
    tprun_stream_init(&se, err[0], STDERR_FILENO);
    se.on_line = on_err_line;
    se.ctx = &R;
    fcntl(out[0], F_SETFL, O_NONBLOCK);
    fcntl(err[0], F_SETFL, O_NONBLOCK);
    double timeout_at = plan->timeout_s > 0 ? tprun_now_s() + plan->timeout_s : 0, kill_at = 0;
    int srun_status = -1, timed_out = 0;
    while (srun_status < 0 || so.fd >= 0 || se.fd >= 0) {
        int st;
        if (srun_status < 0 && waitpid(pid, &st, WNOHANG) == pid) srun_status = st;
        double now = tprun_now_s();
        if (R.held >= 0 && now >= R.held_until && R.first < 0) decide(&R, R.held, R.held_status, R.held_host);
        if (timeout_at > 0 && now >= timeout_at) {
            tprun_say("timeout: the job ran longer than %g s (--timeout); cancelling the srun step", plan->timeout_s);
            timed_out = 1;
            timeout_at = 0;
            kill(pid, SIGTERM);
            kill_at = now + (plan->grace_s > 0 ? plan->grace_s : 0) + 5; /* srun needs time to cancel the step */
        }
        if (kill_at > 0 && now >= kill_at) {
            kill(pid, SIGKILL);
            kill_at = 0;
        }
        double next = timeout_at;
        const double others[] = {kill_at, R.held >= 0 && R.first < 0 ? R.held_until : 0};
        for (size_t i = 0; i < 2; i++)
            if (others[i] > 0 && (next == 0 || others[i] < next)) next = others[i];
        struct pollfd p[3] = {{sfd, POLLIN, 0}, {so.fd, POLLIN, 0}, {se.fd, POLLIN, 0}};
        int ms = next > 0 ? (int)ceil((next - now) * 1000.0) : -1;
        if (srun_status >= 0 && (ms < 0 || ms > 100)) ms = 100; /* srun is gone: its pipes close as its tasks' do */
        if (poll(p, 3, next > 0 && ms < 1 ? 1 : ms) < 0 && errno != EINTR) break;
        if (so.fd >= 0 && p[1].revents && tprun_stream_pump(&so, &none) == 0) tprun_stream_close(&so, &none);
        if (se.fd >= 0 && p[2].revents && tprun_stream_pump(&se, &none) == 0) tprun_stream_close(&se, &none);
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
            if (si.ssi_signo != SIGCHLD && srun_status < 0) kill(pid, (int)si.ssi_signo);
    }
    if (so.fd >= 0) tprun_stream_close(&so, &none);
    if (se.fd >= 0) tprun_stream_close(&se, &none);
    if (R.first < 0 && R.held >= 0) decide(&R, R.held, R.held_status, R.held_host);
    close(sfd);
    sigprocmask(SIG_SETMASK, &old, NULL);
    int status;
    if (timed_out) {
        status = TP_EXIT_TIMEOUT;
    } else if (R.first >= 0) {
        status = tprun_status_code(R.first_status);
    } else if (R.nreported < plan->np) {
        /* srun can report a failed launch and still exit 0: every rank must have said how it ended. */
        char st[160];
        tprun_status_describe(srun_status < 0 ? 0 : srun_status, 0, st, sizeof(st));
        char hosts[512] = "";
        size_t o = 0;
        for (size_t h = 0; plan->hosts != NULL && h < plan->num_hosts && o < sizeof(hosts) - 1; h++)
            if (plan->hosts[h].nranks > 0)
                o += (size_t)snprintf(hosts + o, sizeof(hosts) - o, "%s%s", o ? ", " : "", plan->hosts[h].name);
        tprun_say("srun %s, but only %d of %d ranks reported their end%s%s%s", st, R.nreported, plan->np,
                  hosts[0] ? " (tprun placed the ranks on " : "", hosts,
                  hosts[0] ? " from -H/--hostfile: these must be node names of this allocation)" : "");
        status = tprun_status_failed(srun_status) ? tprun_status_code(srun_status) : TPRUN_EXIT_LAUNCH;
    } else {
        status = srun_status >= 0 ? tprun_status_code(srun_status) : TPRUN_EXIT_LAUNCH;
    }
    free(R.reported);
    return status;
}
