// gpu_comm_host.h — a stand-in for a GpuComm whose collectives run on the host.
//
// Linked into a test program, tests/gpu_comm_host.c's gpu_allreduce and gpu_broadcast
// replace the CUDA backend's (common/cuda_plugin.c defines those two weak): they run
// stage 02's host collectives over the Comm and Group the stand-in was made for. So a
// CPU machine runs, and grades, the code a GPU run takes through a GpuComm (DDP's
// ddp_on_gpu branch, with DDP.gpu_on_host). Any other GpuComm function still needs
// the CUDA backend.
#pragma once
#include "collectives.h"
#include "comm_cuda.h"

GpuComm *gpu_comm_on_host(Comm *c, Group *g);
void gpu_comm_on_host_free(GpuComm *gc);
