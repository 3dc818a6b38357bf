// optim.h — AdamW over the flat parameter buffer, with global-norm clipping.
//
// The moments m and v mirror the parameter layout element for element, so a
// ZeRO-1 rank that owns elements [begin, end) of the parameters owns exactly
// [begin, end) of m and v too.
#pragma once
#include <stddef.h>
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    float lr, beta1, beta2, eps, weight_decay;
    float grad_clip;     // max global L2 norm; 0 disables clipping
    int master;          // mixed precision: keep fp32 master weights (allocated with the
                         // moments, so a model too big fails at step zero; filled from the
                         // model's weights at the first step)
} AdamWConfig;

AdamWConfig adamw_default_config(void);  // lr 3e-4, (0.9, 0.95), 1e-8, wd 0.1, clip 1.0

typedef struct {
    AdamWConfig cfg;
    size_t begin, end;   // element range this optimizer owns (whole model unless sharded)
    size_t capacity;     // elements allocated per moment (>= end - begin: padding)
    float *m, *v;        // device memory (MEM_OPTIMIZER), `capacity` elements each
    float *master;       // mixed precision: fp32 master weights of the range (MEM_OPTIMIZER,
                         // `capacity`), copied from the model's weights at the first step
    int master_filled;
    int t;               // steps taken
    long skipped;        // steps skipped because the gradients were not finite
} AdamW;

// Allocates the moments for elements [begin, end) of the model's flat buffers.
void adamw_init(AdamW *opt, GPT *g, const AdamWConfig *cfg, size_t begin, size_t end);
// The same with room for `capacity` >= end - begin elements: a sharded optimizer
// gives every rank a shard of the same size, ceil(N/ranks), padding the last ones,
// which is what the stage-01 calculator counts.
void adamw_init_padded(AdamW *opt, GPT *g, const AdamWConfig *cfg, size_t begin, size_t end,
                       size_t capacity);
void adamw_free(AdamW *opt, GPT *g);
// Pure bf16 with stochastic rounding: the seed of the stream step t rounds with
// (SRoundRule.bits, ops.h). Not seed + t * 2^64/golden: with the
// stream's own step, element i of step t + 1 would draw what element i + 1 drew at
// step t. splitmix64's finalizer of seed XOR t times another odd constant: every
// step's stream unrelated to the others.
uint64_t adamw_sround_seed(uint64_t seed, uint64_t t);
// Global gradient norm over the whole grads buffer (sqrt of the sum of squares).
double grad_global_norm(GPT *g);
// One step over the owned range. grad_norm is the global norm (computed over all
// ranks' gradients by the caller when sharded); clipping scales by
// min(1, clip/(norm + 1e-6)) exactly as torch.nn.utils.clip_grad_norm_.
// Weight decay applies to slices with decay = 1 only.
//
// Mixed precision (g->prec, stage 06): grad_norm is the norm of the gradients as
// they are, scaled by g->prec.loss_scale; the step divides the scale out. A norm
// that is not finite (an fp16 overflow somewhere) skips the step: nothing changes,
// opt->skipped counts it. With a master copy (mixed-bf16/fp16) AdamW updates the
// fp32 masters and writes them back rounded into the model's weights; pure bf16
// updates the weights in place and rounds them (to nearest, or stochastically) and
// the moments (to nearest). Returns 1 if the step was taken.
int adamw_step(AdamW *opt, GPT *g, double grad_norm);
// The same where the owned range's weights and gradients are not in the flat
// buffers: p and grad point at element `begin` of the range (a shard's buffers).
int adamw_step_at(AdamW *opt, const GPT *g, float *p, const float *grad, double grad_norm);

#ifdef __cplusplus
}
#endif
