// ddp_bf16.c — data parallelism's all-reduce with the gradients in bf16 on the wire
// (ddp_train --grad-comm; 06_mixed_precision/README.md weighs its error).
//
// Mixed precision computes the gradients in bf16 already, so sending them as fp32
// moves 16 zero bits per value. Sending bf16 halves the bytes, which on a
// bandwidth-bound all-reduce halves its time. What it costs: the sum is rounded to
// bf16 after every addition of the ring, p - 1 times on p ranks, where an fp32
// all-reduce of the same values would round once at the end (or never).
// build/mp_comm_error measures that error against the world size.
#include <stdlib.h>

#include "check.h"
#include "ddp.h"
#include "ops.h"

void ddp_sync_grads_bf16(DDP *d, GPT *g) {
    Ctx *ctx = g->ctx;
    size_t n = g->n_params;
    int cpu = ctx->device == DEV_CPU;  // the gradients are host memory already
    float *host = cpu ? g->grads : malloc(n * sizeof(float));
    // The bf16 copy: on the CPU the device's memory, charged to the ledger (MEM_COMM);
    // on a GPU a host buffer, as the fp32 copy beside it, which the GPU's ledger does
    // not count.
    uint16_t *wire = cpu ? mem_alloc(ctx, MEM_COMM, n * sizeof(uint16_t))
                         : malloc(n * sizeof(uint16_t));
    CHECK(host && wire, "out of host memory for %zu gradients in bf16", n);
    if (!cpu) ctx->ops->to_host(ctx, host, g->grads, n * sizeof(float));
    dtype_convert(wire, DT_BF16, host, DT_F32, n);
    allreduce(d->comm, d->group, wire, n, DT_BF16, d->algo);
    dtype_convert(host, DT_F32, wire, DT_BF16, n);
    if (!cpu) {
        ctx->ops->to_device(ctx, g->grads, host, n * sizeof(float));
        free(host);
    }
    ctx->ops->scale(ctx, g->grads, 1.0f / d->group->size, n);
    if (cpu) mem_free(ctx, MEM_COMM, wire, n * sizeof(uint16_t));
    else free(wire);
}
