/* tprun_slurm.c: the Slurm launcher: one `srun --mpi=pmix` step; libtp's ranks learn the world from PMIx. */
#include "tprun_slurm.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "runtime_config.h"
#include "runtime_log.h"
#include "tprun_exit.h"

#define SRUN_FIXED_ARGS 10

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

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* srun's environment: tprun's own, minus the TP_* rank contract (the ranks take PMIx's), plus -x. */
static char **srun_env(const tprun_plan_t *plan, char *const *envp)
{
    size_t n = 0;
    for (char *const *ep = envp; ep != NULL && *ep != NULL; ep++) n++;
    char **env = calloc(n + plan->num_env_set + 1, sizeof(char *));
    if (env == NULL) return NULL;
    size_t k = 0;
    for (char *const *ep = envp; ep != NULL && *ep != NULL; ep++) {
        const char *eq = strchr(*ep, '=');
        size_t len = eq ? (size_t)(eq - *ep) : strlen(*ep);
        if (tprun_env_is_launcher_var(*ep, len, 1) || (len == 11 && strncmp(*ep, "TP_LAUNCHER", 11) == 0)) continue;
        env[k++] = *ep;
    }
    for (size_t i = 0; i < plan->num_env_set; i++) env[k++] = plan->env_set[i];
    env[k] = NULL;
    return env;
}

int tprun_slurm_run(const tprun_plan_t *plan, char *const *envp)
{
    const char *srun = "srun";
    size_t nargs = 0;
    while (plan->argv[nargs] != NULL) nargs++;
    char np[32];
    snprintf(np, sizeof(np), "%d", plan->np);
    char **argv = calloc(nargs + SRUN_FIXED_ARGS + 1, sizeof(char *));
    char **env = srun_env(plan, envp);
    if (argv == NULL || env == NULL) {
        tprun_say("out of memory for srun's command line");
        free(argv);
        free(env);
        return TPRUN_EXIT_LAUNCH;
    }
    size_t k = 0;
    argv[k++] = (char *)srun;
    argv[k++] = "--mpi=pmix";
    argv[k++] = "--kill-on-bad-exit=1";
    argv[k++] = "--overcommit"; /* like tprun's own launcher: N ranks even on fewer CPUs */
    argv[k++] = "--quit-on-interrupt";
    if (plan->tag_output) argv[k++] = "--label";
    argv[k++] = "-n";
    argv[k++] = np;
    argv[k++] = "--";
    argv[k++] = plan->program_path;
    for (size_t i = 1; i < nargs; i++) argv[k++] = plan->argv[i];
    argv[k] = NULL;
    if (tp_log_enabled(TP_LOG_DEBUG)) tp_log(TP_LOG_DEBUG, "spawn", "Slurm allocation: %s --mpi=pmix -n %d %s", srun,
                                             plan->np, plan->program_path);

    sigset_t sigs, old;
    sigemptyset(&sigs);
    static const int handled[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < sizeof(handled) / sizeof(handled[0]); i++) sigaddset(&sigs, handled[i]);
    sigprocmask(SIG_BLOCK, &sigs, &old);
    int sfd = signalfd(-1, &sigs, SFD_CLOEXEC | SFD_NONBLOCK);
    pid_t parent = getpid(), pid = sfd < 0 ? -1 : fork();
    if (pid == 0) {
        sigprocmask(SIG_SETMASK, &old, NULL);
        setpgid(0, 0); /* a terminal's ^C reaches tprun, which forwards it once */
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* srun then cancels the step */
        if (getppid() != parent) _exit(TPRUN_EXIT_LAUNCH);
        execvpe(srun, argv, env);
        dprintf(STDERR_FILENO, "tprun: cannot run %s for the Slurm allocation: %s (set TP_LAUNCHER=local to start the "
                "ranks here)\n", srun, strerror(errno));
        _exit(TPRUN_EXIT_LAUNCH);
    }
    free(argv);
    free(env);
    if (pid < 0) {
        tprun_say("cannot start srun: %s", strerror(errno));
        if (sfd >= 0) close(sfd);
        sigprocmask(SIG_SETMASK, &old, NULL);
        return TPRUN_EXIT_LAUNCH;
    }
    double timeout_at = plan->timeout_s > 0 ? now_s() + plan->timeout_s : 0, kill_at = 0;
    int status = TPRUN_EXIT_LAUNCH, timed_out = 0;
    for (;;) {
        int st;
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) {
            status = timed_out ? TP_EXIT_TIMEOUT : tprun_status_code(st);
            break;
        }
        double now = now_s();
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
        double next = timeout_at > 0 ? timeout_at : kill_at;
        if (kill_at > 0 && kill_at < next) next = kill_at;
        struct pollfd p = {.fd = sfd, .events = POLLIN};
        int ms = next > 0 ? (int)ceil((next - now) * 1000.0) : -1;
        if (poll(&p, 1, next > 0 && ms < 1 ? 1 : ms) < 0 && errno != EINTR) break;
        struct signalfd_siginfo si;
        while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si))
            if (si.ssi_signo != SIGCHLD) kill(pid, (int)si.ssi_signo);
    }
    close(sfd);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return status;
}
