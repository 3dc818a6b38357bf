// memory_model.h — where the memory of a training run goes, as formulas.
//
// Two halves:
//
//   memory_model.c  the formulas themselves (the exercise: exercises/memory_model.c has
//                   the same functions, their bodies left to the learner): bytes per
//                   parameter for each precision recipe and optimizer, the parameter
//                   count of an architecture, ZeRO sharding of the model states, and
//                   activation memory (Korthikanti et al. 2022, generalised to any
//                   element size, with or without dropout) -- plus the exact activation
//                   layout of this course's own GPT (common/model_acts.c, gpt_acts_alloc).
//
//   memory_plan.c   everything around them: presets, recipe names, the whole per-GPU
//                   estimate (mm_estimate), the allocation-order OOM prediction, the
//                   search for the smallest sharding that fits, and the course's GPT cut
//                   into pipeline stages (stage 05: one stage's weights and activations).
//
// Units: bytes, as doubles (exact for integers below 2^53 = 9.0e15, far above any
// per-GPU figure here); GB = 1e9 bytes as in the papers.
#pragma once
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ARCH_GPT = 0, ARCH_LLAMA } Arch;

// A transformer, as much of it as memory depends on.
//   ARCH_GPT:   GPT-2/3 and this course's model. Learned positions (seq x hidden),
//               LayerNorm with bias, biases on every linear, a GELU MLP of width ffn,
//               the LM head tied to the token embedding.
//   ARCH_LLAMA: Llama 2. Rotary positions (no parameters), RMSNorm (weight only), no
//               biases, a SwiGLU MLP (three ffn x hidden matrices), grouped-query
//               attention with kv_heads key/value heads, an untied LM head.
typedef struct {
    Arch arch;
    int layers;     // L
    int hidden;     // h (C in the code)
    int heads;      // a
    int kv_heads;   // = heads unless grouped-query attention
    int ffn;        // MLP width (4h for GPT)
    int vocab;      // V
    int seq;        // s: context length (GPT: rows of the position table) and sequence trained on
    int dropout;    // 1: dropout after attention scores, attention output and MLP (1-byte masks)
    double raw_params;  // > 0: only a parameter count is known (no activations can be computed)
} ModelSpec;

typedef enum {
    RECIPE_FP32 = 0,       // fp32 weights 4, grads 4, optimizer moments in fp32: 16 B with AdamW
    RECIPE_MIXED_BF16,     // ZeRO / Transformer Math: 2 + 2 + (fp32 master 4 + moments) = 16
    RECIPE_MIXED_FP16,     // same bytes; fp16 needs loss scaling (stage 06), bf16 does not
    RECIPE_MEGATRON_BF16,  // Megatron-LM: bf16 weights 2, fp32 grads 4, master+moments 12 = 18
    RECIPE_MEGATRON_FP16,  // Megatron-LM: fp16 weights 2, fp16 grads 2, fp32 main grads 4,
                           //   master+moments 12 = 20 (main grads counted with the optimizer)
    RECIPE_BF16,           // pure bf16, no master copy, bf16 moments: 2 + 2 + 4 = 8
    RECIPE_COURSE,         // this course's code: fp32 4 + 4 + 8 and gpt_alloc_acts' layout
    RECIPE_COUNT
} Recipe;

typedef enum { OPTIM_ADAMW = 0, OPTIM_SGD_MOMENTUM, OPTIM_SGD, OPTIM_COUNT } Optim;
typedef enum { RECOMPUTE_NONE = 0, RECOMPUTE_SELECTIVE, RECOMPUTE_FULL } Recompute;

typedef struct {
    double params;     // bytes per parameter of the weights the model computes with
    double grads;      // of the gradients
    double optimizer;  // of the optimizer state (master copy, main grads, moments)
} BytesPerParam;

// Per-GPU model states.
typedef struct {
    double params, grads, optimizer;
} ModelStates;

// How the model is trained: precision, optimizer, batch and the parallel layout.
typedef struct {
    Recipe recipe;
    Optim optim;
    int micro_batch;     // b: sequences per micro-batch per GPU
    int seq;             // s used for activations (the model's seq unless changed)
    Recompute recompute;
    int sp;              // sequence parallelism (needs tp > 1 to matter)
    int dp, tp, pp;      // data, tensor, pipeline parallel degrees
    int zero;            // ZeRO stage 0..3 over the dp ranks
    int microbatches;    // m: micro-batches per step per pipeline (0 = pp, enough for 1F1B)
    int gpipe;           // 1: GPipe keeps all m in flight; 0: 1F1B keeps min(p, m) on the
                         // first stage (min(p - s, m) on stage s)
    int course_precision; // the course recipe: stage 06's --precision, whose weights,
                          // gradients and workspace this code keeps in fp32 slots (4
                          // bytes): 1 adds the fp32 master weights (mixed-bf16,
                          // mixed-fp16, fp8: 4 more optimizer bytes per parameter), 2
                          // also the fp8 casts' workspace (fp8). 0: fp32, bf16, bf16-sr.
    int course_half;      // the course recipe: 1 if the --precision stores the layers'
                          // saved activations in 2 bytes (every recipe but fp32)
    int recompute_every; // the course recipe with full recompute: every k-th layer (l % k
                         // == 0) keeps only its output, the others everything (0, 1: all)
    int stage;           // the course recipe with pp > 1: the pipeline stage mm_estimate
                         // reports, 0..pp-1 (-1, or any number outside: the busiest, the
                         // stage with the largest total). The other recipes: the first.
    int cp;              // the course recipe: context-parallel ranks sharing each sequence
                         // (stage 04's cp_train, flash attention: 1 its one rank; 0: not
                         // cp_train, the (T, T) scores kept)
    int cp_ulysses;      // ... their attention: Ulysses' all-to-all (else the ring)
} Setup;

// ----------------------------------------------------------------- the formulas
// (memory_model.c; exercises/memory_model.c is the starter)

// Bytes per parameter of weights, gradients and optimizer state for a recipe and
// an optimizer (AdamW: two moments; SGD with momentum: one; SGD: none).
BytesPerParam mm_bytes_per_param(Recipe r, Optim o);

// Parameters of the architecture (raw_params if given).
double mm_param_count(const ModelSpec *m);

// Per-GPU bytes of the model states for `psi` parameters held by this model-parallel
// rank, with ZeRO stage `zero` over `dp` ranks: stage 1 shards the optimizer state,
// 2 also the gradients, 3 also the weights. A shard is ceil(psi / dp) parameters
// (shards are padded, so no size must divide evenly).
ModelStates mm_model_states(double psi, BytesPerParam b, int zero, int dp);

// Activation bytes saved by ONE transformer layer for ONE micro-batch on one GPU
// (Korthikanti et al., Table 2, generalised): element size from the recipe (4 for
// fp32, 2 otherwise), dropout masks of 1 byte when m->dropout, tensor parallel
// degree s->tp, sequence parallelism s->sp, recompute s->recompute.
double mm_act_bytes_per_layer(const ModelSpec *m, const Setup *s);

// Activation bytes on the busiest GPU (the first pipeline stage): layers per stage
// times the micro-batches in flight (1F1B: min(p, m), Korthikanti Eq. 5; GPipe: m),
// plus, for full recompute, the one layer rematerialised during the backward pass,
// plus, when pp == 1, the head (final norm and LM-head inputs, fp32 logits).
double mm_act_bytes_model(const ModelSpec *m, const Setup *s);

// The bytes this course's GPT charges to MEM_ACTIVATIONS in gpt_alloc_acts for a
// (B, T) batch on ONE of `tp` tensor-parallel ranks (stage 04; tp = 1: the whole
// model), with sequence parallelism when `sp` (and tp > 1): fp32 saved tensors plus
// the int32 token and target ids. tp must divide the heads; with sp, B*T too.
double mm_course_act_bytes(const ModelSpec *m, int B, int T, int tp, int sp);

// ----------------------------------------------------------------- around them
// (memory_plan.c)

typedef struct {
    double params;              // whole model
    double params_per_gpu;      // the model-parallel shard before ZeRO: ceil(params/(tp*pp));
                                // the course recipe: mm_course_params_per_rank, exactly
    BytesPerParam bpp;
    double bytes_params, bytes_grads, bytes_optimizer, bytes_activations;
    double bytes_workspace;     // course recipe only: gradient scratch (MEM_WORKSPACE)
    double bytes_comm;          // course recipe with cp > 1: the ring's blocks (MEM_COMM)
    double bytes_total;         // params + grads + optimizer + activations + workspace + comm
    double act_per_layer;       // one layer, one micro-batch
    int layers_per_stage, in_flight;  // of the stage reported
    int stage;                  // the pipeline stage reported (0 unless course with pp > 1)
} MemEstimate;

MemEstimate mm_estimate(const ModelSpec *m, const Setup *s);

// Pipeline bookkeeping: layers on the first stage, ceil(L / pp), and micro-batches
// whose activations it holds at once: 1F1B min(pp, m), GPipe m (m = pp when unset).
int mm_layers_per_stage(const ModelSpec *m, const Setup *s);
int mm_in_flight(const Setup *s);

// The course recipe's MEM_WORKSPACE (gpt_alloc_acts) on one of `tp` tensor-parallel
// ranks, SP when `sp`: gradients of the activations, reused layer by layer, plus the
// scratch of the parallel layers (SP's gathered inputs, the vocab-parallel loss).
double mm_course_workspace_bytes(const ModelSpec *m, int B, int T, int tp, int sp);

// Context parallelism (stage 04's cp_train: flash attention, every rank the whole model)
// on one of `cp` ranks sharing each (B, T) sequence, T/cp tokens each: its activations
// (mm_course_act_bytes of its rows, the (T/cp)^2 probabilities replaced by flash
// attention's log-sum-exp a row and head), its workspace (the layers' scratch for its
// rows, and the larger of the ring's forward scratch, a block's partial output and lse
// and a tile's scores, and its backward's, D a row and head and a tile's P and dP; or
// Ulysses' q, k, v, out, their gradients of its heads over the whole sequence), its
// communication buffers (the ring's two K, V blocks and two dK, dV buffers; Ulysses' send
// and receive buffers of q, k, v). cp = 1: one process with flash attention.
double mm_course_cp_act_bytes(const ModelSpec *m, int B, int T, int cp);
double mm_course_cp_workspace_bytes(const ModelSpec *m, int B, int T, int cp, int ulysses);
double mm_course_cp_comm_bytes(const ModelSpec *m, int B, int T, int cp, int ulysses);

// The parameters one of `tp` tensor-parallel ranks of this course's GPT holds (stage
// 04's split: c_attn and c_fc by output rows, both c_proj by input columns, the token
// table by vocabulary blocks of ceil(V/tp) rows; norms, wpe and the c_proj biases
// replicated). tp = 1: mm_param_count's GPT count.
double mm_course_params_per_rank(const ModelSpec *m, int tp);

// ---- this course's GPT cut into `pp` pipeline stages (stage 05, one chunk per rank)
// mm_estimate uses these for the course recipe when pp > 1 (pp = 1 keeps the whole-model
// functions above). Stages are numbered 0..pp-1 and need pp <= L.

// Layers [*l0, *l1) of stage `stage` of `pp`: consecutive, as even as they can be, the
// first L mod pp stages one layer more (05_pipeline's pp_layers): 8 over 3 is 3, 3, 2.
void mm_stage_layers(int L, int pp, int stage, int *l0, int *l1);

// Micro-batches whose activations stage `stage` of s->pp holds at its peak (stage 05's
// sched_max_in_flight): GPipe all m; 1F1B min(pp - stage, m) -- the first stage pp, the
// last one. m = s->microbatches, or pp when 0. Stage 0: mm_in_flight.
int mm_stage_in_flight(const Setup *s, int stage);

// What stage `stage` of `pp` charges to MEM_ACTIVATIONS at its peak, on one of `tp`
// tensor-parallel ranks (SP when `sp`): `in_flight` micro-batches of (B, T), each one
// gpt_acts_alloc set,
//   in_flight x [4 x (Nl*C + Ls*layer + head) + 2 x 4 x N]   bytes
// with N = B*T, Nl = N/t with SP (else N), Ls = l1 - l0 its layers, layer = Nl(4C + 4) +
// 12N*C/t + B*(NH/t)*T^2 floats (mm_course_act_bytes' layer) and, on the last stage only,
// head = Nl(C + 2) + N*ceil(V/t) + N (+ 2N when t > 1) floats: ln_f, the logits, the
// losses, the vocab-parallel statistics. Nl*C is the embedding's output on stage 0, the
// received input on the others; the int32 tokens and targets come with every set.
// pp = 1, in_flight = 1: mm_course_act_bytes.
//
// With activation recompute (stage 06, common/model.h's GPTRecompute; `every` as
// Setup's recompute_every) a layer keeps less, and the model holds ONE set of
// recompute buffers whatever the micro-batches in flight (+ remat below):
//   selective  layer - B*(NH/t)*T^2 (no attention matrix);  remat = B*(NH/t)*T^2
//   full       Nl*C (its output) for the layers l % every == 0, the whole layer for
//              the others;                                   remat = one whole layer
// half = 1 (stage 06's 2-byte recipes): a layer that keeps its tensors keeps them in 2
// bytes a value but its output and LayerNorm statistics (Nl*(C + 4) floats), and
// computes in a shared fp32 window:                          remat = one whole layer
double mm_course_stage_act_bytes(const ModelSpec *m, int B, int T, int tp, int sp, int pp,
                                 int stage, int in_flight, Recompute rc, int every, int half);

// Stage 06's fp8 recipe: its casts of a linear layer's input, weight and output
// gradient, in fp32 slots (06_mixed_precision/fp8_linear.c, MEM_WORKSPACE), sized for
// the largest layer: N*4C + max(4C, V)*C + N*max(4C, V) floats, N = B*T.
double mm_course_fp8_workspace_bytes(const ModelSpec *m, int B, int T);

// The parameters stage `stage` of `pp` holds on one of `tp` ranks (gpt_fill_slices_part):
//   Ls x ((12C^2 + 7C)/t + 6C)            its layers
//   + ceil(V/t) x C + seq x C             stage 0: wte and wpe
//   + 2C + ceil(V/t) x C                  the last stage: ln_f and a copy of wte (the tied
//                                         LM head, kept equal to stage 0's)
// With pp = 1 the one stage holds wte once: mm_course_params_per_rank.
double mm_course_stage_params(const ModelSpec *m, int tp, int pp, int stage);

// In the order a framework allocates (weights, gradients, optimizer, activations),
// the first category that does not fit in `capacity` bytes; NULL if all fit.
const char *mm_first_oom(const MemEstimate *e, double capacity);

// Smallest sharding of `gpus` GPUs that fits `capacity`: fewest model-parallel ranks
// (tp*pp), then the lowest ZeRO stage, then TP before PP. Keeps the recipe, batch,
// recompute, SP and schedule of `base` (the course recipe: its busiest pipeline stage
// must fit, out->stage = -1). Returns 0 and fills *out (and *est) when one fits.
int mm_find_fit(const ModelSpec *m, const Setup *base, int gpus, double capacity, Setup *out,
                MemEstimate *est);

// Names, for flags and output.
const char *mm_recipe_name(Recipe r);         // "fp32", "mixed-bf16", ...
const char *mm_recipe_help(Recipe r);         // one line: what the bytes are
int mm_recipe_parse(const char *s, Recipe *r);
const char *mm_optim_name(Optim o);           // "adamw", "sgd-momentum", "sgd"
int mm_optim_parse(const char *s, Optim *o);
const char *mm_recompute_name(Recompute r);   // "none", "selective", "full"
int mm_recompute_parse(const char *s, Recompute *r);
// Activation element size of a recipe: 4 (fp32, course) or 2.
int mm_act_elem_bytes(Recipe r);

// Presets: gpt2-124m, gpt2-xl, llama2-7b, llama2-13b, llama2-70b, gpt3-175b, and the
// course's tiny and small. 0 on success.
int mm_preset(const char *name, ModelSpec *out);
#define MM_PRESETS "gpt2-124m|gpt2-xl|llama2-7b|llama2-13b|llama2-70b|gpt3-175b|tiny|small"
// Default setup: AdamW, mixed-bf16, b = 1, s = model seq, DP = TP = PP = 1, ZeRO 0.
Setup mm_default_setup(const ModelSpec *m);

#ifdef __cplusplus
}
#endif
