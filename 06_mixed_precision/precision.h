// precision.h — stage 06's primitives: stochastic rounding to bf16, dynamic loss
// scaling, the per-tensor scales of fp8 training, and activation recompute.
//
// Three ways training keeps its accuracy when tensors are stored in fewer bits:
//
//   sround.c      stochastic rounding (SR): round up with probability equal to how
//                 far the value lies towards the upper neighbour, so that on average
//                 the rounding error is zero. A long sum of updates too small for
//                 round-to-nearest to register (each below half an ulp, so each is
//                 rounded away) then still moves the stored value, by the right
//                 amount on average. It is what lets an optimizer keep bf16 weights.
//   loss_scale.c  dynamic loss scaling, as PyTorch's torch.cuda.amp.GradScaler:
//                 fp16 gradients underflow (at or below 2^-25 they are 0), so the loss is
//                 multiplied by a large scale before the backward pass and the
//                 gradients divided by it before the update. Too large a scale
//                 overflows to inf: that step is skipped and the scale halved; after
//                 a long run of good steps the scale is doubled again.
//   fp8.c         delayed scaling, as NVIDIA Transformer Engine: an fp8 tensor is
//                 x * scale rounded to e4m3 or e5m2, with the scale chosen from the
//                 largest |x| (amax) of the last few steps, so that the tensor's
//                 largest values land near the format's largest finite one.
//
// and one way to trade compute for memory:
//
//   recompute.c   activation recompute: a layer's backward computes again what its
//                 forward did not keep.
//
// How they reach the core, which names no stage: the model takes them as plugins
// (precision_plugins below: recompute, the stochastic rounding rule the CPU backend
// applies element by element, the fp8 recipe's casts), and the training loop as an
// extension (precision_ext.c: the flags, the loss scaler around each step). A
// binary linked without this stage refuses the flags and recipes that need them.
// The CUDA backend has twins of the rounding and the casts that give the same bits.
#pragma once
#include <stdint.h>

#include "dtype.h"
#include "model.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---------------------------------------------------------------- stochastic rounding

// f rounded to bf16 stochastically. r16 is a random number uniform in [0, 65536).
// bf16 keeps the top 16 bits of f; the 16 bits it drops, read as an integer d, say
// how far f lies from the bf16 value below it (in magnitude) towards the one above:
// the fraction d / 65536 of the gap. f rounds away from zero exactly when
// r16 >= 65536 - d (so with probability d / 65536; the GPU twin rounds for the same
// r16, so the two devices give the same bits), towards zero otherwise. So:
//   - the result is one of the two bf16 values around f (truncation, or the next
//     one away from zero), and the expected result is f itself;
//   - a value bf16 holds exactly (d = 0) is returned unchanged, whatever r16;
//   - inf and NaN are returned as f32_to_bf16 returns them (inf stays inf, NaN NaN);
//   - the overflow edge: above the largest finite bf16 (0x7f7f), "the next value
//     away from zero" is inf. Where rounding up would give inf, the result is what
//     round-to-nearest-even gives instead (max finite when d < 0x8000, inf when
//     RNE itself overflows): stochastic rounding never makes an inf that RNE would
//     not have made.
uint16_t f32_to_bf16_stochastic(float f, uint32_t r16);

// The random numbers for stochastic rounding: 16 bits, uniform in [0, 65536), from
// a counter-based hash of (seed, index). No state: element i of a tensor rounded
// with (seed, offset) uses sround_bits(seed, offset + i), so the result depends on
// neither the number of threads nor the order of the elements, and the GPU (which
// computes the same hash, ops_cuda_precision.cu) gives the same bits as the CPU.
// The hash: the top 16 bits of number `index` of splitmix64's stream from `seed`
// (whose state after k steps is seed + k * 2^64/golden ratio, so any number of the
// stream is computed directly, without walking to it).
uint32_t sround_bits(uint64_t seed, uint64_t index);

// ---------------------------------------------------------------- dynamic loss scaling

// The state of dynamic loss scaling, PyTorch's GradScaler with two clamps added.
typedef struct {
    float scale;           // the loss is multiplied by this before the backward pass
    float growth_factor;   // scale *= growth_factor after growth_interval good steps
    float backoff_factor;  // scale *= backoff_factor on a step whose gradients overflowed
    float min_scale;       // never backed off below this
    float max_scale;       // never grown above this
    int growth_interval;   // good steps in a row before the scale grows
    int good_steps;        // good steps since the last growth or overflow
    long steps;            // updates asked for (loss_scaler_update calls)
    long skipped;          // of them, skipped because of an inf or NaN gradient
    long growths;          // times the scale actually grew (not counting a clamp at max)
    long backoffs;         // times the scale actually shrank (not counting a clamp at min)
} LossScaler;

// PyTorch's defaults: scale 2^16, growth 2, backoff 0.5, interval 2000; min_scale 1
// (DeepSpeed's default floor: below 1 the "scaling" would shrink gradients that were
// already too large for fp16), max_scale 2^24 (far above any useful scale; it keeps
// the scale finite however long training runs without an overflow).
LossScaler loss_scaler_default(void);

// After the backward pass: found_inf says whether any gradient is inf or NaN.
// Returns 1 when the optimizer should apply this step's update, 0 when the step
// must be skipped. On an overflow: scale *= backoff_factor (not below min_scale),
// good_steps = 0, skipped++. Otherwise good_steps++, and when good_steps reaches
// growth_interval: scale *= growth_factor (not above max_scale), good_steps = 0.
// steps counts every call; growths and backoffs count the actual changes of scale.
int loss_scaler_update(LossScaler *s, int found_inf);

// ---------------------------------------------------------------- fp8 delayed scaling

// Transformer Engine's delayed scaling for one tensor: the amax (max |x|) of the last
// `len` steps, in a ring buffer. The scale a step uses comes from the amaxes of the
// steps before it (the tensor is quantized in the same kernel that measures its
// amax, so the current amax is not known yet): hence "delayed".
typedef struct {
    int len;         // history length (Transformer Engine's amax_history_len)
    int pos;         // where the next amax is written
    int filled;      // amaxes recorded so far, at most len
    float *history;  // len floats
    float margin;    // scale = fmt_max / amax / 2^margin: headroom for growth
    DType fmt;       // DT_E4M3 (forward: weights, activations) or DT_E5M2 (gradients)
} Fp8Scaling;

void fp8_scaling_init(Fp8Scaling *s, int len, DType fmt, float margin);
void fp8_scaling_free(Fp8Scaling *s);
// Records one step's amax (ops->quantize_fp8 returns it), dropping the oldest once
// the history holds len of them.
void fp8_record(Fp8Scaling *s, float amax);
// fmt_max / amax_max / 2^margin, amax_max the largest finite amax in the history;
// 1 when there is none above zero (empty history, a tensor of zeros: nothing to
// scale by). A non-finite amax (a step that overflowed) is ignored, as Transformer
// Engine keeps the previous scale then. Capped at FLT_MAX (an amax so small the
// quotient overflows).
float fp8_scale(const Fp8Scaling *s);
float fp8_format_max(DType fmt);  // E4M3_MAX or E5M2_MAX; dies for other types

// ---------------------------------------------------------------- the fp8 recipe's layers

// The model's serial linear layers with fp8 casts (fp8_linear.c): every tensor a GEMM
// reads is cast with its own delayed scale, from its amaxes over the last
// GPT_FP8_HISTORY steps. enable and free bracket g->fp8 (gpt_set_precision and
// gpt_free call them through the plugins).
#define GPT_FP8_HISTORY 16
void gpt_fp8_enable(GPT *g);
void gpt_fp8_free(GPT *g);
void gpt_fp8_linear_forward(GPT *g, float *out, const float *inp, const float *w, const float *b,
                            int N, int C, int OC);
void gpt_fp8_linear_backward(GPT *g, float *dinp, float *dw, float *db, const float *dout,
                             const float *inp, const float *w, int N, int C, int OC);
// After each optimizer step, this step's amaxes go into the histories and the next
// step's scales are fixed (nothing without fp8).
void gpt_fp8_step_end(GPT *g);
int gpt_fp8_layers(const GPT *g);  // linear layers seen so far (4L + 1 after a forward)
// The scales' state, for a checkpoint (stage 07): every layer's amax histories
// (x, w, dy), one row of history + 2 floats each, in the order the layers first
// ran; malloc'd (NULL, 0 x 0 without fp8). And back: layers a forward has not
// reached yet take their rows when it does. -1 with a message if the shape or a
// position does not fit this run.
float *gpt_fp8_state(const GPT *g, int *rows, int *cols);
int gpt_fp8_restore(GPT *g, const float *state, int rows, int cols, char *err, size_t errn);

// ---------------------------------------------------------------- activation recompute

// The activations layer l's backward reads, made whole again: the saved ones where
// the forward kept them, the recomputed ones where it did not (g->recompute). The
// exercise (recompute.c); the model calls it through its plugins.
LayerActs gpt_recompute_layer(GPT *g, const float *x, int l, int B, int T);

// ---------------------------------------------------------------- the model's plugins

// All of the above that the model calls (plugins.c): g->plugins = &precision_plugins
// before gpt_set_recompute and gpt_set_precision.
extern const GPTPlugins precision_plugins;
#ifdef __cplusplus
}
#endif
