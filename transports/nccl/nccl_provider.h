/* nccl_provider.h: the NCCL collective provider's per-comm state, shared by its communicator and call files. */
#ifndef NCCL_PROVIDER_H
#define NCCL_PROVIDER_H

#include "nccl_lib.h"

typedef struct nccl_state {
    tp_comm_t *comm;
    int rank, size;
    const nccl_lib_t *lib; /* set once this comm decided to use NCCL */
    int declined;          /* every rank agreed NCCL is absent: CUDA buffers go to the next provider */
    tp_status_t failed;    /* sticky: init or a call failed, or fate aborted the communicators */
    nccl_comm_t nc;        /* the comm's communicator, made by its first collective on CUDA memory */
    nccl_comm_t *pairs;    /* by comm rank: two-rank communicators of point-to-point calls made before nc */
    signed char *pair_declined;
    struct nccl_hello *hellos; /* every rank's hello, kept when the comm declined: its pairs decide without a call */
    int nccl_order;   /* TP_NCCL_ORDER=nccl: NCCL's own sums, max and min */
    double timeout_s; /* bound on init and on a call's enqueue (the comm's boot_timeout) */
    void *scratch;
    size_t scratch_len;
    const tp_device_ops_t *scratch_dev;
    tp_device_event_t *scratch_done; /* the last call that used scratch, on its stream */
    void *scratch_stream;            /* that native stream: a call on the same one is ordered after it already */
    struct nccl_state *next;         /* the list fate walks */
} nccl_state_t;

/* The comm's communicator, made now if this is its first collective on CUDA memory (every rank calls).
 * TP_COLL_DECLINED (and st->declined) when the ranks' hellos show NCCL cannot take them: absent on one, or two on
 * one GPU. */
tp_status_t nccl_ready(nccl_state_t *st, const char *fn, const tp_coll_args_t *a);
/* The communicator to reach a->peer with, made for the pair now when the comm has none yet (both sides call). */
tp_status_t nccl_pair(nccl_state_t *st, const char *fn, const tp_coll_args_t *a, nccl_comm_t *nc, int *nc_peer);
/* After an enqueue or ncclGroupEnd returned r on nc: waits (bounded) while nc is in progress, checks its state. */
tp_status_t nccl_check(nccl_state_t *st, const char *fn, nccl_comm_t nc, nccl_result_t r);
/* At least len bytes of device scratch, ordered after its last use: queue the call's work after this. */
tp_status_t nccl_scratch(nccl_state_t *st, const char *fn, const tp_coll_args_t *a, size_t len, void **out);
/* Marks scratch used by the work queued so far on the call's stream. */
tp_status_t nccl_scratch_done(nccl_state_t *st, const tp_coll_args_t *a);
/* Held around every NCCL call: fate's abort waits for the one in progress (NCCL forbids an abort during one). */
void nccl_lock_calls(void);
void nccl_unlock_calls(void);
/* The native stream (CUstream) of a call's stream. */
void *nccl_native_stream(const tp_coll_args_t *a);

extern const tp_coll_ops_t tp_nccl_coll_ops;

tp_status_t nccl_comm_create(tp_comm_t *comm, void **state);
void nccl_comm_destroy(void *state);

#endif
