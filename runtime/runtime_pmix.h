/* runtime_pmix.h: ranks started by a PMIx server (mpirun, srun --mpi=pmix) learn the world and rank 0's address. */
#ifndef RUNTIME_PMIX_H
#define RUNTIME_PMIX_H

#include "runtime_world.h"

/* Whether a PMIx server started this process: PMIX_NAMESPACE and PMIX_RANK are set (tprun's TP_RANK wins). */
int tp_pmix_started(void);

/* Connects to the server (PMIx_Init) and fills rank, size, locality, job id and, on rank 0, boot_host. */
tp_status_t tp_pmix_world(tp_world_t *w);

/*
 * After rank 0 listens: rank 0 publishes its bootstrap address and a fresh job key, every rank fences with
 * data collection, and the others read both into boot_host, boot_port and job_key. Bounded by TP_BOOT_TIMEOUT.
 */
tp_status_t tp_pmix_share_boot(tp_world_t *w);

/* Disconnects from the server; safe to call when tp_pmix_world did not succeed. */
void tp_pmix_finalize(void);

#endif
