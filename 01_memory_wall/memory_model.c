// memory_model.c — the formulas of stage 01 (the reference; the exercise is
// exercises/memory_model.c, the same functions with their bodies left to you).
//
// Every number the calculator prints is built from these six functions. Each one
// is a few lines; the comments say where its terms come from.
#include <math.h>

#include "memory_model.h"

// ---------------------------------------------------------------- bytes per parameter
//
// A parameter costs memory three times: the weight the model computes with, its
// gradient, and whatever the optimizer keeps for it.
//
//   recipe          weight  grad  optimizer with AdamW (m and v)        total
//   fp32 / course     4      4    m 4 + v 4                      =  8    16
//   mixed (ZeRO)      2      2    fp32 master 4 + m 4 + v 4      = 12    16
//   Megatron bf16     2      4    master 4 + m 4 + v 4           = 12    18  (grads kept in fp32)
//   Megatron fp16     2      2    master 4 + main grad 4 + m + v = 16    20
//   pure bf16         2      2    m 2 + v 2                      =  4     8
//
// SGD with momentum keeps one moment, plain SGD none; the master copy stays.
BytesPerParam mm_bytes_per_param(Recipe r, Optim o) {
    double moments = o == OPTIM_ADAMW ? 2 : o == OPTIM_SGD_MOMENTUM ? 1 : 0;
    BytesPerParam b = {0, 0, 0};
    switch (r) {
    case RECIPE_FP32:
    case RECIPE_COURSE:        b = (BytesPerParam){4, 4, 4 * moments}; break;
    case RECIPE_MIXED_BF16:
    case RECIPE_MIXED_FP16:    b = (BytesPerParam){2, 2, 4 + 4 * moments}; break;
    case RECIPE_MEGATRON_BF16: b = (BytesPerParam){2, 4, 4 + 4 * moments}; break;
    // Megatron's fp16 path accumulates into fp32 "main grads" beside the fp16 ones;
    // they live (and are sharded) with the optimizer, which is why its distributed
    // optimizer costs 4 + 16/d bytes per parameter.
    case RECIPE_MEGATRON_FP16: b = (BytesPerParam){2, 2, 4 + 4 + 4 * moments}; break;
    case RECIPE_BF16:          b = (BytesPerParam){2, 2, 2 * moments}; break;
    default: break;
    }
    return b;
}

// ---------------------------------------------------------------- parameter count
//
// GPT block: ln_1 (2h) + c_attn (3h*h + 3h) + c_proj (h*h + h) + ln_2 (2h)
//            + c_fc (f*h + f) + c_proj (h*f + h)      = 4h^2 + 2fh + 9h + f
//            (= 12h^2 + 13h for f = 4h: Megatron's Eq. 2 term by term)
// plus the token table V*h (tied to the LM head), positions s*h and ln_f (2h).
// Llama block: q, o (h*h each), k, v (h * kv_heads*head_dim each), three SwiGLU
// matrices (3fh) and two RMSNorm weights (2h); plus the final norm (h) and untied
// embedding and LM head (2Vh).
double mm_param_count(const ModelSpec *m) {
    if (m->raw_params > 0) return m->raw_params;
    double L = m->layers, h = m->hidden, f = m->ffn, V = m->vocab, s = m->seq;
    if (m->arch == ARCH_LLAMA) {
        double kv = (double)m->kv_heads * (m->hidden / m->heads);
        return L * (2 * h * h + 2 * h * kv + 3 * f * h + 2 * h) + h + 2 * V * h;
    }
    return L * (4 * h * h + 2 * f * h + 9 * h + f) + V * h + s * h + 2 * h;
}

// ---------------------------------------------------------------- ZeRO
//
// ZeRO (Rajbhandari et al., §5): over N_d data-parallel ranks, stage 1 (P_os) keeps
// 1/N_d of the optimizer state, stage 2 (P_os+g) also of the gradients, stage 3
// (P_os+g+p) also of the weights. With 2 + 2 + 12 bytes: 4Ψ + 12Ψ/N_d, then
// 2Ψ + 14Ψ/N_d, then 16Ψ/N_d.
ModelStates mm_model_states(double psi, BytesPerParam b, int zero, int dp) {
    double shard = ceil(psi / (dp > 0 ? dp : 1));
    ModelStates s;
    s.params = b.params * (zero >= 3 ? shard : psi);
    s.grads = b.grads * (zero >= 2 ? shard : psi);
    s.optimizer = b.optimizer * (zero >= 1 ? shard : psi);
    return s;
}

// ---------------------------------------------------------------- activations
//
// Korthikanti et al. (2022) count, per layer, the tensors the backward pass needs,
// at 2 bytes per element plus 1-byte dropout masks:
//
//   attention  11sbh + 5as^2b: QKV input 2, Q and K 4, V 2, c_proj input 2, mask 1;
//              scores: softmax output 2, its dropout mask 1, dropout output 2
//   MLP        19sbh: input 2, GELU input 8, GELU output 8, mask 1
//   two norms  4sbh: their inputs
//   total      sbh(34 + 5as/h)                                         (Eq. 1)
//
// i.e. 16 elements per token (4 of them replicated across tensor-parallel ranks:
// the two norm inputs, the QKV input, the MLP input; 12 split: Q, K, V, c_proj
// input, 8 of MLP) and 2 masks, and per head a score matrix. With tensor
// parallelism t the split part and the scores divide by t (Eq. 2); sequence
// parallelism divides the replicated part too (Eq. 4); selective recompute drops
// the score matrices (recomputed, cheap in FLOPs, huge in bytes); full recompute
// keeps only the layer's input (2sbh).
//
// Generalised here: e bytes per element (4 for fp32), masks only with dropout,
// K and V of kv_heads heads (grouped-query attention), an MLP of `ffn` with two
// saved intermediates (GELU) or three (SwiGLU: gate, up, their product).
double mm_act_bytes_per_layer(const ModelSpec *m, const Setup *s) {
    if (m->raw_params > 0 || m->layers <= 0) return 0;
    double b = s->micro_batch, sq = s->seq, h = m->hidden, a = m->heads;
    double t = s->tp > 0 ? s->tp : 1, sp_div = s->sp ? t : 1;
    if (s->recipe == RECIPE_COURSE) {
        // This code, exactly (common/model_acts.c, gpt_acts_alloc): per token ln1, qkv (3),
        // atty, res_att, ln2, fch (4), fch_gelu (4), res_mlp = 16C floats plus the mean
        // and rstd of both layernorms (4 floats), and one B x NH x T x T score matrix.
        // On one of t tensor-parallel ranks (stage 04) qkv, atty, fch, fch_gelu (12C)
        // and the heads are split t ways; ln1, res_att, ln2, res_mlp and the statistics
        // (4C + 4) only with sequence parallelism (mm_course_act_bytes says why).
        // What one layer keeps: its output alone under full recompute; no attention
        // matrix under selective; with a 2-byte --precision (stage 06) all but the
        // output and the statistics in 2 bytes.
        double n = b * sq, nl = s->sp && t > 1 ? n / t : n, att = b * (a / t) * sq * sq;
        if (s->recompute == RECOMPUTE_FULL) return 4.0 * nl * h;
        if (s->recompute == RECOMPUTE_SELECTIVE) att = 0;
        if (s->course_half) return 4.0 * nl * (h + 4) + 2.0 * (nl * 3 * h + n * 12 * h / t + att);
        return 4.0 * (nl * (4 * h + 4) + n * 12 * h / t + att);
    }
    double e = mm_act_elem_bytes(s->recipe), mask = m->dropout ? 1 : 0;
    double sbh = sq * b * h;
    if (s->recompute == RECOMPUTE_FULL) return e * sbh / sp_div;
    double kv_frac = (double)m->kv_heads / m->heads;  // K, V width relative to h
    double mlp_saved = m->arch == ARCH_LLAMA ? 3 : 2;
    double replicated = 4 * e + 2 * mask;
    double split = e * (2 + 2 * kv_frac + mlp_saved * m->ffn / h);
    double bytes = sbh * (replicated / sp_div + split / t);
    if (s->recompute == RECOMPUTE_NONE) bytes += a * sq * sq * b * (e + mask * (e + 1)) / t;
    return bytes;
}

// The first pipeline stage holds the most: its L/p layers for every micro-batch in
// flight. 1F1B keeps at most p in flight, so p x L/p = L layers' worth (Eq. 5,
// independent of p); GPipe keeps all m.
double mm_act_bytes_model(const ModelSpec *m, const Setup *s) {
    if (m->raw_params > 0 || m->layers <= 0) return 0;
    if (s->recipe == RECIPE_COURSE)  // this code's layout, with its recompute and 2-byte storage
        return mm_course_stage_act_bytes(m, s->micro_batch, s->seq, s->tp, s->sp, 1, 0, 1,
                                         s->recompute, s->recompute_every, s->course_half);
    double layers = mm_layers_per_stage(m, s), in_flight = mm_in_flight(s);
    double bytes = in_flight * layers * mm_act_bytes_per_layer(m, s);
    if (s->recompute == RECOMPUTE_FULL) {
        // Backward rematerialises one layer at a time: its full activations live
        // while that layer's gradients are computed.
        Setup none = *s;
        none.recompute = RECOMPUTE_NONE;
        bytes += mm_act_bytes_per_layer(m, &none);
    }
    if (s->pp <= 1) {
        // The head, on the last stage: inputs of the final norm and of the LM head
        // (replicated unless SP), and the logits in fp32 for the loss (vocab-parallel
        // over t), as Korthikanti §4.3 lists them.
        double t = s->tp > 0 ? s->tp : 1, sbh = (double)s->seq * s->micro_batch * m->hidden;
        bytes += 2.0 * mm_act_elem_bytes(s->recipe) * sbh / (s->sp ? t : 1) +
                 4.0 * s->seq * s->micro_batch * m->vocab / t;
    }
    return bytes;
}

// gpt_alloc_acts, term by term, on one of t tensor-parallel ranks (t = 1: the whole
// model, as stages 01-03 run it). N = B*T tokens; per token and per layer:
//
//   ln1, res_att, ln2, res_mlp    C each      the residual stream and the layernorms'
//   mean and 1/std of both norms  2 each      outputs: whole on every TP rank
//   qkv 3C, atty C, fch 4C,       C/t each    the column- and row-parallel layers'
//     fch_gelu 4C                             shares: each rank has its slice of columns
//   the attention probabilities   B x NH/t x T x T: this rank's heads
//
// and around the layers: the embedding output (C per token), ln_f's output, mean and
// 1/std (C + 2), the logits of this rank's block of the vocabulary (V padded to a
// multiple of t: ceil(V/t) per token), the per-position losses (1); with t > 1 the
// vocab-parallel cross-entropy also keeps each row's max and sum of exponentials for
// its backward (2). All fp32; then the int32 token ids and targets (N each, on every
// rank).
//
// Sequence parallelism (Korthikanti et al. 2022, §4.2, Eq. 4) splits what tensor
// parallelism leaves whole -- the layernorms, the residual stream, the embedding
// output and ln_f -- along the sequence: each rank keeps N/t of those tokens (Nl).
double mm_course_act_bytes(const ModelSpec *m, int B, int T, int tp, int sp) {
    double t = tp > 0 ? tp : 1, N = (double)B * T, Nl = sp && t > 1 ? N / t : N;
    double C = m->hidden, L = m->layers, Cl = C / t, NHl = m->heads / t;
    double Vl = ceil(m->vocab / t);
    double per_layer = Nl * (4 * C + 4) + N * 12 * Cl + (double)B * NHl * T * T;
    double floats = Nl * C + L * per_layer + Nl * (C + 2) + N * Vl + N + (t > 1 ? 2 * N : 0);
    return 4.0 * floats + 2.0 * sizeof(int) * N;
}
