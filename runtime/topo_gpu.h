/* topo_gpu.h: a host's GPUs by PCI (sysfs under TP_SYSFS_ROOT), the ones a job may use (TP_GPUS, else the vendors'
 * *_VISIBLE_DEVICES) and the one of each local rank. Compiled into tprun (its binding service) and libtp (ranks
 * that another launcher started). */
#ifndef TOPO_GPU_H
#define TOPO_GPU_H

#include <stddef.h>

#include "tp.h"

#define TP_GPU_MAX           64
#define TP_GPU_VENDOR_NVIDIA 0x10de
#define TP_GPU_VENDOR_AMD    0x1002

typedef struct tp_gpu {
    char bus_id[16];  /* "0000:3b:00.0", lower case */
    unsigned vendor;  /* TP_GPU_VENDOR_NVIDIA or TP_GPU_VENDOR_AMD */
    int numa_node;    /* sysfs numa_node: -1 when the firmware does not say (VMs) */
    int index;        /* among all of the host's GPUs, in bus id order (TP_GPUS's indexes) */
    int vendor_index; /* among its vendor's GPUs, in bus id order (CUDA_DEVICE_ORDER=PCI_BUS_ID's index) */
} tp_gpu_t;

/* The variables that choose GPUs, as one rank's environment holds them (NULL: unset). */
typedef struct tp_gpu_env {
    const char *tp_gpus, *cuda, *hip, *rocr;
} tp_gpu_env_t;

/* Fills e from an environment array (a later entry wins, as -x's do). */
void tp_gpu_env_from(tp_gpu_env_t *e, char *const *envp);

/* The host's GPUs in bus id order (at most max): NVIDIA and AMD display, 3D and processing-accelerator functions.
 * Returns how many, 0 without a PCI tree. */
int tp_gpu_list(tp_gpu_t *out, int max);

/*
 * The GPUs a job may use, in the order ranks take them: TP_GPUS (bus ids or indexes into all), else each vendor's
 * GPUs filtered by CUDA_VISIBLE_DEVICES (NVIDIA) or ROCR_VISIBLE_DEVICES then HIP_VISIBLE_DEVICES (AMD), NVIDIA's
 * first. *why names what chose them ("all GPUs", "CUDA_VISIBLE_DEVICES=0,1", ...). A bad value (not a list, an index
 * past the GPUs, a repeat, a UUID) is TP_ERR_INVALID with one line naming the variable in err.
 */
tp_status_t tp_gpu_visible(const tp_gpu_env_t *e, const tp_gpu_t *all, int n, tp_gpu_t *out, int *nout, char *why,
                           size_t why_len, char *err, size_t err_len);

/*
 * The GPU of local rank local_rank of local_size, for a rank that tprun did not start (no TP_GPU_BUS_ID): the
 * visible GPUs of envp taken by local rank; one visible GPU is every rank's (its launcher gave each rank its own).
 * TP_OK with gpu->bus_id "" when the host has no visible GPU; TP_ERR_INVALID with err (a bad variable, more ranks
 * than GPUs).
 */
tp_status_t tp_gpu_of_local_rank(int local_rank, int local_size, char *const *envp, tp_gpu_t *gpu, char *err,
                                 size_t err_len);

#endif
