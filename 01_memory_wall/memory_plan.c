// memory_plan.c — what surrounds the formulas: presets, names, the per-GPU
// estimate, the allocation-order OOM prediction, the smallest sharding that fits,
// and the course's GPT over pipeline stages (stage 05).
//
// Nothing here is an exercise; it composes the functions of memory_model.c.
#include <math.h>
#include <string.h>

#include "flash_tiles.h"
#include "memory_model.h"

// ---------------------------------------------------------------- presets

int mm_preset(const char *name, ModelSpec *out) {
    // arch, L, h, a, kv, ffn, V, s, dropout. GPT-2/3 were trained with dropout;
    // Llama 2 and this course's model use none.
    static const struct { const char *name; ModelSpec m; } presets[] = {
        {"gpt2-124m", {ARCH_GPT, 12, 768, 12, 12, 3072, 50257, 1024, 1, 0}},
        {"gpt2-xl", {ARCH_GPT, 48, 1600, 25, 25, 6400, 50257, 1024, 1, 0}},
        {"llama2-7b", {ARCH_LLAMA, 32, 4096, 32, 32, 11008, 32000, 4096, 0, 0}},
        {"llama2-13b", {ARCH_LLAMA, 40, 5120, 40, 40, 13824, 32000, 4096, 0, 0}},
        {"llama2-70b", {ARCH_LLAMA, 80, 8192, 64, 8, 28672, 32000, 4096, 0, 0}},
        {"gpt3-175b", {ARCH_GPT, 96, 12288, 96, 96, 49152, 50257, 2048, 1, 0}},
        {"tiny", {ARCH_GPT, 2, 64, 4, 4, 256, 256, 32, 0, 0}},     // = common/model.c presets
        {"small", {ARCH_GPT, 4, 256, 4, 4, 1024, 256, 128, 0, 0}},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(name, presets[i].name) == 0) { *out = presets[i].m; return 0; }
    return -1;
}

Setup mm_default_setup(const ModelSpec *m) {
    Setup s = {.recipe = RECIPE_MIXED_BF16, .optim = OPTIM_ADAMW, .micro_batch = 1,
               .seq = m->seq, .recompute = RECOMPUTE_NONE, .sp = 0, .dp = 1, .tp = 1, .pp = 1,
               .zero = 0, .microbatches = 0, .gpipe = 0, .stage = 0};
    return s;
}

// ---------------------------------------------------------------- names

static const char *const recipe_names[RECIPE_COUNT] = {
    "fp32", "mixed-bf16", "mixed-fp16", "megatron-bf16", "megatron-fp16", "bf16", "course",
};
static const char *const recipe_help[RECIPE_COUNT] = {
    "fp32 weights, fp32 grads, fp32 optimizer state",
    "bf16 weights and grads, fp32 master weights and optimizer state (ZeRO's 2+2+K)",
    "fp16 weights and grads, fp32 master weights and optimizer state (ZeRO's 2+2+K)",
    "Megatron-LM: bf16 weights, fp32 grads, fp32 master weights and optimizer state",
    "Megatron-LM: fp16 weights and grads, fp32 main grads, master weights, optimizer state",
    "pure bf16: bf16 weights, grads and optimizer state, no fp32 master",
    "this course's code: weights, gradients, optimizer in fp32 slots; activations as "
    "gpt_alloc_acts allocates them, the layers' in 2 bytes with a 2-byte --precision",
};

const char *mm_recipe_name(Recipe r) { return r < RECIPE_COUNT ? recipe_names[r] : "?"; }
const char *mm_recipe_help(Recipe r) { return r < RECIPE_COUNT ? recipe_help[r] : "?"; }

int mm_recipe_parse(const char *s, Recipe *r) {
    for (int i = 0; i < RECIPE_COUNT; i++)
        if (strcmp(s, recipe_names[i]) == 0) { *r = (Recipe)i; return 0; }
    return -1;
}

static const char *const optim_names[OPTIM_COUNT] = {"adamw", "sgd-momentum", "sgd"};
const char *mm_optim_name(Optim o) { return o < OPTIM_COUNT ? optim_names[o] : "?"; }
int mm_optim_parse(const char *s, Optim *o) {
    for (int i = 0; i < OPTIM_COUNT; i++)
        if (strcmp(s, optim_names[i]) == 0) { *o = (Optim)i; return 0; }
    return -1;
}

static const char *const recompute_names[3] = {"none", "selective", "full"};
const char *mm_recompute_name(Recompute r) {
    return (int)r >= 0 && r <= RECOMPUTE_FULL ? recompute_names[r] : "?";
}
int mm_recompute_parse(const char *s, Recompute *r) {
    for (int i = 0; i < 3; i++)
        if (strcmp(s, recompute_names[i]) == 0) { *r = (Recompute)i; return 0; }
    return -1;
}

int mm_act_elem_bytes(Recipe r) { return r == RECIPE_FP32 || r == RECIPE_COURSE ? 4 : 2; }

// ---------------------------------------------------------------- the estimate

int mm_layers_per_stage(const ModelSpec *m, const Setup *s) {
    int p = s->pp > 0 ? s->pp : 1;
    return (m->layers + p - 1) / p;
}

int mm_in_flight(const Setup *s) {
    int p = s->pp > 0 ? s->pp : 1;
    int mb = s->microbatches > 0 ? s->microbatches : p;
    return s->gpipe ? mb : (mb < p ? mb : p);
}

// On one of t tensor-parallel ranks (t = 1: the whole model), N = B*T tokens, Nl = N/t
// with sequence parallelism and N without:
//   dres, dln                 Nl x C each   gradients of the residual stream and the norms
//   datty C/t, dqkv 3C/t,     per token     of this rank's slices of the parallel layers
//     dbig, dbig2 4C/t each
//   datt                      B x NH/t x T x T
//   SP: a column-parallel layer's input gathered over the sequence (N x C) and its
//       full-width gradient before the reduce-scatter (N x C)
//   t > 1: every rank's row maxima, gathered (t x N), for the vocab-parallel loss.
// At t = 1: 14C floats per token plus one score matrix.
double mm_course_workspace_bytes(const ModelSpec *m, int B, int T, int tp, int sp) {
    double t = tp > 0 ? tp : 1, N = (double)B * T, Nl = sp && t > 1 ? N / t : N;
    double C = m->hidden, Cl = C / t;
    double floats = 2 * Nl * C + N * Cl + N * 3 * Cl + 2 * N * 4 * Cl +
                    (double)B * (m->heads / t) * T * T;
    if (sp && t > 1) floats += 2 * N * C;
    if (t > 1) floats += t * N;
    return 4.0 * floats;
}

double mm_course_cp_act_bytes(const ModelSpec *m, int B, int T, int cp) {
    double Tl = (double)T / cp, L = m->layers, NH = m->heads;
    return mm_course_act_bytes(m, B, T / cp, 1, 0) - 4 * L * B * NH * (Tl * Tl - Tl);
}

double mm_course_cp_workspace_bytes(const ModelSpec *m, int B, int T, int cp, int ulysses) {
    double Tl = (double)T / cp, C = m->hidden, NH = m->heads;
    double layers = mm_course_workspace_bytes(m, B, T / cp, 1, 0) - 4.0 * B * NH * Tl * Tl;
    if (cp <= 1) return layers;
    if (ulysses) return layers + 4 * 8 * B * Tl * C;
    // The ring's forward holds a block's partial output and lse (Tl (hs + 1) floats) and a
    // tile's scores (FLASH_BR Tl), its backward D a row and head (B NH Tl) and a tile's P and
    // dP (2 FLASH_BR Tl): the larger is the peak.
    double fwd = Tl * (C / NH + 1) + FLASH_BR * Tl, bwd = B * NH * Tl + 2 * FLASH_BR * Tl;
    return layers + 4 * (fwd > bwd ? fwd : bwd);
}

double mm_course_cp_comm_bytes(const ModelSpec *m, int B, int T, int cp, int ulysses) {
    double Tl = (double)T / cp, C = m->hidden;
    return cp <= 1 ? 0 : 4 * 2 * B * Tl * (ulysses ? 3 : 4) * C;
}

// Stage 04's split of the GPT over t ranks: wte by vocabulary blocks (V padded to a
// multiple of t), wpe whole; per layer c_attn (3C x C + 3C) and c_fc (4C x C + 4C) by
// output rows, both c_proj weights (C x C, C x 4C) by input columns with their biases
// (C each) whole, the two layernorms (4C) whole; ln_f (2C) whole. Per layer that is
// (12C^2 + 7C)/t + 6C, the 12C^2 + 13C of mm_param_count at t = 1.
double mm_course_params_per_rank(const ModelSpec *m, int tp) {
    double t = tp > 0 ? tp : 1, C = m->hidden, L = m->layers;
    double Vl = ceil(m->vocab / t);
    return Vl * C + (double)m->seq * C + L * ((12 * C * C + 7 * C) / t + 6 * C) + 2 * C;
}

// ---------------------------------------------------------------- the course over stages
//
// Stage 05 cuts this GPT into p stages of consecutive layers (05_pipeline/pipe_model.c,
// pp_layers); each stage is a GPT of its own (common/model.h's GPTPart) holding its
// layers' weights, stage 0 also wte and wpe, the last stage also ln_f and a copy of wte
// (the tied LM head). Its engine allocates one gpt_acts_alloc set per micro-batch at
// the micro-batch's receive or forward and frees it at its backward, so a stage's
// activation peak is (micro-batches in flight) x (one set). The gradient workspace is
// one per stage and sized by B, T, t and SP only: mm_course_workspace_bytes on every
// stage. The messages in flight are charged to MEM_COMM, which no recipe here counts.

void mm_stage_layers(int L, int pp, int stage, int *l0, int *l1) {
    int p = pp > 0 ? pp : 1, base = L / p, extra = L % p;
    *l0 = stage * base + (stage < extra ? stage : extra);
    *l1 = *l0 + base + (stage < extra);
}

// 1F1B: stage s runs p - s forwards before its first backward (the warm-up), then one
// backward per forward, so p - s micro-batches are in flight at most (fewer if m is
// smaller); GPipe runs every forward first.
int mm_stage_in_flight(const Setup *s, int stage) {
    int p = s->pp > 0 ? s->pp : 1;
    int mb = s->microbatches > 0 ? s->microbatches : p, left = p - stage;
    return s->gpipe ? mb : (mb < left ? mb : left);
}

double mm_course_stage_act_bytes(const ModelSpec *m, int B, int T, int tp, int sp, int pp,
                                 int stage, int in_flight, Recompute rc, int every, int half) {
    int p = pp > 0 ? pp : 1, k = every > 0 ? every : 1, l0, l1;
    mm_stage_layers(m->layers, p, stage, &l0, &l1);
    double t = tp > 0 ? tp : 1, N = (double)B * T, Nl = sp && t > 1 ? N / t : N;
    double C = m->hidden, Cl = C / t, NHl = m->heads / t, Vl = ceil(m->vocab / t);
    double att = (double)B * NHl * T * T;
    double layer = Nl * (4 * C + 4) + N * 12 * Cl + att;
    double head = stage == p - 1 ? Nl * (C + 2) + N * Vl + N + (t > 1 ? 2 * N : 0) : 0;
    double kept = 0, halves = 0, remat = 0;
    for (int l = l0; l < l1; l++) {
        if (rc == RECOMPUTE_FULL && l % k == 0) {
            kept += Nl * C, remat = layer;
        } else if (half) {
            kept += Nl * (C + 4);
            halves += Nl * 3 * C + N * 12 * Cl + (rc == RECOMPUTE_SELECTIVE ? 0 : att);
            remat = layer;
        } else {
            kept += rc == RECOMPUTE_SELECTIVE ? layer - att : layer;
        }
    }
    if (rc == RECOMPUTE_SELECTIVE && l1 > l0 && !half) remat = att;
    double floats = Nl * C + kept + head;  // the input, the layers, the head
    return in_flight * (4.0 * floats + 2.0 * halves + 2.0 * sizeof(int) * N) + 4.0 * remat;
}

double mm_course_fp8_workspace_bytes(const ModelSpec *m, int B, int T) {
    double N = (double)B * T, C = m->hidden, V = m->vocab, big = 4 * C > V ? 4 * C : V;
    return 4.0 * (N * 4 * C + big * C + N * big);
}

double mm_course_stage_params(const ModelSpec *m, int tp, int pp, int stage) {
    int p = pp > 0 ? pp : 1, l0, l1;
    mm_stage_layers(m->layers, p, stage, &l0, &l1);
    double t = tp > 0 ? tp : 1, C = m->hidden, Vl = ceil(m->vocab / t);
    int first = stage == 0, last = stage == p - 1;
    double n = (l1 - l0) * ((12 * C * C + 7 * C) / t + 6 * C);
    if (first || last) n += Vl * C;     // wte on stage 0, its copy on the last: once if p = 1
    if (first) n += (double)m->seq * C;  // wpe
    if (last) n += 2 * C;                // ln_f
    return n;
}

MemEstimate mm_estimate(const ModelSpec *m, const Setup *s) {
    MemEstimate e;
    memset(&e, 0, sizeof e);
    int mp = (s->tp > 0 ? s->tp : 1) * (s->pp > 0 ? s->pp : 1);
    int have_arch = !(m->raw_params > 0);
    // The course recipe over pipeline stages: one stage's numbers, the one asked for or
    // the busiest (the largest total; the first of equals).
    int staged = s->recipe == RECIPE_COURSE && have_arch && s->pp > 1;
    if (staged && (s->stage < 0 || s->stage >= s->pp)) {
        Setup k = *s;
        for (k.stage = 0; k.stage < s->pp; k.stage++) {
            MemEstimate x = mm_estimate(m, &k);
            if (k.stage == 0 || x.bytes_total > e.bytes_total) e = x;
        }
        return e;
    }
    int stage = staged ? s->stage : 0;
    e.stage = stage;
    e.params = mm_param_count(m);
    // The course recipe splits exactly as stage 04's code does (what stays whole is
    // counted on every rank), and stage 05's over stages; the others approximate with
    // an even split.
    if (staged)
        e.params_per_gpu = mm_course_stage_params(m, s->tp, s->pp, stage);
    else if (s->recipe == RECIPE_COURSE && have_arch)
        e.params_per_gpu = mm_course_params_per_rank(m, s->tp);
    else
        e.params_per_gpu = ceil(e.params / mp);
    e.bpp = mm_bytes_per_param(s->recipe, s->optim);
    if (s->recipe == RECIPE_COURSE && s->course_precision) e.bpp.optimizer += 4;  // masters
    ModelStates ms = mm_model_states(e.params_per_gpu, e.bpp, s->zero, s->dp);
    e.bytes_params = ms.params;
    e.bytes_grads = ms.grads;
    e.bytes_optimizer = ms.optimizer;
    if (staged) {
        int l0, l1;
        mm_stage_layers(m->layers, s->pp, stage, &l0, &l1);
        e.act_per_layer = mm_act_bytes_per_layer(m, s);
        e.layers_per_stage = l1 - l0;
        e.in_flight = mm_stage_in_flight(s, stage);
        e.bytes_activations = mm_course_stage_act_bytes(m, s->micro_batch, s->seq, s->tp, s->sp,
                                                        s->pp, stage, e.in_flight, s->recompute,
                                                        s->recompute_every, s->course_half);
        e.bytes_workspace = mm_course_workspace_bytes(m, s->micro_batch, s->seq, s->tp, s->sp);
    } else if (have_arch) {
        e.act_per_layer = mm_act_bytes_per_layer(m, s);
        e.bytes_activations = mm_act_bytes_model(m, s);
        e.layers_per_stage = mm_layers_per_stage(m, s);
        e.in_flight = mm_in_flight(s);
        if (s->recipe == RECIPE_COURSE)
            e.bytes_workspace = mm_course_workspace_bytes(m, s->micro_batch, s->seq, s->tp,
                                                          s->sp);
    }
    if (s->recipe == RECIPE_COURSE && s->course_precision == 2 && have_arch)
        e.bytes_workspace += mm_course_fp8_workspace_bytes(m, s->micro_batch, s->seq);
    if (s->recipe == RECIPE_COURSE && have_arch && s->cp >= 1) {  // tp = pp = 1 (memcalc checks)
        e.bytes_activations = mm_course_cp_act_bytes(m, s->micro_batch, s->seq, s->cp);
        e.bytes_workspace = mm_course_cp_workspace_bytes(m, s->micro_batch, s->seq, s->cp,
                                                         s->cp_ulysses);
        e.bytes_comm = mm_course_cp_comm_bytes(m, s->micro_batch, s->seq, s->cp, s->cp_ulysses);
        // One layer's saved tensors for this rank's rows: 16C + 4 floats a row and a
        // log-sum-exp a row and head (mm_course_act_bytes' per_layer, flash attention's).
        double N = (double)s->micro_batch * s->seq / s->cp, C = m->hidden;
        e.act_per_layer = 4 * (N * (16 * C + 4) + N * m->heads);
    }
    e.bytes_total = e.bytes_params + e.bytes_grads + e.bytes_optimizer + e.bytes_activations +
                    e.bytes_workspace + e.bytes_comm;
    return e;
}

const char *mm_first_oom(const MemEstimate *e, double capacity) {
    const char *names[] = {"params", "grads", "optimizer", "activations", "workspace", "comm"};
    double parts[] = {e->bytes_params, e->bytes_grads, e->bytes_optimizer, e->bytes_activations,
                      e->bytes_workspace, e->bytes_comm};
    double held = 0;
    for (int i = 0; i < 6; i++) {
        held += parts[i];
        if (held > capacity) return names[i];
    }
    return NULL;
}

int mm_find_fit(const ModelSpec *m, const Setup *base, int gpus, double capacity, Setup *out,
                MemEstimate *est) {
    int have_arch = !(m->raw_params > 0);
    for (int mp = 1; mp <= gpus; mp++) {
        if (gpus % mp) continue;
        for (int zero = 0; zero <= 3; zero++) {
            // TP before PP: the largest tensor-parallel degree (at most 8, one node)
            // that divides mp and the heads.
            for (int tp = 8; tp >= 1; tp /= 2) {
                if (mp % tp) continue;
                if (have_arch && (m->heads % tp || m->kv_heads % tp)) continue;
                int pp = mp / tp;
                if (have_arch && pp > m->layers) continue;
                // This code has TP (stage 04), with SP only over whole token shares,
                // and PP (stage 05), whose busiest stage must fit.
                if (base->recipe == RECIPE_COURSE && base->sp &&
                    ((long)base->micro_batch * base->seq) % tp)
                    continue;
                Setup s = *base;
                s.tp = tp;
                s.pp = pp;
                if (base->recipe == RECIPE_COURSE) s.stage = -1;
                s.dp = gpus / mp;
                s.zero = zero;
                MemEstimate e = mm_estimate(m, &s);
                if (e.bytes_total <= capacity) {
                    *out = s;
                    if (est) *est = e;
                    return 0;
                }
            }
        }
    }
    return -1;
}
