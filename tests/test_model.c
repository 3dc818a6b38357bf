// test_model.c — the GPT as a whole on the CPU: counts, memory, determinism,
// the pieces a later stage composes (layer ranges, hooks, accumulation), the
// data loader's rank slicing, and that the synthetic corpus is learnable.
// (Agreement with PyTorch is tests/test_torch.sh.)
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "data.h"
#include "harness.h"
#include "model.h"
#include "ops.h"
#include "optim.h"
#include "perf.h"

static const GPTConfig TINY = {2, 64, 4, 32, 256};

// Trains `steps` AdamW steps on the synthetic corpus; writes the losses.
static void train(const GPTConfig *c, uint64_t seed, int B, int steps, float *losses) {
    Ctx ctx;
    ctx_init(&ctx, DEV_CPU, 1, 0);
    GPT g;
    gpt_init(&g, &ctx, c, seed);
    gpt_alloc_grads(&g);
    gpt_alloc_acts(&g, B, c->seq_len);
    AdamWConfig oc = adamw_default_config();
    oc.lr = 1e-3f;
    AdamW opt;
    adamw_init(&opt, &g, &oc, 0, g.n_params);
    DataLoader dl;
    data_open_synthetic(&dl, c->vocab, 1 << 16, seed, B, c->seq_len, 0, 1);
    int *x = xmalloc(sizeof(int) * B * c->seq_len), *y = xmalloc(sizeof(int) * B * c->seq_len);
    for (int s = 0; s < steps; s++) {
        data_next(&dl, x, y);
        gpt_zero_grad(&g);
        losses[s] = gpt_forward(&g, x, y, B, c->seq_len);
        gpt_backward(&g, 1.0f);
        adamw_step(&opt, &g, grad_global_norm(&g));
    }
    free(x); free(y);
    data_close(&dl);
    adamw_free(&opt, &g);
    gpt_free(&g);
    ctx_destroy(&ctx);
}

// The cores CPU MFU is quoted against: ranks x threads, never more than the cores
// there are. 3 ranks on 2 cores once printed MFU 107-117 % (counted 3 cores' peak).
static void test_usable_cores(TestState *ts) {
    static const int cases[][4] = {  // local ranks, threads, cores, want
        {1, 1, 2, 1}, {2, 1, 2, 2}, {3, 1, 2, 2}, {4, 1, 2, 2}, {8, 1, 2, 2},
        {1, 2, 2, 2}, {1, 4, 2, 2}, {2, 4, 16, 8}, {4, 2, 6, 6}, {1, 1, 1, 1},
        {0, 0, 0, 1}, {2, 0, 4, 2},  // nonsense counts as 1
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int got = usable_cores(cases[i][0], cases[i][1], cases[i][2]);
        if (got != cases[i][3]) {
            bad++;
            printf("# usable_cores(%d ranks, %d threads, %d cores) = %d, want %d\n", cases[i][0],
                   cases[i][1], cases[i][2], got, cases[i][3]);
        }
    }
    test_report(ts, bad == 0, "mfu.usable_cores", "%d of %zu cases wrong", bad,
                sizeof cases / sizeof cases[0]);
    int have = cores_available();
    test_report(ts, have >= 1, "mfu.cores_available", "%d", have);
}

static void test_counts(TestState *ts) {
    GPTConfig c;
    gpt_preset("gpt2-124m", &c);
    size_t n = gpt_num_params(&c);
    // 124,439,808: GPT-2 small with tied embeddings (docs/formulas.md §2.2).
    test_report(ts, n == 124439808u, "params.gpt2_124m", "%zu (want 124439808)", n);
    c.vocab = 50304;  // nanoGPT's padded vocabulary
    double f = gpt_flops_per_token(&c, 1024);
    // 6 * 123,689,472 + 12*12*12*64*1024 = 855,383,040 FLOPs per token (PaLM formula,
    // docs/formulas.md §5.2).
    test_report(ts, f == 855383040.0, "flops_per_token.gpt2", "%.0f (want 855383040)", f);
    ParamSlice *s = xcalloc(gpt_num_slices(&TINY), sizeof *s);
    gpt_fill_slices(&TINY, s);
    int contiguous = 1;
    for (int i = 1; i < gpt_num_slices(&TINY); i++)
        contiguous &= s[i].offset == s[i - 1].offset + s[i - 1].numel && s[i].group >= s[i - 1].group;
    test_report(ts, contiguous, "slices.contiguous_by_group", "%d slices", gpt_num_slices(&TINY));
    free(s);
}

// GPT-2's initialisation draws every matrix from N(0, 0.02) (the residual projections
// 0.02/sqrt(2L)), every bias 0 and every LayerNorm gain 1, whatever the shapes: a
// matrix of one row (wpe at T = 1) is still drawn, not zeroed as a bias.
static void test_init(TestState *ts) {
    GPTConfig c = {2, 8, 2, 1, 16};  // T = 1: wpe is 1 x C
    Ctx ctx;
    ctx_init(&ctx, DEV_CPU, 1, 0);
    GPT g;
    gpt_init(&g, &ctx, &c, 5);
    int bad = 0, drawn = 0;
    for (int i = 0; i < g.n_slices; i++) {
        const ParamSlice *s = &g.slices[i];
        int nonzero = 0, ones = 0;
        for (size_t k = 0; k < s->numel; k++) {
            nonzero += g.params[s->offset + k] != 0.0f;
            ones += g.params[s->offset + k] == 1.0f;
        }
        int gain = strstr(s->name, "ln_") && strstr(s->name, ".weight");
        if (s->decay) drawn++, bad += nonzero != (int)s->numel;  // a matrix: all drawn
        else bad += gain ? ones != (int)s->numel : nonzero != 0;
    }
    test_report(ts, bad == 0 && drawn == 2 + 4 * c.n_layer, "init.matrices_drawn_vectors_set",
                "%d of %d tensors wrong; %d matrices drawn (wpe is 1 x %d)", bad, g.n_slices, drawn,
                c.n_embd);
    gpt_free(&g);
    ctx_destroy(&ctx);
}

static void test_ledger_static(TestState *ts) {
    Ctx ctx;
    ctx_init(&ctx, DEV_CPU, 1, 0);
    GPT g;
    gpt_init(&g, &ctx, &TINY, 1);
    gpt_alloc_grads(&g);
    AdamWConfig oc = adamw_default_config();
    AdamW opt;
    adamw_init(&opt, &g, &oc, 0, g.n_params);
    size_t N = g.n_params;
    const Ledger *l = &ctx.ledger;
    int ok = l->current[MEM_PARAMS] == 4 * N && l->current[MEM_GRADS] == 4 * N &&
             l->current[MEM_OPTIMIZER] == 8 * N;
    test_report(ts, ok, "ledger.static_4_4_8_bytes_per_param",
                "params %zu grads %zu optimizer %zu for N=%zu", l->current[MEM_PARAMS],
                l->current[MEM_GRADS], l->current[MEM_OPTIMIZER], N);
    adamw_free(&opt, &g);
    gpt_free(&g);
    test_report(ts, l->total_current == 0, "ledger.all_freed", "%zu bytes left", l->total_current);
    ctx_destroy(&ctx);
}

static void test_determinism(TestState *ts) {
    float a[5], b[5], c[5];
    train(&TINY, 11, 4, 5, a);
    train(&TINY, 11, 4, 5, b);
    train(&TINY, 12, 4, 5, c);
    test_report(ts, memcmp(a, b, sizeof a) == 0, "determinism.same_seed_bitwise",
                "losses %.7f ... %.7f", a[0], a[4]);
    test_report(ts, memcmp(a, c, sizeof a) != 0, "determinism.other_seed_differs",
                "%.7f vs %.7f", a[4], c[4]);
}

static int order[64], n_order;
static void record_hook(GPT *g, int group, void *arg) {
    (void)g; (void)arg;
    if (n_order < 64) order[n_order++] = group;
}

// Layer ranges, hooks and gradient accumulation: what stages 02-05 build on.
static void test_composition(TestState *ts) {
    Ctx ctx;
    ctx_init(&ctx, DEV_CPU, 1, 0);
    GPT g;
    const int B = 4, T = TINY.seq_len, L = TINY.n_layer;
    gpt_init(&g, &ctx, &TINY, 3);
    gpt_alloc_grads(&g);
    gpt_alloc_acts(&g, B, T);
    DataLoader dl;
    data_open_synthetic(&dl, TINY.vocab, 1 << 14, 3, B, T, 0, 1);
    int *x = xmalloc(sizeof(int) * B * T), *y = xmalloc(sizeof(int) * B * T);
    data_next(&dl, x, y);
    size_t NP = g.n_params, BTV = (size_t)B * T * TINY.vocab;

    // Full forward/backward with the hook recording the order groups complete in.
    g.hook = record_hook;
    gpt_zero_grad(&g);
    float loss = gpt_forward(&g, x, y, B, T);
    float *logits = xmalloc(BTV * sizeof(float));
    memcpy(logits, g.acts.logits, BTV * sizeof(float));
    gpt_backward(&g, 1.0f);
    int ok = n_order == L + 2;
    for (int i = 0; i < n_order && ok; i++) ok = order[i] == L + 1 - i;
    test_report(ts, ok, "hooks.order_last_group_first", "%d calls, first %d, last %d", n_order,
                order[0], order[n_order - 1]);
    g.hook = NULL;
    float *full = xmalloc(NP * sizeof(float));
    memcpy(full, g.grads, NP * sizeof(float));

    // The same forward as a pipeline would run it: embed | layer 0 | layer 1 | head.
    gpt_embed_forward(&g, B, T);
    for (int l = 0; l < L; l++) gpt_blocks_forward(&g, gpt_layer_output(&g, l - 1), l, l + 1, B, T);
    float loss2 = gpt_head_forward(&g, gpt_layer_output(&g, L - 1), B, T, 1);
    test_report(ts, loss2 == loss && memcmp(logits, g.acts.logits, BTV * sizeof(float)) == 0,
                "layer_ranges.forward_bitwise", "loss %.7f vs %.7f", loss2, loss);

    // The backward in two passes (input, then weights, one layer range at a time
    // from the top) gives the fused backward's gradients, bit for bit.
    gpt_zero_grad(&g);
    size_t NC = (size_t)B * T * TINY.n_embd;
    float *dx = xmalloc(NC * sizeof(float));
    float *keep = xmalloc(gpt_keep_floats(&g, 0, 1, B, T) * sizeof(float));
    gpt_head_backward(&g, gpt_layer_output(&g, L - 1), dx, 1.0f, B, T);
    for (int l = L - 1; l >= 0; l--) {
        gpt_blocks_backward_input(&g, gpt_layer_output(&g, l - 1), dx, l, l + 1, B, T, keep);
        gpt_blocks_backward_weight(&g, gpt_layer_output(&g, l - 1), l, l + 1, B, T, keep);
    }
    gpt_embed_backward(&g, dx, B, T);
    size_t diff = 0;
    for (size_t i = 0; i < NP; i++) diff += memcmp(&g.grads[i], &full[i], sizeof(float)) != 0;
    test_report(ts, diff == 0, "backward.two_passes_bitwise", "%zu of %zu gradients differ from "
                "gpt_backward's", diff, NP);
    free(dx);
    free(keep);

    // Gradient accumulation: two micro-batches of B/2, each scaled 1/2, equal one
    // batch of B (up to the order of two fp32 sums: tolerance 1e-6).
    gpt_free(&g);
    gpt_init(&g, &ctx, &TINY, 3);
    gpt_alloc_grads(&g);
    gpt_alloc_acts(&g, B / 2, T);
    gpt_zero_grad(&g);
    for (int half = 0; half < 2; half++) {
        gpt_forward(&g, x + half * (B / 2) * T, y + half * (B / 2) * T, B / 2, T);
        gpt_backward(&g, 0.5f);
    }
    check_rel(ts, "grad_accumulation.equals_full_batch", g.grads, full, NP, 1e-6);

    free(x); free(y); free(logits); free(full);
    data_close(&dl);
    gpt_free(&g);
    ctx_destroy(&ctx);
}

static void test_data(TestState *ts) {
    // N ranks with batch B see exactly the rows of one process with batch N*B.
    const int B = 2, T = 8, W = 3;
    DataLoader one, r[W];
    data_open_synthetic(&one, 50, 5000, 9, W * B, T, 0, 1);
    for (int k = 0; k < W; k++) data_open_synthetic(&r[k], 50, 5000, 9, B, T, k, W);
    int ok = 1;
    int *gx = xmalloc(sizeof(int) * W * B * T), *gy = xmalloc(sizeof(int) * W * B * T);
    int *x = xmalloc(sizeof(int) * B * T), *y = xmalloc(sizeof(int) * B * T);
    for (int step = 0; step < 4; step++) {
        data_next(&one, gx, gy);
        for (int k = 0; k < W; k++) {
            data_next(&r[k], x, y);
            ok &= memcmp(x, gx + k * B * T, sizeof(int) * B * T) == 0;
            ok &= memcmp(y, gy + k * B * T, sizeof(int) * B * T) == 0;
        }
    }
    test_report(ts, ok, "data.ranks_partition_global_batch", "world %d, 4 steps", W);
    int shift = 1;
    for (int i = 0; i + 1 < B * T; i++)
        if ((i + 1) % T) shift &= gy[i] == gx[i + 1];
    test_report(ts, shift, "data.targets_are_next_tokens", "row length %d", T);
    // Restoring the step restores the stream (the loader's whole state).
    one.step = 2;
    data_next(&one, gx, gy);
    DataLoader again;
    data_open_synthetic(&again, 50, 5000, 9, W * B, T, 0, 1);
    int *x3 = xmalloc(sizeof(int) * W * B * T), *y3 = xmalloc(sizeof(int) * W * B * T);
    for (int step = 0; step <= 2; step++) data_next(&again, x3, y3);
    test_report(ts, memcmp(x3, gx, sizeof(int) * W * B * T) == 0, "data.resume_from_step",
                "step 2 replayed");
    for (int k = 0; k < W; k++) data_close(&r[k]);
    data_close(&one); data_close(&again);
    free(gx); free(gy); free(x); free(y); free(x3); free(y3);
}

static void test_learns(TestState *ts) {
    // The tiny model on the synthetic corpus: the loss must fall well below the
    // uniform guess ln(V) = 5.55. The chain's entropy is about 1.0 nats; a bigram
    // model reaches about 1.4. 300 steps reach well under half of ln(V).
    enum { STEPS = 300 };
    float losses[STEPS];
    train(&TINY, 5, 8, STEPS, losses);
    double uniform = log((double)TINY.vocab), last = 0;
    for (int i = STEPS - 10; i < STEPS; i++) last += losses[i] / 10.0;
    test_report(ts, last < 0.5 * uniform, "synthetic.loss_falls_below_half_uniform",
                "first %.3f, mean of last 10 %.3f, ln(V) %.3f", losses[0], last, uniform);
}

int main(void) {
    TestState ts = {0};
    test_counts(&ts);
    test_init(&ts);
    test_usable_cores(&ts);
    test_ledger_static(&ts);
    test_determinism(&ts);
    test_composition(&ts);
    test_data(&ts);
    test_learns(&ts);
    return test_finish(&ts);
}
