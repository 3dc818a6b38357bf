// exercises/memory_model.c — stage 01's exercise: the formulas of the memory
// calculator. Same functions as ../memory_model.c; the bodies are yours.
//
//   make grade-1              every part, with a score
//   make grade-1 PART=zero_sharding
//
// Read ../README.md first (the 16-bytes rule, ZeRO, Korthikanti's activation count),
// and ../memory_model.h for what each function must return. The parts, and the
// tests that grade them (tests/test_memory_model.c, tests/test_memcalc.sh,
// build-ex/measure --check), are listed in parts.txt.
#include <math.h>

#include "../memory_model.h"

// Bytes per parameter of the weights, the gradients and the optimizer state.
BytesPerParam mm_bytes_per_param(Recipe r, Optim o) {
    // TODO(exercise): fill in the table of the lesson.
    //  - How many moments does each optimizer keep? AdamW 2 (m, v), SGD with momentum 1,
    //    SGD 0.
    //  - fp32 and course: 4-byte weights and grads; the moments in fp32; no master copy.
    //  - mixed-bf16 / mixed-fp16 (ZeRO): 2 + 2, and the optimizer keeps an fp32 master
    //    copy (4) besides fp32 moments: K = 12 with AdamW.
    //  - megatron-bf16: like mixed, but the gradients are fp32 (4): 18 with AdamW.
    //  - megatron-fp16: like mixed, plus fp32 "main grads" (4) counted with the
    //    optimizer, which is what its distributed optimizer shards: 20 with AdamW.
    //  - bf16 (pure): 2 + 2, moments in bf16, no master copy: 8 with AdamW.
    (void)r;
    (void)o;
    BytesPerParam b = {0, 0, 0};
    return b;
}

// Parameters of the architecture (or m->raw_params when that is > 0).
double mm_param_count(const ModelSpec *m) {
    // TODO(exercise): count every tensor once.
    //  - GPT block: ln_1 and ln_2 (weight and bias each), c_attn (3h x h + bias),
    //    attn c_proj (h x h + bias), c_fc (ffn x h + bias), mlp c_proj (h x ffn + bias).
    //    Plus the token table (V x h, tied to the LM head), the positions (seq x h),
    //    ln_f (2h). GPT-2 124M must come out as 124,439,808.
    //  - Llama block: q and o (h x h), k and v (h x kv_heads*head_dim), three SwiGLU
    //    matrices (ffn x h), two RMSNorm weights (h). Plus the final norm (h), the token
    //    table and an untied LM head (V x h each). Llama-2-7B: 6,738,415,616.
    //  - Count in double: 70e9 does not fit in an int.
    (void)m;
    return 0;
}

// Per-GPU bytes of weights, gradients and optimizer state under ZeRO.
ModelStates mm_model_states(double psi, BytesPerParam b, int zero, int dp) {
    // TODO(exercise): ZeRO stage 1 shards the optimizer state over dp ranks, stage 2
    // also the gradients, stage 3 also the weights. A shard is ceil(psi / dp)
    // parameters. Check yourself against ZeRO's Figure 1: 7.5B on 64 GPUs with
    // 2 + 2 + 12 bytes is 120 -> 31.4 -> 16.6 -> 1.875 GB.
    (void)psi;
    (void)b;
    (void)zero;
    (void)dp;
    ModelStates s = {0, 0, 0};
    return s;
}

// Activation bytes of one layer, one micro-batch, one GPU.
double mm_act_bytes_per_layer(const ModelSpec *m, const Setup *s) {
    // TODO(exercise): Korthikanti et al., generalised.
    //  - Nothing to count without an architecture (m->raw_params > 0): return 0.
    //  - RECIPE_COURSE is this code exactly: 4 bytes x (b*s*(16h + 4) + b*a*s*s) -- read
    //    gpt_acts_alloc in common/model_acts.c and find the 16 tensors and the 4 statistics.
    //    On one of t = s->tp ranks (stage 04) the 12h of qkv, atty, fch, fch_gelu and the
    //    a heads divide by t; the other 4h + 4 only with s->sp (see mm_course_act_bytes).
    //    Stage 06's options change what a layer keeps (memory_model.h, above
    //    mm_course_stage_act_bytes): s->recompute full keeps only the layer's output
    //    (4 bytes x its h per token), selective no score matrices; s->course_half stores
    //    all but the output and the 4 statistics in 2 bytes a value.
    //  - Otherwise e = mm_act_elem_bytes(s->recipe) bytes per element, and a 1-byte mask
    //    per dropout when m->dropout. Per token (multiply by s*b*h):
    //      replicated over TP ranks: 4 elements (two norm inputs, QKV input, MLP input)
    //                                + 2 masks; divided by t only with sequence parallelism
    //      split over t:             Q 1, K and V kv_heads/heads each, attention output 1,
    //                                and the MLP's intermediates: 2 x ffn/h (GELU: input,
    //                                output) or 3 x ffn/h (SwiGLU: gate, up, product)
    //    plus, per head, the s x s scores (x b, / t): softmax output e, and with dropout
    //    also its mask (1) and its output (e). For GPT-3 with 16-bit and dropout that is
    //    sbh(34 + 5as/h): 2868.9 MB per layer.
    //  - Selective recompute drops the score matrices. Full recompute keeps only the
    //    layer input: e*s*b*h (divided by t with SP).
    (void)m;
    (void)s;
    return 0;
}

// Activation bytes on the busiest GPU (the first pipeline stage).
double mm_act_bytes_model(const ModelSpec *m, const Setup *s) {
    // TODO(exercise):
    //  - raw_params > 0: 0. RECIPE_COURSE: one set of gpt_acts_alloc's buffers, as
    //    memory_plan.c's mm_course_stage_act_bytes(m, s->micro_batch, s->seq, s->tp, s->sp,
    //    1, 0, 1, s->recompute, s->recompute_every, s->course_half) counts them: your
    //    mm_course_act_bytes below (one stage, one micro-batch, no recompute, 4 bytes)
    //    with stage 06's recompute and 2-byte storage. Pass them all: a run with
    //    --recompute or a 2-byte --precision must be predicted too.
    //  - mm_layers_per_stage(m, s) layers x mm_in_flight(s) micro-batches x one layer
    //    (Korthikanti Eq. 5: with 1F1B this is L layers' worth for any p).
    //  - Full recompute: add one layer without recompute (it is rematerialised during
    //    the backward pass).
    //  - s->pp <= 1 (this GPU also has the head): add the inputs of the final norm and of
    //    the LM head (2 elements per token, / t with SP) and the fp32 logits,
    //    4 x s x b x V / t bytes.
    (void)m;
    (void)s;
    return 0;
}

// What gpt_alloc_acts charges to MEM_ACTIVATIONS for a (B, T) batch on one of tp
// tensor-parallel ranks, with sequence parallelism when sp.
double mm_course_act_bytes(const ModelSpec *m, int B, int T, int tp, int sp) {
    // TODO(exercise): read gpt_acts_alloc in common/model_acts.c and add up the floats
    // its buffer holds (a->floats: the embedding's output, each layer's tensors, the
    // head's) and the two int32 arrays of token ids it allocates beside them. Your
    // number must match build/measure's ledger exactly, to the byte: every term counts.
    // Start with tp = 1 (no sp): the whole model, as stages 01-03 run it. Then what
    // t = tp > 1 changes, tensor by tensor, with N = B*T tokens (stage 04's layout,
    // the same gpt_alloc_acts):
    //  - split t ways: qkv, atty, fch, fch_gelu (each rank has C/t of their columns),
    //    the attention probabilities (NH/t heads), the logits (a block of the
    //    vocabulary, padded to a multiple of t: ceil(V/t) columns);
    //  - whole on every rank: the residual stream and everything of the layernorms
    //    (encoded, ln1, res_att, ln2, res_mlp, the mean and 1/std, ln_f), the losses and
    //    the token ids;
    //  - new: the vocab-parallel cross-entropy keeps each row's max and sum of
    //    exponentials (2 floats per token) for its backward;
    //  - sp (only with tp > 1; Korthikanti et al., Eq. 4): the residual stream and the
    //    layernorms' tensors (the list above up to ln_f) are split along the sequence,
    //    N/t tokens per rank; the split tensors, the losses, the max and sum pairs and
    //    the token ids keep all N.
    (void)m;
    (void)B;
    (void)T;
    (void)tp;
    (void)sp;
    return 0;
}
