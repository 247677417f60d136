/* slurm_service.c: under Slurm each rank's SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, SLURM_NTASKS and SLURM_NPROCS
 * are its own, as srun gives each task of an N-rank step (the agent's own step has one task): a launcher service
 * whose only hook is a rank's environment, turned on in the agents by the plan line "slurm 1". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime_log.h"
#include "services.h"
#include "tprun_args.h"
#include "tprun_spawn.h"

static const char *const task_vars[] = {"SLURM_PROCID", "SLURM_LOCALID", "SLURM_NODEID", "SLURM_NTASKS",
                                        "SLURM_NPROCS"};
#define NUM_TASK_VARS (sizeof(task_vars) / sizeof(task_vars[0]))

static int agent_on; /* this agent's plan said "slurm 1" */

static tp_status_t rank_env(tprun_job_t *job, int i)
{
    char *p;
    size_t k;
    char **env =
        tprun_services_env_rebuild(job, i, task_vars, NUM_TASK_VARS, NUM_TASK_VARS, NUM_TASK_VARS * 40, &p, &k);
    if (env == NULL) return TP_ERR_NO_MEMORY;
    const int values[NUM_TASK_VARS] = {job->ranks[i].id, job->ranks[i].local_rank, job->node_rank, job->world_size,
                                       job->world_size};
    for (size_t v = 0; v < NUM_TASK_VARS; v++) {
        env[k++] = p;
        p += sprintf(p, "%s=%d", task_vars[v], values[v]) + 1;
    }
    env[k] = NULL;
    job->envp[i] = env;
    return TP_OK;
}

static int wanted(const tprun_plan_t *plan) { return plan->slurm; }

static int plan_lines(struct tprun_loop *L, int ai, tprun_plan_add_fn add, void *ctx)
{
    (void)L, (void)ai;
    return add(ctx, "slurm", "1");
}

static int plan_line(tprun_plan_t *plan, const char *key, const char *value)
{
    if (strcmp(key, "slurm") != 0) return 0;
    plan->slurm = agent_on = strcmp(value, "1") == 0;
    return 1;
}

static int is_on(void) { return agent_on; }

const tprun_service_ops_t tprun_slurm_service = {
    .name = "slurm",
    .wanted = wanted,
    .plan_lines = plan_lines,
    .rank_env = rank_env,
    .agent_plan_line = plan_line,
    .agent_on = is_on,
};
