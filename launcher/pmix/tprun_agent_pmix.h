/* tprun_agent_pmix.h: the PMIx server an agent hosts for its ranks under tprun --pmix (tprun_agent.c's hooks). */
#ifndef TPRUN_AGENT_PMIX_H
#define TPRUN_AGENT_PMIX_H

#include <stddef.h>

#include "tprun_spawn.h"

/* A plan line "pmix", "pmixhosts" or "pmixmap": 1 when taken, 0 when not one of them, -1 out of memory. */
int tprun_agent_pmix_plan(const char *key, const char *value);
int tprun_agent_pmix_on(void);
/* Before the keeper starts: libpmix loads and the tmpdir exists (the keeper removes it if the agent dies). */
int tprun_agent_pmix_prepare(char *err, size_t err_len);
/* After tprun_job_prepare: starts the server for this host's ranks. */
tp_status_t tprun_agent_pmix_start(const tprun_job_t *J, char *err, size_t err_len);
/* After the environments are built: adds what PMIx gives each rank. */
tp_status_t tprun_agent_pmix_envs(tprun_job_t *J);
/* The fd to poll (-1 without --pmix), and what to do when it is readable: send the events to tprun. */
int tprun_agent_pmix_fd(void);
void tprun_agent_pmix_on_ready(void (*reap)(void *ctx), void *ctx);
/* A command from tprun ("pF", "pq", "pr", "pn"): 1 when it was one. */
int tprun_agent_pmix_command(char *line);
/* Ends the server and removes its tmpdir. */
void tprun_agent_pmix_stop(void);

#endif
