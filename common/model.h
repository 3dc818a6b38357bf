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
// A tensor-parallel rank (stage 04) has the same table with its pieces of the
// split tensors (Split below; model_layout.c), in the same order.
#pragma once
#include <stddef.h>
#include "ctx.h"
#include "dtype.h"

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

// How tensor parallelism (stage 04, Megatron-LM) splits a tensor over the t ranks
// of a tensor-parallel group. With t = 1 nothing is split: the layout above.
typedef enum {
    SPLIT_NONE = 0,  // replicated on every rank: LayerNorms, wpe, the biases of the
                     // row-parallel layers (added once, after the reduction)
    SPLIT_ROWS,      // output features (a matrix's rows, a bias's elements): c_fc
    SPLIT_QKV,       // rows within each of c_attn's q, k, v blocks: rank r holds its
                     // heads of each (not a third of the stacked matrix)
    SPLIT_COLS,      // input features (columns): attn.c_proj, mlp.c_proj
    SPLIT_VOCAB,     // wte's rows: the vocabulary padded to a multiple of t, t blocks
} Split;

typedef struct {
    char name[48];      // PyTorch-style name, e.g. "h.3.attn.c_attn.weight"
    size_t offset;      // element offset into the flat buffer
    size_t numel;
    int rows, cols;     // shape (rows x cols); vectors have rows == 1
    int group;          // 0 embeddings, 1+l block l, L+1 final layernorm
    int decay;          // 1 if weight decay applies (matrices), 0 (biases, norms)
    // Tensor parallelism: this rank's (rows x cols) is its piece of the whole
    // (grows x gcols) tensor, which starts at element goffset of the whole
    // model's flat layout. Equal to rows, cols, offset when t = 1.
    int split;          // Split
    int grows, gcols;
    size_t goffset;
} ParamSlice;

// The tensors of block l, in layout order: slice 2 + l*GPT_BLOCK_TENSORS + k.
enum { GPT_LN1W, GPT_LN1B, GPT_QKVW, GPT_QKVB, GPT_ATTPROJW, GPT_ATTPROJB, GPT_LN2W, GPT_LN2B,
       GPT_FCW, GPT_FCB, GPT_FCPROJW, GPT_FCPROJB, GPT_BLOCK_TENSORS };

// The part of the model a rank holds: its tensor-parallel piece (rank tp_rank of
// tp) of layers [l0, l1), with the embedding and/or the head (a pipeline stage,
// stage 05). The tied wte is held by both the embedding's and the head's part.
typedef struct { int tp, tp_rank, l0, l1, embed, head; } GPTPart;
GPTPart gpt_whole(const GPTConfig *c);      // {1, 0, 0, L, 1, 1}

size_t gpt_num_params(const GPTConfig *c);  // the whole model's
// Fills the slice table (caller provides room for gpt_num_slices(c) entries).
int gpt_num_slices(const GPTConfig *c);
void gpt_fill_slices(const GPTConfig *c, ParamSlice *slices);
// The same for one rank of t tensor-parallel ranks (every rank's table has the
// same names and groups; rank r's pieces are gpt_slice_copy's).
void gpt_fill_slices_tp(const GPTConfig *c, int tp, ParamSlice *slices);
// The same for any part: tensors it does not hold keep their place in the table
// with no elements (rows = cols = numel = 0).
void gpt_fill_slices_part(const GPTConfig *c, const GPTPart *part, ParamSlice *slices);
// Between a whole tensor and rank `rank`'s piece of it: to_piece = 1 cuts the
// piece out of `whole` (zero rows where the vocabulary is padded), 0 puts the
// piece back into its place in `whole`.
void gpt_slice_copy(const ParamSlice *s, int rank, float *whole, float *piece,
                    int to_piece);
// Where element e of rank `rank`'s piece of s lies in the whole tensor (*global, from
// the tensor's first element), and how many elements from e on follow it there
// contiguously: a run of the piece that is a run of the whole. (Padding rows of the
// vocabulary map past the tensor's end.)
size_t gpt_slice_run(const ParamSlice *s, int rank, size_t e, size_t *global);
// Rows of the vocabulary each of t ranks holds: ceil(V / t).
int gpt_vocab_block(const GPTConfig *c, int tp);
// NULL if the model splits over tp ranks (with sequence parallelism sp for a
// B x T micro-batch), else a message naming the flags ("--tp 3 does not divide
// --heads 4 ...").
const char *gpt_tp_error(const GPTConfig *c, int tp, int sp, int B, int T, char *buf, size_t n);
// FLOPs per token: 6N + 12 L H Q T (PaLM appendix B, as in nanoGPT's MFU).
double gpt_flops_per_token(const GPTConfig *c, int T);

// Activations saved by the forward pass for one layer (pointers into one buffer).
// The shapes are a single process's; a tensor-parallel rank holds 1/t of every
// width that splits (3C, C of atty, 4C, the NH heads) and, with sequence
// parallelism, N/t token rows of the rest (gpt_alloc_acts says which).
typedef struct {
    float *ln1, *ln1_mean, *ln1_rstd;  // (B,T,C), (B,T), (B,T)
    float *qkv;                        // (B,T,3C)
    float *atty;                       // (B,T,C)  attention output before c_proj
    float *att;                        // (B,NH,T,T) softmax probabilities (NULL: flash)
    float *lse;                        // (B,NH,T) each query row's log-sum-exp, what flash
                                       // attention keeps instead of att (NULL otherwise)
    float *res_att;                    // (B,T,C)  x + attn
    float *ln2, *ln2_mean, *ln2_rstd;
    float *fch;                        // (B,T,4C) before GELU
    float *fch_gelu;                   // (B,T,4C)
    float *res_mlp;                    // (B,T,C)  output of the layer
    uint16_t *packed;                  // the mixed recipes: the layer's 2-byte copy of the
                                       // tensors it rounds (gpt_layer_packed); then the
                                       // pointers above but the statistics and res_mlp
                                       // are the shared window's (GPT.remat)
} LayerActs;

// Everything the forward pass saves for the backward pass of one micro-batch
// (MEM_ACTIVATIONS: one buffer, plus the token ids), for the layers the model
// computes (l0..l1, the embedding, the head). A pipeline stage keeps one set per
// micro-batch in flight and points g->acts at the one it computes (stage 05).
typedef struct {
    float *buffer; size_t floats;
    uint16_t *packed; size_t packed_elems;  // the packed layers' 2-byte copies (one buffer)
    int B, T;                   // the batch they were sized for
    float *encoded;             // (B,T,C) the input of layer l0: the embedding's output,
                                // or on a later pipeline stage what the one before sent
    LayerActs *layers;          // host array of L; entries outside [l0, l1) stay empty
    float *lnf, *lnf_mean, *lnf_rstd;
    float *logits;              // (B,T,V); after backward holds dlogits
    float *losses;              // (B,T)
    float *vocab_stats;         // (2,N) tensor parallel: each row's max and sum of exponentials
    int *tokens, *targets;      // (B,T) device copies
    int *host_tokens;           // (B,T) host copy of the tokens
} GPTActs;

typedef struct GPT GPT;

// Activation recompute (stage 06): what a layer's forward keeps for its backward.
//   NONE       every tensor of LayerActs, per layer and micro-batch;
//   SELECTIVE  all but the attention probabilities att (B x NH x T x T, the part that
//              grows with T^2, Korthikanti et al. 2022 §5): the backward recomputes
//              them from qkv into one shared buffer;
//   FULL       only the layer's output res_mlp (the next layer's input): the backward
//              runs the layer's forward again, from the layer's input, into one
//              shared layer of buffers, then its backward. With every = k > 1 only
//              the layers l with l % k == 0 do so; the others keep everything.
// The shared buffers (g->remat) are one per model, charged to MEM_ACTIVATIONS. The
// recomputed tensors are the same calls on the same inputs: the same bits.
typedef enum { GPT_RECOMPUTE_NONE = 0, GPT_RECOMPUTE_SELECTIVE, GPT_RECOMPUTE_FULL } GPTRecompute;

// Precision recipes (stage 06; the names of the stage-01 calculator's recipes where
// they are the same thing):
//   fp32        everything fp32.
//   mixed-bf16  the model computes with bf16 weights, activations and gradients
//               (every GEMM and reduction accumulates in fp32); the optimizer keeps
//               fp32 master weights and moments and writes bf16 weights back.
//   mixed-fp16  the same in fp16, whose 5-bit exponent needs the loss scaled up
//               (dynamic loss scaling: loss_scale below, 06_mixed_precision/
//               loss_scale.c); a step whose gradients overflowed is skipped.
//   bf16        pure bf16: no master copy; the update is rounded to nearest into
//               the bf16 weights (small updates vanish), moments bf16 too.
//   bf16-sr     pure bf16 with the update rounded stochastically (unbiased).
// Every tensor the recipe makes bf16 is rounded to bf16 where it is written (ops.h's
// round_to), and the ops compute in fp32 from those values, as tensor cores do. What
// the backward reads of each layer is then STORED in 2 bytes (gpt_layer_packed;
// model_acts.c); the weights, their gradients and the workspace are still fp32 slots
// holding bf16 values (4 bytes each: the course's remaining emulation).
//   fp8         mixed-bf16 whose GEMMs read fp8: inputs and weights E4M3, output
//               gradients E5M2, each tensor with its own scale from its amax over the
//               last steps (Transformer Engine's delayed scaling;
//               06_mixed_precision/fp8_linear.c). Serial layers only (no TP, no
//               two-pass backward).
// fp32, mixed-bf16 and bf16 need nothing but rounding to nearest, the core's. The
// others need an algorithm stage 06 teaches: mixed-fp16 its loss scaling (in the
// training loop), bf16-sr its stochastic rounding and fp8 its scaled casts (both
// GPTPlugins, below).
typedef enum { PREC_FP32 = 0, PREC_MIXED_BF16, PREC_MIXED_FP16, PREC_BF16, PREC_BF16_SR,
               PREC_FP8, PREC_COUNT } GPTRecipe;
typedef struct {
    int recipe;          // GPTRecipe
    DType dtype;         // what weights, activations and gradients are rounded to
    int master;          // 1: fp32 master weights in the optimizer (the mixed recipes)
    int stochastic;      // 1: the update is rounded stochastically (bf16-sr)
    float loss_scale;    // the loss gradient is multiplied by it, the update divides it out
    uint64_t seed;       // of the stochastic rounding
} GPTPrecision;

// The layers that tensor parallelism replaces (stage 04 fills this table; the
// serial ones in model.c are the default). Shapes are this rank's: N = B*T token
// rows, of which the residual stream holds N/t with sequence parallelism; C and
// OC are the layer's local input and output widths. Each writes its output and
// its input gradient (no +=) and accumulates into the weight gradients.
typedef struct {
    // Column-parallel linear: out(N, OC) = f(inp) @ w^T + b, inp the residual
    // stream's rows (f: identity forward / all-reduce backward; with SP,
    // all-gather / reduce-scatter).
    void (*column_forward)(GPT *g, float *out, const float *inp, const float *w, const float *b,
                           int N, int C, int OC);
    void (*column_backward)(GPT *g, float *dinp, float *dw, float *db, const float *dout,
                            const float *inp, const float *w, int N, int C, int OC);
    // Row-parallel linear: out = g(inp(N, C) @ w^T) + b, out the residual stream's
    // rows (g: all-reduce forward / identity backward; with SP, reduce-scatter /
    // all-gather); the bias joins the sum once (tensor-parallel member 0 adds it to
    // its partial before the reduction).
    void (*row_forward)(GPT *g, float *out, const float *inp, const float *w, const float *b,
                        int N, int C, int OC);
    void (*row_backward)(GPT *g, float *dinp, float *dw, float *db, const float *dout,
                         const float *inp, const float *w, int N, int C, int OC);
    // Token + position embedding of the B x T batch in g->acts.tokens into the
    // residual stream's rows; wte is this rank's vocabulary block.
    void (*embed_forward)(GPT *g, float *out, const float *wte, const float *wpe, int B, int T);
    void (*embed_backward)(GPT *g, float *dwte, float *dwpe, const float *dout, int B, int T);
    // losses(N) of logits(N, this rank's vocabulary block) against g->acts.targets;
    // backward writes dlogits (may alias logits) = d(loss)/d(logits) x dloss.
    void (*crossentropy_forward)(GPT *g, float *losses, const float *logits, int N);
    void (*crossentropy_backward)(GPT *g, float *dlogits, const float *logits, float dloss, int N);
    // Causal attention of a->qkv into a->atty, keeping what its backward reads (a->lse
    // with flash attention), and that backward: g->dqkv += from g->datty. NULL: the
    // core's op over this rank's heads and its B x T tokens, which must then be the whole
    // sequence (context parallelism, stage 04, holds a share of it and fills these).
    void (*attention_forward)(GPT *g, const LayerActs *a, int B, int T);
    void (*attention_backward)(GPT *g, const LayerActs *a, int B, int T);
} GPTParallelOps;

// The serial layers: a table to start from when a strategy replaces some entries.
const GPTParallelOps *gpt_serial_layers(void);

typedef struct {
    int size, rank;             // t, and this rank's place in its tensor-parallel group
    int sp;                     // sequence parallelism: the residual stream holds N/t rows
    const GPTParallelOps *ops;  // NULL: the serial layers
    void *arg;                  // the layers' state (stage 04: groups, collectives)
} GPTParallel;
// What a later stage plugs into the model (stage 06: 06_mixed_precision/precision.h's
// precision_plugins): the algorithms behind recompute and the recipes that need more
// than rounding to nearest. Set g->plugins before gpt_set_recompute and
// gpt_set_precision; without it (NULL) they refuse what needs a plugin, naming it.
typedef struct {
    // Activation recompute: what layer l's backward reads, the saved activations
    // made whole again where the forward kept less (g->recompute). Called only when
    // the model keeps less than everything: the default reads what was saved.
    LayerActs (*recompute_layer)(GPT *g, const float *x, int l, int B, int T);
    // bf16-sr: the rule the weights are rounded with (ops->round_stochastic_bf16).
    SRoundRule sround;
    // fp8: the serial linear layers' GEMMs on scaled fp8 casts. enable sets up g->fp8
    // (gpt_set_precision calls it), free releases it (gpt_free); the layers replace
    // the serial linear layers' forward and backward while g->fp8 is set.
    void (*fp8_enable)(GPT *g);
    void (*fp8_free)(GPT *g);
    void (*fp8_linear_forward)(GPT *g, float *out, const float *inp, const float *w,
                               const float *b, int N, int C, int OC);
    void (*fp8_linear_backward)(GPT *g, float *dinp, float *dw, float *db, const float *dout,
                                const float *inp, const float *w, int N, int C, int OC);
} GPTPlugins;

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

    // What this model computes: layers [l0, l1), the embedding, the head (the LM
    // head and the loss). The whole model unless a pipeline stage (stage 05).
    int l0, l1, has_embed, has_head;

    // Activations, sized for (B,T) at gpt_alloc_acts (MEM_ACTIVATIONS).
    int B, T;
    GPTActs acts;
    // Workspace (MEM_WORKSPACE): gradients of activations, reused layer by layer.
    float *work_buffer; size_t work_floats;
    float *dres;                // (B,T,C) gradient flowing down the residual stream
    float *dln;                 // (B,T,C) gradient wrt a layernorm output
    float *datty;               // (B,T,C) gradient wrt the attention output
    float *dqkv;                // (B,T,3C)
    float *dbig, *dbig2;        // (B,T,4C) gradients wrt fch_gelu and fch
    float *datt;                // (B,NH,T,T) attention-backward scratch

    // Tensor parallelism (t = tp.size > 1), allocated by gpt_alloc_acts:
    float *vocab_work;          // (t,N) workspace: every rank's row maxima
    float *sp_full, *sp_dfull;  // (N,C) workspace, SP only: a column-parallel layer's
                                // gathered input, and its full-width gradient
    GPTParallel tp;             // size 1: serial

    // Attention without the (T,T) matrix (gpt_set_flash_attention, before the
    // activations exist): ops.h's flash_attention_* pair, att NULL and lse kept.
    int flash_attention;
    // Activation recompute (gpt_set_recompute, before the activations exist).
    int recompute, recompute_every;  // GPTRecompute; every k-th layer (1: all)
    LayerActs remat;            // SELECTIVE: att; FULL or packed layers: one whole layer
    float *remat_buffer; size_t remat_floats;  // (MEM_ACTIVATIONS)
    int remat_B, remat_T;       // the batch it was sized for (0 until activations exist)
    int scratch_borrowed;       // 1: the workspace and remat buffers are another model's
                                // (gpt_alloc_workspace_shared), which frees them
    GPTPrecision prec;          // gpt_set_precision; fp32 by default
    int acts_fp32;              // gpt_set_acts_fp32: a 2-byte recipe's activations in fp32 slots
    struct GPTFp8 *fp8;         // the fp8 recipe's scales per linear layer (plugins->fp8_enable)
    const GPTPlugins *plugins;  // a later stage's algorithms (above); NULL: none

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
// The same for rank tp_rank of a tensor-parallel group of tp: the slice table is
// this rank's pieces (gpt_fill_slices_tp), n_params their sum. Set g->tp.ops (and
// .sp, .arg) before gpt_alloc_acts.
void gpt_init_layout_tp(GPT *g, Ctx *ctx, const GPTConfig *cfg, int tp, int tp_rank);
void gpt_init_tp(GPT *g, Ctx *ctx, const GPTConfig *cfg, uint64_t seed, int tp, int tp_rank);
// Any part (a pipeline stage, with or without tensor parallelism): its weights
// only, the single-process model's numbers. Groups it does not hold have
// gparams / ggrads NULL: computing with them is refused.
void gpt_init_layout_part(GPT *g, Ctx *ctx, const GPTConfig *cfg, const GPTPart *part);
void gpt_init_part(GPT *g, Ctx *ctx, const GPTConfig *cfg, uint64_t seed, const GPTPart *part);
// 1 if the part holds any element of the group.
int gpt_group_held(const GPT *g, int group);
// gpt_init's initial weights of elements [lo, hi) of g's flat layout, into host
// memory `out` (hi - lo floats): the same numbers, whatever the sharding; a
// tensor-parallel rank gets its pieces of the single-process model's tensors.
void gpt_initial_params(const GPT *g, uint64_t seed, size_t lo, size_t hi, float *out);
void gpt_alloc_grads(GPT *g);                 // MEM_GRADS, zeroed; points ggrads into it
void gpt_alloc_acts(GPT *g, int B, int T);    // MEM_ACTIVATIONS + MEM_WORKSPACE
// The workspace alone (gpt_alloc_acts = the first set of activations + this): a
// pipeline stage allocates its activations per micro-batch in flight instead.
void gpt_alloc_workspace(GPT *g, int B, int T);
// Models that never compute at the same time (the chunks of an interleaved pipeline
// rank, stage 05) share one workspace and one shared layer (g->remat): models[0]
// allocates them, sized for whichever model needs most, and the others point into
// them. Neither holds anything from one forward or backward call to the next, so
// one of each per rank is enough, whatever its chunks. Same shapes (tp, sp) only.
void gpt_alloc_workspace_shared(GPT *const *models, int n, int B, int T);
// One more set of activations for (B,T), for the layers g computes (a pipeline
// stage's micro-batches in flight), and its release.
void gpt_acts_alloc(GPT *g, GPTActs *a, int B, int T);
void gpt_acts_free(GPT *g, GPTActs *a);
void gpt_free(GPT *g);
// [begin, end) element range of a group in the flat buffers.
void gpt_group_range(const GPT *g, int group, size_t *begin, size_t *end);
const ParamSlice *gpt_find_slice(const GPT *g, const char *name);
// The tensor holding element `element` of the flat layout; NULL past the end.
const ParamSlice *gpt_slice_at(const GPT *g, size_t element);

// Copies a batch's token ids (and targets, if not NULL) into g->acts, checking
// every id against the vocabulary: what gpt_forward does first. The pieces below
// read them from there.
void gpt_set_batch(GPT *g, const int *tokens, const int *targets, int B, int T);
// Whole model. tokens/targets are host arrays of B*T ints; targets may be NULL
// (then no loss). Returns the mean loss (or 0).
float gpt_forward(GPT *g, const int *tokens, const int *targets, int B, int T);
// Accumulates gradients of the mean loss into g->grads (zero them first with
// gpt_zero_grad unless accumulating micro-batches). dloss_scale multiplies the
// loss gradient (1/accum_steps for gradient accumulation, 1 otherwise).
void gpt_backward(GPT *g, float dloss_scale);
void gpt_zero_grad(GPT *g);

// The pieces, for a pipeline stage that owns a range of layers:
// embed: tokens -> g->acts.encoded; blocks [l0,l1): input x (B,T,C) -> layer l1-1's res_mlp;
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
// The blocks' backward in two passes (a zero-bubble pipeline, stage 05): the input
// pass takes dx from layer l1-1's output to layer l0's input, as
// gpt_blocks_backward does, but computes no weight gradient; instead it keeps in
// `keep` (gpt_keep_floats floats) the gradients the weights need. The weight pass,
// any time later while the activations are still there, adds the weight gradients
// from them: the same calls on the same data as gpt_blocks_backward, so the same bits.
// Serial layers only (no tensor parallelism).
size_t gpt_keep_floats(const GPT *g, int l0, int l1, int B, int T);
void gpt_blocks_backward_input(GPT *g, const float *x, float *dx, int l0, int l1, int B, int T,
                               float *keep);
void gpt_blocks_backward_weight(GPT *g, const float *x, int l0, int l1, int B, int T,
                                const float *keep);
// Output of layer l (or the embedding for l = -1): the input of layer l+1.
const float *gpt_layer_output(const GPT *g, int l);

// ---- mixed precision (stage 06)
// Sets the recipe and rounds the weights the model holds (g->params) to its dtype:
// with a master copy, the optimizer copies these rounded weights into it at its
// first step (as Megatron-LM does). seed: the stochastic rounding's. bf16-sr and
// fp8 need their plugin (g->plugins): refused without it.
void gpt_set_precision(GPT *g, GPTRecipe r, uint64_t seed);
// What the recipe needs beyond rounding to nearest, in words ("dynamic loss
// scaling", "stochastic rounding", "fp8 delayed scaling"); NULL for fp32,
// mixed-bf16 and bf16, which need nothing more.
const char *gpt_recipe_needs(GPTRecipe r);
int gpt_recipe_master(GPTRecipe r);                // 1: fp32 master weights (mixed-*, fp8)
DType gpt_recipe_dtype(GPTRecipe r);               // what it rounds to: fp32, bf16 or fp16
const char *gpt_recipe_name(GPTRecipe r);          // "fp32", "mixed-bf16", ...
int gpt_recipe_parse(const char *s, GPTRecipe *r); // 0 on success
#define GPT_RECIPES "fp32|mixed-bf16|mixed-fp16|bf16|bf16-sr|fp8"

// ---- the attention's algorithm
// on = 1: FlashAttention's tiles (ops.h's flash_attention_*): each layer keeps its
// query rows' log-sum-exp, B*NH*T floats, instead of the (T,T) probabilities,
// B*NH*T*T, and the backward recomputes them tile by tile. The same function, summed
// in another order (test_flash.c). Call before the activations are allocated.
// Selective recompute, which exists to drop those probabilities, is refused with it.
void gpt_set_flash_attention(GPT *g, int on);

// ---- activation recompute (stage 06)
// Chooses what the forward keeps (GPTRecompute above; every >= 1). Call before
// gpt_alloc_acts / gpt_alloc_workspace; refused afterwards. Anything but NONE needs
// the recompute plugin (g->plugins->recompute_layer).
void gpt_set_recompute(GPT *g, GPTRecompute level, int every);
const char *gpt_recompute_name(GPTRecompute r);          // "none", "selective", "full"
int gpt_recompute_parse(const char *s, GPTRecompute *r); // 0 on success
// 1 if layer l keeps only its output (FULL, and l is one of every k-th).
int gpt_layer_recomputed(const GPT *g, int l);
// The mixed recipes (a 2-byte dtype) store each layer's saved tensors in 2 bytes,
// but the LayerNorm statistics and the layer's output (model_acts.c says why); a layer
// that full recompute runs again keeps only its output, in fp32, as before.
int gpt_acts_packed(const GPT *g);          // the recipe's dtype is 2 bytes (and not acts_fp32)
int gpt_layer_packed(const GPT *g, int l);  // and layer l keeps its tensors
// on = 1: keep them in fp32 slots instead (4 bytes a value holding the same numbers:
// what the course did before, for the tests and the benchmark to compare). Call
// before the activations are allocated.
void gpt_set_acts_fp32(GPT *g, int on);
// One layer: its forward writes every tensor of *a from input x (B*T rows; with SP
// the stream's rows), its backward takes dx from the layer's output to its input
// and accumulates the layer's weight gradients. Neither calls the strategy's hooks
// (the callers, gpt_blocks_forward / gpt_blocks_backward, do, once per layer).
void gpt_layer_forward(GPT *g, const LayerActs *a, const float *x, int l, int B, int T);
void gpt_layer_backward(GPT *g, const LayerActs *a, const float *x, float *dx, int l, int B,
                        int T);
// The attention of a layer (this rank's heads) from a->qkv: a->atty and a->att,
// rounded as the forward rounds them (mixed precision).
void gpt_attention_forward(GPT *g, const LayerActs *a, int B, int T);

#ifdef __cplusplus
}
#endif
