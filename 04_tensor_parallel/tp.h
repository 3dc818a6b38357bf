// tp.h — Megatron-LM tensor parallelism: every layer of the GPT split over the t
// ranks of a tensor-parallel group, with or without sequence parallelism, and
// data parallelism (stage 02's DDP) across such groups.
//
// The core's GPT (common/model.c) calls its layers through a table
// (GPTParallelOps); this stage fills it:
//
//   conjugate.c    f and g, the two conjugate operators, and the collectives
//   linear.c       column- and row-parallel linear layers built on them   (exercise)
//   vocab_embed.c  the vocabulary-parallel embedding
//   vocab_ce.c     the vocabulary-parallel cross-entropy                  (exercise)
//   tp_model.c     the table, gathering the whole model back, the optimizer step
//
// Which rank holds which piece of each weight is the core's layout
// (common/model_layout.c, gpt_fill_slices_tp): c_attn and c_fc split by output
// rows (c_attn within each of q, k and v), the two c_proj by input columns, wte
// by vocabulary rows; LayerNorms, wpe and the c_proj biases are replicated.
#pragma once
#include "collectives.h"
#include "comm_cuda.h"
#include "ddp.h"
#include "model.h"
#include "optim.h"
#include "trainer.h"

typedef struct {
    Comm *comm;
    Group *group;       // the tensor-parallel group: t ranks that split every layer
    Algo algo;          // host collectives (ring, naive or mpi)
    GpuComm *gpu;       // device buffers (--device cuda): NCCL or the CUDA IPC ring
    int sp;             // sequence parallelism
    double comm_s;      // seconds spent in this group's collectives (for the share of a step)
    void *outer;        // a strategy TP is composed into, whose layers find it here (cp_model.c)
} TensorParallel;

// ---- f and g (conjugate.c) ----
// f sits before a column-parallel layer, g after a row-parallel one. Without SP:
//   f: forward the identity,   backward an all-reduce of the input gradient;
//   g: forward an all-reduce,  backward the identity.
// With SP the residual stream holds N/t token rows per rank, and the all-reduce
// splits into its two halves: f gathers the rows forward and reduce-scatters the
// gradient backward; g reduce-scatters forward and gathers backward.
//
// f forward: the layer's whole (N, C) input: x itself, or gathered into g->sp_full.
const float *tp_f_forward(GPT *g, const float *x, int N, int C);
// f backward: dfull (N, C) holds this rank's part of the input gradient (every
// rank's input is the same, each rank's weights reach only some outputs); sum it
// over the group into dx (the same buffer without SP; this rank's N/t rows with SP).
void tp_f_backward(GPT *g, float *dx, float *dfull, int N, int C);
// g forward: partial (N, C) holds this rank's part of the layer's output; the
// sum over the group goes into out (the same buffer without SP; this rank's rows
// with SP: `partial` is then scratch).
void tp_g_forward(GPT *g, float *out, float *partial, int N, int C);
// g backward: the whole (N, C) output gradient: dout itself, or gathered into g->sp_dfull.
const float *tp_g_backward(GPT *g, const float *dout, int N, int C);
// The full-width scratch buffer a partial result goes in before g (g->sp_full
// with SP; without SP the output itself).
float *tp_partial_buffer(GPT *g, float *out);

// The group's collectives on this rank's buffers (host or device), timed.
void tp_allreduce(GPT *g, float *buf, size_t n);
void tp_all_gather(GPT *g, float *buf, size_t n);      // member i's block: shard_range(n, t, i)
void tp_reduce_scatter(GPT *g, float *buf, size_t n);

// ---- the layers (linear.c, vocab_embed.c, vocab_ce.c): GPTParallelOps' entries ----
void tp_column_forward(GPT *g, float *out, const float *inp, const float *w, const float *b,
                       int N, int C, int OC);
void tp_column_backward(GPT *g, float *dinp, float *dw, float *db, const float *dout,
                        const float *inp, const float *w, int N, int C, int OC);
void tp_row_forward(GPT *g, float *out, const float *inp, const float *w, const float *b, int N,
                    int C, int OC);
void tp_row_backward(GPT *g, float *dinp, float *dw, float *db, const float *dout,
                     const float *inp, const float *w, int N, int C, int OC);
void tp_embed_forward(GPT *g, float *out, const float *wte, const float *wpe, int B, int T);
void tp_embed_backward(GPT *g, float *dwte, float *dwpe, const float *dout, int B, int T);
void tp_crossentropy_forward(GPT *g, float *losses, const float *logits, int N);
void tp_crossentropy_backward(GPT *g, float *dlogits, const float *logits, float dloss, int N);
// This rank's block of the vocabulary: ids [*lo, *lo + Vl), of which *valid are
// real (the last blocks are padded when t does not divide V).
int tp_vocab_range(const GPT *g, int *lo, int *valid);

// ---- the model (tp_model.c) ----
// Makes g (built with gpt_init_tp / gpt_init_layout_tp on this group's rank) use
// the parallel layers. t = 1 keeps the serial layers: one rank is the serial model.
void tp_install(GPT *g, TensorParallel *tp);
// The table tp_install installs (t > 1), for a strategy that replaces some of its entries.
const GPTParallelOps *tp_layer_ops(void);
// The whole model's weights (or gradients, grads = 1) in the single-process
// layout, into host memory `out` (gpt_num_params floats) on every member.
void tp_gather(GPT *g, int grads, float *out);
// With SP each rank's LayerNorm gradients cover its own token rows: the group sums them.
void tp_reduce_norm_grads(GPT *g);
// The global gradient norm: split tensors summed over the group, replicated ones once.
double tp_grad_norm(GPT *g);

// The training strategy (common/trainer.h) for a dp x tp mesh: TP in the group,
// DDP (stage 02) over dp. Gradient accumulation, clipping and AdamW as ever.
typedef struct {
    TensorParallel tp;
    DDP ddp;            // over the data-parallel group (size 1: none)
    AdamW opt;
    TrainStrategy strategy;
    LinkBytes step_start;  // what this rank had sent when the step began
    LinkBytes step_sent;   // what it sent in the last step, inside its node and across
    double step_tp_s;               // seconds in TP collectives in the last step
} TPTrain;

void tp_train_init(TPTrain *s, Comm *c, Group *tp_group, Group *dp_group, Algo algo, int sp,
                   GpuComm *gpu_tp, GpuComm *gpu_dp);
