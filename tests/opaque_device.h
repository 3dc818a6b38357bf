// opaque_device.h — a CPU device whose memory the host cannot read directly.
//
// On a GPU, code that dereferences a device pointer on the host crashes; on the CPU
// "device" memory is host memory, and the same mistake computes the right numbers.
// This checking device keeps every value in device memory in a code that only the
// backend's ops and to_host / to_device translate:
//   a float x is stored as OPAQUE_SCALE * x (-4096: exact in fp32, and sums of
//     stored values are the stored sums, so the collectives need no change; the
//     sign makes a maximum of stored values the stored minimum);
//   an id (the one int buffer given to opaque_begin) as (id + V/2 + 1) mod V.
// A host loop over device memory then reads values off by -4096 or wrong ids, and
// writes values the backend reads back the same way: wrong losses, not a crash.
// The ops translated are those of the vocabulary-parallel loss (logits_max,
// logits_sumexp, crossentropy_loss, crossentropy_backward_split) and the memory
// moves; copy and memset0 move stored values as they are. Any other op computes on
// stored values (right only where it is linear): test one contract at a time.
#pragma once
#include <stddef.h>

#include "ctx.h"
#include "ops.h"

#define OPAQUE_SCALE (-4096.0f)

typedef struct {
    Ops ops;            // first: ctx->ops points here, and the wrappers find the rest
    const Ops *plain;   // the CPU backend underneath
    int *ids;           // the device buffer of ids (targets), n_ids of them
    size_t n_ids;
    int vocab;
} OpaqueDevice;

// From here to opaque_end, ctx computes on the opaque device: ctx->ops is od's.
// ids: the device buffer of token ids the ops read (its contents are not changed:
// put ids in with ctx->ops->to_device after this call).
void opaque_begin(OpaqueDevice *od, Ctx *ctx, int *ids, size_t n_ids, int vocab);
void opaque_end(OpaqueDevice *od, Ctx *ctx);
