// grad_comm.h — gradients communicated in bf16 (stage 06).
#pragma once
#include "ddp.h"

// Stage 02's gradient average with the gradients on the wire as bf16: half the
// bytes of ddp_sync_grads. Each rank's gradients are rounded to bf16 (mixed-bf16's
// already are: nothing changes), all-reduced as bf16 (collectives.h: every addition
// in fp32, its result rounded to bf16: p - 1 roundings on a ring of p), then
// averaged. On a GPU the bf16 copy goes through host memory.
void ddp_sync_grads_bf16(DDP *d, GPT *g);
