/* coll_internal.h: the collectives layer's per-comm state and the helpers its algorithms share. */
#ifndef COLL_INTERNAL_H
#define COLL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "coll_frame.h"
#include "runtime_stop.h"
#include "runtime_world.h"

#define COLL_WINDOW 2            /* parts in flight per peer into scratch slots */
#define COLL_SMALL_BYTES 65536   /* all_reduce: (size - 1) * bytes up to this goes in one round */
#define COLL_XFERS_PER_PEER (COLL_WINDOW + 4)

/* The host engine's state on one comm (its comm_state as a collective provider). */
typedef struct coll_state {
    tp_comm_t *comm;
    tp_xfer_t *pool; /* transfers of the call in progress */
    int pool_len, pool_used;
    uint8_t *scratch; /* size * COLL_WINDOW slots of part_bytes, by comm rank; untouched until needed */
    size_t slot_bytes;
    uint64_t *send_seq, *recv_seq; /* point-to-point calls, by comm rank */
    const void **srcs;             /* per-call tables, by comm rank */
    const uint8_t **pieces;
    void **sbuf, **rbuf; /* the callers' tables for coll_pairwise */
    size_t *slen, *rlen;
    tp_xfer_t **xa, **xb;
    size_t *next;
    struct coll_hier *hier; /* the comm's hosts (coll_hier.c) */
    int *order, *place;     /* the shared-CPU dissemination ring (coll_dissem_ring); NULL: rank order */
    struct coll_pair_class *pair_ways; /* 2 ranks: which way each class of large calls goes (coll_pair_way.c) */
} coll_state_t;

/* The bytes of cs's scratch: COLL_WINDOW slots of part_bytes per comm rank. */
static inline size_t coll_scratch_bytes(const coll_state_t *cs)
{
    return (size_t)cs->comm->size * COLL_WINDOW * cs->slot_bytes;
}

typedef struct coll_call {
    tp_comm_t *comm;
    coll_state_t *cs;
    const tp_device_ops_t *dev; /* owns the call's buffers: every copy and reduction on them goes through it */
    tp_frame_id_t id;
    size_t part_bytes;
    tp_stop_call_t stop; /* where it waits, for the stop word */
    uint64_t stop_gen;   /* the finalize news it has checked against */
} coll_call_t;

/* Starts a call on the buffers of device dev: identity, sequence number, empty pool. */
void coll_begin(coll_call_t *c, coll_state_t *cs, const tp_device_ops_t *dev, tp_coll_kind_t coll, tp_dtype_t dtype,
                tp_op_t op, uint64_t count, int root);
/* A transfer to or from comm rank peer (send: all of buf ready unless the caller lowers ready). */
tp_xfer_t *coll_xfer(coll_call_t *c, int peer, int is_send, uint8_t step, void *buf, size_t len,
                     uint32_t first_part, size_t part_bytes);
tp_status_t coll_post(coll_call_t *c, tp_xfer_t *x);
/* Waits for the transports to move something; a failure (TP_ERRORS=return) or peers' finalize that this call can
 * never complete after (TP_STOPPED) ends the wait. */
tp_status_t coll_progress(coll_call_t *c);
/* Waits until every transfer of the call is complete. */
tp_status_t coll_wait_all(coll_call_t *c);
/* Ends a failed call: drops its transfers and tells the peers when they disagree on it. */
tp_status_t coll_fail(coll_call_t *c, tp_status_t s);
uint8_t *coll_slot(coll_call_t *c, int peer, int k);

/*
 * Every peer p != me at once (or only peer `only` when it is >= 0): sends slen[p] bytes from sbuf[p] and receives
 * rlen[p] bytes into rbuf[p]. With in_place, rbuf[p] == sbuf[p] and received parts wait in scratch until the
 * same part has gone out. With mirror (not in place), the send to coll_mirror_peer's peer also copies its bytes
 * there as they go out.
 */
tp_status_t coll_pairwise(coll_call_t *c, int only, void *const *sbuf, const size_t *slen, void *const *rbuf,
                          const size_t *rlen, int in_place, void *mirror);
/* The lowest comm peer whose transport copies what it sends into a mirror as well (TP_TRANSPORT_MIRROR) in a call on
 * the host's buffers; -1 when none. */
int coll_mirror_peer(coll_call_t *c);

/*
 * A dissemination call (coll_algos.c): with blocks, rank p's bytes are lens[p] at blocks[p], consecutive in rank
 * order, and every rank ends with all of them (this rank's own sent from own when not NULL, else from its block);
 * without, the root's bytes (none for a barrier) reach every rank's buf.
 */
typedef struct coll_dissem {
    void *const *blocks;
    const size_t *lens;
    const void *own;
    void *buf;
    size_t bytes;
    int root;
    /* The ring's order (coll_dissem_ring): order[v] is the comm rank at place v, place[r] the place of rank r, and
     * blocks and lens go by place; NULL: rank order. Not with a root. */
    const int *order, *place;
} coll_dissem_t;
tp_status_t coll_dissem(coll_call_t *c, const coll_dissem_t *m);
/* The dissemination ring for a comm whose ranks share CPUs: where every rank is bound to one CPU and some CPU holds
 * several, ranks that share one are spread around the ring (block 0,1 | 2,3 becomes 0,2,1,3), so the first round
 * crosses CPUs and the last stays on one. *order and *place stay NULL (rank order) otherwise. */
tp_status_t coll_dissem_ring(const tp_comm_t *comm, int **order, int **place);

/* Algorithms (called with validated arguments, size > 1). */
tp_status_t coll_barrier(coll_call_t *c);
tp_status_t coll_broadcast(coll_call_t *c, void *buf, size_t bytes, int root);
tp_status_t coll_all_reduce(coll_call_t *c, const void *send, void *recv, size_t count);
tp_status_t coll_reduce_scatter(coll_call_t *c, const void *send, void *recv, size_t count);

int coll_overlap(const void *a, size_t alen, const void *b, size_t blen);

/* A vector cut into slices: slice j has base + (j < rem) elements; pe elements make a part. */
typedef struct slices {
    size_t base, rem, es, pe;
} slices_t;
static inline size_t slice_count(const slices_t *sl, int j) { return sl->base + ((size_t)j < sl->rem); }
static inline size_t slice_first(const slices_t *sl, int j)
{
    return sl->base * (size_t)j + ((size_t)j < sl->rem ? (size_t)j : sl->rem);
}
static inline size_t slice_parts(size_t cnt, size_t pe) { return cnt == 0 ? 1 : (cnt + pe - 1) / pe; }
static inline size_t slice_part_elems(size_t cnt, size_t pe, size_t k)
{
    size_t left = cnt - (k * pe < cnt ? k * pe : cnt);
    return left < pe ? left : pe;
}
void coll_slices_init(slices_t *sl, size_t count, int n, size_t es, size_t part_bytes);

/* The way of a 2-rank all_reduce or reduce_scatter over a lending transport (coll_pair_way.c), per class of call
 * size (the whole vector's bytes): streamed (the peer reduces each piece as it lands, and the reduced slice goes
 * back as it grows) or lent (the peer reads each piece whole from its sender's buffer, x->lend). */
enum { COLL_PAIR_STREAMED = 0, COLL_PAIR_LENT = 1 };
#define COLL_PAIR_MIN         524288 /* calls over fewer bytes (the whole vector) are streamed */
#define COLL_PAIR_CLASSES     8
#define COLL_PAIR_WINDOW      5
#define COLL_PAIR_EXPLORE     (4 * COLL_PAIR_WINDOW) /* a class's first calls: WINDOW timed each way */
#define COLL_PAIR_PROBE_FIRST 32  /* the first probe of an epoch, this many calls into it; then twice as far ... */
#define COLL_PAIR_PROBE_MAX   512 /* ... up to this, and every this many after */
#define COLL_PAIR_MARGIN_PCT  5
typedef struct coll_pair_class {
    uint32_t ns_kib[2][COLL_PAIR_WINDOW]; /* the leader's, by way: its last timed calls, ns per KiB of vector */
    uint32_t have[2], next[2];
    uint64_t count;     /* calls of the class so far */
    int last;           /* the way its last call went */
    int best;           /* the way calls go between probes: the leader's choice, as the follower last saw it */
    int pending;        /* the leader's: a change decided, waiting for a call between probes */
    uint64_t epoch;     /* the call where the way last changed (0: none yet): probes count from there */
    uint64_t lent;      /* calls lent both ways */
    int no_lend;        /* none was by the end of the exploration: streamed from then on */
    int reduce_scatter; /* which table it is in, and its smallest vector (set with the table): for the log */
    size_t min_bytes;
} coll_pair_class_t;
/* The class of a call over a vector of bytes (both ranks: the same); NULL: streamed, untimed. */
coll_pair_class_t *coll_pair_class(coll_state_t *cs, int reduce_scatter, size_t bytes);
/* Whether call o of an epoch probes the other way. */
int coll_pair_probes(uint64_t o);
/* The way this call goes (leads: the lower rank), and whether the leader counts its time (sample). */
int coll_pair_way(coll_pair_class_t *c, int leads, int *sample);
/* A window's new time for way; 1 when it made the leader decide to change its best way (pending). */
int coll_pair_timed(coll_pair_class_t *c, int way, uint32_t ns_per_kib);
/* After a call that went way in ns over a vector of bytes, sent and got this rank's piece and the peer's: the leader
 * keeps the time, the follower what it saw of the leader's way. */
void coll_pair_done(coll_pair_class_t *c, int leads, int way, int sample, int64_t ns, size_t bytes,
                    const tp_xfer_t *sent, const tp_xfer_t *got);
/* A debug note per class used, at the comm's end: calls, how many lent, the way they settled on. */
void coll_pair_report(const coll_state_t *cs, int rank);
#define COLL_REDUCE_CHUNK 16384 /* elements reduced at once while a part is still arriving */
/* all_reduce's small-call rule (every vector to every rank), the same on every rank and for both engines. */
int coll_all_reduce_is_small(coll_call_t *c, size_t count);

/*
 * Hierarchical calls (coll_hier*.c) on a comm over several hosts, TP_COLL_HIER: whether this call goes that way
 * (the same answer on every rank), and the algorithms.
 */
int coll_hier_wanted(coll_call_t *c, size_t bytes);
tp_status_t coll_hier_gather(coll_call_t *c, void *const *blocks, const size_t *lens);
tp_status_t coll_hier_all_reduce(coll_call_t *c, const void *send, void *recv, size_t count);
tp_status_t coll_hier_reduce_scatter(coll_call_t *c, const void *send, void *recv, size_t count);
tp_status_t coll_hier_broadcast(coll_call_t *c, void *buf, size_t bytes, int root);
/* Groups a comm's ranks by host (every rank derives the same table from the records); NULL when out of memory. */
struct coll_hier *coll_hier_find(tp_comm_t *comm);
void coll_hier_free(struct coll_hier *h);

/* The host engine's side of tp_comm_split: every rank's (color, key) into all, in comm rank order; *seq the call's. */
tp_status_t coll_split_exchange(coll_state_t *cs, int32_t *all, uint64_t *seq);

#endif
