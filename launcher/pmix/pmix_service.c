/* pmix_service.c: --pmix as a launcher service: tprun's hub (tprun_pmix_loop.c) and each agent's server
 * (tprun_agent_pmix.c) behind one ops table; their messages on the agents' channel start with 'p'. */
#include <stdlib.h>
#include <string.h>

#include "services.h"
#include "tprun_agent_pmix.h"
#include "tprun_args.h"
#include "tprun_pmix.h"
#include "tprun_spawn.h"

static int wanted(const tprun_plan_t *plan) { return plan->pmix; }

/* The agent hosts a server for its ranks: the job's hosts and each rank's host travel in its plan. */
static int plan_lines(struct tprun_loop *L, int ai, tprun_plan_add_fn add, void *ctx)
{
    (void)L, (void)ai;
    char *hosts = NULL, *map = NULL;
    int ok = tprun_pmix_describe(&hosts, &map) == TP_OK && add(ctx, "pmix", "1") == 0 &&
             add(ctx, "pmixhosts", hosts) == 0 && add(ctx, "pmixmap", map) == 0;
    free(hosts);
    free(map);
    return ok ? 0 : -1;
}

static tp_status_t rank_env(tprun_job_t *job, int i)
{
    return tprun_pmix_rank_env(job->ranks[i].id, job->envp[i], &job->envp[i]);
}

/* "pmix 1" turns it on; its ranks then take their world from PMIx, not from tprun's variables. */
static int agent_plan_line(tprun_plan_t *plan, const char *key, const char *value)
{
    int taken = tprun_agent_pmix_plan(key, value);
    if (taken > 0 && strcmp(key, "pmix") == 0) plan->pmix = tprun_agent_pmix_on();
    return taken;
}

static int agent_fd(void) { return tprun_agent_pmix_fd(); }

/* Ranks on other hosts may still want this host's ranks' data after they ended: the server stays. */
static int agent_keeps(void) { return tprun_agent_pmix_on(); }

static void job_over(void)
{
    tprun_pmix_stop();
    tprun_agent_pmix_stop();
}

const tprun_service_ops_t tprun_pmix_service = {
    .name = "pmix",
    .msg_prefix = 'p',
    .wanted = wanted,
    .prepare = tprun_pmix_prepare,
    .start = tprun_pmix_start,
    .plan_lines = plan_lines,
    .rank_env = rank_env,
    .rank_ended = tprun_pmix_rank_ended,
    .rank_failed = tprun_pmix_rank_failed,
    .agent_message = tprun_pmix_agent_line,
    .agent_gone = tprun_pmix_agent_gone,
    .agent_plan_line = agent_plan_line,
    .agent_on = tprun_agent_pmix_on,
    .agent_prepare = tprun_agent_pmix_prepare,
    .agent_start = tprun_agent_pmix_start,
    .agent_fd = agent_fd,
    .agent_ready = tprun_agent_pmix_on_ready,
    .agent_command = tprun_agent_pmix_command,
    .agent_keeps = agent_keeps,
    .job_over = job_over,
};
