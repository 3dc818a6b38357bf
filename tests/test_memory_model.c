// test_memory_model.c — stage 01's calculator against the published figures.
//
// Sources (collected, with their numbers, in docs/formulas.md §1-4):
//   ZeRO (Rajbhandari et al. 2019) §3.1, Figure 1, Tables 1 and 2;
//   Transformer Math 101 (EleutherAI 2023) and Megatron-LM's distributed-optimizer table;
//   Megatron-LM (Narayanan et al. 2021) Eq. 2 and Table 1;
//   Korthikanti et al. 2022, Table 2, Eq. 5, and the GPT-3 test vector;
//   exact parameter counts of GPT-2 and Llama 2 (their released checkpoints).
//
// Check names start with the part they belong to (01_memory_wall/exercises/parts.txt):
// bpp., params., zero., act., measured. -- every check fails on the pristine starters,
// which return zeros: each comparison requires the expected value to be positive and the
// result to be within a stated tolerance of it. plan. checks test memory_plan.c, which
// is not an exercise (they pass on the starters too and are not scored).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../01_memory_wall/memory_model.h"
#include "harness.h"

// ---------------------------------------------------------------- bytes per parameter

static int bpp_is(Recipe r, Optim o, double p, double g, double opt) {
    BytesPerParam b = mm_bytes_per_param(r, o);
    return b.params == p && b.grads == g && b.optimizer == opt;
}

static void test_bpp(TestState *ts) {
    BytesPerParam b;
    b = mm_bytes_per_param(RECIPE_MIXED_BF16, OPTIM_ADAMW);
    test_report(ts, bpp_is(RECIPE_MIXED_BF16, OPTIM_ADAMW, 2, 2, 12) &&
                    bpp_is(RECIPE_MIXED_FP16, OPTIM_ADAMW, 2, 2, 12),
                "bpp.mixed_adamw_2_2_12", "got %g + %g + %g (ZeRO §3.1: 2Ψ + 2Ψ + KΨ, K = 12)",
                b.params, b.grads, b.optimizer);
    b = mm_bytes_per_param(RECIPE_FP32, OPTIM_ADAMW);
    test_report(ts, bpp_is(RECIPE_FP32, OPTIM_ADAMW, 4, 4, 8), "bpp.fp32_adamw_4_4_8",
                "got %g + %g + %g (Megatron's table: fp32 = 16, no master copy)", b.params,
                b.grads, b.optimizer);
    b = mm_bytes_per_param(RECIPE_COURSE, OPTIM_ADAMW);
    test_report(ts, bpp_is(RECIPE_COURSE, OPTIM_ADAMW, 4, 4, 8), "bpp.course_4_4_8",
                "got %g + %g + %g (this code: fp32 params, grads, AdamW m and v)", b.params,
                b.grads, b.optimizer);
    b = mm_bytes_per_param(RECIPE_MEGATRON_BF16, OPTIM_ADAMW);
    test_report(ts, bpp_is(RECIPE_MEGATRON_BF16, OPTIM_ADAMW, 2, 4, 12), "bpp.megatron_bf16_18",
                "got %g + %g + %g (bf16 params, fp32 grads)", b.params, b.grads, b.optimizer);
    b = mm_bytes_per_param(RECIPE_MEGATRON_FP16, OPTIM_ADAMW);
    test_report(ts, bpp_is(RECIPE_MEGATRON_FP16, OPTIM_ADAMW, 2, 2, 16), "bpp.megatron_fp16_20",
                "got %g + %g + %g (fp32 main grads counted with the optimizer)", b.params,
                b.grads, b.optimizer);
    b = mm_bytes_per_param(RECIPE_BF16, OPTIM_ADAMW);
    test_report(ts, bpp_is(RECIPE_BF16, OPTIM_ADAMW, 2, 2, 4), "bpp.pure_bf16_8",
                "got %g + %g + %g (no master copy, bf16 moments)", b.params, b.grads, b.optimizer);
    // Transformer Math: SGD with momentum keeps 8 bytes in mixed precision (master 4 +
    // momentum 4); plain SGD only the master copy. In fp32 there is no master copy.
    int ok = bpp_is(RECIPE_MIXED_BF16, OPTIM_SGD_MOMENTUM, 2, 2, 8) &&
             bpp_is(RECIPE_FP32, OPTIM_SGD_MOMENTUM, 4, 4, 4) &&
             bpp_is(RECIPE_BF16, OPTIM_SGD_MOMENTUM, 2, 2, 2);
    b = mm_bytes_per_param(RECIPE_MIXED_BF16, OPTIM_SGD_MOMENTUM);
    test_report(ts, ok, "bpp.sgd_momentum", "mixed: got %g + %g + %g (want 2 + 2 + 8)", b.params,
                b.grads, b.optimizer);
    ok = bpp_is(RECIPE_MIXED_BF16, OPTIM_SGD, 2, 2, 4) && bpp_is(RECIPE_FP32, OPTIM_SGD, 4, 4, 0) &&
         bpp_is(RECIPE_MEGATRON_FP16, OPTIM_SGD, 2, 2, 8) &&
         bpp_is(RECIPE_MEGATRON_BF16, OPTIM_SGD, 2, 4, 4);
    b = mm_bytes_per_param(RECIPE_MIXED_BF16, OPTIM_SGD);
    test_report(ts, ok, "bpp.sgd", "mixed: got %g + %g + %g (want 2 + 2 + 4)", b.params, b.grads,
                b.optimizer);

    // Megatron-LM's distributed optimizer (ZeRO-1-like): the weights and model grads stay,
    // the optimizer part is sharded: 4 + 16/d, 6 + 12/d, 8 + 8/d bytes per parameter.
    ok = 1;
    const int ds[] = {1, 2, 8, 64};
    for (int i = 0; i < 4; i++) {
        double d = ds[i];
        BytesPerParam f16 = mm_bytes_per_param(RECIPE_MEGATRON_FP16, OPTIM_ADAMW);
        BytesPerParam b16 = mm_bytes_per_param(RECIPE_MEGATRON_BF16, OPTIM_ADAMW);
        BytesPerParam f32 = mm_bytes_per_param(RECIPE_FP32, OPTIM_ADAMW);
        ok = ok && near(f16.params + f16.grads + f16.optimizer / d, 4 + 16 / d, 1e-12) &&
             near(b16.params + b16.grads + b16.optimizer / d, 6 + 12 / d, 1e-12) &&
             near(f32.params + f32.grads + f32.optimizer / d, 8 + 8 / d, 1e-12);
    }
    test_report(ts, ok, "bpp.megatron_distributed_optimizer",
                "4 + 16/d, 6 + 12/d, 8 + 8/d for d = 1, 2, 8, 64");

    // 70B x 16 B = 1120 GB (weights 140, grads 140, optimizer 840), decimal GB, exact.
    b = mm_bytes_per_param(RECIPE_MIXED_BF16, OPTIM_ADAMW);
    double psi = 70e9;
    ok = near(psi * (b.params + b.grads + b.optimizer), 1120e9, 0) &&
         near(psi * b.optimizer, 840e9, 0) && near(psi * b.params, 140e9, 0);
    test_report(ts, ok, "bpp.70b_x16_is_1120GB", "70e9 x %g B = %.1f GB (1043.1 GiB)",
                b.params + b.grads + b.optimizer, psi * (b.params + b.grads + b.optimizer) / 1e9);
}

// ---------------------------------------------------------------- parameter counts

static ModelSpec preset(const char *name) {
    ModelSpec m;
    memset(&m, 0, sizeof m);
    if (mm_preset(name, &m) != 0) printf("# no preset %s\n", name);
    return m;
}

static void test_params(TestState *ts) {
    // Exact integers: a double holds them exactly, so the tolerance is 0.
    struct { const char *name; double want; const char *note; } rows[] = {
        {"gpt2-124m", 124439808, "GPT-2 small, tied embeddings, with wpe"},
        {"gpt2-xl", 1557611200, "GPT-2 XL"},
        {"llama2-7b", 6738415616, "32(4h^2 + 3h*11008 + 2h) + h + 2Vh"},
        {"llama2-13b", 13015864320, "Llama 2 13B"},
        {"llama2-70b", 68976648192, "Llama 2 70B, 8 KV heads"},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        ModelSpec m = preset(rows[i].name);
        double got = mm_param_count(&m);
        char name[64];
        snprintf(name, sizeof name, "params.%s", rows[i].name);
        for (char *p = name; *p; p++) if (*p == '-') *p = '_';
        test_report(ts, near(got, rows[i].want, 0), name, "%.0f (want %.0f: %s)", got,
                    rows[i].want, rows[i].note);
    }
    // One GPT-2 block: 12h^2 + 13h = 7,087,872 at h = 768.
    ModelSpec m = preset("gpt2-124m"), m0 = m;
    m0.layers = 0;
    double block = (mm_param_count(&m) - mm_param_count(&m0)) / m.layers;
    test_report(ts, near(block, 7087872, 0), "params.gpt2_block", "%.0f per block (want 7,087,872)",
                block);
    // Llama-3-8B: V 128256, 8 KV heads, FFN 14336.
    m = preset("llama2-7b");
    m.vocab = 128256; m.kv_heads = 8; m.ffn = 14336;
    double got = mm_param_count(&m);
    test_report(ts, near(got, 8030261248, 0), "params.llama3_8b_gqa", "%.0f (want 8,030,261,248)",
                got);
    // A raw count passes through.
    ModelSpec raw;
    memset(&raw, 0, sizeof raw);
    raw.raw_params = 7.5e9;
    test_report(ts, near(mm_param_count(&raw), 7.5e9, 0), "params.raw_count", "%.0f",
                mm_param_count(&raw));

    // Megatron-LM Table 1: P = 12lh^2 (1 + 13/(12h) + (V+s)/(12lh)), V = 51200, s = 2048.
    // Our GPT count is Eq. 2 term by term plus the final layernorm (2h), which Eq. 2
    // leaves out; the table prints billions to one decimal (half a unit: 0.05 B).
    struct { double printed; int heads, h, l; } mt[] = {
        {1.7, 24, 2304, 24},   {3.6, 32, 3072, 30},   {7.5, 32, 4096, 36},
        {18.4, 48, 6144, 40},  {39.1, 64, 8192, 48},  {76.1, 80, 10240, 60},
        {145.6, 96, 12288, 80}, {310.1, 128, 16384, 96}, {529.6, 128, 20480, 105},
        {1008.0, 160, 25600, 128},
    };
    for (size_t i = 0; i < sizeof mt / sizeof mt[0]; i++) {
        ModelSpec g = {ARCH_GPT, mt[i].l, mt[i].h, mt[i].heads, mt[i].heads, 4 * mt[i].h, 51200,
                       2048, 1, 0};
        double l = mt[i].l, h = mt[i].h;
        double eq2 = 12 * l * h * h * (1 + 13 / (12 * h) + (51200 + 2048) / (12 * l * h));
        double p = mm_param_count(&g);
        // Eq. 2 in floating point: relative rounding ~1e-16 of 1e12 is < 1 parameter.
        int ok = near(p, eq2 + 2 * h, 1.0) && near(p / 1e9, mt[i].printed, 0.05 + 1e-9);
        char name[64];
        snprintf(name, sizeof name, "params.megatron_table1.%gB", mt[i].printed);
        test_report(ts, ok, name, "%.3f B (Eq. 2: %.3f B + final layernorm; printed %.1f)",
                    p / 1e9, eq2 / 1e9, mt[i].printed);
    }
    // GPT-3 175B: 12lh^2 = 173.95 B; Eq. 2 gives 174.604 B with V = 50257.
    m = preset("gpt3-175b");
    got = mm_param_count(&m);
    test_report(ts, near(got / 1e9, 174.604, 0.0005 + 2 * 12288 / 1e9), "params.gpt3_175b",
                "%.3f B (Eq. 2 with V = 50257: 174.604 B)", got / 1e9);
}

// ---------------------------------------------------------------- ZeRO

// Decimal places of a printed table entry ("52.5" -> 1), for "1 in the last digit".
static double last_digit(const char *s) {
    const char *dot = strchr(s, '.');
    int d = dot ? (int)strlen(dot + 1) : 0;
    return pow(10, -d);
}

static void test_zero(TestState *ts) {
    // ZeRO Table 1, per-device GB with K = 12 (2 + 2 + 12 bytes per parameter). The
    // paper truncates its integer entries (513.5 -> 513) and rounds its small ones
    // (41.25 -> 41.3), so the tolerance is 1 in the last printed digit.
    const BytesPerParam mixed = {2, 2, 12};
    const int dps[6] = {1, 4, 16, 64, 256, 1024};
    struct { const char *model; double psi; const char *gb[3][6]; } t1[] = {
        {"7.5B", 7.5e9, {{"120", "52.5", "35.6", "31.4", "30.4", "30.1"},
                         {"120", "41.3", "21.6", "16.6", "15.4", "15.1"},
                         {"120", "30", "7.5", "1.88", "0.47", "0.12"}}},
        {"128B", 128e9, {{"2048", "896", "608", "536", "518", "513"},
                         {"2048", "704", "368", "284", "263", "257"},
                         {"2048", "512", "128", "32", "8", "2"}}},
        {"1T", 1e12, {{"16000", "7000", "4750", "4187", "4046", "4011"},
                      {"16000", "5500", "2875", "2218", "2054", "2013"},
                      {"16000", "4000", "1000", "250", "62.5", "15.6"}}},
    };
    const char *stage_names[3] = {"P_os", "P_os+g", "P_os+g+p"};
    for (int i = 0; i < 3; i++) {
        for (int z = 1; z <= 3; z++) {
            int ok = 1;
            char detail[512];
            size_t pos = 0;
            for (int k = 0; k < 6; k++) {
                ModelStates s = mm_model_states(t1[i].psi, mixed, z, dps[k]);
                double got = (s.params + s.grads + s.optimizer) / 1e9;
                double want = atof(t1[i].gb[z - 1][k]);
                int row_ok = near(got, want, last_digit(t1[i].gb[z - 1][k]) + 1e-9);
                ok = ok && row_ok;
                pos += (size_t)snprintf(detail + pos, sizeof detail - pos, "%s%d:%.3f%s",
                                        k ? " " : "", dps[k], got, row_ok ? "" : "(!)");
            }
            char name[64];
            snprintf(name, sizeof name, "zero.table1.%s.%s", t1[i].model, stage_names[z - 1]);
            test_report(ts, ok, name, "GB per device for DP %s", detail);
        }
    }
    // Figure 1: 7.5B on 64 GPUs: 120 -> 31.4 -> 16.6 -> 1.9 GB (1.875 printed as 1.9).
    double fig[4];
    for (int z = 0; z <= 3; z++) {
        ModelStates s = mm_model_states(7.5e9, mixed, z, 64);
        fig[z] = (s.params + s.grads + s.optimizer) / 1e9;
    }
    test_report(ts, near(fig[0], 120, 0.05) && near(fig[1], 31.4, 0.05) && near(fig[2], 16.6, 0.05) &&
                    near(fig[3], 1.875, 1e-9),
                "zero.figure1_7.5B_64gpus", "%.3f -> %.3f -> %.3f -> %.3f GB", fig[0], fig[1],
                fig[2], fig[3]);
    // Each stage shards the right category: at stage 2 the weights stay whole.
    ModelStates s2 = mm_model_states(1000, mixed, 2, 10);
    test_report(ts, near(s2.params, 2000, 0) && near(s2.grads, 200, 0) && near(s2.optimizer, 1200, 0),
                "zero.stage2_categories", "params %.0f grads %.0f optimizer %.0f (want 2000 200 1200)",
                s2.params, s2.grads, s2.optimizer);
    // Shards are padded: 10 parameters over 4 ranks is 3 per rank.
    ModelStates s3 = mm_model_states(10, mixed, 3, 4);
    test_report(ts, near(s3.params + s3.grads + s3.optimizer, 48, 0), "zero.padded_shards",
                "%.0f bytes per rank for 10 params / 4 ranks (want 3 x 16 = 48)",
                s3.params + s3.grads + s3.optimizer);
    // Table 2: the largest model whose states fit 32 GB, MP 1 x 64 GPUs:
    // 2B / 7.6B / 14.4B / 128B (printed to one decimal, or whole).
    const double t2[4] = {2, 7.6, 14.4, 128};
    const double t2_tol[4] = {0.05, 0.05, 0.05, 0.5};
    int ok = 1;
    double got[4];
    for (int z = 0; z <= 3; z++) {
        ModelStates s = mm_model_states(1e9, mixed, z, 64);  // bytes for one billion parameters
        double per_b = s.params + s.grads + s.optimizer;
        got[z] = per_b > 0 ? 32e9 / per_b : 0;
        ok = ok && near(got[z], t2[z], t2_tol[z]);
    }
    test_report(ts, ok, "zero.table2_max_model_32GB", "%.2f / %.2f / %.2f / %.1f B params",
                got[0], got[1], got[2], got[3]);
}

// ---------------------------------------------------------------- activations

static void test_acts(TestState *ts) {
    // GPT-3: a = 96, h = 12288, s = 2048, b = 1, 16-bit with dropout; 5as/h = 80.
    ModelSpec g = preset("gpt3-175b");
    Setup s = mm_default_setup(&g);
    double sbh = 2048.0 * 12288;
    struct { const char *name; int tp, sp; Recompute rc; double want, printed_mb, tol_mb; } rows[] = {
        {"act.korthikanti.no_parallelism", 1, 0, RECOMPUTE_NONE, sbh * (34 + 80), 2868.9, 0.05},
        {"act.korthikanti.tp8", 8, 0, RECOMPUTE_NONE, sbh * (10 + 24.0 / 8 + 80.0 / 8), 578.8, 0.05},
        {"act.korthikanti.tp8_sp", 8, 1, RECOMPUTE_NONE, sbh * (34.0 / 8 + 80.0 / 8), 358.6, 0.05},
        {"act.korthikanti.tp8_sp_selective", 8, 1, RECOMPUTE_SELECTIVE, sbh * 34 / 8, 106.95, 0.005},
        {"act.korthikanti.tp8_selective", 8, 0, RECOMPUTE_SELECTIVE, sbh * (10 + 24.0 / 8), 0, 0},
        {"act.korthikanti.full_recompute", 8, 0, RECOMPUTE_FULL, 2 * sbh, 0, 0},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        Setup x = s;
        x.tp = rows[i].tp;
        x.sp = rows[i].sp;
        x.recompute = rows[i].rc;
        double got = mm_act_bytes_per_layer(&g, &x);
        // The formula is exact; floating point differs from it by ~1e-16 relative.
        int ok = near(got, rows[i].want, 1e-9 * rows[i].want);
        if (rows[i].printed_mb > 0) ok = ok && near(got / 1e6, rows[i].printed_mb, rows[i].tol_mb);
        test_report(ts, ok, rows[i].name, "%.2f MB per layer (formula %.2f MB%s)", got / 1e6,
                    rows[i].want / 1e6, rows[i].printed_mb > 0 ? ", test vector printed" : "");
    }
    // The test vector's whole-model figures: 96 layers.
    Setup x = s;
    double l96 = 96 * mm_act_bytes_per_layer(&g, &x);
    x.tp = 8; x.sp = 1; x.recompute = RECOMPUTE_SELECTIVE;
    double l96sel = 96 * mm_act_bytes_per_layer(&g, &x);
    test_report(ts, near(l96 / 1e9, 275.4, 0.05) && near(l96sel / 1e9, 10.27, 0.005),
                "act.gpt3_96_layers", "%.2f GB without parallelism (275.4), %.3f GB with TP 8 + SP "
                "+ selective (10.27)", l96 / 1e9, l96sel / 1e9);

    // Eq. 5: with 1F1B the first stage holds p micro-batches x L/p layers = L layers'
    // worth, whatever p is. (pp > 1: the head lives on the last stage, not counted.)
    x = s; x.tp = 8; x.sp = 1;
    double per = mm_act_bytes_per_layer(&g, &x);
    int ok = 1;
    char detail[256];
    size_t pos = 0;
    for (int p = 2; p <= 8; p *= 2) {
        Setup y = x;
        y.pp = p;
        double got = mm_act_bytes_model(&g, &y);
        ok = ok && near(got, 96 * per, 1e-9 * 96 * per);
        pos += (size_t)snprintf(detail + pos, sizeof detail - pos, "p=%d: %.2f GB; ", p, got / 1e9);
    }
    test_report(ts, ok, "act.eq5_1f1b_independent_of_p", "%s(sbhL/t)(34 + 5as/h) = %.2f GB", detail,
                96 * per / 1e9);
    // GPipe keeps all m micro-batches; 1F1B with m < p keeps m.
    Setup y = x;
    y.pp = 8; y.microbatches = 32; y.gpipe = 1;
    double gp = mm_act_bytes_model(&g, &y);
    y.gpipe = 0; y.microbatches = 4;
    double few = mm_act_bytes_model(&g, &y);
    test_report(ts, near(gp, 32 * 12 * per, 1e-9 * gp) && near(few, 4 * 12 * per, 1e-9 * few),
                "act.pipeline_in_flight", "GPipe m=32: %.1f GB (32 x 12 layers); 1F1B m=4 < p=8: %.1f "
                "GB (4 x 12)", gp / 1e9, few / 1e9);
    // Full recompute keeps each layer's input, and rematerialises one layer at a time.
    y = x; y.pp = 4; y.recompute = RECOMPUTE_FULL;
    Setup none = y;
    none.recompute = RECOMPUTE_NONE;
    double full = mm_act_bytes_model(&g, &y), one = mm_act_bytes_per_layer(&g, &none);
    double want = 4 * 24 * sbh * 2 / 8 + one;  // SP: the saved inputs are sharded too
    test_report(ts, near(full, want, 1e-9 * want), "act.full_recompute_model",
                "%.2f GB (96 inputs of 2sbh/t + one layer recomputed %.2f GB)", full / 1e9, one / 1e9);
    // A model known by its parameter count alone has no activation model, whatever the
    // count (the smallest too) and whatever architecture the spec also carries.
    ModelSpec counted = g;
    double tiny[2] = {1, 7.5e9}, got_raw[2];
    for (int i = 0; i < 2; i++) {
        counted.raw_params = tiny[i];
        got_raw[i] = mm_act_bytes_model(&counted, &x) + mm_act_bytes_per_layer(&counted, &x);
    }
    test_report(ts, got_raw[0] == 0 && got_raw[1] == 0, "act.raw_count_has_none",
                "raw counts of 1 and 7.5e9 parameters: %.0f and %.0f activation bytes (want 0: "
                "no architecture to count)", got_raw[0], got_raw[1]);
    // pp = 1: the head (inputs of the final norm and of the LM head, fp32 logits).
    Setup h = s;
    double head = 2 * 2 * sbh + 4.0 * 2048 * 50257;
    double whole = mm_act_bytes_model(&g, &h);
    double lay = 96 * mm_act_bytes_per_layer(&g, &h);
    // With TP 8 and SP the norm and LM-head inputs are split along the sequence, and
    // the logits over the vocabulary (vocab-parallel): both / t.
    Setup h8 = s;
    h8.tp = 8;
    h8.sp = 1;
    double head8 = (2 * 2 * sbh + 4.0 * 2048 * 50257) / 8;
    double whole8 = mm_act_bytes_model(&g, &h8), lay8 = 96 * mm_act_bytes_per_layer(&g, &h8);
    test_report(ts, lay > 0 && near(whole - lay, head, 1e-6 * head) &&
                        near(whole8 - lay8, head8, 1e-6 * head8),
                "act.head_on_last_stage", "%.3f GB beside %.1f GB of layers (fp32 logits 4sbV = "
                "%.3f GB); TP 8 + SP: %.3f GB (want 1/8: %.3f GB)", (whole - lay) / 1e9, lay / 1e9,
                4.0 * 2048 * 50257 / 1e9, (whole8 - lay8) / 1e9, head8 / 1e9);

    // The generalisation: fp32 without dropout is 16 elements x 4 bytes per token and
    // one score matrix per head -- the same 16 tensors-per-token this code saves.
    ModelSpec nd = g;
    nd.dropout = 0;
    Setup f = s;
    f.recipe = RECIPE_FP32;
    double fp = mm_act_bytes_per_layer(&nd, &f), fwant = sbh * 64 + 96.0 * 2048 * 2048 * 4;
    test_report(ts, near(fp, fwant, 1e-9 * fwant), "act.fp32_no_dropout_16_elements",
                "%.1f MB per layer (want 64sbh + 4as^2b = %.1f MB)", fp / 1e6, fwant / 1e6);
    // fp32 with dropout: the two masks (1 byte each) per token, and per head the scores'
    // softmax (4 bytes), its dropout mask (1) and the dropout's output (4).
    double fd = mm_act_bytes_per_layer(&g, &f), fdwant = sbh * (64 + 2) + 96.0 * 2048 * 2048 * 9;
    test_report(ts, near(fd, fdwant, 1e-9 * fdwant), "act.fp32_dropout",
                "%.1f MB per layer (want 66sbh + 9as^2b = %.1f MB)", fd / 1e6, fdwant / 1e6);
    // Llama 2 70B (bf16, no dropout): replicated 4 elements, split Q 1 + attention output 1
    // + K, V 2 x 1/8 + SwiGLU 3 x 3.5 = 12.75, one bf16 score matrix per head.
    ModelSpec ll = preset("llama2-70b");
    Setup ls = mm_default_setup(&ll);
    double lsbh = 4096.0 * 8192, lwant = lsbh * 2 * (4 + 12.75) + 64.0 * 4096 * 4096 * 2;
    double lgot = mm_act_bytes_per_layer(&ll, &ls);
    test_report(ts, near(lgot, lwant, 1e-9 * lwant), "act.llama2_70b_gqa_swiglu",
                "%.1f MB per layer (want %.1f MB)", lgot / 1e6, lwant / 1e6);
    // This code's layer: 16C + 4 floats per token (the 4: layernorm mean and rstd) and one
    // B x NH x T x T score matrix (common/model_acts.c, gpt_acts_alloc).
    ModelSpec c = preset("small");
    Setup cs = mm_default_setup(&c);
    cs.recipe = RECIPE_COURSE;
    cs.micro_batch = 4;
    double cwant = 4.0 * (4 * 128 * (16 * 256 + 4) + 4.0 * 4 * 128 * 128);
    double cgot = mm_act_bytes_per_layer(&c, &cs);
    test_report(ts, near(cgot, cwant, 0), "act.course_per_layer", "%.0f B (want %.0f)", cgot, cwant);

    // The course recipe with stage 06's recompute and 2-byte storage (--precision
    // mixed-bf16 stores the layers' tensors in 2 bytes): the whole model's activations,
    // as the ledger measures them (build/train --layers 4 --width 32 --heads 4 --seq 8
    // --vocab 61 --batch 2 --precision P --recompute R [--recompute-every 2]; stage 06's
    // mp.memory checks hold memcalc to the ledger, to the byte).
    ModelSpec k = {ARCH_GPT, 4, 32, 4, 4, 128, 61, 8, 0, 0};
    static const struct { const char *prec; int half; Recompute rc; double want; } kc[] = {
        {"fp32", 0, RECOMPUTE_NONE, 148608},       {"fp32", 0, RECOMPUTE_SELECTIVE, 142464},
        {"fp32", 0, RECOMPUTE_FULL, 51584},        {"mixed-bf16", 1, RECOMPUTE_NONE, 118144},
        {"mixed-bf16", 1, RECOMPUTE_SELECTIVE, 114048}, {"mixed-bf16", 1, RECOMPUTE_FULL, 51584},
        {"fp32 every 2", 0, RECOMPUTE_FULL, 117632},   {"mixed-bf16 every 2", 1, RECOMPUTE_FULL, 84864},
    };
    static const char *rcname[] = {"none", "selective", "full"};
    char kd[512];
    size_t kp = 0;
    int kok = 1;
    for (size_t i = 0; i < sizeof kc / sizeof kc[0]; i++) {
        Setup ks = mm_default_setup(&k);
        ks.recipe = RECIPE_COURSE;
        ks.micro_batch = 2;
        ks.recompute = kc[i].rc;
        ks.recompute_every = strstr(kc[i].prec, "every 2") ? 2 : 1;
        ks.course_precision = kc[i].half;  // 1: a mixed recipe (its masters)
        ks.course_half = kc[i].half;
        double got = mm_act_bytes_model(&k, &ks);
        if (!near(got, kc[i].want, 0)) {
            kok = 0;
            kp += (size_t)snprintf(kd + kp, sizeof kd - kp, "%s%s --recompute %s: %.0f B (want "
                                   "%.0f); ", kp ? "" : "wrong: ", kc[i].prec, rcname[kc[i].rc],
                                   got, kc[i].want);
        }
    }
    if (kok) snprintf(kd, sizeof kd, "fp32 and mixed-bf16 (2-byte layers), --recompute none, "
                      "selective, full, full every 2: the ledger's bytes");
    test_report(ts, kok, "act.course_recompute_2byte", "L4 C32 NH4 T8 V61, batch 2: %s", kd);
}

// The course recipe over tensor-parallel ranks and pipeline stages:
// test_memory_course.c.
void test_course_tp(TestState *ts);
void test_course_pp(TestState *ts);

int main(void) {
    TestState ts = {0, 0};
    test_bpp(&ts);
    test_params(&ts);
    test_zero(&ts);
    test_acts(&ts);
    test_course_tp(&ts);
    test_course_pp(&ts);
    return test_finish(&ts);
}
