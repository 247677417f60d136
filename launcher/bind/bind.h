/* bind.h: the binding service's plan: each local rank's GPU and the CPUs and NUMA node it is bound to, computed
 * with hwloc before any rank forks, applied in the child with system calls only. */
#ifndef TPRUN_BIND_H
#define TPRUN_BIND_H

#include <sched.h>
#include <stddef.h>

#include "topo_gpu.h"
#include "tp.h"
#include "tprun_args.h"

/* NUMA nodes a memory policy may name (the kernel's nodemask in words). */
#define TPRUN_BIND_NODE_WORDS 16

typedef struct tprun_bind_rank {
    tp_gpu_t gpu;      /* gpu.bus_id "" when the rank gets none */
    char cpus[256];    /* TP_BIND_CPUS: bound (or, unbound, inherited) CPU list */
    int numa;          /* TP_BIND_NUMA, -1 for "-" (memory left to the kernel) */
    char why[200];     /* TP_BIND_WHY */
    int apply;         /* the child binds (this machine's topology, bound) */
    cpu_set_t *cpuset; /* CPU_ALLOC'd, cpuset_size bytes */
    size_t cpuset_size;
    unsigned long nodemask[TPRUN_BIND_NODE_WORDS];
} tprun_bind_rank_t;

/*
 * Every local rank's GPU and binding for local_size ranks on host, from the GPUs (TP_SYSFS_ROOT) that e makes
 * visible and hwloc's topology (HWLOC_XMLFILE replays another machine: computed, not applied). gpus_per_rank 0 gives
 * none. host (or NULL: the message's reader knows it) names the host in messages. Bad variables or more ranks than GPUs: TP_ERR_INVALID with one line in err. *out: local_size entries.
 */
tp_status_t tprun_bind_compute(int mode, int gpus_per_rank, const tp_gpu_env_t *e, int local_size, const char *host,
                               tprun_bind_rank_t **out, char *err, size_t err_len);
void tprun_bind_free(tprun_bind_rank_t *ranks, int n);

/* In a vforked child: system calls only. */
void tprun_bind_apply(const tprun_bind_rank_t *b);

#endif
