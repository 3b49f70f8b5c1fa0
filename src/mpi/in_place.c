/* MPI_IN_PLACE is a macro whose value differs between MPI libraries (OpenMPI: (void *)1, MPICH: (void *)-1);
 * the Rust bindings do not export it, so it is read here, compiled against the library's own mpi.h. */
#include <mpi.h>

void *collbench_mpi_in_place(void) { return MPI_IN_PLACE; }
