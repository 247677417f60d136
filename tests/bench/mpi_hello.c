/* mpi_hello: MPI_Init, one barrier, MPI_Finalize: what an MPI job pays before its first collective. */
#include <mpi.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Finalize();
    return 0;
}
