// exercises/ddp.c — YOUR DDP. `make grade-2 PART=ddp_broadcast` and
// `PART=ddp_sync_grads` grade it: N ranks with batch B must end with the weights of
// one process with batch N*B.
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

// Given: where the collectives find the buffers. On the CPU the host collectives
// work on g->params / g->grads themselves; on a GPU they need a host copy
// (host_view, then back_to_device after the collective) unless the run has a
// GpuComm (on_gpu: d->gpu set), whose gpu_broadcast / gpu_allreduce (comm_cuda.h)
// take the device pointers.
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

static int on_gpu(const DDP *d, const GPT *g) { return d->gpu && g->ctx->device == DEV_CUDA; }

// Make every replica start from rank 0's weights.
// Hints: one broadcast (collectives.h) of g->params, g->n_params fp32 elements from
// root 0, with ALGO_RD (a binomial tree), or ALGO_MPI when d->algo is ALGO_MPI (the
// library's own). The buffer: host_view(d, g, g->params, 1), then back_to_device;
// when on_gpu, gpu_broadcast(d->gpu, g->params, g->n_params, DT_F32, 0) instead.
void ddp_broadcast_params(DDP *d, GPT *g) {
    (void)d; (void)g; (void)host_view; (void)back_to_device; (void)on_gpu;
    // TODO(exercise)
}

// Average the gradients over the group: after this call every rank's g->grads
// holds (1/N) * sum over ranks of their g->grads.
// Hints: one allreduce over the whole flat buffer (g->n_params fp32 elements) with
// d->algo, on host_view(d, g, g->grads, 1) then back_to_device (or, when on_gpu,
// gpu_allreduce(d->gpu, g->grads, g->n_params, DT_F32)); then scale g->grads by 1/N
// where they live: g->ctx->ops->scale(ctx, ptr, s, n).
// Why the mean and not the sum? Each rank's loss is already a mean over its own
// B*T tokens.
void ddp_sync_grads(DDP *d, GPT *g) {
    (void)d; (void)g;
    // TODO(exercise)
}
