/* coll_staged.h: the staging collective provider: calls on a stream are queued there and run by one proxy thread
 * that copies through pinned slabs and runs the built-in host engine on them. */
#ifndef COLL_STAGED_H
#define COLL_STAGED_H

#include <pthread.h>
#include <stdatomic.h>

#include "coll_dispatch.h"

#define TP_STAGE_SLOTS 256 /* calls queued at once, process-wide: each has its own ready and done word */
#define TP_STAGE_LANES 4   /* devices whose memory is staged in one process (host, cuda, hip, a test's) */

/* One device's side: its words, the proxy's copy stream and the slab, all made on the first call with its memory. */
typedef struct stage_lane {
    const tp_device_ops_t *dev;
    tp_stream_t *copy;        /* the proxy's own stream: every copy of ours goes there, none on the caller's */
    uint64_t *words;          /* ready[TP_STAGE_SLOTS], done[TP_STAGE_SLOTS], then the copy stream's tick */
    uint8_t *words_dev;       /* the same words as device work addresses them */
    uint64_t tick;            /* the last value queued to the tick word */
    uint8_t *slab, *slab_dev; /* two part sets: copies of part k + 1 overlap the transfer of part k */
    size_t slab_len;
    int stuck;         /* a copy timed out: it may still land, so the slab and stream are never reused or freed */
    uint64_t *retired; /* words of a session that failed: kept, as a stream may still wait on them */
} stage_lane_t;

/* One comm's state as a provider. */
typedef struct stage_comm {
    tp_comm_t *comm;
    int queued; /* its calls in the queue, under the stage lock */
} stage_comm_t;

/* One queued call: the caller's arguments, copied. */
typedef struct stage_call {
    stage_comm_t *sc;
    tp_coll_args_t a;
    size_t *counts; /* all_gatherv: the caller's counts (it may free them once the call returned) */
    stage_lane_t *lane;
    uint64_t seq;         /* its words are at seq % TP_STAGE_SLOTS and take the value seq */
    atomic_int cancelled; /* its comm went away before its stream reached it */
} stage_call_t;

/* The process's one proxy and queue: the transports are not thread-safe and calls on every comm must run in the
 * order they were made, as on every other rank, so one thread runs them all, first in first out. */
typedef struct stage {
    pthread_mutex_t lock;
    pthread_cond_t cond; /* the proxy waits for calls; callers for room, for the queue to drain */
    pthread_t thread;
    int running, stop;
    atomic_int active; /* a call was ever queued: host calls then wait for the queue to drain first */
    stage_call_t ring[TP_STAGE_SLOTS];
    uint64_t head, tail; /* the queued calls are seq head + 1 .. tail */
    tp_status_t failed;  /* sticky: every later call returns it */
    char why[256];
    stage_lane_t lanes[TP_STAGE_LANES];
    int n_lanes;
    int64_t timeout_ns; /* TP_STAGE_TIMEOUT: a copy of ours, or a comm's queue at its destroy */
    int64_t spin_ns;
    int fate_hooked;
} stage_t;

extern stage_t tp_stage;

/* "tp_all_reduce" and the like, for messages. */
extern const char *const tp_stage_call_names[TP_CALLS];

/* The staging provider (coll_staged.c). */
extern const tp_coll_ops_t tp_staged_coll_ops;

/* The proxy's side (coll_staged_proxy.c): runs one call whose stream reached it, in parts of TP_PART_BYTES. */
tp_status_t tp_stage_run(stage_call_t *c);
/* Polls a word device work writes until it is >= value (1), cancel is set or, with cancel, the job failed (0), or
 * deadline (0: none) passes (-1). */
int tp_stage_poll(const uint64_t *word, uint64_t value, const atomic_int *cancel, int64_t deadline_ns);
/* Whether every copy queued on the lane's stream landed within TP_STAGE_TIMEOUT (a tick queued behind them ran). */
int tp_stage_copies_landed(stage_lane_t *lane);

#endif
