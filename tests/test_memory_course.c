// test_memory_course.c — stage 01's course recipe (this repository's own GPT) over
// stage 04's tensor-parallel ranks and stage 05's pipeline stages, against bytes
// counted tensor by tensor. Linked into test_memory_model (which calls the two
// tests); the check names follow its parts (measured., plan.).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../01_memory_wall/memory_model.h"
#include "harness.h"

void test_course_tp(TestState *ts);
void test_course_pp(TestState *ts);

// ---------------------------------------------------------------- the course over TP ranks
//
// Stage 04 splits this code's GPT over t tensor-parallel ranks, optionally with sequence
// parallelism. A small model with nothing a power of two where it matters: L 2, C 48,
// 12 heads (so t = 2, 3, 4 all take whole heads), V 97 (padded to 98, 99, 100: blocks
// of 49, 33, 25 rows), position table 8, batch 2 x 6 (N = 12 tokens: SP splits them 6,
// 4, 3 per rank). Expected bytes per rank, counted tensor by tensor (fp32 unless said;
// Nl = N/t with SP, else N):
//   activations  encoded Nl*48; per layer ln1, res_att, ln2, res_mlp Nl*48 each, two
//                means and two rstds Nl each, qkv N*144/t, atty N*48/t, fch and fch_gelu
//                N*192/t each, att 2 x 12/t x 6 x 6; lnf Nl*48, its mean and rstd Nl
//                each; logits N*ceil(97/t); losses N; t > 1: row max and sum N each;
//                + int32 tokens and targets, 4N bytes each
//   workspace    dres, dln Nl*48 each; datty N*48/t, dqkv N*144/t, dbig, dbig2 N*192/t
//                each, datt 2 x 12/t x 6 x 6; SP: gathered input and its gradient N*48
//                each; t > 1: all ranks' row maxima t*N
//   params       wte ceil(97/t) x 48, wpe 8 x 48; per layer ln_1, ln_2 4 x 48, c_attn
//                (144*48 + 144)/t, attn c_proj 48*48/t + 48, c_fc (192*48 + 192)/t,
//                mlp c_proj 48*192/t + 48; ln_f 2 x 48
void test_course_tp(TestState *ts) {
    ModelSpec m = {ARCH_GPT, 2, 48, 12, 12, 192, 97, 8, 0, 0};
    static const struct { const char *name; int tp, sp; double act, work; } cases[] = {
        {"tp1", 1, 0, 90528, 35712},
        {"tp2", 2, 0, 57216, 20256},    {"tp3", 3, 0, 46080, 15120},
        {"tp4", 4, 0, 40512, 12576},    {"tp2_sp", 2, 1, 45456, 22560},
        {"tp3_sp", 3, 1, 30400, 16656}, {"tp4_sp", 4, 1, 22872, 13728},
    };
    char name[64], detail[512];
    int wok = 1;
    size_t pos = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double got = mm_course_act_bytes(&m, 2, 6, cases[i].tp, cases[i].sp);
        snprintf(name, sizeof name, "measured.course_act.%s", cases[i].name);
        // Off by a whole number of bytes per token says which term: 8 B = the two int32
        // id arrays, 16 B per layer = one LayerNorm's mean and 1/std, ...
        char off[96] = "";
        if (!near(got, cases[i].act, 0))
            snprintf(off, sizeof off, "; off by %+.0f B, %+.2f B per token of the 12",
                     got - cases[i].act, (got - cases[i].act) / 12);
        test_report(ts, near(got, cases[i].act, 0), name,
                    "TP %d%s, L2 C48 NH12 V97, batch 2x6: %.0f B per rank (want %.0f%s)",
                    cases[i].tp, cases[i].sp ? " + SP" : "", got, cases[i].act, off);
        double w = mm_course_workspace_bytes(&m, 2, 6, cases[i].tp, cases[i].sp);
        wok = wok && near(w, cases[i].work, 0);
        pos += (size_t)snprintf(detail + pos, sizeof detail - pos, "%s %.0f (want %.0f); ",
                                cases[i].name, w, cases[i].work);
    }
    test_report(ts, wok, "plan.course_workspace_per_rank", "%s", detail);
    static const double want_params[] = {61680, 31392, 21296, 16248};  // t = 1..4
    int pok = 1;
    pos = 0;
    for (int t = 1; t <= 4; t++) {
        double got = mm_course_params_per_rank(&m, t);
        pok = pok && near(got, want_params[t - 1], 0);
        pos += (size_t)snprintf(detail + pos, sizeof detail - pos, "tp%d %.0f (want %.0f); ", t,
                                got, want_params[t - 1]);
    }
    // mm_estimate takes the course's model states from this split.
    Setup s = mm_default_setup(&m);
    s.recipe = RECIPE_COURSE;
    s.tp = 3;
    MemEstimate e = mm_estimate(&m, &s);
    test_report(ts, pok && e.params_per_gpu == want_params[2], "plan.course_params_per_rank",
                "%smm_estimate at TP 3: %.0f", detail, e.params_per_gpu);
}

// ---------------------------------------------------------------- the course over pipeline stages
//
// Stage 05 cuts this code's GPT into p stages (05_pipeline/pipe_model.c). The model of
// tests/test_pp.c and tests/stage05.sh: L 8, C 32, 4 heads, T 8, V 61, micro-batches of
// B = 2 (N = 16 tokens). Counted here tensor by tensor, in floats unless said:
//   one micro-batch's set   the input (embedding output or received) N*C = 512; per layer
//                           ln1, res_att, ln2, res_mlp 4 x 512, four statistics 4 x 16,
//                           qkv, atty, fch, fch_gelu 12 x 512, att 2 x 4 x 8 x 8 = 8768;
//                           the last stage's head: lnf 512 + 2 x 16, logits 16 x 61,
//                           losses 16 = 1536; x 4 bytes, + int32 tokens, targets 2 x 64 B
//   its weights             per layer 12C^2 + 13C = 12704; stage 0 wte 61 x 32 = 1952 and
//                           wpe 8 x 32 = 256; the last stage ln_f 64 and wte's copy 1952
// 8 layers over 2, 3, 4 stages: 4 4 | 3 3 2 | 2 2 2 2. So one set is
//   p 2: 4(512 + 4 x 8768) + 128 = 142464, 4(512 + 4 x 8768 + 1536) + 128 = 148608
//   p 3: 4(512 + 3 x 8768) + 128 = 107392 (twice), 4(512 + 2 x 8768 + 1536) + 128 = 78464
//   p 4: 4(512 + 2 x 8768) + 128 = 72320 (three times), then 78464
// and the parameters
//   p 2: 2208 + 4 x 12704 = 53024, 4 x 12704 + 2016 = 52832
//   p 3: 2208 + 3 x 12704 = 40320, 38112, 2 x 12704 + 2016 = 27424
//   p 4: 27616, 25408, 25408, 27424
// (build/pp_train's ledgers print these, x in flight, and x 4 bytes: tests/stage05.sh).
static const ModelSpec pp_model = {ARCH_GPT, 8, 32, 4, 4, 128, 61, 8, 0, 0};
static const struct { int p; double set[4], params[4]; } pp_rows[] = {
    {2, {142464, 148608}, {53024, 52832}},
    {3, {107392, 107392, 78464}, {40320, 38112, 27424}},
    {4, {72320, 72320, 72320, 78464}, {27616, 25408, 25408, 27424}},
};

static Setup pp_setup(int p, int m, int gpipe) {
    Setup s = mm_default_setup(&pp_model);
    s.recipe = RECIPE_COURSE;
    s.micro_batch = 2;
    s.pp = p;
    s.microbatches = m;
    s.gpipe = gpipe;
    return s;
}

void test_course_pp(TestState *ts) {
    const ModelSpec *m = &pp_model;
    char name[64], detail[512];
    size_t pos;
    // pp_layers' split: the first L mod p stages one layer more.
    static const int want_l0[3][5] = {{0, 4, 8}, {0, 3, 6, 8}, {0, 2, 4, 6, 8}};
    int ok = 1;
    pos = 0;
    for (int i = 0; i < 3; i++) {
        int p = pp_rows[i].p;
        pos += (size_t)snprintf(detail + pos, sizeof detail - pos, "p%d:", p);
        for (int st = 0; st < p; st++) {
            int l0 = -1, l1 = -1;
            mm_stage_layers(8, p, st, &l0, &l1);
            ok = ok && l0 == want_l0[i][st] && l1 == want_l0[i][st + 1];
            pos += (size_t)snprintf(detail + pos, sizeof detail - pos, " %d..%d", l0, l1 - 1);
        }
        pos += (size_t)snprintf(detail + pos, sizeof detail - pos, "; ");
    }
    int l0 = -1, l1 = -1;
    mm_stage_layers(10, 4, 3, &l0, &l1);  // 10 over 4: 3 3 2 2
    ok = ok && l0 == 8 && l1 == 10;
    test_report(ts, ok, "plan.course_pp_layers", "%s10 over 4, stage 3: %d..%d (want 8..9)",
                detail, l0, l1 - 1);

    // In flight: GPipe m; 1F1B min(p - s, m); m = 0 is p.
    ok = 1;
    pos = 0;
    static const struct { int p, m, gpipe, want[4]; } fl[] = {
        {4, 4, 0, {4, 3, 2, 1}}, {4, 2, 0, {2, 2, 2, 1}}, {4, 0, 0, {4, 3, 2, 1}},
        {3, 4, 1, {4, 4, 4}},    {3, 0, 1, {3, 3, 3}},    {2, 8, 0, {2, 1}},
    };
    for (size_t i = 0; i < sizeof fl / sizeof fl[0]; i++) {
        Setup s = pp_setup(fl[i].p, fl[i].m, fl[i].gpipe);
        pos += (size_t)snprintf(detail + pos, sizeof detail - pos, "%s p%d m%d:",
                                fl[i].gpipe ? "gpipe" : "1f1b", fl[i].p, fl[i].m);
        for (int st = 0; st < fl[i].p; st++) {
            int k = mm_stage_in_flight(&s, st);
            ok = ok && k == fl[i].want[st];
            pos += (size_t)snprintf(detail + pos, sizeof detail - pos, " %d", k);
        }
        ok = ok && mm_stage_in_flight(&s, 0) == mm_in_flight(&s);
        pos += (size_t)snprintf(detail + pos, sizeof detail - pos, "; ");
    }
    test_report(ts, ok, "plan.course_pp_in_flight", "%s", detail);

    // Every stage's activation peak for GPipe (m 4: all 4 in flight) and 1F1B (m 4:
    // p - s; m 2 on 4 stages: 2 2 2 1), and its parameters.
    for (int i = 0; i < 3; i++) {
        int p = pp_rows[i].p;
        for (int sched = 0; sched < 3; sched++) {
            int gpipe = sched == 0, mb = sched == 2 ? 2 : 4;
            if (sched == 2 && p != 4) continue;
            ok = 1;
            pos = 0;
            for (int st = 0; st < p; st++) {
                int k = gpipe ? mb : (p - st < mb ? p - st : mb);
                double want = k * pp_rows[i].set[st];
                double got = mm_course_stage_act_bytes(m, 2, 8, 1, 0, p, st, k, RECOMPUTE_NONE, 1, 0);
                ok = ok && near(got, want, 0);
                pos += (size_t)snprintf(detail + pos, sizeof detail - pos, "stage %d: %.0f (%d x "
                                        "%.0f); ", st, got, k, pp_rows[i].set[st]);
            }
            snprintf(name, sizeof name, "plan.course_pp_act.p%d.%s%s", p, gpipe ? "gpipe" : "1f1b",
                     sched == 2 ? "_m2" : "");
            test_report(ts, ok, name, "%s", detail);
        }
        ok = 1;
        pos = 0;
        for (int st = 0; st < p; st++) {
            double got = mm_course_stage_params(m, 1, p, st);
            ok = ok && near(got, pp_rows[i].params[st], 0);
            pos += (size_t)snprintf(detail + pos, sizeof detail - pos, "stage %d: %.0f (want "
                                    "%.0f); ", st, got, pp_rows[i].params[st]);
        }
        snprintf(name, sizeof name, "plan.course_pp_params.p%d", p);
        test_report(ts, ok, name, "%s", detail);
    }

    // One stage is the whole model: encoded, 8 layers, the head; wte once.
    double whole = mm_course_stage_act_bytes(m, 2, 8, 1, 0, 1, 0, 1, RECOMPUTE_NONE, 1, 0);
    double wp = mm_course_stage_params(m, 1, 1, 0);
    test_report(ts, near(whole, 4 * (512 + 8 * 8768 + 1536) + 128, 0) &&
                    near(wp, 2208 + 8 * 12704 + 64, 0) && wp == mm_course_params_per_rank(m, 1),
                "plan.course_pp_one_stage_is_whole_model",
                "p 1: activations %.0f B (want 288896), params %.0f (want 103904)", whole, wp);

    // TP 2 inside each of 2 stages (stage 05 x stage 04), with and without SP: per rank
    // C/2 of the split tensors, 2 heads, a 31-row block of the vocabulary, the head's
    // row max and sum (2 x 16); SP: 8 of the 16 tokens for the rest. One set:
    //   no SP  layer 16 x 132 + 16 x 192 + 2 x 2 x 64 = 5440, head 16 x 34 + 16 x 31 + 16
    //          + 32 = 1088: 4(512 + 4 x 5440) + 128 = 89216, + 4 x 1088 = 93568
    //   SP     layer 8 x 132 + 3072 + 256 = 4384, head 8 x 34 + 496 + 48 = 816, input
    //          256: 4(256 + 4 x 4384) + 128 = 71296, + 4 x 816 = 74560
    //   params per layer (12C^2 + 7C)/2 + 6C = 6448, wte block 31 x 32 = 992:
    //          992 + 256 + 4 x 6448 = 27040, 4 x 6448 + 64 + 992 = 26848
    double t0 = mm_course_stage_act_bytes(m, 2, 8, 2, 0, 2, 0, 3, RECOMPUTE_NONE, 1, 0);
    double t1 = mm_course_stage_act_bytes(m, 2, 8, 2, 0, 2, 1, 3, RECOMPUTE_NONE, 1, 0);
    double s0 = mm_course_stage_act_bytes(m, 2, 8, 2, 1, 2, 0, 3, RECOMPUTE_NONE, 1, 0);
    double s1 = mm_course_stage_act_bytes(m, 2, 8, 2, 1, 2, 1, 3, RECOMPUTE_NONE, 1, 0);
    double p0 = mm_course_stage_params(m, 2, 2, 0), p1 = mm_course_stage_params(m, 2, 2, 1);
    test_report(ts, near(t0, 3 * 89216, 0) && near(t1, 3 * 93568, 0) && near(s0, 3 * 71296, 0) &&
                    near(s1, 3 * 74560, 0) && near(p0, 27040, 0) && near(p1, 26848, 0),
                "plan.course_pp_tp2", "3 in flight: %.0f, %.0f; SP %.0f, %.0f (want 267648, "
                "280704; 213888, 223680); params %.0f, %.0f (want 27040, 26848)", t0, t1, s0, s1,
                p0, p1);

    // mm_estimate reports the stage asked for: 1F1B on 4 stages, m 4, stage 1.
    Setup s = pp_setup(4, 4, 0);
    s.stage = 1;
    MemEstimate e = mm_estimate(m, &s);
    test_report(ts, e.stage == 1 && e.in_flight == 3 && e.layers_per_stage == 2 &&
                    near(e.params_per_gpu, 25408, 0) && near(e.bytes_activations, 3 * 72320, 0) &&
                    near(e.bytes_workspace, 4 * (14 * 32 * 16 + 2 * 4 * 64), 0),
                "plan.course_pp_estimate", "stage %d: %d layers, %d in flight, %.0f params, "
                "activations %.0f B (want 216960), workspace %.0f B (want 30720)", e.stage,
                e.layers_per_stage, e.in_flight, e.params_per_gpu, e.bytes_activations,
                e.bytes_workspace);
    // ... or, stage -1, the busiest: GPipe on 2 stages holds 4 sets on each, and the
    // last stage's carry the head (148608 > 142464); 1F1B on 4 the first stage (4 in
    // flight).
    s = pp_setup(2, 4, 1);
    s.stage = -1;
    MemEstimate g2 = mm_estimate(m, &s);
    s = pp_setup(4, 4, 0);
    s.stage = -1;
    MemEstimate f4 = mm_estimate(m, &s);
    test_report(ts, g2.stage == 1 && near(g2.bytes_activations, 4 * 148608, 0) && f4.stage == 0 &&
                    near(f4.bytes_activations, 4 * 72320, 0),
                "plan.course_pp_busiest_stage", "GPipe p 2: stage %d (%.0f B of activations); "
                "1F1B p 4: stage %d (%.0f B)", g2.stage, g2.bytes_activations, f4.stage,
                f4.bytes_activations);
}

