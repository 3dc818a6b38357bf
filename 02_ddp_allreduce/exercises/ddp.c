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
}

void ddp_free(DDP *d, GPT *g) {
    if (d->staging) {
        free(d->staging);
        ledger_release(&g->ctx->ledger, MEM_COMM, g->n_params * sizeof(float));
        d->staging = NULL;
    }
}

// Make every replica start from rank 0's weights.
// Hint: one broadcast (collectives.h) of g->params: g->n_params fp32 elements,
// root 0, algorithm ALGO_RD (a binomial tree). (On the CPU, g->params is host
// memory; the GPU version would stage through a host copy.)
void ddp_broadcast_params(DDP *d, GPT *g) {
    (void)d; (void)g;
    // TODO(exercise)
}

// Average the gradients over the group: after this call every rank's g->grads
// holds (1/N) * sum over ranks of their g->grads.
// Hints: one allreduce over the whole flat buffer g->grads (g->n_params fp32
// elements) with d->algo, then scale by 1/N: g->ctx->ops->scale(ctx, ptr, s, n).
// Why the mean and not the sum? Each rank's loss is already a mean over its own
// B*T tokens.
void ddp_sync_grads(DDP *d, GPT *g) {
    (void)d; (void)g;
    // TODO(exercise)
}
