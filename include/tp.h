/* tp.h: the libtp runtime for tensor-parallel engines (the one installed API header). */
#ifndef TP_H
#define TP_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The exported API: libtp is built with -fvisibility=hidden, so a function is exported only when its declaration
 * here or in tp_provider.h starts with TP_API (tests/api_symbols.sh checks that the two sets agree). */
#if defined(__GNUC__)
#define TP_API __attribute__((visibility("default")))
#else
#define TP_API
#endif

#define TP_VERSION_MAJOR 0
#define TP_VERSION_MINOR 1
#define TP_VERSION_PATCH 0

/* Exit status of a rank that the fate path ends because a peer failed or stopped answering. */
#define TP_EXIT_PEER_FAILED 70
/* Exit status of a rank that the fate path ends on its own failure: the job's verdict names this rank (its own call
 * or tp_init failed and no peer's failure explains it). A launcher takes it for the cause, 70 for consequences. */
#define TP_EXIT_FAILED 71
/* Exit status of tprun when --timeout expires. */
#define TP_EXIT_TIMEOUT 124

/*
 * Status codes. TP_OK is 0; errors are negative and grouped by how far they reach:
 * -1..-99 this call only, -100..-199 one peer (the job is doomed under fate), -200.. the whole job.
 *
 * Errors are fatal by default (TP_ERRORS=fatal, as MPI's default error handler): a call that meets a peer- or
 * job-scope error does not return; the rank logs the job's first failure (the same rank on every rank: the one
 * that failed first, never one that ended because of it), runs the tp_fate_register callbacks and exits with
 * TP_EXIT_PEER_FAILED (TP_EXIT_FAILED when that failure is this rank's own). With TP_ERRORS=return (agreed by every rank) the call returns the status instead, once the
 * cause is known: tp_last_error() names the rank that failed first, the callbacks have run, every later call on any
 * comm returns the same status and tp_finalize returns it at once. An engine that then exits should exit with
 * TP_EXIT_PEER_FAILED so its launcher sees it as a consequence, not a cause. TP_STOPPED returns in both modes.
 */
typedef enum tp_status {
    TP_OK = 0,
    /* this call */
    TP_ERR_INVALID = -1,     /* a bad argument */
    TP_ERR_NO_MEMORY = -2,   /* an allocation failed */
    TP_ERR_UNSUPPORTED = -3, /* the operation is not available here (a non-NULL stream, a transport) */
    TP_ERR_STATE = -4,       /* called in the wrong state (before init, after finalize) */
    TP_ERR_SYSTEM = -5,      /* a system call failed */
    TP_ERR_NOT_FOUND = -6,   /* a name or key was not found */
    /* one peer */
    TP_ERR_PEER_FAILED = -100, /* a peer died, closed its connection or stopped answering */
    TP_ERR_PROTOCOL = -101,    /* a peer sent something that is not the protocol */
    /* the whole job */
    TP_ERR_BOOTSTRAP = -200, /* the bootstrap failed (timeout, unreachable root, refused) */
    TP_ERR_MISMATCH = -201,  /* a setting that must match differs between ranks */
    TP_ERR_DESYNC = -202,    /* ranks called different collectives, counts or types */
    TP_ERR_ABORTED = -203,   /* the job is being torn down */
    /*
     * Not a failure: peers called tp_finalize while this rank waited in a call they will never make (a serving
     * loop's end). tp_last_error() says who and where ("rank 0 and 2 others called tp_finalize while this rank
     * waits in all_reduce call 3922 on comm 0"); call tp_finalize, which completes. Fate does not fire.
     */
    TP_STOPPED = -204,
} tp_status_t;

typedef enum tp_scope {
    TP_SCOPE_NONE = 0, /* TP_OK */
    TP_SCOPE_CALL = 1,
    TP_SCOPE_PEER = 2,
    TP_SCOPE_JOB = 3,
} tp_scope_t;

/* A static, one-line description of a status. */
TP_API const char *tp_status_string(tp_status_t status);
/* How far an error reaches: the fate path treats TP_SCOPE_PEER and TP_SCOPE_JOB as fatal to the job. */
TP_API tp_scope_t tp_status_scope(tp_status_t status);
/* The last error message logged by this thread's calls into libtp, or "" (names the thing, for engines' logs). */
TP_API const char *tp_last_error(void);

/* The library's version string ("0.1.0"). */
TP_API const char *tp_version(void);

/* ---- Initialization ---- */

/* Options for tp_init, built before the bootstrap: settings here must match on every rank. */
typedef struct tp_attr tp_attr_t;

TP_API tp_status_t tp_attr_create(tp_attr_t **attr);
/* Adds an engine setting (such as a model hash) that every rank must give with the same value. */
TP_API tp_status_t tp_attr_set_setting(tp_attr_t *attr, const char *key, const char *value);
TP_API void tp_attr_destroy(tp_attr_t *attr);

/* A communicator: the world, or a sub-communicator of it. */
typedef struct tp_comm tp_comm_t;

/*
 * Joins the job: reads the world from tprun's environment, a PMIx server, torchrun-style variables
 * (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or else runs as a singleton; bootstraps, agrees the settings
 * and starts the fate monitor. attr may be NULL. Returns the world communicator in *world. A failure after the
 * fate monitor started is the job's, like a failed call's (TP_ERRORS); a later tp_init then returns TP_ERR_STATE.
 */
TP_API tp_status_t tp_init(const tp_attr_t *attr, tp_comm_t **world);
/* Leaves the job cleanly (peers do not see it as a failure). Idempotent; NULL is allowed. */
TP_API tp_status_t tp_finalize(tp_comm_t *world);

TP_API int tp_comm_rank(const tp_comm_t *comm);
TP_API int tp_comm_size(const tp_comm_t *comm);
/* Rank and size among the ranks of this comm on this host, and this host's index among the job's hosts. */
TP_API int tp_comm_local_rank(const tp_comm_t *comm);
TP_API int tp_comm_local_size(const tp_comm_t *comm);
TP_API int tp_comm_node_rank(const tp_comm_t *comm);

/* What the bootstrap learned about one rank. Strings live until tp_finalize. */
typedef struct tp_peer_info {
    int rank;
    int local_rank;
    int node_rank;
    pid_t pid;
    const char *host;    /* the host name the rank reported */
    const char *address; /* the address peers use to reach it */
} tp_peer_info_t;

/* Fills *info for a rank of comm (its rank within comm). */
TP_API tp_status_t tp_comm_peer(const tp_comm_t *comm, int rank, tp_peer_info_t *info);
/* The agreed value of a setting (built-in or engine-added), or NULL. */
TP_API const char *tp_comm_setting(const tp_comm_t *comm, const char *key);
/* The job id every rank agreed on. */
TP_API const char *tp_comm_job_id(const tp_comm_t *comm);

/* ---- Fate ---- */

/* What the fate path knows about the failure that ends the job. */
typedef struct tp_failure {
    int rank;           /* the rank that failed, or -1 when unknown */
    const char *host;   /* its host, or "" */
    pid_t pid;          /* its pid, or 0 */
    const char *reason; /* why: "connection closed without tp_finalize", "no heartbeat for 1000 ms", ... */
} tp_failure_t;

typedef void (*tp_fate_fn)(const tp_failure_t *failure, void *arg);

/*
 * Registers a callback that runs, on the fate thread, when a peer fails and before this rank exits with
 * TP_EXIT_PEER_FAILED (with TP_ERRORS=return: before calls return the failure) (abort NCCL communicators and the
 * like here). Callbacks run once, in reverse order of registration, and must not call back into libtp. May be
 * called before tp_init.
 */
TP_API tp_status_t tp_fate_register(tp_fate_fn fn, void *arg);
/* With TP_ERRORS=return: 1 once the job has failed, with *failure (strings live until exit) filled; else 0. */
TP_API int tp_fate_failure(tp_failure_t *failure);

/* ---- Collectives (blocking on host memory with a NULL stream) ---- */

typedef enum tp_dtype {
    TP_BYTES = 0,
    TP_F32 = 1,
    TP_F64 = 2,
    TP_BF16 = 3,
    TP_F16 = 4,
    TP_I32 = 5,
    TP_I64 = 6,
} tp_dtype_t;

typedef enum tp_op {
    TP_SUM = 0,
    TP_MAX = 1,
    TP_MIN = 2,
} tp_op_t;

/* Bytes per element of a type (1 for TP_BYTES), or 0 for an unknown type. */
TP_API size_t tp_dtype_size(tp_dtype_t dtype);

/* ---- Streams: the engine's device stream, handed over without this header including CUDA or HIP ---- */

/* Which API a stream (and the memory its calls take) belongs to. */
typedef enum tp_device_kind {
    TP_DEVICE_HOST = 0, /* a host stream: work queued in order and run by a thread of libtp (tests without a GPU) */
    TP_DEVICE_CUDA = 1, /* native is a CUstream / cudaStream_t (NULL: the default stream of the current context) */
    TP_DEVICE_HIP = 2,  /* native is a hipStream_t (NULL: the default stream of the current device) */
} tp_device_kind_t;

/*
 * The stream argument of every collective and point-to-point call. NULL: buffers are host memory and the call
 * returns when it is done. Otherwise one made here; whether a call takes one depends on the collective providers
 * this libtp has: a call no provider takes with a stream fails with TP_ERR_UNSUPPORTED and an error naming the
 * call, and the comm stays usable. A call with a stream only queues its work there and returns; its failure, if
 * any, is returned by the next call (docs/COLLECTIVES.md, "Staging").
 */
typedef struct tp_stream tp_stream_t;

/*
 * Wraps the engine's native stream (kind CUDA or HIP) or makes a host stream (kind HOST, native must be NULL).
 * The engine keeps ownership of native and must not destroy it before tp_stream_destroy. Fails by name when the
 * kind's driver is absent or cannot wait on a 64-bit stream value.
 */
TP_API tp_status_t tp_stream_create(tp_device_kind_t kind, void *native, tp_stream_t **out);
/* Frees what tp_stream_create made (a host stream first runs what is queued); native is left alone. */
TP_API tp_status_t tp_stream_destroy(tp_stream_t *stream);

/* ---- Host memory that same-host peers read in place ---- */

/*
 * Memory for host buffers the collectives send from. Bytes a call sends that lie in it and exist when the call
 * begins (send buffers; not what the call itself produces) are read by a peer on this host over shm where they lie,
 * through its own mapping: one copy instead of two through the shared-memory ring (frames of TP_SHM_MAP_BYTES,
 * 1 MiB, or more). The peer's reads leave those cache lines in its cache too, so the engine's next write to them
 * costs more (docs/ENGINE.md: what is left of the gain when a buffer is rewritten before every call). A call's
 * buffers in the first 32 live allocations are known host memory: no GPU driver is asked about them. Page-aligned
 * and zeroed; callable before tp_init and after tp_finalize; thread-safe. A peer keeps the pages of up to 8 such
 * allocations of each rank mapped (even after tp_mem_free) until it maps another or finalizes. TP_ERR_INVALID for
 * 0 bytes, TP_ERR_NO_MEMORY when there is no room.
 */
TP_API tp_status_t tp_mem_alloc(size_t bytes, void **ptr);
/* Frees what tp_mem_alloc returned (NULL: nothing); any other address, or one freed already, is TP_ERR_INVALID. */
TP_API tp_status_t tp_mem_free(void *ptr);

/*
 * Determinism: every TP_SUM is the rank-order sum. For each element, ((x0 + x1) + x2) + ..., accumulated in f32
 * for TP_BF16 and TP_F16 (rounded once, to nearest even, at the end) and in the type itself otherwise, so the
 * result is the same bits on every rank, run after run, at any world size, algorithm or part size.
 * Counts are in elements; send and receive buffers may be the same (in place) where the shapes allow.
 */
TP_API tp_status_t tp_barrier(tp_comm_t *comm);
TP_API tp_status_t tp_broadcast(tp_comm_t *comm, void *buf, size_t count, tp_dtype_t dtype, int root,
                                tp_stream_t *stream);
/* recv holds size * count elements, rank r's in slot r. */
TP_API tp_status_t tp_all_gather(tp_comm_t *comm, const void *send, void *recv, size_t count, tp_dtype_t dtype,
                                 tp_stream_t *stream);
/* Rank r gives counts[r] elements; recv holds them back to back in rank order. */
TP_API tp_status_t tp_all_gatherv(tp_comm_t *comm, const void *send, void *recv, const size_t *counts, tp_dtype_t dtype,
                                  tp_stream_t *stream);
TP_API tp_status_t tp_all_reduce(tp_comm_t *comm, const void *send, void *recv, size_t count, tp_dtype_t dtype,
                                 tp_op_t op, tp_stream_t *stream);
/* send holds size * count elements; rank r receives the reduction of slot r. */
TP_API tp_status_t tp_reduce_scatter(tp_comm_t *comm, const void *send, void *recv, size_t count, tp_dtype_t dtype,
                                     tp_op_t op, tp_stream_t *stream);
/* Slot p of send (count elements) goes to rank p; slot p of recv comes from rank p. */
TP_API tp_status_t tp_all_to_all(tp_comm_t *comm, const void *send, void *recv, size_t count, tp_dtype_t dtype,
                                 tp_stream_t *stream);
TP_API tp_status_t tp_send(tp_comm_t *comm, const void *buf, size_t count, tp_dtype_t dtype, int peer,
                           tp_stream_t *stream);
TP_API tp_status_t tp_recv(tp_comm_t *comm, void *buf, size_t count, tp_dtype_t dtype, int peer, tp_stream_t *stream);
/* Sends count elements to peer and receives count elements from it at once. */
TP_API tp_status_t tp_exchange(tp_comm_t *comm, const void *send, void *recv, size_t count, tp_dtype_t dtype, int peer,
                               tp_stream_t *stream);

/* ---- Sub-communicators ---- */

/* Ranks with the same color form a new comm, ordered by key then rank; a negative color gets *out = NULL. */
TP_API tp_status_t tp_comm_split(tp_comm_t *comm, int color, int key, tp_comm_t **out);
/* Frees a comm made by tp_comm_split (the world is freed by tp_finalize). */
TP_API tp_status_t tp_comm_destroy(tp_comm_t *comm);

#ifdef __cplusplus
}
#endif

#endif /* TP_H */
