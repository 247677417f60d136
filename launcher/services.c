/* services.c: the launcher's service list (one line per service) and the walks tprun and the agents make over it. */
#include "services.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

#include "core/loop.h"
#include "runtime_log.h"
#include "tprun_args.h"
#include "tprun_spawn.h"

extern const tprun_service_ops_t tprun_slurm_service, tprun_pmix_service, tprun_bind_service;

/* The services, in the order their hooks run. */
static const tprun_service_ops_t *const services[] = {
    &tprun_slurm_service, /* under Slurm: each rank's own SLURM_PROCID, ... (launcher/slurm) */
    &tprun_pmix_service,  /* --pmix: a PMIx server per host (launcher/pmix) */
    &tprun_bind_service,  /* each rank's GPU, CPUs and memory (launcher/bind) */
};
#define NUM_SERVICES (sizeof(services) / sizeof(services[0]))

/* Which services this process runs: tprun decides from the plan, an agent from its plan's lines. */
static int active[NUM_SERVICES];

/* Service i when this process runs it, else NULL. */
static const tprun_service_ops_t *svc(size_t i) { return active[i] ? services[i] : NULL; }

int tprun_services_prepare(const tprun_plan_t *plan)
{
    for (size_t i = 0; i < NUM_SERVICES; i++) active[i] = services[i]->wanted != NULL && services[i]->wanted(plan);
    for (size_t i = 0; i < NUM_SERVICES; i++) {
        const tprun_service_ops_t *s = svc(i);
        if (s == NULL) continue;
        int st = s->prepare != NULL ? s->prepare(plan) : 0;
        if (st != 0) return st;
    }
    return 0;
}

tp_status_t tprun_services_start(struct tprun_loop *L)
{
    for (size_t i = 0; i < NUM_SERVICES; i++) {
        const tprun_service_ops_t *s = svc(i);
        if (s == NULL) continue;
        tp_status_t st = s->start != NULL ? s->start(L) : TP_OK;
        if (st != TP_OK) return st;
    }
    return TP_OK;
}

int tprun_services_plan_lines(struct tprun_loop *L, int ai, tprun_plan_add_fn add, void *ctx)
{
    for (size_t i = 0; i < NUM_SERVICES; i++) {
        const tprun_service_ops_t *s = svc(i);
        if (s != NULL && s->plan_lines != NULL && s->plan_lines(L, ai, add, ctx) != 0) return -1;
    }
    return 0;
}

void tprun_services_rank_ended(struct tprun_loop *L, int r)
{
    for (size_t i = 0; i < NUM_SERVICES; i++) {
        const tprun_service_ops_t *s = svc(i);
        if (s != NULL && s->rank_ended != NULL) s->rank_ended(L, r);
    }
}

int tprun_services_rank_failed(struct tprun_loop *L, int r)
{
    int taken = 0;
    for (size_t i = 0; i < NUM_SERVICES; i++) {
        const tprun_service_ops_t *s = svc(i);
        if (s != NULL && s->rank_failed != NULL) taken |= s->rank_failed(L, r);
    }
    return taken;
}

const char *tprun_services_msg_types(void)
{
    static char types[NUM_SERVICES + 1];
    size_t n = 0;
    for (size_t i = 0; i < NUM_SERVICES; i++)
        if (services[i]->msg_prefix != '\0') types[n++] = services[i]->msg_prefix;
    types[n] = '\0';
    return types;
}

int tprun_services_agent_message(struct tprun_loop *L, int ai, char *line)
{
    for (size_t i = 0; i < NUM_SERVICES; i++) {
        const tprun_service_ops_t *s = svc(i);
        if (s != NULL && s->agent_message != NULL && line[0] == s->msg_prefix && s->agent_message(L, ai, line))
            return 1;
    }
    return 0;
}

void tprun_services_agent_gone(struct tprun_loop *L, int ai)
{
    for (size_t i = 0; i < NUM_SERVICES; i++) {
        const tprun_service_ops_t *s = svc(i);
        if (s != NULL && s->agent_gone != NULL) s->agent_gone(L, ai);
    }
}

int tprun_services_agent_plan_line(tprun_plan_t *plan, const char *key, const char *value)
{
    for (size_t i = 0; i < NUM_SERVICES; i++) {
        int taken = services[i]->agent_plan_line != NULL ? services[i]->agent_plan_line(plan, key, value) : 0;
        if (taken != 0) return taken;
    }
    return 0;
}

int tprun_services_agent_prepare(char *err, size_t err_len)
{
    for (size_t i = 0; i < NUM_SERVICES; i++) active[i] = services[i]->agent_on != NULL && services[i]->agent_on();
    for (size_t i = 0; i < NUM_SERVICES; i++) {
        const tprun_service_ops_t *s = svc(i);
        if (s != NULL && s->agent_prepare != NULL && s->agent_prepare(err, err_len) != 0) return -1;
    }
    return 0;
}

tp_status_t tprun_services_agent_start(const tprun_job_t *job, char *err, size_t err_len)
{
    for (size_t i = 0; i < NUM_SERVICES; i++) {
        const tprun_service_ops_t *s = svc(i);
        if (s == NULL) continue;
        tp_status_t st = s->agent_start != NULL ? s->agent_start(job, err, err_len) : TP_OK;
        if (st != TP_OK) return st;
    }
    return TP_OK;
}

/* What an agent's loop calls for service i's fd. */
static struct service_watch {
    size_t i;
    void (*reap)(void *ctx);
    void *ctx;
} watches[NUM_SERVICES];

static void on_service_fd(void *arg, unsigned revents)
{
    struct service_watch *w = arg;
    (void)revents;
    services[w->i]->agent_ready(w->reap, w->ctx);
}

void tprun_services_agent_watch(tprun_evloop_t *ev, void (*reap)(void *ctx), void *ctx)
{
    for (size_t i = 0; i < NUM_SERVICES; i++) {
        const tprun_service_ops_t *s = svc(i);
        if (s == NULL || s->agent_fd == NULL || s->agent_ready == NULL || s->agent_fd() < 0) continue;
        watches[i] = (struct service_watch){i, reap, ctx};
        tprun_ev_fd(ev, s->agent_fd(), EPOLLIN, 0, on_service_fd, &watches[i]);
    }
}

int tprun_services_agent_command(char *line)
{
    for (size_t i = 0; i < NUM_SERVICES; i++) {
        const tprun_service_ops_t *s = svc(i);
        if (s != NULL && s->agent_command != NULL && line[0] == s->msg_prefix && s->agent_command(line)) return 1;
    }
    return 0;
}

int tprun_services_agent_keeps(void)
{
    for (size_t i = 0; i < NUM_SERVICES; i++) {
        const tprun_service_ops_t *s = svc(i);
        if (s != NULL && s->agent_keeps != NULL && s->agent_keeps()) return 1;
    }
    return 0;
}

tp_status_t tprun_services_rank_envs(tprun_job_t *job)
{
    for (int r = 0; r < job->np; r++)
        for (size_t i = 0; i < NUM_SERVICES && job->ranks[r].agent < 0; i++) {
            const tprun_service_ops_t *s = svc(i);
            if (s != NULL && s->rank_env != NULL && s->rank_env(job, r) != TP_OK) {
                tp_log(TP_LOG_ERROR, "spawn", "%s: could not give rank %d its environment (see above)", s->name,
                       job->ranks[r].id);
                return TP_ERR_SYSTEM;
            }
        }
    return TP_OK;
}

void tprun_services_child_exec(const tprun_job_t *job, int r)
{
    for (size_t i = 0; i < NUM_SERVICES; i++) {
        const tprun_service_ops_t *s = svc(i);
        if (s != NULL && s->child_exec != NULL) s->child_exec(job, r);
    }
}

/* The environments the services' rank_env hooks built: arrays and their strings. */
static char **env_mem;
static size_t env_count;

static int env_named(const char *entry, const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(names[i]);
        if (strncmp(entry, names[i], l) == 0 && entry[l] == '=') return 1;
    }
    return 0;
}

char **tprun_services_env_rebuild(tprun_job_t *job, int i, const char *const *drop, size_t ndrop, size_t add,
                                  size_t add_bytes, char **strings, size_t *k)
{
    size_t n = 0;
    for (char **e = job->envp[i]; e != NULL && *e != NULL; e++) n++;
    char **mem = realloc(env_mem, (env_count + 2) * sizeof(char *));
    if (mem != NULL) env_mem = mem;
    char **env = malloc((n + add + 1) * sizeof(char *));
    char *s = malloc(add_bytes > 0 ? add_bytes : 1);
    if (mem == NULL || env == NULL || s == NULL) {
        free(env);
        free(s);
        tp_log(TP_LOG_ERROR, "spawn", "out of memory for rank %d's environment", job->ranks[i].id);
        return NULL;
    }
    env_mem[env_count++] = (char *)env;
    env_mem[env_count++] = s;
    *k = 0;
    for (size_t j = 0; j < n; j++)
        if (!env_named(job->envp[i][j], drop, ndrop)) env[(*k)++] = job->envp[i][j];
    *strings = s;
    return env;
}

void tprun_services_job_over(void)
{
    for (size_t i = 0; i < env_count; i++) free(env_mem[i]);
    free(env_mem);
    env_mem = NULL;
    env_count = 0;
    /* Every service, on or not: a refusal may come after a plan line allocated or a tmpdir was made. */
    for (size_t i = 0; i < NUM_SERVICES; i++)
        if (services[i]->job_over != NULL) services[i]->job_over();
}

/* ---- paths the keeper removes ---- */

#define KEPT_PATHS_MAX 8
static char kept[KEPT_PATHS_MAX][512];

int tprun_services_keep_path(const char *path)
{
    for (size_t i = 0; i < KEPT_PATHS_MAX; i++)
        if (kept[i][0] == '\0' && strlen(path) < sizeof(kept[i])) {
            snprintf(kept[i], sizeof(kept[i]), "%s", path);
            return 0;
        }
    tp_log(TP_LOG_ERROR, "keeper", "no room to register %s for removal", path);
    return -1;
}

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

void tprun_services_remove_path(const char *path)
{
    if (path == NULL || path[0] == '\0') return;
    nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
    for (size_t i = 0; i < KEPT_PATHS_MAX; i++)
        if (strcmp(kept[i], path) == 0) kept[i][0] = '\0';
}

void tprun_services_keeper_cleanup(void)
{
    for (size_t i = 0; i < KEPT_PATHS_MAX; i++)
        if (kept[i][0] != '\0') nftw(kept[i], remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}
