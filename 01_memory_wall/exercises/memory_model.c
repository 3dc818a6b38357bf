// exercises/memory_model.c — stage 01's exercise: the formulas of the memory
// calculator. Same functions as ../memory_model.c; the bodies are yours.
//
//   make grade-1              every part, with a score
//   make grade-1 PART=zero_sharding
//   make hint-1 PART=<part>   stuck? (tier 1 a nudge; TIER=2 the steps; TIER=3 more)
//
// Read ../README.md first (the 16-bytes rule, ZeRO, Korthikanti's activation count,
// this code's own activations), and ../memory_model.h for what each function must
// return (and for mm_course_stage_act_bytes, mm_layers_per_stage, mm_in_flight,
// mm_act_elem_bytes: given, in memory_plan.c, for you to call). The sources, with
// their tables and equations: ../../docs/formulas.md §1-4. The parts, and the tests
// that grade them (tests/test_memory_model.c, tests/test_memcalc.sh,
// build-ex/measure --check), are listed in parts.txt. All sizes are doubles: 70e9
// does not fit in an int.
#include <math.h>

#include "../memory_model.h"

// Part bytes_per_param. Bytes per parameter of the weights, the gradients and the
// optimizer state, for every Recipe and Optim: the lesson's §1 tables (and the
// comments of the Recipe enum). The optimizer's bytes hold whatever it keeps per
// parameter: its moments (AdamW 2, SGD with momentum 1, SGD none) at the recipe's
// width, the fp32 master copy where the recipe has one, and Megatron fp16's fp32
// "main grads" (counted with the optimizer, which is what its distributed optimizer
// shards).
// Checked: 16 / 18 / 20 / 8 B with AdamW, both SGDs, Megatron's distributed-optimizer
// table, 70B x 16 = 1120 GB (also through memcalc).
// Pitfalls: a master copy forgotten, or kept whatever the optimizer (SGD keeps it too,
// and only it).
BytesPerParam mm_bytes_per_param(Recipe r, Optim o) {
    // TODO(exercise)
    (void)r;
    (void)o;
    BytesPerParam b = {0, 0, 0};
    return b;
}

// Part param_count. Parameters of the architecture (or m->raw_params when that is
// > 0): every tensor of the model counted once, for ARCH_GPT and ARCH_LLAMA as
// ../memory_model.h describes them (biases, norms, tied or untied head, positions,
// grouped-query K and V).
// Checked: GPT-2 124M must come out as 124,439,808; GPT-2 XL, GPT-3 175B, Llama 2
// 7B (6,738,415,616) / 13B / 70B, Llama 3 8B (GQA), every row of Megatron's Table 1
// (Eq. 2).
// Pitfalls: the biases of the linear layers; a tied head counted twice, or an untied
// one once.
double mm_param_count(const ModelSpec *m) {
    // TODO(exercise)
    (void)m;
    return 0;
}

// Part zero_sharding. Per-GPU bytes of weights, gradients and optimizer state for psi
// parameters under ZeRO stage `zero` (0-3) over dp ranks, as ../memory_model.h says
// (a shard is ceil(psi / dp) parameters: shards are padded).
// Checked: all 54 entries of ZeRO's Table 1 (within its printed rounding), Figure 1
// (7.5B on 64 GPUs with 2 + 2 + 12 bytes: 120 -> 31.4 -> 16.6 -> 1.875 GB), Table 2,
// memcalc --gpus.
// Pitfall: which states each stage shards (stage 2 is more than stage 1).
ModelStates mm_model_states(double psi, BytesPerParam b, int zero, int dp) {
    // TODO(exercise)
    (void)psi;
    (void)b;
    (void)zero;
    (void)dp;
    ModelStates s = {0, 0, 0};
    return s;
}

// Part activations (with the next function). Activation bytes of ONE layer for ONE
// micro-batch on one GPU, for the Setup's recipe, TP degree, SP and recompute:
//   - nothing to count without an architecture (m->raw_params > 0): 0;
//   - RECIPE_COURSE is this code exactly (common/model_acts.c, gpt_acts_alloc; the
//     lesson's "This code's own activations"): its tensors on one of s->tp ranks
//     (what TP splits, what only SP splits), with stage 06's options (memory_model.h,
//     above mm_course_stage_act_bytes): s->recompute, and s->course_half's 2-byte
//     storage;
//   - every other recipe: Korthikanti et al.'s count generalised as the lesson's §2
//     says: e = mm_act_elem_bytes(s->recipe) bytes per element, 1-byte masks only with
//     m->dropout, K and V of kv_heads heads, an MLP of width ffn with two saved
//     intermediates (GELU) or three (SwiGLU), the s x s scores per head; TP divides the
//     split part and the scores, SP also the replicated part; selective recompute
//     drops the scores, full recompute keeps only the layer's input.
// Checked: Korthikanti's Table 2 (every row) and the GPT-3 vector (16-bit with dropout:
// sbh(34 + 5as/h), 2868.9 MB per layer), fp32 with and without dropout, Llama 2 70B
// (GQA, SwiGLU), this code's recipe with --recompute and a 2-byte --precision (the
// ledger's bytes).
// Pitfalls: the scores are s x s per head (quadratic in s); the scores' dropout output
// at e bytes, not 2; 16-bit sizes assumed for fp32.
double mm_act_bytes_per_layer(const ModelSpec *m, const Setup *s) {
    // TODO(exercise)
    (void)m;
    (void)s;
    return 0;
}

// Activation bytes on the busiest GPU (the first pipeline stage), as ../memory_model.h
// says: its layers x the micro-batches it holds in flight x one layer (Korthikanti
// Eq. 5: with 1F1B, L layers' worth for any p), the one layer full recompute
// rematerialises during the backward, and, when this GPU also has the head (pp <= 1),
// the inputs of the final norm and of the LM head (replicated unless SP) and the fp32
// logits (split over the vocabulary by TP). RECIPE_COURSE: exactly one set of
// gpt_acts_alloc's buffers with stage 06's recompute (every k-th layer too) and 2-byte
// storage, as mm_course_stage_act_bytes counts them for one stage, one micro-batch.
// Checked: Eq. 5 for p = 2, 4, 8 (independent of p), GPipe, full recompute, the head
// (its logits split over TP), memcalc's GPT-3 line, the course recipe's runs with
// --recompute (and --recompute-every) and 2-byte precisions.
// Pitfalls: a course recipe that ignores --recompute, --recompute-every or the 2-byte
// storage (right for fp32 without recompute, which is what measure runs).
double mm_act_bytes_model(const ModelSpec *m, const Setup *s) {
    // TODO(exercise)
    (void)m;
    (void)s;
    return 0;
}

// Part measured. What gpt_alloc_acts charges to MEM_ACTIVATIONS for a (B, T) batch on
// one of tp tensor-parallel ranks, with sequence parallelism when sp (and tp > 1): the
// floats of its buffer (a->floats: the embedding's output, each layer's tensors, the
// head's; common/model_acts.c) and the two int32 arrays of token ids beside them.
// Exact, to the byte: build/measure's ledger is the judge, and every term counts.
// With tp > 1 (stage 04's layout, the same gpt_alloc_acts; the lesson's "This code's
// own activations" and ../memory_model.h): which tensors each rank holds a slice of
// (columns, heads, a block of the vocabulary padded to ceil(V/t)), which whole, what
// the vocab-parallel cross-entropy adds, and what SP splits along the sequence (N/t
// tokens) and what it leaves at all N.
// Checked: measure --check on tiny, odd and small models (static and activations,
// exact), memcalc predicting the OOM in the optimizer, and one rank of stage 04's
// split for t = 1..4, with and without SP, against bytes counted tensor by tensor.
// Pitfall: the LayerNorms' saved mean and 1/std (4 floats per token per layer).
double mm_course_act_bytes(const ModelSpec *m, int B, int T, int tp, int sp) {
    // TODO(exercise)
    (void)m;
    (void)B;
    (void)T;
    (void)tp;
    (void)sp;
    return 0;
}
