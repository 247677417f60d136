/* mpi_spin: an MPI rank that reports "ready rank R of N pid P", then loops in MPI_Barrier or busy computes. */
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    int rank, size;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    int barrier = argc > 1 && strcmp(argv[1], "barrier") == 0;
    if (argc > 1 && !barrier && strcmp(argv[1], "compute") != 0) {
        if (rank == 0) fprintf(stderr, "usage: mpi_spin [barrier|compute]\n");
        MPI_Finalize();
        return 2;
    }
    MPI_Barrier(MPI_COMM_WORLD); /* every rank is wired up before any says ready */
    printf("ready rank %d of %d pid %d\n", rank, size, (int)getpid());
    fflush(stdout);
    if (barrier)
        for (;;) MPI_Barrier(MPI_COMM_WORLD);
    volatile unsigned long spins = 0;
    for (;;) spins++; /* the launcher alone must end this rank */
}
