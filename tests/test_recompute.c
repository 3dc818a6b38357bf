// test_recompute.c — stage 06's activation recompute on one process.
//
// mp.recompute.LEVEL.grads    the gradients (and the loss) with recompute LEVEL are
//                             BITWISE those without: the backward reads the same
//                             numbers whether they were kept or computed again (the
//                             same calls on the same inputs, in the same order).
// mp.recompute.LEVEL.memory   what the ledger charges to MEM_ACTIVATIONS = the stage-01
//                             calculator's course recipe with --recompute LEVEL
//                             (mm_course_stage_act_bytes), to the byte; and less than
//                             without recompute.
// mp.recompute.LEVEL.steps    3 AdamW steps: the weights bitwise those without.
// mp.recompute.LEVEL.reruns   what the backward computes again, counted by the
//                             attention forwards it calls: selective one per layer
//                             (the attention matrix), full every k only the layers
//                             l % k == 0 (the others kept everything), none nothing.
// mp.recompute.selective.two_pass   the zero-bubble pipeline's backward in two passes
//                             (stage 05) recomputes the attention matrix in its input
//                             pass: bitwise the one-pass gradients.
// LEVEL: selective, full, full_every2 (layers 0 and 2 of 4), full_every3 (0 and 3).
//
// The mixed recipes store each layer's saved tensors in 2 bytes (model_acts.c):
// mp.packed.RECIPE.LEVEL.grads   gradients and loss BITWISE those of the same recipe
//                             with the activations in fp32 slots (every packed value
//                             was rounded to the 2-byte type first: packing is exact);
// mp.packed.RECIPE.LEVEL.steps   the weights after 3 AdamW steps, bitwise;
// mp.packed.RECIPE.LEVEL.memory  the ledger's activations = the calculator's course
//                             recipe with that --precision (half = 1), to the byte, and
//                             less than in fp32 slots;
// mp.packed.bf16.two_pass     the zero-bubble backward unpacks each layer in both passes.
// RECIPE: mixed-bf16, mixed-fp16 (fp16 keeps subnormals: the gradients have them);
// LEVEL: none, selective, full_every2 (two layers packed, two recomputed).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "../01_memory_wall/memory_model.h"
#include "ctx.h"
#include "harness.h"
#include "model.h"
#include "ops.h"
#include "optim.h"
#include "precision.h"
#include "rng.h"

enum { B = 2, STEPS = 3 };
static const GPTConfig CFG = {.n_layer = 4, .n_embd = 32, .n_head = 4, .seq_len = 8, .vocab = 61};

typedef struct {
    float loss;
    float *grads;            // after one forward and backward
    float *params;           // after STEPS AdamW steps
    size_t act_bytes;        // MEM_ACTIVATIONS held once allocated
    size_t n;
    long reruns;             // attention forwards during the first backward
} Run;

// The backend with its attention forward counted: every layer's forward calls it
// once, and so does every recomputation of a layer or of its attention matrix.
static long attention_calls;
static void (*attention_forward_real)(Ctx *, float *, float *, const float *, int, int, int, int,
                                      DType);
static void attention_forward_counted(Ctx *ctx, float *out, float *att, const float *qkv, int Bn,
                                      int T, int C, int NH, DType rt) {
    attention_calls++;
    attention_forward_real(ctx, out, att, qkv, Bn, T, C, NH, rt);
}

static void batch(int step, int *tok, int *tgt) {
    Rng r;
    rng_seed(&r, 1000 + (uint64_t)step);
    for (int i = 0; i < B * CFG.seq_len; i++) {
        tok[i] = (int)rng_below(&r, (uint32_t)CFG.vocab);
        tgt[i] = (int)rng_below(&r, (uint32_t)CFG.vocab);
    }
}

static Run run_as(GPTRecipe recipe, int fp32_slots, GPTRecompute rc, int every, int two_pass) {
    Ctx ctx;
    ctx_init(&ctx, DEV_CPU, 1, 0);
    Ops counted = *ctx.ops;
    attention_forward_real = ctx.ops->attention_forward;
    counted.attention_forward = attention_forward_counted;
    ctx.ops = &counted;
    GPT g;
    gpt_init(&g, &ctx, &CFG, 7);
    g.plugins = &precision_plugins;  // this stage's recompute (the model calls it)
    gpt_set_recompute(&g, rc, every);
    gpt_set_precision(&g, recipe, 5);
    gpt_set_acts_fp32(&g, fp32_slots);
    gpt_alloc_grads(&g);
    gpt_alloc_acts(&g, B, CFG.seq_len);
    Run out = {0};
    out.n = g.n_params;
    out.act_bytes = ctx.ledger.current[MEM_ACTIVATIONS];
    AdamWConfig oc = adamw_default_config();
    oc.master = gpt_recipe_master(recipe);
    AdamW opt;
    adamw_init(&opt, &g, &oc, 0, g.n_params);
    int T = CFG.seq_len, L = CFG.n_layer, tok[B * 8], tgt[B * 8];
    for (int s = 0; s < STEPS; s++) {
        batch(s, tok, tgt);
        gpt_zero_grad(&g);
        float loss = gpt_forward(&g, tok, tgt, B, T);
        long before = attention_calls;
        if (!two_pass) {
            gpt_backward(&g, 1.0f);
            if (s == 0) out.reruns = attention_calls - before;
        } else {  // stage 05's zero-bubble split: input gradients first, weights after
            float *keep = xcalloc(gpt_keep_floats(&g, 0, L, B, T), sizeof(float));
            gpt_head_backward(&g, gpt_layer_output(&g, L - 1), g.dres, 1.0f, B, T);
            gpt_blocks_backward_input(&g, g.acts.encoded, g.dres, 0, L, B, T, keep);
            gpt_embed_backward(&g, g.dres, B, T);
            gpt_blocks_backward_weight(&g, g.acts.encoded, 0, L, B, T, keep);
            free(keep);
        }
        if (s == 0) {
            out.loss = loss;
            out.grads = xmalloc(g.n_params * sizeof(float));
            memcpy(out.grads, g.grads, g.n_params * sizeof(float));
        }
        adamw_step(&opt, &g, grad_global_norm(&g));
    }
    out.params = xmalloc(g.n_params * sizeof(float));
    memcpy(out.params, g.params, g.n_params * sizeof(float));
    adamw_free(&opt, &g);
    gpt_free(&g);
    ctx_destroy(&ctx);
    return out;
}
static Run run(GPTRecompute rc, int every, int two_pass) {
    return run_as(PREC_FP32, 0, rc, every, two_pass);
}

// The first element where a and b differ, or -1.
static long first_diff(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (memcmp(&a[i], &b[i], sizeof(float))) return (long)i;
    return -1;
}

static void free_run(Run *r) {
    free(r->grads);
    free(r->params);
}

// The 2-byte storage against fp32 slots holding the same numbers.
static void test_packed(TestState *ts, const ModelSpec *m) {
    static const struct { const char *name; GPTRecompute rc; Recompute mm; int every; } levels[] = {
        {"none", GPT_RECOMPUTE_NONE, RECOMPUTE_NONE, 1},
        {"selective", GPT_RECOMPUTE_SELECTIVE, RECOMPUTE_SELECTIVE, 1},
        {"full_every2", GPT_RECOMPUTE_FULL, RECOMPUTE_FULL, 2},
    };
    static const GPTRecipe recipes[] = {PREC_MIXED_BF16, PREC_MIXED_FP16};
    char name[96];
    for (size_t r = 0; r < 2; r++)
        for (size_t i = 0; i < sizeof levels / sizeof *levels; i++) {
            const char *rn = gpt_recipe_name(recipes[r]);
            Run slots = run_as(recipes[r], 1, levels[i].rc, levels[i].every, 0);
            Run packed = run_as(recipes[r], 0, levels[i].rc, levels[i].every, 0);
            long d = first_diff(packed.grads, slots.grads, slots.n);
            snprintf(name, sizeof name, "mp.packed.%s.%s.grads", rn, levels[i].name);
            test_report(ts, d < 0 && memcmp(&packed.loss, &slots.loss, sizeof(float)) == 0, name,
                        "loss %.7f vs %.7f in fp32 slots; %s", packed.loss, slots.loss,
                        d < 0 ? "every gradient bitwise" : "gradients differ");
            if (d >= 0) printf("  first difference at element %ld: %.9g vs %.9g\n", d,
                               packed.grads[d], slots.grads[d]);
            d = first_diff(packed.params, slots.params, slots.n);
            snprintf(name, sizeof name, "mp.packed.%s.%s.steps", rn, levels[i].name);
            test_report(ts, d < 0, name, "weights after %d AdamW steps %s", STEPS,
                        d < 0 ? "bitwise" : "differ");
            double pred = mm_course_stage_act_bytes(m, B, CFG.seq_len, 1, 0, 1, 0, 1,
                                                    levels[i].mm, levels[i].every, 1);
            snprintf(name, sizeof name, "mp.packed.%s.%s.memory", rn, levels[i].name);
            test_report(ts, (double)packed.act_bytes == pred && packed.act_bytes < slots.act_bytes,
                        name, "activations %zu B (calculator %.0f); in fp32 slots %zu B",
                        packed.act_bytes, pred, slots.act_bytes);
            free_run(&slots);
            free_run(&packed);
        }
    Run slots = run_as(PREC_MIXED_BF16, 1, GPT_RECOMPUTE_NONE, 1, 0);
    Run zb = run_as(PREC_MIXED_BF16, 0, GPT_RECOMPUTE_NONE, 1, 1);
    int same = first_diff(zb.grads, slots.grads, slots.n) < 0 &&
               first_diff(zb.params, slots.params, slots.n) < 0;
    test_report(ts, same, "mp.packed.bf16.two_pass", "input pass then weight pass, packed, "
                "against one pass in fp32 slots: %s", same ? "bitwise" : "differs");
    free_run(&slots);
    free_run(&zb);
}

// Full recompute must compute a layer again into the shared layer (g->remat) and leave
// the layer's saved output alone: it is the next layer's input, and in a pipeline the
// buffer the stage sent, which a GPU may still be reading. Writing the same bits back
// would pass every numerical check on the CPU, so the saved output is poisoned before
// each recompute and must come out of it untouched, while the recomputed output
// equals what the forward saved, bit for bit.
static void test_saved_output(TestState *ts, int every) {
    const char *name = every == 1 ? "mp.recompute.full.saved_output"
                                  : "mp.recompute.full_every2.saved_output";
    Ctx ctx;
    ctx_init(&ctx, DEV_CPU, 1, 0);
    GPT g;
    gpt_init(&g, &ctx, &CFG, 7);
    g.plugins = &precision_plugins;
    gpt_set_recompute(&g, GPT_RECOMPUTE_FULL, every);
    gpt_alloc_grads(&g);
    gpt_alloc_acts(&g, B, CFG.seq_len);
    int T = CFG.seq_len, tok[B * 8], tgt[B * 8];
    size_t n = (size_t)B * T * CFG.n_embd;
    batch(0, tok, tgt);
    gpt_forward(&g, tok, tgt, B, T);
    float *saved = xmalloc(n * sizeof(float));
    int bad = 0, layers = 0;
    for (int l = 0; l < CFG.n_layer && !bad; l++) {
        if (!gpt_layer_recomputed(&g, l)) continue;
        layers++;
        float *out = g.acts.layers[l].res_mlp;
        const float *x = l == 0 ? g.acts.encoded : g.acts.layers[l - 1].res_mlp;
        memcpy(saved, out, n * sizeof(float));
        for (size_t i = 0; i < n; i++) out[i] = float_from_bits(0x7fc0dead);  // a marked NaN
        LayerActs a = gpt_recompute_layer(&g, x, l, B, T);
        for (size_t i = 0; i < n && !bad; i++)
            if (float_bits(out[i]) != 0x7fc0dead) {
                bad = 1;
                test_report(ts, 0, name,
                            "layer %d: recomputing it wrote into its saved output (element %zu): "
                            "recompute into g->remat, whose res_mlp is the layer's own", l, i);
            }
        if (!bad && (a.res_mlp == out || memcmp(a.res_mlp, saved, n * sizeof(float)) != 0)) {
            bad = 1;
            test_report(ts, 0, name,
                        "layer %d: the recomputed output %s", l, a.res_mlp == out ?
                        "is the saved buffer (return g->remat's)" : "differs from the one the forward saved");
        }
        memcpy(out, saved, n * sizeof(float));
    }
    if (!bad)
        test_report(ts, layers > 0, name,
                    "%d layer%s recomputed into g->remat, their saved outputs untouched and "
                    "equal, bitwise, to the recomputed ones", layers, layers == 1 ? "" : "s");
    free(saved);
    gpt_free(&g);
    ctx_destroy(&ctx);
}

int main(void) {
    TestState ts = {0, 0};
    ModelSpec m = {.arch = ARCH_GPT, .layers = CFG.n_layer, .hidden = CFG.n_embd,
                   .heads = CFG.n_head, .kv_heads = CFG.n_head, .ffn = 4 * CFG.n_embd,
                   .vocab = CFG.vocab, .seq = CFG.seq_len};
    static const struct { const char *name; GPTRecompute rc; Recompute mm; int every; } levels[] = {
        {"selective", GPT_RECOMPUTE_SELECTIVE, RECOMPUTE_SELECTIVE, 1},
        {"full", GPT_RECOMPUTE_FULL, RECOMPUTE_FULL, 1},
        {"full_every2", GPT_RECOMPUTE_FULL, RECOMPUTE_FULL, 2},
        {"full_every3", GPT_RECOMPUTE_FULL, RECOMPUTE_FULL, 3},
    };
    static const char *const parts[] = {"grads", "memory", "steps", "reruns"};
    for (size_t i = 0; i < sizeof levels / sizeof *levels; i++)
        for (int k = 0; k < 4; k++) printf("PLAN mp.recompute.%s.%s\n", levels[i].name, parts[k]);
    static const char *const packed_names[] = {"mixed-bf16.none", "mixed-bf16.selective",
        "mixed-bf16.full_every2", "mixed-fp16.none", "mixed-fp16.selective", "mixed-fp16.full_every2"};
    for (int i = 0; i < 6; i++)
        printf("PLAN mp.packed.%s.grads\nPLAN mp.packed.%s.steps\nPLAN mp.packed.%s.memory\n",
               packed_names[i], packed_names[i], packed_names[i]);
    printf("PLAN mp.packed.bf16.two_pass\nPLAN mp.recompute.full.saved_output\n"
           "PLAN mp.recompute.full_every2.saved_output\n");
    fflush(stdout);  // before any run: a crash in the first must not lose the plan

    Run base = run(GPT_RECOMPUTE_NONE, 1, 0);
    double base_pred = mm_course_stage_act_bytes(&m, B, CFG.seq_len, 1, 0, 1, 0, 1,
                                                 RECOMPUTE_NONE, 1, 0);
    char name[96];
    for (size_t i = 0; i < sizeof levels / sizeof *levels; i++) {
        Run r = run(levels[i].rc, levels[i].every, 0);
        long d = first_diff(r.grads, base.grads, base.n);
        snprintf(name, sizeof name, "mp.recompute.%s.grads", levels[i].name);
        test_report(&ts, d < 0 && memcmp(&r.loss, &base.loss, sizeof(float)) == 0, name,
                    "loss %.7f vs %.7f; %s", r.loss, base.loss,
                    d < 0 ? "every gradient bitwise" : "gradients differ");
        if (d >= 0) printf("  first difference at element %ld: %.9g vs %.9g\n", d, r.grads[d],
                           base.grads[d]);
        double pred = mm_course_stage_act_bytes(&m, B, CFG.seq_len, 1, 0, 1, 0, 1, levels[i].mm,
                                                levels[i].every, 0);
        snprintf(name, sizeof name, "mp.recompute.%s.memory", levels[i].name);
        test_report(&ts, (double)r.act_bytes == pred && r.act_bytes < base.act_bytes, name,
                    "activations %zu B (calculator %.0f; none %zu, calculator %.0f)", r.act_bytes,
                    pred, base.act_bytes, base_pred);
        d = first_diff(r.params, base.params, base.n);
        snprintf(name, sizeof name, "mp.recompute.%s.steps", levels[i].name);
        test_report(&ts, d < 0, name, "weights after %d AdamW steps %s", STEPS,
                    d < 0 ? "bitwise" : "differ");
        long want = 0;
        for (int l = 0; l < CFG.n_layer; l++)
            want += levels[i].rc == GPT_RECOMPUTE_SELECTIVE || l % levels[i].every == 0;
        snprintf(name, sizeof name, "mp.recompute.%s.reruns", levels[i].name);
        test_report(&ts, r.reruns == want && base.reruns == 0, name, "the backward ran %ld "
                    "attention forwards again (want %ld of %d layers; none: %ld)", r.reruns, want,
                    CFG.n_layer, base.reruns);
        free(r.grads);
        free(r.params);
    }
    Run zb = run(GPT_RECOMPUTE_SELECTIVE, 1, 1);
    test_report(&ts, first_diff(zb.grads, base.grads, base.n) < 0 &&
                         first_diff(zb.params, base.params, base.n) < 0,
                "mp.recompute.selective.two_pass", "input pass then weight pass: %s",
                first_diff(zb.grads, base.grads, base.n) < 0 ? "bitwise" : "differs");
    test_report(&ts, (double)base.act_bytes == base_pred, "mp.recompute.none.memory",
                "activations %zu B, calculator %.0f", base.act_bytes, base_pred);
    free(zb.grads);
    free(zb.params);
    test_packed(&ts, &m);
    test_saved_output(&ts, 1);
    test_saved_output(&ts, 2);
    free(base.grads);
    free(base.params);
    printf("%d passed, %d failed\n", ts.passed, ts.failed);
    return ts.failed ? 1 : 0;
}
