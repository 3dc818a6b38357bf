// model.h — a GPT-2-style transformer over flat buffers.
//
//   tokens -> wte + wpe -> L x [ x += attn(ln1(x)); x += mlp(ln2(x)) ] -> lnf -> @ wte^T
//
// Parameters, gradients (and, in optim.h, the AdamW moments) each live in ONE
// contiguous buffer. A table of named slices says where each tensor lives. The
// layout is grouped by layer, in forward order:
//
//   group 0        wte (V,C), wpe (T,C)                       -- the embeddings
//   group 1+l      h.l.ln_1.{weight,bias}, h.l.attn.c_attn.{weight,bias} (3C,C),
//                  h.l.attn.c_proj.{weight,bias} (C,C), h.l.ln_2.{weight,bias},
//                  h.l.mlp.c_fc.{weight,bias} (4C,C), h.l.mlp.c_proj.{weight,bias} (C,4C)
//   group L+1      ln_f.{weight,bias}
//
// so that one layer's weights (what FSDP gathers, what a pipeline stage owns) are
// one contiguous range, and a ZeRO shard is a plain [begin, end) of the buffer.
// Weights are stored (out, in) like torch.nn.Linear; the LM head is tied to wte.
#pragma once
#include <stddef.h>
#include "ctx.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int n_layer;   // L
    int n_embd;    // C
    int n_head;    // NH
    int seq_len;   // T (maximum; wpe has this many rows)
    int vocab;     // V
} GPTConfig;

// Presets: "tiny" (tests), "small" (demos, benchmarks), "gpt2-124m".
int gpt_preset(const char *name, GPTConfig *out);   // 0 on success
const char *gpt_preset_names(void);                 // "tiny, small, gpt2-124m"
// NULL if valid, else a message naming what is wrong ("--heads 5 does not divide --width 64").
const char *gpt_config_error(const GPTConfig *c, char *buf, size_t n);

typedef struct {
    char name[48];      // PyTorch-style name, e.g. "h.3.attn.c_attn.weight"
    size_t offset;      // element offset into the flat buffer
    size_t numel;
    int rows, cols;     // shape (rows x cols); vectors have rows == 1
    int group;          // 0 embeddings, 1+l block l, L+1 final layernorm
    int decay;          // 1 if weight decay applies (matrices), 0 (biases, norms)
} ParamSlice;

size_t gpt_num_params(const GPTConfig *c);
// Fills the slice table (caller provides room for gpt_num_slices(c) entries).
int gpt_num_slices(const GPTConfig *c);
void gpt_fill_slices(const GPTConfig *c, ParamSlice *slices);
// FLOPs per token: 6N + 12 L H Q T (PaLM appendix B, as in nanoGPT's MFU).
double gpt_flops_per_token(const GPTConfig *c, int T);

// Activations saved by the forward pass for one layer (pointers into one buffer).
typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd;  // (B,T,C), (B,T), (B,T)
    float *qkv;                        // (B,T,3C)
    float *atty;                       // (B,T,C)  attention output before c_proj
    float *att;                        // (B,NH,T,T) softmax probabilities
    float *res_att;                    // (B,T,C)  x + attn
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch;                        // (B,T,4C) before GELU
    float *fch_gelu;                   // (B,T,4C)
    float *res_mlp;                    // (B,T,C)  output of the layer
} LayerActs;

typedef struct GPT GPT;
// Called when the gradients of one group are complete during the backward pass
// (group L+1 first, then L ... 1, then 0). DDP overlap and FSDP hook in here.
typedef void (*GradHook)(GPT *g, int group, void *arg);
// Called just before the model reads a group's weights (GPT_NEED_PARAMS) or
// writes its gradients (GPT_NEED_GRADS); ZeRO-3 and FSDP gather the weights and
// make room for the gradients here, and point gparams / ggrads at them. The uses,
// in order: forward 0, 1 ... L, then L+1 and 0 (the tied LM head); backward L+1
// and 0 (head), L ... 1, then 0 for its gradients only (the embedding's backward
// reads no weights).
enum { GPT_NEED_PARAMS = 1, GPT_NEED_GRADS = 2 };
typedef void (*UseHook)(GPT *g, int group, int need, void *arg);

struct GPT {
    GPTConfig cfg;
    Ctx *ctx;
    int n_slices;
    ParamSlice *slices;         // host memory
    size_t n_params;
    size_t *group_offset;       // L+3 entries: group g is [off[g], off[g+1]); host
    float *params;              // flat, device memory (MEM_PARAMS); NULL when sharded
    float *grads;               // flat, device memory (MEM_GRADS); NULL until gpt_alloc_grads
    // Where each group's weights and gradients are now: element o of group k
    // (group_offset[k] <= o < group_offset[k+1]) is gparams[k][o - group_offset[k]].
    // By default they point into the flat buffers; a sharded strategy points them
    // at the buffers it gathers (and at NULL while a group is not materialised).
    float **gparams, **ggrads;  // host arrays of L+2

    // Activations, sized for (B,T) at gpt_alloc_acts (MEM_ACTIVATIONS).
    int B, T;
    float *act_buffer; size_t act_floats;
    float *encoded;             // (B,T,C) embedding output = input of layer 0
    LayerActs *layers;          // host array of L
    float *lnf, *lnf_mean, *lnf_rstd;
    float *logits;              // (B,T,V); after backward holds dlogits
    float *losses;              // (B,T)
    int *tokens, *targets;      // (B,T) device copies
    int *host_tokens;           // (B,T) host copy of the last tokens
    // Workspace (MEM_WORKSPACE): gradients of activations, reused layer by layer.
    float *work_buffer; size_t work_floats;
    float *dres;                // (B,T,C) gradient flowing down the residual stream
    float *dln;                 // (B,T,C) gradient wrt a layernorm output
    float *datty;               // (B,T,C) gradient wrt the attention output
    float *dqkv;                // (B,T,3C)
    float *dbig, *dbig2;        // (B,T,4C) gradients wrt fch_gelu and fch
    float *datt;                // (B,NH,T,T) attention-backward scratch

    float loss;                 // mean loss of the last forward (host)
    int last_B, last_T;         // shape of the last forward

    GradHook hook; void *hook_arg;
    UseHook use_hook; void *use_arg;
};

// Builds the model: slice table, parameters (MEM_PARAMS). Weights are initialised
// as GPT-2 does: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)), biases 0,
// layernorm weights 1 -- from `seed`, identical on every device.
void gpt_init(GPT *g, Ctx *ctx, const GPTConfig *cfg, uint64_t seed);
// The model without weights: the slice table and the group layout, params NULL.
// ZeRO-3 and FSDP keep only shards of the weights and build them with
// gpt_initial_params.
void gpt_init_layout(GPT *g, Ctx *ctx, const GPTConfig *cfg);
// gpt_init's initial weights of elements [lo, hi) of the flat layout, into host
// memory `out` (hi - lo floats): the same numbers, whatever the sharding.
void gpt_initial_params(const GPT *g, uint64_t seed, size_t lo, size_t hi, float *out);
void gpt_alloc_grads(GPT *g);                 // MEM_GRADS, zeroed; points ggrads into it
void gpt_alloc_acts(GPT *g, int B, int T);    // MEM_ACTIVATIONS + MEM_WORKSPACE
void gpt_free(GPT *g);
// [begin, end) element range of a group in the flat buffers.
void gpt_group_range(const GPT *g, int group, size_t *begin, size_t *end);
const ParamSlice *gpt_find_slice(const GPT *g, const char *name);

// Whole model. tokens/targets are host arrays of B*T ints; targets may be NULL
// (then no loss). Returns the mean loss (or 0).
float gpt_forward(GPT *g, const int *tokens, const int *targets, int B, int T);
// Accumulates gradients of the mean loss into g->grads (zero them first with
// gpt_zero_grad unless accumulating micro-batches). dloss_scale multiplies the
// loss gradient (1/accum_steps for gradient accumulation, 1 otherwise).
void gpt_backward(GPT *g, float dloss_scale);
void gpt_zero_grad(GPT *g);

// The pieces, for a pipeline stage that owns a range of layers:
// embed: tokens -> g->encoded; blocks [l0,l1): input x (B,T,C) -> layer l1-1's res_mlp;
// head: x -> lnf -> logits -> losses.
void gpt_embed_forward(GPT *g, int B, int T);
void gpt_blocks_forward(GPT *g, const float *x, int l0, int l1, int B, int T);
float gpt_head_forward(GPT *g, const float *x, int B, int T, int has_targets);
// head backward: writes dx (B,T,C) = gradient wrt the head's input x, into `dx`.
void gpt_head_backward(GPT *g, const float *x, float *dx, float dloss_scale, int B, int T);
// blocks backward over [l0,l1): dx holds the gradient wrt layer l1-1's output on
// entry and the gradient wrt x (layer l0's input) on exit.
void gpt_blocks_backward(GPT *g, const float *x, float *dx, int l0, int l1, int B, int T);
void gpt_embed_backward(GPT *g, const float *dx, int B, int T);
// Output of layer l (or the embedding for l = -1): the input of layer l+1.
const float *gpt_layer_output(const GPT *g, int l);

#ifdef __cplusplus
}
#endif
