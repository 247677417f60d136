/* tprun_summary.h: --json-summary FILE, one JSON object per job for CI systems that parse results. */
#ifndef TPRUN_SUMMARY_H
#define TPRUN_SUMMARY_H

#include <stddef.h>

#include "tp.h"
#include "tprun_args.h"
#include "core/state.h"

/*
 * Before anything starts: refuses a FILE whose directory is missing or not writable (by creating and removing
 * FILE's temporary name there) and the Slurm launcher, which keeps no per-rank record. On success notes the job's
 * start time and keeps every line tprun says from then on. err gets one line without "tprun: ".
 */
tp_status_t tprun_summary_check(const tprun_plan_t *plan, char *err, size_t err_len);

/* Writes plan->json_summary from the ended job: a temporary file renamed over FILE; says why when it cannot. */
tp_status_t tprun_summary_write(const tprun_loop_t *L, int exit_status);


#endif
