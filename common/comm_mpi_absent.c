// comm_mpi_absent.c — the MPI hooks of a build without mpicc.
#include "check.h"
#include "comm_internal.h"
int mpi_launch_init(int *rank, int *size) { (void)rank; (void)size; return 0; }
void mpi_launch_finalize(void) {}
void mpi_group_comm(Comm *c, Group *g) { (void)c; (void)g; }
void mpi_transport_init(Comm *c) {
    (void)c;
    DIE("--transport mpi: this binary was built without MPI (mpicc was not found at build time)");
}
