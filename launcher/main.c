/* main.c: tprun's main: parses the command line, then runs the job with the backends that want it (inside a Slurm
 * allocation srun starts the agents). Nothing in the launcher calls back into it. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/agent.h"
#include "core/job.h"
#include "local/local.h"
#include "runtime_config.h"
#include "runtime_log.h"
#include "slurm/slurm.h"
#include "ssh/ssh.h"
#include "tprun_args.h"
#include "tprun_exit.h"
#include "tprun_summary.h"

extern char **environ;

/* The launcher backends, one line each, in the order they start their ranks (every host's agent first). */
static const tprun_backend_ops_t *const backends[] = {
    &tprun_ssh_backend,
    &tprun_local_backend,
    NULL,
};

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
    } else if (plan.json_summary != NULL && tprun_summary_check(&plan, err, sizeof(err)) != TP_OK) {
        tprun_say("%s", err);
        status = TPRUN_EXIT_USAGE;
    } else {
        /* One warning per job: the ranks (local, remote or under srun) inherit TP_ENV_CHECKED and stay quiet. */
        tp_config_warn_unknown(environ);
        if (plan.env_set != NULL) tp_config_warn_unknown(plan.env_set);
        setenv("TP_ENV_CHECKED", "1", 1);
        if (tprun_slurm_wanted(plan.launcher, environ) && (status = tprun_slurm_check(&plan, environ)) == 0)
            status = tprun_slurm_plan(&plan, environ); /* Slurm: srun starts every node's agent (the ssh backend's) */
        if (status == 0) status = tprun_job_run(&plan, host, backends);
    }
    tprun_plan_free(&plan);
    return status;
}
