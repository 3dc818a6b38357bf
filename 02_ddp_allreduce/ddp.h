// ddp.h — data parallelism: every rank holds the whole model, trains on its own
// slice of the global batch, and averages the gradients before the update.
#pragma once
#include "collectives.h"
#include "comm_cuda.h"
#include "model.h"

typedef struct {
    Comm *comm;
    Group *group;       // the data-parallel group
    Algo algo;          // which all-reduce (host buffers)
    float *staging;     // host copy of the gradients when they live on a GPU
    // Set by the caller after ddp_init when the model is on a GPU and the
    // gradients should move GPU to GPU (NCCL or CUDA IPC, comm_cuda.h) instead of
    // through `staging`. NULL: host collectives with `algo`. Owned by the caller.
    GpuComm *gpu;
} DDP;

void ddp_init(DDP *d, Comm *c, Group *g, Algo algo);
void ddp_free(DDP *d, GPT *g);
// Rank 0's weights to everyone, so all replicas start identical.
void ddp_broadcast_params(DDP *d, GPT *g);
// grads = (1/N) sum over ranks of grads: one all-reduce over the whole flat
// gradient buffer, after all micro-batches (gradient accumulation needs no
// extra communication).
void ddp_sync_grads(DDP *d, GPT *g);
