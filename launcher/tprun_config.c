/* tprun_config.c: tprun's own TP_* table; data, so that libtp knows these names too (no unknown-variable
 * warning for them in a rank). */
#include <stdio.h>
#include <string.h>

#include "runtime_config.h"
#include "runtime_log.h"
#include "tprun_config.h"

static const char *const bind_modes[] = {"gpu", "none", "core", "numa"};

int tprun_bind_mode_parse(const char *text)
{
    for (int m = 0; m < (int)(sizeof(bind_modes) / sizeof(bind_modes[0])); m++)
        if (strcmp(text, bind_modes[m]) == 0) return m;
    return -1;
}

const char *tprun_bind_mode_name(int mode) { return bind_modes[mode]; }

int tprun_gpus_per_rank_parse(const char *text)
{
    return strcmp(text, "0") == 0 ? 0 : strcmp(text, "1") == 0 ? 1 : -1;
}

static tp_status_t check_bind_to(const char *text, char *err, size_t err_len)
{
    char q[TP_QUOTE_LEN];
    if (tprun_bind_mode_parse(text) >= 0) return TP_OK;
    snprintf(err, err_len, "TP_BIND_TO: expected " TPRUN_BIND_MODES_TEXT ", got \"%s\"", tp_quote(text, q, sizeof(q)));
    return TP_ERR_INVALID;
}

static tp_status_t check_gpus_per_rank(const char *text, char *err, size_t err_len)
{
    char q[TP_QUOTE_LEN];
    if (tprun_gpus_per_rank_parse(text) >= 0) return TP_OK;
    snprintf(err, err_len, "TP_GPUS_PER_RANK: expected " TPRUN_GPUS_PER_RANK_TEXT ", got \"%s\"",
             tp_quote(text, q, sizeof(q)));
    return TP_ERR_INVALID;
}

const tp_config_entry_t tp_tprun_config[] = {
    {"TP_KILL_GRACE", "kill_grace", TP_CONFIG_SECONDS, TP_CONFIG_USER | TP_CONFIG_TPRUN, "1",
     "tprun: seconds between SIGTERM and SIGKILL when the job is ended", NULL},
    {"TP_TIMEOUT", "timeout", TP_CONFIG_SECONDS, TP_CONFIG_USER | TP_CONFIG_TPRUN, NULL,
     "tprun: end the job after this many seconds (as --timeout)", NULL},
    {"TP_SSH", "ssh", TP_CONFIG_STRING, TP_CONFIG_USER | TP_CONFIG_TPRUN, "ssh",
     "tprun: the command that reaches a remote host (as --ssh), split on blanks; BatchMode=yes is always added", NULL},
    {"TP_SSH_TIMEOUT", "ssh_timeout", TP_CONFIG_SECONDS, TP_CONFIG_USER | TP_CONFIG_TPRUN, "10",
     "tprun: seconds for every remote host's agent to answer before the launch fails naming the host", NULL},
    {"TP_LAUNCH_FANOUT", "launch_fanout", TP_CONFIG_INT, TP_CONFIG_USER | TP_CONFIG_TPRUN, "32",
     "tprun: with more remote hosts than this, tprun starts this many agents and each starts others over ssh (a tree); 0: tprun starts every agent", NULL},
    {"TP_LAUNCHER", "launcher", TP_CONFIG_STRING, TP_CONFIG_USER | TP_CONFIG_TPRUN, "auto",
     "tprun: how ranks start: local (fork), slurm (srun starts tprun's agent on each node), or auto (slurm when SLURM_JOB_ID is set)", NULL},
    {"TP_PMIX", "pmix", TP_CONFIG_BOOL, TP_CONFIG_USER | TP_CONFIG_TPRUN, "0",
     "tprun: host a PMIx server for the ranks (as --pmix): PMIx programs get their world, fence, get and abort", NULL},
    {"TP_BIND_TO", "bind_to", TP_CONFIG_STRING, TP_CONFIG_USER | TP_CONFIG_TPRUN, "gpu",
     "tprun: bind each rank's CPUs and memory (as --bind-to): " TPRUN_BIND_MODES_TEXT, check_bind_to},
    {"TP_GPUS_PER_RANK", "gpus_per_rank", TP_CONFIG_STRING, TP_CONFIG_USER | TP_CONFIG_TPRUN, "1",
     "tprun: 1: each rank gets its own GPU by local rank, and a host with fewer visible GPUs than ranks is refused; 0: "
     "ranks get no GPU and every GPU variable stays as it is (as --gpus-per-rank)",
     check_gpus_per_rank},
    {"TP_TORCH_ENV", "torch_env", TP_CONFIG_BOOL, TP_CONFIG_USER | TP_CONFIG_TPRUN, "1",
     "tprun: also set RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT", NULL},
    {0},
};
