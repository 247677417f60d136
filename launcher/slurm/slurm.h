/* slurm.h: the Slurm backend: inside an allocation, srun starts tprun's per-host agent on every node of the job. */
#ifndef TPRUN_SLURM_H
#define TPRUN_SLURM_H

#include <stddef.h>

#include "tprun_args.h"
#include "tprun_spawn.h"

/* Whether srun starts the agents: how ("--launcher" or TP_LAUNCHER) is slurm, or auto/unset with SLURM_JOB_ID set. */
int tprun_slurm_wanted(const char *how, char *const *envp);

/* Before anything starts: inside an allocation (else 2) with srun in PATH (else 125); one line says what is missing. */
int tprun_slurm_check(const tprun_plan_t *plan, char *const *envp);

/*
 * Makes the plan one of agents on the allocation's nodes: -H/--hostfile names (each must be a node of the
 * allocation), else SLURM_JOB_NODELIST with SLURM_TASKS_PER_NODE slots; every host, this one included, gets an
 * agent. Returns 0, or tprun's exit status after one line naming the problem.
 */
int tprun_slurm_plan(tprun_plan_t *plan, char *const *envp);

/* The ssh backend's agent command under Slurm: srun --nodes=1 --ntasks=1 --nodelist=HOST --overlap ... EXE --agent
 * (a NULL-ended argv in one malloc'd block, as tprun_ssh_agent_argv's). */
char **tprun_slurm_agent_argv(const tprun_plan_t *plan, const char *exe, const char *host);

/* In an agent under srun (no SSH_CONNECTION): the address other nodes reach this one at, its first non-loopback
 * IPv4 interface's; ip is left as it is when there is none. */
void tprun_slurm_node_ip(char *ip, size_t len);

/* Expands a Slurm host list ("n[01-03,7],gpu1") into names (malloc'd array of malloc'd strings); -1 if malformed. */
int tprun_slurm_hostlist(const char *list, char ***names, size_t *count);
/* Expands SLURM_TASKS_PER_NODE ("2(x3),1") into count entries; -1 if malformed or not count entries. */
int tprun_slurm_tasks_per_node(const char *spec, int *out, size_t count);

#endif
