// ddp.c — DDP's two collectives: a broadcast of the weights at the start, an
// all-reduce of the gradients every step.
//
// Why the mean and not the sum: each rank's loss is the mean over its own B*T
// tokens, so (1/N) sum_r grad_r is the gradient of the mean over all N*B*T
// tokens — exactly what one process with batch N*B computes. The flat gradient
// buffer makes this one collective call, not one per tensor.
#include <stdlib.h>

#include "check.h"
#include "ddp.h"
#include "ops.h"

void ddp_init(DDP *d, Comm *c, Group *g, Algo algo) {
    d->comm = c;
    d->group = g;
    d->algo = algo;
    d->staging = NULL;
    d->gpu = NULL;
}

void ddp_free(DDP *d, GPT *g) {
    (void)g;
    free(d->staging);
    d->staging = NULL;
}

// The host buffer the collectives work on: the gradients themselves on the CPU;
// on a GPU without a GpuComm, a host copy (the host transports move host memory).
// Not charged to the context's ledger, which counts the device's memory.
static float *host_view(DDP *d, GPT *g, float *dev, int to_host) {
    Ctx *ctx = g->ctx;
    if (ctx->device == DEV_CPU) return dev;
    size_t bytes = g->n_params * sizeof(float);
    if (!d->staging) {
        d->staging = malloc(bytes);
        CHECK(d->staging, "out of host memory for the %zu-byte DDP staging buffer", bytes);
    }
    if (to_host) ctx->ops->to_host(ctx, d->staging, dev, bytes);
    return d->staging;
}

static void back_to_device(DDP *d, GPT *g, float *dev) {
    if (g->ctx->device != DEV_CPU)
        g->ctx->ops->to_device(g->ctx, dev, d->staging, g->n_params * sizeof(float));
}

// With a GpuComm the buffers never leave the GPU: NCCL, or our ring over CUDA
// IPC (comm_cuda.h), works on the device pointers directly. That saves two PCIe
// copies of the whole model per step, and the host memory to hold them.
static int on_gpu(const DDP *d, const GPT *g) { return d->gpu && g->ctx->device == DEV_CUDA; }

void ddp_broadcast_params(DDP *d, GPT *g) {
    if (on_gpu(d, g)) {
        gpu_broadcast(d->gpu, g->params, g->n_params, DT_F32, 0);
        return;
    }
    float *p = host_view(d, g, g->params, 1);
    broadcast(d->comm, d->group, p, g->n_params, DT_F32, 0, d->algo == ALGO_MPI ? ALGO_MPI : ALGO_RD);
    back_to_device(d, g, g->params);
}

void ddp_sync_grads(DDP *d, GPT *g) {
    if (on_gpu(d, g)) {
        gpu_allreduce(d->gpu, g->grads, g->n_params, DT_F32);
    } else {
        float *grads = host_view(d, g, g->grads, 1);
        allreduce(d->comm, d->group, grads, g->n_params, DT_F32, d->algo);
        back_to_device(d, g, g->grads);
    }
    g->ctx->ops->scale(g->ctx, g->grads, 1.0f / d->group->size, g->n_params);
}
