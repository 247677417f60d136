/* tprun_slurm.h: inside a Slurm allocation, the ranks are one srun step whose ranks bootstrap through PMIx. */
#ifndef TPRUN_SLURM_H
#define TPRUN_SLURM_H

#include "tprun_args.h"

/* Whether srun starts the ranks: how ("--launcher" or TP_LAUNCHER) is slurm, or auto/unset with SLURM_JOB_ID set. */
int tprun_slurm_wanted(const char *how, char *const *envp);

/* Before anything starts: inside an allocation (else 2) with srun in PATH (else 125); one line says what is missing. */
int tprun_slurm_check(const tprun_plan_t *plan, char *const *envp);

/*
 * Runs the plan as `srun --mpi=pmix --kill-on-bad-exit -n N tprun --slurm-task PROGRAM ...`; forwards signals and
 * output, keeps --timeout. Returns the first failing rank's status (from the tasks' reports), as tprun does.
 */
int tprun_slurm_run(const tprun_plan_t *plan, char *const *envp);

/* `tprun --slurm-task PROGRAM ARGS...`: runs one rank, forwards signals to it, reports its end, ends as it did. */
int tprun_slurm_task(char **argv);

#endif
