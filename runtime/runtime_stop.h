/* runtime_stop.h: what a waiting call needs to know from outside it: the job failed (TP_ERRORS=return), or peers
 * called tp_finalize so that the call can never complete (the stop word, TP_STOPPED); and the fd that wakes it. */
#ifndef RUNTIME_STOP_H
#define RUNTIME_STOP_H

#include <stdint.h>

#include "runtime_world.h"

/* Where a waiting call is: its comm's collective index, or its per-peer indexes for point-to-point calls. */
typedef struct tp_stop_call {
    const char *name; /* "all_reduce", "recv", ... (tp.h's names without tp_) */
    uint64_t index;   /* collectives: the comm's call index; p2p: the send index (or recv index for recv) */
    int peer;         /* p2p: the comm rank of the other side; -1 for collectives */
    int sends, recvs; /* p2p: it sends to / receives from peer */
    uint64_t send_index, recv_index;
} tp_stop_call_t;

/* The fd a waiting call polls beside its transports' (readable when there is news); -1 before tp_stop_open. */
int tp_stop_wake_fd(void);
tp_status_t tp_stop_open(void);
void tp_stop_close(void);
/* Wakes every waiting call (the job failed: the fd stays readable). */
void tp_stop_wake_failed(void);
/*
 * Records finalize news and wakes waiting calls: for each rank that called tp_finalize, a line "r RANK" then the
 * call counts it sent with its BYE (tp_coll_stop_table's lines). Returns -1 when news is malformed (nothing kept).
 */
int tp_stop_news(const char *news, int size);
/* Rank 0: rank's BYE table (only its count lines: a rank cannot speak for others) becomes news here, and waits to
 * be relayed to the ranks still in their calls; -1 when out of memory (they wait for the job's end instead). */
int tp_stop_relay_add(int rank, const char *bye_table, int size);
/* Rank 0: the news not relayed yet, in tp_stop_news's form (*len bytes, malloc'd); NULL when none. */
char *tp_stop_relay_take(size_t *len);
/* Changes each time finalize news arrives: a call checks again only then. */
uint64_t tp_stop_gen(void);
/* TP_OK while the call can still complete, else TP_STOPPED with the message set as this thread's last error. */
tp_status_t tp_stop_check(const tp_comm_t *comm, const tp_stop_call_t *call);

#endif
