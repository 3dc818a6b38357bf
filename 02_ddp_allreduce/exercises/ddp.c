// exercises/ddp.c — YOUR DDP. `make grade-2 PART=ddp_broadcast` and
// `PART=ddp_sync_grads` grade it: N ranks with batch B must end with the weights of
// one process with batch N*B.
// Stuck on one? make hint-2 PART=<part>   (tier 1 a nudge; TIER=2, 3 more)
//
// Where the buffers live (../ddp.h): g->params and g->grads are flat buffers of
// g->n_params fp32 elements in the device's memory. The host collectives
// (collectives.h) work on host memory: ddp_host_view(d, g, dev, to_host) gives a host
// view of a device buffer (the buffer itself on the CPU; a staging copy on a GPU, or
// with --staged), and ddp_back_to_device(d, g, dev) writes the view back. When the
// run has a GPU communicator (ddp_on_gpu(d, g)), gpu_broadcast / gpu_allreduce work
// on the device pointers instead. Work on device memory goes through the backend,
// g->ctx->ops (ops.h: scale(ctx, ptr, s, n) and the rest).
//
// What you may use: broadcast and allreduce (collectives.h, with an Algo), the three
// helpers above, gpu_broadcast / gpu_allreduce, g->ctx->ops. d->comm and d->group
// are the communicator and the group DDP runs over; d->algo the --algo the run asked
// for.
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

// ddp_broadcast_params: every rank of the group ends with the weights of the group's
// rank 0, bit for bit, wherever the weights live (a GPU run's copy included).
// Checked (tests/test_ddp.c, ddp.broadcast_params.*) on 2-5 ranks, on subgroups (where
// rank 0 is the group's, not the world's), through the host copy a GPU run takes
// (--staged) and through a GpuComm (.gpucomm), and by ddp_train with --algo ring.
// Pitfalls: not every algorithm has every collective (collective_has, collectives.h:
// the ring has no broadcast); a host view that never saw the device's weights, or
// whose result never goes back to them.
void ddp_broadcast_params(DDP *d, GPT *g) {
    (void)d; (void)g;
    // TODO(exercise)
}

// ddp_sync_grads: after this call every rank's g->grads holds (1/N) * the sum over the
// group's N ranks of their g->grads (N the group's size: DDP may run on a subgroup of
// a mesh), on the device, with one collective over the whole flat buffer, by the
// algorithm the run asked for (its bytes are counted and must be that algorithm's).
// Why the mean and not the sum? Each rank's loss is already a mean over its own B*T
// tokens.
// Checked (ddp.mean_gradient.*, ddp.equals_single_process.*): the gradient itself
// against one process on all N*B rows (within 1e-5), on subgroups, --staged; five
// AdamW steps against the single process, with one all-reduce a step of the
// algorithm's bytes; and the ddp_on_gpu branch, on the CPU, through a stand-in GpuComm
// whose collectives run on the host (ddp.*.gpucomm, tests/gpu_comm_host.h). On a real
// GPU a host loop over g->grads would read device memory.
// Pitfalls: the sum without the mean (AdamW and clipping hide it from the weights:
// the gradient is compared directly); the mean over the world instead of the group;
// a fixed algorithm; results left in the host copy.
void ddp_sync_grads(DDP *d, GPT *g) {
    (void)d; (void)g;
    // TODO(exercise)
}
