/* bench_mpi_call.h: one MPI collective by its index in op_names, as mpi_coll_bench and ab_bench call it. */
#ifndef BENCH_MPI_CALL_H
#define BENCH_MPI_CALL_H

#include <stddef.h>

#include <mpi.h>

/* One call of op (an index of op_names) on bytes per rank of floats in MPI_COMM_WORLD; sendrecv with rank ^ 1, or
 * itself. Returns MPI's status. */
static inline int bench_mpi_call(int op, float *send, float *recv, size_t bytes, int me, int n)
{
    int count = (int)(bytes / 4), peer = (me ^ 1) < n ? me ^ 1 : me;
    MPI_Comm w = MPI_COMM_WORLD;
    switch (op) {
    case 0: return MPI_Allreduce(send, recv, count, MPI_FLOAT, MPI_SUM, w);
    case 1: return MPI_Allgather(send, count, MPI_FLOAT, recv, count, MPI_FLOAT, w);
    case 2: return MPI_Reduce_scatter_block(send, recv, count, MPI_FLOAT, MPI_SUM, w);
    case 3: return MPI_Bcast(send, count, MPI_FLOAT, 0, w);
    case 4: return MPI_Sendrecv(send, count, MPI_FLOAT, peer, 0, recv, count, MPI_FLOAT, peer, 0, w, MPI_STATUS_IGNORE);
    case 5: return MPI_Alltoall(send, count / n, MPI_FLOAT, recv, count / n, MPI_FLOAT, w);
    }
    return MPI_ERR_OP;
}

#endif
