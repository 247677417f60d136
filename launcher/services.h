/* services.h: launcher services (PMIx now, hardware binding next): each is one ops table of hooks that tprun and
 * every agent call in the job's order. services.c holds the list; a service is one folder plus one line there. */
#ifndef TPRUN_SERVICES_H
#define TPRUN_SERVICES_H

#include <stddef.h>
#include <stdint.h>

#include "tp.h"

struct tprun_plan;
struct tprun_job;
struct tprun_loop;

/* Adds "key value" to an agent's plan (build_plan's writer); 0, or -1 out of memory. */
typedef int (*tprun_plan_add_fn)(void *ctx, const char *key, const char *value);

/*
 * A hook a service does not need is NULL. "tprun" hooks run in tprun (the hub of every host), "agent" hooks in
 * `tprun --agent`, the rest in both (they see the ranks the process itself starts, job->ranks[i].agent < 0).
 */
typedef struct tprun_service_ops {
    const char *name;
    char msg_prefix; /* channel lines whose first word starts with it are its messages, both ways */
    /* tprun: whether the plan wants it (an option, a variable). */
    int (*wanted)(const struct tprun_plan *plan);
    /* tprun, job starting, before the keeper and any fd: 0 or tprun's exit status after one line saying why. */
    int (*prepare)(const struct tprun_plan *plan);
    /* tprun, after the job's ids, listener and ranks are known: starts what serves the ranks (its fds go into
     * L's loop as the service registers them). */
    tp_status_t (*start)(struct tprun_loop *L);
    /* tprun: what agent ai's plan carries for it (read back by agent_plan_line). */
    int (*plan_lines)(struct tprun_loop *L, int ai, tprun_plan_add_fn add, void *ctx);
    /* A rank's environment: rank i's job->envp[i] may be replaced (the service owns the new array). */
    tp_status_t (*rank_env)(struct tprun_job *job, int i);
    /* In rank i's child before exec (fds set; a vfork child: system calls only, no memory written): affinity. */
    void (*child_exec)(const struct tprun_job *job, int i);
    /* tprun: rank r ended; rank_failed: it failed first; 1 when the service starts the teardown itself. */
    void (*rank_ended)(struct tprun_loop *L, int r);
    int (*rank_failed)(struct tprun_loop *L, int r);
    /* tprun: a message line from agent ai that starts with msg_prefix: 1 when it was one of its own. */
    int (*agent_message)(struct tprun_loop *L, int ai, char *line);
    /* tprun: agent ai's channel ended: what it owed will not come. */
    void (*agent_gone)(struct tprun_loop *L, int ai);
    /* agent: a plan line: 1 taken, 0 not its own, -1 out of memory; it may set plan fields (plan->pmix). */
    int (*agent_plan_line)(struct tprun_plan *plan, const char *key, const char *value);
    /* agent: whether the plan turned it on. */
    int (*agent_on)(void);
    /* agent, job starting: before the keeper (0, else err says why), then after tprun_job_prepare. */
    int (*agent_prepare)(char *err, size_t err_len);
    tp_status_t (*agent_start)(const struct tprun_job *job, char *err, size_t err_len);
    /* agent: an fd to poll (-1: none), what to do when it is readable (reap first reports ranks already dead). */
    int (*agent_fd)(void);
    void (*agent_ready)(void (*reap)(void *ctx), void *ctx);
    /* agent: a command line from tprun that starts with msg_prefix: 1 when it was one. */
    int (*agent_command)(char *line);
    /* agent: whether it keeps the agent up after its ranks ended, until tprun ends the job. */
    int (*agent_keeps)(void);
    /* Job over (every exit path, more than once is fine): stops it and removes what it made. */
    void (*job_over)(void);
} tprun_service_ops_t;

/* ---- tprun's walks (in list order; a service the plan does not want is skipped) ---- */
int tprun_services_prepare(const struct tprun_plan *plan);
tp_status_t tprun_services_start(struct tprun_loop *L);
int tprun_services_plan_lines(struct tprun_loop *L, int ai, tprun_plan_add_fn add, void *ctx);
void tprun_services_rank_ended(struct tprun_loop *L, int r);
int tprun_services_rank_failed(struct tprun_loop *L, int r);
/* The first letters of the services' messages ("p"): the agents' links route them to the walks below. */
const char *tprun_services_msg_types(void);
/* A line from agent ai: 1 when a service took it. */
int tprun_services_agent_message(struct tprun_loop *L, int ai, char *line);
void tprun_services_agent_gone(struct tprun_loop *L, int ai);

/* ---- the agent's walks ---- */
int tprun_services_agent_plan_line(struct tprun_plan *plan, const char *key, const char *value);
int tprun_services_agent_prepare(char *err, size_t err_len);
tp_status_t tprun_services_agent_start(const struct tprun_job *job, char *err, size_t err_len);
/* Puts each service's fd into the agent's loop: when readable, reap(ctx) first reports ranks already dead. */
struct tprun_evloop;
void tprun_services_agent_watch(struct tprun_evloop *ev, void (*reap)(void *ctx), void *ctx);
int tprun_services_agent_command(char *line);
int tprun_services_agent_keeps(void);

/* ---- both ---- */
/* Every rank this process starts (agent < 0) gets each service's environment; logs which rank failed. */
tp_status_t tprun_services_rank_envs(struct tprun_job *job);
void tprun_services_child_exec(const struct tprun_job *job, int i);
void tprun_services_job_over(void);
/*
 * For a rank_env hook: rank i's entries except those named in drop, with room after them for add entries and
 * add_bytes of strings at *strings; *k is the entries copied. The memory lives until tprun_services_job_over.
 * NULL (logged) when out of memory.
 */
char **tprun_services_env_rebuild(struct tprun_job *job, int i, const char *const *drop, size_t ndrop, size_t add,
                                  size_t add_bytes, char **strings, size_t *k);

/* ---- what the keeper removes when tprun or an agent dies without ending the job ---- */
/* Registers a path (a directory tree) the keeper removes; call before the keeper starts. */
int tprun_services_keep_path(const char *path);
/* Removes path's tree now (and forgets it): the normal end. */
void tprun_services_remove_path(const char *path);
/* In the keeper after its parent died: removes every registered path that still exists. */
void tprun_services_keeper_cleanup(void);

#endif
