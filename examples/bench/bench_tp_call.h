/* bench_tp_call.h: one libtp collective by its index in op_names, as tp-bench and ab_bench call it. */
#ifndef BENCH_TP_CALL_H
#define BENCH_TP_CALL_H

#include <stddef.h>

#include <tp.h>

#include "bench_schedule.h"

/* One call of op (an index of op_names) on bytes per rank of f32 elements; sendrecv with rank ^ 1, or itself. */
static inline tp_status_t bench_tp_call(tp_comm_t *w, int op, void *send, void *recv, size_t bytes)
{
    int me = tp_comm_rank(w), n = tp_comm_size(w);
    size_t count = bytes / 4;
    switch (op) {
    case BENCH_ALL_REDUCE: return tp_all_reduce(w, send, recv, count, TP_F32, TP_SUM, NULL);
    case BENCH_ALL_GATHER: return tp_all_gather(w, send, recv, count, TP_F32, NULL);
    case BENCH_REDUCE_SCATTER: return tp_reduce_scatter(w, send, recv, count, TP_F32, TP_SUM, NULL);
    case BENCH_BROADCAST: return tp_broadcast(w, send, count, TP_F32, 0, NULL);
    case BENCH_SENDRECV: return tp_exchange(w, send, recv, count, TP_F32, (me ^ 1) < n ? me ^ 1 : me, NULL);
    case BENCH_ALL_TO_ALL: return tp_all_to_all(w, send, recv, count / (size_t)n, TP_F32, NULL);
    }
    return TP_ERR_INVALID;
}

#endif
