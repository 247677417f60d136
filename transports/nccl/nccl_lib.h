/*
 * nccl_lib.h: the few NCCL types and entry points the provider uses, declared here so that libtp builds without
 * nccl.h and loads libnccl.so.2 only when a CUDA buffer first reaches a collective.
 */
#ifndef NCCL_LIB_H
#define NCCL_LIB_H

#include <limits.h>
#include <stddef.h>

#include "tp_provider.h"

/* NCCL's values (nccl.h 2.x: stable across versions). */
typedef enum {
    NCCL_OK = 0,
    NCCL_SYSTEM_ERROR = 2,
    NCCL_INTERNAL_ERROR = 3,
    NCCL_INVALID_USAGE = 5,
    NCCL_REMOTE_ERROR = 6,
    NCCL_IN_PROGRESS = 7,
} nccl_result_t;

typedef enum {
    NCCL_INT8 = 0,
    NCCL_UINT8 = 1,
    NCCL_INT32 = 2,
    NCCL_INT64 = 4,
    NCCL_F16 = 6,
    NCCL_F32 = 7,
    NCCL_F64 = 8,
    NCCL_BF16 = 9
} nccl_dtype_t;
typedef enum { NCCL_SUM = 0, NCCL_MAX = 2, NCCL_MIN = 3 } nccl_redop_t;

#define NCCL_ID_BYTES 128
typedef struct nccl_id {
    char internal[NCCL_ID_BYTES];
} nccl_id_t;

typedef struct nccl_comm_opaque *nccl_comm_t;

/* The prefix of ncclConfig_t that NCCL 2.14 reads (it copies min(size) and ignores fields newer than version). */
typedef struct nccl_config {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cga_cluster_size, min_ctas, max_ctas;
    const char *net_name;
} nccl_config_t;
#define NCCL_CONFIG_MAGIC   0xcafebeef
#define NCCL_CONFIG_VERSION 21400
#define NCCL_CONFIG_UNDEF   INT_MIN

/* The entry points, resolved once; a library that lacks one is not used. */
typedef struct nccl_lib {
    nccl_result_t (*get_version)(int *version);
    const char *(*get_error_string)(nccl_result_t r);
    nccl_result_t (*get_unique_id)(nccl_id_t *id);
    nccl_result_t (*comm_init_rank_config)(nccl_comm_t *comm, int n, nccl_id_t id, int rank, nccl_config_t *config);
    nccl_result_t (*comm_get_async_error)(nccl_comm_t comm, nccl_result_t *state);
    nccl_result_t (*comm_abort)(nccl_comm_t comm);
    nccl_result_t (*comm_finalize)(nccl_comm_t comm);
    nccl_result_t (*comm_destroy)(nccl_comm_t comm);
    nccl_result_t (*mem_alloc)(void **ptr, size_t size);
    nccl_result_t (*mem_free)(void *ptr);
    nccl_result_t (*group_start)(void);
    nccl_result_t (*group_end)(void);
    nccl_result_t (*all_reduce)(const void *send, void *recv, size_t count, nccl_dtype_t dt, nccl_redop_t op,
                                nccl_comm_t comm, void *stream);
    nccl_result_t (*reduce_scatter)(const void *send, void *recv, size_t count, nccl_dtype_t dt, nccl_redop_t op,
                                    nccl_comm_t comm, void *stream);
    nccl_result_t (*all_gather)(const void *send, void *recv, size_t count, nccl_dtype_t dt, nccl_comm_t comm,
                                void *stream);
    nccl_result_t (*broadcast)(const void *send, void *recv, size_t count, nccl_dtype_t dt, int root, nccl_comm_t comm,
                               void *stream);
    nccl_result_t (*send)(const void *buf, size_t count, nccl_dtype_t dt, int peer, nccl_comm_t comm, void *stream);
    nccl_result_t (*recv)(void *buf, size_t count, nccl_dtype_t dt, int peer, nccl_comm_t comm, void *stream);
    int version;
} nccl_lib_t;

/*
 * Loads the library once per process (TP_NCCL_LIBRARY, else libnccl.so.2 from the loader's path) after setting
 * NCCL_NVLS_ENABLE=0 unless the user set it; returns it, or NULL with why (the same answer on every later call).
 */
const nccl_lib_t *nccl_lib_load(char *why, size_t why_len);
/* "ncclRemoteError: remote process exited or there was a network error" style text for messages. */
const char *nccl_lib_error(const nccl_lib_t *lib, nccl_result_t r);

#endif
