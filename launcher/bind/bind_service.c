/* bind_service.c: GPUs and CPU/memory binding as a launcher service: tprun and every agent compute their own
 * host's ranks' plan (bind.h) before they fork, give each rank its GPU's variables and TP_BIND_*, and the child
 * binds itself before exec. Agents are turned on by the plan line "bind MODE GPUS_PER_RANK". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bind/bind.h"
#include "runtime_log.h"
#include "services.h"
#include "tprun_args.h"
#include "tprun_exit.h"
#include "tprun_spawn.h"

extern char **environ;

/* The variables the service sets (a rank's inherited ones of these names are dropped): the GPU's first. */
static const char *const set_vars[] = {"CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", "HIP_VISIBLE_DEVICES",
                                       "ROCR_VISIBLE_DEVICES", "TP_GPU_BUS_ID",     "TP_BIND_CPUS",
                                       "TP_BIND_NUMA",         "TP_BIND_WHY"};
#define NUM_SET_VARS (sizeof(set_vars) / sizeof(set_vars[0]))
#define NUM_GPU_VARS 4
#define BIND_VAR_LEN 320

static int mode, gpus_per_rank = 1, agent_on;
static tprun_bind_rank_t *plan_ranks; /* this host's ranks, by local rank */
static int plan_n = -1;

static void plan_drop(void)
{
    tprun_bind_free(plan_ranks, plan_n);
    plan_ranks = NULL;
    plan_n = -1;
}

/* The plan for n ranks on host from the variables in e; 0, or -1 with err. */
static int plan_make(const tp_gpu_env_t *e, int n, const char *host, char *err, size_t err_len)
{
    plan_drop();
    if (tprun_bind_compute(mode, gpus_per_rank, e, n, host, &plan_ranks, err, err_len) != TP_OK) return -1;
    plan_n = n;
    return 0;
}

/* tprun's ranks on this machine: -x values win over tprun's environment, as in their environments. */
static int prepare(const tprun_plan_t *plan)
{
    mode = plan->bind_to;
    gpus_per_rank = plan->gpus_per_rank;
    int n = plan->hosts == NULL ? plan->np : 0;
    for (size_t h = 0; h < plan->num_hosts; h++)
        if (plan->hosts[h].local) n += plan->hosts[h].nranks;
    if (plan->slurm) n = 0; /* srun starts every host's agent, this one's too */
    tp_gpu_env_t e, x;
    tp_gpu_env_from(&e, environ);
    tp_gpu_env_from(&x, plan->env_set);
    e.tp_gpus = x.tp_gpus ? x.tp_gpus : e.tp_gpus, e.cuda = x.cuda ? x.cuda : e.cuda;
    e.hip = x.hip ? x.hip : e.hip, e.rocr = x.rocr ? x.rocr : e.rocr;
    char host[256], err[1024];
    if (gethostname(host, sizeof(host)) != 0) snprintf(host, sizeof(host), "localhost");
    host[sizeof(host) - 1] = '\0';
    for (size_t h = 0; h < plan->num_hosts; h++)
        if (plan->hosts[h].local && plan->hosts[h].nranks > 0) snprintf(host, sizeof(host), "%s", plan->hosts[h].name);
    if (plan_make(&e, n, host, err, sizeof(err)) != 0) {
        tprun_say("%s", err);
        return TPRUN_EXIT_USAGE;
    }
    return 0;
}

static int wanted(const tprun_plan_t *plan) { return (void)plan, 1; }

static int plan_lines(struct tprun_loop *L, int ai, tprun_plan_add_fn add, void *ctx)
{
    (void)L, (void)ai;
    char v[64];
    snprintf(v, sizeof(v), "%s %d", tprun_bind_mode_name(mode), gpus_per_rank);
    return add(ctx, "bind", v);
}

static int agent_plan_line(tprun_plan_t *plan, const char *key, const char *value)
{
    (void)plan;
    if (strcmp(key, "bind") != 0) return 0;
    char m[16];
    if (sscanf(value, "%15s %d", m, &gpus_per_rank) != 2 || (mode = tprun_bind_mode_parse(m)) < 0) mode = -1;
    agent_on = 1;
    return 1;
}

static int is_on(void) { return agent_on; }

/* The agent's host: its environment holds tprun's TP_* and -x variables by now. */
static tp_status_t agent_start(const tprun_job_t *job, char *err, size_t err_len)
{
    tp_gpu_env_t e;
    if (mode < 0) return snprintf(err, err_len, "bad \"bind\" line in the plan from tprun"), TP_ERR_INVALID;
    tp_gpu_env_from(&e, environ);
    return plan_make(&e, job->np, NULL, err, err_len) == 0 ? TP_OK : TP_ERR_INVALID; /* tprun names the host */
}

/* Rank i's variables: its GPU's (when it has one) and TP_BIND_*; the inherited GPU choice stays without a GPU. */
static tp_status_t rank_env(tprun_job_t *job, int i)
{
    int lr = job->ranks[i].local_rank;
    if (lr < 0 || lr >= plan_n) {
        tp_log(TP_LOG_ERROR, "bind", "rank %d: local rank %d, but the binding plan has %d ranks", job->ranks[i].id, lr,
               plan_n);
        return TP_ERR_INVALID;
    }
    const tprun_bind_rank_t *b = &plan_ranks[lr];
    int gpu = b->gpu.bus_id[0] != '\0', amd = b->gpu.vendor == TP_GPU_VENDOR_AMD;
    size_t k, skip = gpu ? 0 : NUM_GPU_VARS;
    char *p;
    char **env = tprun_services_env_rebuild(job, i, set_vars + skip, NUM_SET_VARS - skip, NUM_SET_VARS,
                                            NUM_SET_VARS * BIND_VAR_LEN, &p, &k);
    if (env == NULL) return TP_ERR_NO_MEMORY;
#define BIND_ADD(...) (env[k++] = p, p += snprintf(p, BIND_VAR_LEN, __VA_ARGS__) + 1)
    if (gpu && !amd) {
        BIND_ADD("CUDA_VISIBLE_DEVICES=%d", b->gpu.vendor_index);
        BIND_ADD("CUDA_DEVICE_ORDER=PCI_BUS_ID");
    } else if (gpu) { /* HIP also reads CUDA_VISIBLE_DEVICES: left out, so only ROCm's pair names the GPU */
        BIND_ADD("ROCR_VISIBLE_DEVICES=%d", b->gpu.vendor_index);
        BIND_ADD("HIP_VISIBLE_DEVICES=0");
    }
    if (gpu) BIND_ADD("TP_GPU_BUS_ID=%s", b->gpu.bus_id);
    BIND_ADD("TP_BIND_CPUS=%.255s", b->cpus);
    if (b->numa >= 0) BIND_ADD("TP_BIND_NUMA=%d", b->numa);
    else BIND_ADD("TP_BIND_NUMA=-");
    BIND_ADD("TP_BIND_WHY=%.199s", b->why);
#undef BIND_ADD
    env[k] = NULL;
    job->envp[i] = env;
    return TP_OK;
}

static void child_exec(const tprun_job_t *job, int i)
{
    int lr = job->ranks[i].local_rank;
    if (lr >= 0 && lr < plan_n) tprun_bind_apply(&plan_ranks[lr]);
}

static void job_over(void) { plan_drop(); }

const tprun_service_ops_t tprun_bind_service = {
    .name = "bind",
    .wanted = wanted,
    .prepare = prepare,
    .plan_lines = plan_lines,
    .rank_env = rank_env,
    .child_exec = child_exec,
    .agent_plan_line = agent_plan_line,
    .agent_on = is_on,
    .agent_start = agent_start,
    .job_over = job_over,
};
