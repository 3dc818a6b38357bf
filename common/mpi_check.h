// mpi_check.h — MPI_CHECK, the MPI member of check.h's error-check family.
// Included only by code built with mpicc (the Makefile builds MPI parts when it
// finds mpicc), so CPU-only code never needs mpi.h.
#pragma once
#include <mpi.h>

#include "check.h"

#define MPI_CHECK(call)                                                           \
    do {                                                                          \
        int mpi_rc_ = (call);                                                     \
        if (mpi_rc_ != MPI_SUCCESS) {                                             \
            char mpi_msg_[MPI_MAX_ERROR_STRING];                                  \
            int mpi_len_ = 0;                                                     \
            MPI_Error_string(mpi_rc_, mpi_msg_, &mpi_len_);                       \
            die_at(__FILE__, __LINE__, "MPI error %d in %s: %s", mpi_rc_, #call,  \
                   mpi_msg_);                                                     \
        }                                                                         \
    } while (0)
