/* coll_dispatch.h: the collective providers, each comm's state in every one, and the choice of one per call. */
#ifndef COLL_DISPATCH_H
#define COLL_DISPATCH_H

#include "runtime_world.h"

#define TP_COLL_PROVIDERS_MAX 4

/* What tp_comm_t's coll_state points at. */
typedef struct coll_comm {
    tp_status_t failed; /* sticky: a comm that failed a call fails the next ones alike */
    tp_comm_t *comm;
    struct coll_comm *next_live; /* every live comm, for the call counts a rank sends when it finalizes */
    int from_split;
    int n;
    const tp_coll_ops_t *ops[TP_COLL_PROVIDERS_MAX];
    void *state[TP_COLL_PROVIDERS_MAX];
} coll_comm_t;

/* Puts a provider ahead of those listed, for comms made from now on; refuses a wrong ABI or a full list. */
tp_status_t tp_coll_provider_add(const tp_coll_ops_t *ops);
/* Whether any provider orders calls on a stream (none does yet: a stream argument is refused by name). */
int tp_coll_streams_taken(void);
/* What every call checks of a live comm before its arguments: an earlier failure on it, a stream nobody takes. */
tp_status_t tp_coll_usable(tp_comm_t *comm, const char *fn, tp_stream_t *stream);
/*
 * Fills args->device and args->mem_type from the buffers a and b (either may be NULL) and returns the comm's
 * provider for that memory type and call with its state in *state; NULL (logged, naming fn) when none takes it.
 */
const tp_coll_ops_t *tp_coll_choose(coll_comm_t *cc, const char *fn, tp_coll_args_t *args, const void *a, const void *b,
                                    void **state);
/* Hands a checked call to the provider that takes its buffers (a and b, either may be NULL) and its stream. */
tp_status_t tp_coll_dispatch(tp_comm_t *comm, const char *fn, tp_coll_args_t *args, const void *a, const void *b);
/*
 * Ends a call: a peer- or job-scope failure goes to the fate path (fatal: it does not return; TP_ERRORS=return: the
 * job's first failure is named in fn's message), and makes the comm fail alike from now on.
 */
tp_status_t tp_coll_finish(coll_comm_t *cc, tp_status_t s, const char *fn);
/*
 * This rank's call counts, sent with its BYE so a peer waiting in a call learns it will not be made (the stop
 * word): "c COMM_ID CALLS" per live comm, then "p COMM_ID WORLD_PEER SENT RECEIVED" per point-to-point peer.
 * Returns a malloc'd string, or NULL when out of memory.
 */
char *tp_coll_stop_table(void);
/* A call without a stream, or tp_comm_split: waits until every stream call queued (coll_staged.c) ran, so the
 * transports have one user and calls keep their order; returns an earlier stream call's failure (logged naming fn). */
tp_status_t tp_staged_quiesce(const char *fn);
/* tp_finalize, before its counts go to the peers: the stream calls queued run first, up to TP_STAGE_TIMEOUT for those
 * whose streams have not reached them, which are then cancelled (logged). */
void tp_staged_drain(void);
/* Makes the staging memory of stream's device (pinned words and slab, the proxy's copy stream) when the engine hands
 * libtp a stream, or at tp_init for streams made before it: pinned allocations synchronise the device, so one made
 * inside a call could wait for a stream the engine holds on a gate of its own (seen on the H200). */
void tp_staged_prepare(tp_stream_t *stream, const tp_world_t *world);
/* The built-in host engine's state on a comm (tp_comm_split's exchange runs on it). */
void *tp_coll_host_state(coll_comm_t *cc);

#endif
