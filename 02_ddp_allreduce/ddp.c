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
    *d = (DDP){.comm = c, .group = g, .algo = algo};  // no staging, no GpuComm, not staged
}

void ddp_free(DDP *d, GPT *g) {
    (void)g;
    free(d->staging);
    d->staging = NULL;
}

void ddp_broadcast_params(DDP *d, GPT *g) {
    if (ddp_on_gpu(d, g)) {
        gpu_broadcast(d->gpu, g->params, g->n_params, DT_F32, 0);
        return;
    }
    float *p = ddp_host_view(d, g, g->params, 1);
    broadcast(d->comm, d->group, p, g->n_params, DT_F32, 0, d->algo == ALGO_MPI ? ALGO_MPI : ALGO_RD);
    ddp_back_to_device(d, g, g->params);
}

void ddp_sync_grads(DDP *d, GPT *g) {
    if (ddp_on_gpu(d, g)) {
        gpu_allreduce(d->gpu, g->grads, g->n_params, DT_F32);
    } else {
        float *grads = ddp_host_view(d, g, g->grads, 1);
        allreduce(d->comm, d->group, grads, g->n_params, DT_F32, d->algo);
        ddp_back_to_device(d, g, g->grads);
    }
    g->ctx->ops->scale(g->ctx, g->grads, 1.0f / d->group->size, g->n_params);
}
