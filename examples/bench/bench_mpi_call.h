/* bench_mpi_call.h: one MPI collective by its index in op_names, as mpi_coll_bench and ab_bench call it. */
#ifndef BENCH_MPI_CALL_H
#define BENCH_MPI_CALL_H

#include <stddef.h>

#include <mpi.h>

#include "bench_schedule.h"

/* One call of op (an index of op_names) on bytes per rank of floats in MPI_COMM_WORLD; sendrecv with rank ^ 1, or
 * itself. Returns MPI's status. */
static inline int bench_mpi_call(int op, float *send, float *recv, size_t bytes, int me, int n)
{
    int count = (int)(bytes / 4), peer = (me ^ 1) < n ? me ^ 1 : me;
    MPI_Comm w = MPI_COMM_WORLD;
    switch (op) {
    case BENCH_ALL_REDUCE: return MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, w);
    case BENCH_ALL_GATHER: return MPI_Allgather(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, w);
    case BENCH_REDUCE_SCATTER: return MPI_Reduce_scatter_block(send, recv, count, MPI_FLOAT, MPI_SUM, w);
    case BENCH_BROADCAST: return MPI_Bcast(send, count, MPI_FLOAT, 0, w);
    case BENCH_SENDRECV:
        return MPI_Sendrecv(send, count, MPI_FLOAT, peer, 0, recv, count, MPI_FLOAT, peer, 0, w, MPI_STATUS_IGNORE);
    case BENCH_ALL_TO_ALL: return MPI_Alltoall(send, count / n, MPI_FLOAT, recv, count / n, MPI_FLOAT, w);
    }
    return MPI_ERR_OP;
}

#endif
