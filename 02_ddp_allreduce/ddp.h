// ddp.h — data parallelism: every rank holds the whole model, trains on its own
// slice of the global batch, and averages the gradients before the update.
#pragma once
#include <stdlib.h>

#include "check.h"
#include "collectives.h"
#include "comm_cuda.h"
#include "model.h"
#include "ops.h"

typedef struct {
    Comm *comm;
    Group *group;       // the data-parallel group
    Algo algo;          // which all-reduce (host buffers)
    float *staging;     // host copy of the gradients when they live on a GPU
    // Set by the caller after ddp_init when the model is on a GPU and the
    // gradients should move GPU to GPU (NCCL or CUDA IPC, comm_cuda.h) instead of
    // through `staging`. NULL: host collectives with `algo`. Owned by the caller.
    GpuComm *gpu;
    // Tests only (test_ddp --staged): take the host-copy path on the CPU too, so that
    // a CPU machine runs the code a GPU run takes through `staging`.
    int stage_on_host;
    // Tests only (test_ddp --gpu-comm-on-host): take the GpuComm path on the CPU, `gpu`
    // being tests/gpu_comm_host.c's stand-in, whose collectives run on the host.
    int gpu_on_host;
} DDP;

void ddp_init(DDP *d, Comm *c, Group *g, Algo algo);
void ddp_free(DDP *d, GPT *g);
// Rank 0's weights to everyone, so all replicas start identical.
void ddp_broadcast_params(DDP *d, GPT *g);
// grads = (1/N) sum over ranks of grads: one all-reduce over the whole flat
// gradient buffer, after all micro-batches (gradient accumulation needs no
// extra communication).
void ddp_sync_grads(DDP *d, GPT *g);

// ddp_sync_grads with the gradients on the wire as bf16 (ddp_bf16.c): half the bytes.
// Each rank's gradients are rounded to bf16 (mixed-bf16's already are: nothing
// changes), all-reduced as bf16 (collectives.h: every addition in fp32, its result
// rounded to bf16: p - 1 roundings on a ring of p), then averaged. On a GPU the bf16
// copy goes through host memory. Not an exercise.
void ddp_sync_grads_bf16(DDP *d, GPT *g);

// Where the collectives find the buffers (given to the exercise, used by ddp.c):
// on the CPU the host collectives work on g->params / g->grads themselves; on a GPU
// they need a host copy (ddp_host_view, the collective, then ddp_back_to_device),
// unless the run has a GpuComm (ddp_on_gpu: d->gpu set), whose gpu_broadcast /
// gpu_allreduce take the device pointers (NCCL, or our ring over CUDA IPC: two PCIe
// copies of the whole model saved per step). The host copy is not charged to the
// context's ledger, which counts the device's memory.
static inline float *ddp_host_view(DDP *d, GPT *g, float *dev, int to_host) {
    Ctx *ctx = g->ctx;
    if (ctx->device == DEV_CPU && !d->stage_on_host) return dev;
    size_t bytes = g->n_params * sizeof(float);
    if (!d->staging) {
        d->staging = (float *)malloc(bytes);
        CHECK(d->staging, "out of host memory for the %zu-byte DDP staging buffer", bytes);
    }
    if (to_host) ctx->ops->to_host(ctx, d->staging, dev, bytes);
    return d->staging;
}
static inline void ddp_back_to_device(DDP *d, GPT *g, float *dev) {
    if (g->ctx->device != DEV_CPU || d->stage_on_host)
        g->ctx->ops->to_device(g->ctx, dev, d->staging, g->n_params * sizeof(float));
}
static inline int ddp_on_gpu(const DDP *d, const GPT *g) {
    return d->gpu && (g->ctx->device == DEV_CUDA || d->gpu_on_host);
}
