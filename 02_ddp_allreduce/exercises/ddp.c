// exercises/ddp.c — YOUR DDP. `make grade-2 PART=ddp_broadcast` and
// `PART=ddp_sync_grads` grade it: N ranks with batch B must end with the weights of
// one process with batch N*B.
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

// Make every replica start from rank 0's weights.
// Hints: one broadcast (collectives.h) of g->params, g->n_params fp32 elements from
// root 0, with ALGO_RD (a binomial tree), or ALGO_MPI when d->algo is ALGO_MPI (the
// library's own). The buffer: ddp_host_view(d, g, g->params, 1), then
// ddp_back_to_device (ddp.h); when ddp_on_gpu, gpu_broadcast(d->gpu, g->params,
// g->n_params, DT_F32, 0) instead.
void ddp_broadcast_params(DDP *d, GPT *g) {
    (void)d; (void)g;
    // TODO(exercise)
}

// Average the gradients over the group: after this call every rank's g->grads
// holds (1/N) * sum over ranks of their g->grads.
// Hints: one allreduce over the whole flat buffer (g->n_params fp32 elements) with
// d->algo, on ddp_host_view(d, g, g->grads, 1) then ddp_back_to_device (or, when
// ddp_on_gpu, gpu_allreduce(d->gpu, g->grads, g->n_params, DT_F32)); then scale
// g->grads by 1/N where they live: g->ctx->ops->scale(ctx, ptr, s, n).
// Why the mean and not the sum? Each rank's loss is already a mean over its own
// B*T tokens.
// The grader runs on the CPU: its --staged checks take the host-copy path a GPU
// run takes (so a missing ddp_back_to_device fails); the ddp_on_gpu branch runs only
// on a GPU (scripts/gpu_check.sh), and a host loop in place of ops->scale would
// read device memory there: use the ops.
void ddp_sync_grads(DDP *d, GPT *g) {
    (void)d; (void)g;
    // TODO(exercise)
}
