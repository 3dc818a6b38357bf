// measure.c — the calculator against the machine.
//
// For several model sizes: build the real GPT from the core the way build/train
// does (weights, gradients, AdamW state, activations), run one forward, backward
// and optimizer step, then read the ledger and print, per category, the bytes the
// calculator predicted (the "course" recipe: fp32 4 + 4 + 8 bytes per parameter,
// activations as gpt_alloc_acts lays them out) beside the bytes measured.
//
//   build/measure                           # the quick suite, a table
//   build/measure --suite full --threads 2 --out runs/01_memory_wall/measured.dat
//   build/measure --check                   # PASS/FAIL lines for tests/stage01.sh
//   build/measure --device cuda             # the same on a GPU (workspace then also
//                                           # holds the backend's scratch)
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "flags.h"
#include "ledger.h"
#include "memory_model.h"
#include "model.h"
#include "ops.h"
#include "optim.h"

typedef struct {
    const char *name;
    GPTConfig cfg;  // L, C, NH, T (positions), V
    int B, T;       // the batch trained on (T <= cfg.seq_len)
} Size;

static const Size quick[] = {
    {"tiny", {2, 64, 4, 32, 256}, 2, 32},
    {"odd", {3, 72, 6, 13, 97}, 3, 13},        // no dimension a power of two
    {"small", {4, 256, 4, 128, 256}, 4, 128},
};
static const Size full_extra[] = {
    {"medium", {6, 384, 6, 256, 512}, 4, 256},
    {"gpt2-124m", {12, 768, 12, 1024, 50257}, 1, 256},  // T < positions: wpe still 1024 rows
};

static int n_pass, n_fail;
__attribute__((format(printf, 4, 5)))
static void check(int ok, const char *name, const char *size, const char *fmt, ...) {
    printf("%s %s.%s  ", ok ? "PASS" : "FAIL", name, size);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    if (ok) n_pass++; else n_fail++;
}

static void fmt(double bytes, char *buf, size_t n) {
    format_bytes_f(bytes, buf, n);
}

static void measure_one(const Size *z, Device dev, int threads, int do_check, FILE *out) {
    Ctx ctx;
    ctx_init(&ctx, dev, threads, 0);
    GPT g;
    gpt_init(&g, &ctx, &z->cfg, 1);
    gpt_alloc_grads(&g);
    AdamWConfig oc = adamw_default_config();
    AdamW opt;
    adamw_init(&opt, &g, &oc, 0, g.n_params);
    gpt_alloc_acts(&g, z->B, z->T);

    // One full step on a deterministic batch.
    size_t BT = (size_t)z->B * z->T;
    int *tok = malloc(BT * sizeof(int)), *tgt = malloc(BT * sizeof(int));
    CHECK(tok && tgt, "out of host memory");
    for (size_t i = 0; i < BT; i++) {
        tok[i] = (int)((i * 7 + 3) % (size_t)z->cfg.vocab);
        tgt[i] = (int)((i * 11 + 5) % (size_t)z->cfg.vocab);
    }
    gpt_zero_grad(&g);
    float loss = gpt_forward(&g, tok, tgt, z->B, z->T);
    gpt_backward(&g, 1.0f);
    adamw_step(&opt, &g, grad_global_norm(&g));
    ctx.ops->synchronize(&ctx);
    CHECK(isfinite(loss), "%s: loss %f", z->name, loss);

    // The calculator's view of the same run.
    ModelSpec m = {ARCH_GPT, z->cfg.n_layer, z->cfg.n_embd, z->cfg.n_head, z->cfg.n_head,
                   4 * z->cfg.n_embd, z->cfg.vocab, z->cfg.seq_len, 0, 0};
    Setup s = mm_default_setup(&m);
    s.recipe = RECIPE_COURSE;
    s.micro_batch = z->B;
    s.seq = z->T;
    MemEstimate e = mm_estimate(&m, &s);
    // The paper's formula for comparison: Korthikanti per layer at 4 bytes, no
    // dropout, plus the head -- what a reader would estimate without reading model.c.
    Setup k = s;
    k.recipe = RECIPE_FP32;
    double paper = mm_act_bytes_model(&m, &k);

    const Ledger *l = &ctx.ledger;
    double pred[5] = {e.bytes_params, e.bytes_grads, e.bytes_optimizer, e.bytes_activations,
                      e.bytes_workspace};
    MemCategory cat[5] = {MEM_PARAMS, MEM_GRADS, MEM_OPTIMIZER, MEM_ACTIVATIONS, MEM_WORKSPACE};
    char a[32], b[32];
    printf("\n%s: L=%d C=%d NH=%d T=%d V=%d, batch %dx%d, %zu params (predicted %.0f), loss %.4f\n",
           z->name, z->cfg.n_layer, z->cfg.n_embd, z->cfg.n_head, z->cfg.seq_len, z->cfg.vocab,
           z->B, z->T, g.n_params, e.params, loss);
    printf("  %-12s %14s %14s %16s %9s\n", "category", "predicted", "measured peak",
           "measured bytes", "diff");
    for (int i = 0; i < 5; i++) {
        double meas = (double)l->peak[cat[i]];
        fmt(pred[i], a, sizeof a);
        fmt(meas, b, sizeof b);
        printf("  %-12s %14s %14s %16.0f %+8.2f%%\n", mem_category_name(cat[i]), a, b, meas,
               meas > 0 ? 100.0 * (pred[i] - meas) / meas : 0.0);
    }
    fmt(e.bytes_total, a, sizeof a);
    fmt((double)l->total_peak, b, sizeof b);
    printf("  %-12s %14s %14s %16zu\n", "total", a, b, l->total_peak);
    double meas_act = (double)l->peak[MEM_ACTIVATIONS];
    fmt(paper, a, sizeof a);
    printf("  Korthikanti's formula at fp32, no dropout, plus head: %s (%+.2f%% vs measured: it "
           "leaves out the layernorm statistics, the per-position losses and the token ids)\n",
           a, meas_act > 0 ? 100.0 * (paper - meas_act) / meas_act : 0.0);

    if (out)
        fprintf(out, "%s %.0f %zu %.0f %zu %.0f %zu %.0f %zu %.0f %zu %.0f\n", z->name, pred[0],
                l->peak[MEM_PARAMS], pred[1], l->peak[MEM_GRADS], pred[2], l->peak[MEM_OPTIMIZER],
                pred[3], l->peak[MEM_ACTIVATIONS], pred[4], l->peak[MEM_WORKSPACE], paper);

    if (do_check) {
        // Static state: the same formula the allocator uses, so equality, to the byte.
        int exact = 1;
        for (int i = 0; i < 3; i++)
            exact = exact && pred[i] > 0 && pred[i] == (double)l->peak[cat[i]] &&
                    pred[i] == (double)l->current[cat[i]];
        check(exact, "measured.static_exact", z->name,
              "params+grads+optimizer predicted %.0f B, measured %.0f B",
              pred[0] + pred[1] + pred[2],
              (double)(l->peak[MEM_PARAMS] + l->peak[MEM_GRADS] + l->peak[MEM_OPTIMIZER]));
        // Activations: the course recipe follows gpt_alloc_acts term by term, so it
        // must be exact too. A tolerance here would let a forgotten term (the
        // layernorms' mean and 1/std are 0.2 % of the bytes) pass unnoticed.
        check(pred[3] > 0 && pred[3] == meas_act, "measured.activations_exact", z->name,
              "predicted %.0f B, measured %.0f B", pred[3], meas_act);
        // Workspace is the one category the core adds on top of the saved activations
        // (gradients of activations, reused layer by layer). On the CPU it is exactly
        // gpt_alloc_acts' buffer; the CUDA backend adds its own scratch to it.
        if (dev == DEV_CPU)
            check(pred[4] == (double)l->peak[MEM_WORKSPACE], "workspace.course_exact", z->name,
                  "predicted %.0f B, measured %.0f B", pred[4], (double)l->peak[MEM_WORKSPACE]);
    }

    free(tok);
    free(tgt);
    adamw_free(&opt, &g);
    gpt_free(&g);
    ctx_destroy(&ctx);
}

int main(int argc, char **argv) {
    const char *suite = "quick", *device = "cpu", *out_path = "";
    int threads = 1, do_check = 0;
    Flag flags[] = {
        F_CHOICE("--suite", &suite, "quick|full", "model sizes: quick (tiny, odd, small) or full (+ medium, gpt2-124m)"),
        F_CHOICE("--device", &device, "cpu|cuda", "where to compute"),
        F_INT("--threads", &threads, 1, 1024, "CPU threads (BLAS)"),
        F_STRING("--out", &out_path, "write a data file for the plot here ('' = none)"),
        F_BOOL("--check", &do_check, "print PASS/FAIL lines (static state and activations: exact)"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "measure [flags]",
                "Trains one step of several GPT sizes and prints the calculator's prediction "
                "beside the memory ledger, per category.");
    Device dev;
    device_parse(device, &dev);
    FILE *out = NULL;
    if (out_path[0]) {
        out = fopen(out_path, "w");
        CHECK(out, "--out %s: cannot open for writing", out_path);
        fprintf(out, "# predicted vs measured bytes per category (course recipe), device %s\n"
                "# name params_pred params_meas grads_pred grads_meas optimizer_pred "
                "optimizer_meas activations_pred activations_meas workspace_pred workspace_meas "
                "korthikanti_fp32\n", device);
    }
    printf("predicted: build/memcalc's course recipe (fp32 4 + 4 + 8 B/param; activations as "
           "gpt_alloc_acts allocates them)\nmeasured: the ledger's peak per category after one "
           "forward, backward and AdamW step on %s\n", device);
    for (size_t i = 0; i < sizeof quick / sizeof quick[0]; i++)
        measure_one(&quick[i], dev, threads, do_check, out);
    if (strcmp(suite, "full") == 0)
        for (size_t i = 0; i < sizeof full_extra / sizeof full_extra[0]; i++)
            measure_one(&full_extra[i], dev, threads, do_check, out);
    if (out) fclose(out);
    if (do_check) printf("# %d passed, %d failed\n", n_pass, n_fail);
    return 0;
}
