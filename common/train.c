// train.c — the training driver: one process, one device, a GPT and AdamW.
//
//   build/train --preset small --steps 50                # CPU, 1 thread
//   build/train --preset small --device cuda             # one GPU
//   build/train --preset tiny --data README.md           # byte-level on any text file
//
// Every step prints loss, time, tokens/s, MFU and the peak memory per category.
// Later stages add ranks; this file is the single-process baseline they are
// checked against.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "data.h"
#include "flags.h"
#include "model.h"
#include "ops.h"
#include "optim.h"
#include "perf.h"
#include "timer.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const char *preset = "small", *device = "cpu", *data = "synthetic";
    int layers = 0, width = 0, heads = 0, seq = 0, vocab = 0;
    int batch = 8, steps = 50, threads = 1, accum = 1, warmup = 2, log_every = 1;
    double lr = 3e-4, wd = 0.1, clip = 1.0, beta1 = 0.9, beta2 = 0.95, peak_tflops = 0;
    unsigned long long seed = 1;
    size_t device_mem = 0;
    Flag flags[] = {
        F_CHOICE("--preset", &preset, "tiny|small|gpt2-124m", "model preset; the size flags below override it"),
        F_INT("--layers", &layers, 1, 4096, "transformer blocks L (0 = preset)"),
        F_INT("--width", &width, 1, 65536, "channels C (0 = preset)"),
        F_INT("--heads", &heads, 1, 4096, "attention heads; must divide --width (0 = preset)"),
        F_INT("--seq", &seq, 1, 1 << 20, "sequence length T (0 = preset)"),
        F_INT("--vocab", &vocab, 2, 1 << 24, "vocabulary V (0 = preset; byte-level text needs >= 256)"),
        F_INT("--batch", &batch, 1, 1 << 20, "sequences per micro-batch B"),
        F_INT("--grad-accum", &accum, 1, 1 << 20, "micro-batches per optimizer step"),
        F_INT("--steps", &steps, 1, 1 << 30, "optimizer steps"),
        F_DOUBLE("--lr", &lr, 0, 10, "AdamW learning rate"),
        F_DOUBLE("--beta1", &beta1, 0, 0.999999, "AdamW beta1"),
        F_DOUBLE("--beta2", &beta2, 0, 0.999999, "AdamW beta2"),
        F_DOUBLE("--weight-decay", &wd, 0, 10, "decoupled weight decay (matrices only)"),
        F_DOUBLE("--grad-clip", &clip, 0, 1e6, "max global gradient norm (0 = off)"),
        F_U64("--seed", &seed, 0, 1.8e19, "seed for weights and the synthetic corpus"),
        F_STRING("--data", &data, "'synthetic' or the path of a text file (byte-level)"),
        F_CHOICE("--device", &device, "cpu|cuda", "where to compute"),
        F_INT("--threads", &threads, 1, 1024, "CPU threads (BLAS)"),
        F_BYTES("--device-mem", &device_mem, 0, 1e18, "simulated device capacity, e.g. 80GB (0 = unlimited)"),
        F_DOUBLE("--peak-tflops", &peak_tflops, 0, 1e6, "peak for MFU (0 = measured sgemm on cpu, 989.4 on cuda)"),
        F_INT("--warmup", &warmup, 0, 1 << 20, "steps left out of the median timings"),
        F_INT("--log-every", &log_every, 1, 1 << 30, "print every n-th step"),
    };
    int nf = FLAG_COUNT(flags);
    flags_parse(flags, nf, argc, argv, "train [flags]",
                "Trains a GPT-2-style model on one device and reports loss, tokens/s, MFU and memory.");

    // Resolve the configuration, then validate all of it before allocating anything.
    GPTConfig cfg;
    CHECK(gpt_preset(preset, &cfg) == 0, "unknown preset %s", preset);
    if (layers) cfg.n_layer = layers;
    if (width) cfg.n_embd = width;
    if (heads) cfg.n_head = heads;
    if (seq) cfg.seq_len = seq;
    if (vocab) cfg.vocab = vocab;
    char err[200];
    if (gpt_config_error(&cfg, err, sizeof err)) flags_fail("%s", err);
    int synthetic = strcmp(data, "synthetic") == 0;
    if (!synthetic && cfg.vocab < 256)
        flags_fail("--data %s is byte-level text and needs --vocab >= 256 (the model has %d)", data,
                   cfg.vocab);
    if (synthetic && cfg.vocab < 4) flags_fail("the synthetic corpus needs --vocab >= 4");
    Device dev;
    device_parse(device, &dev);
    int B = batch, T = cfg.seq_len;

    Ctx ctx;
    ctx_init(&ctx, dev, threads, device_mem);
    DataLoader dl;
    if (synthetic) data_open_synthetic(&dl, cfg.vocab, (size_t)1 << 22, seed, B, T, 0, 1);
    else data_open_text(&dl, data, B, T, 0, 1);

    // Build in the order a framework does: weights, gradients, optimizer state,
    // then activations. With --device-mem too small, the failure comes here, at
    // step zero, before any forward pass.
    GPT g;
    gpt_init(&g, &ctx, &cfg, seed);
    gpt_alloc_grads(&g);
    AdamWConfig oc = {(float)lr, (float)beta1, (float)beta2, 1e-8f, (float)wd, (float)clip};
    AdamW opt;
    adamw_init(&opt, &g, &oc, 0, g.n_params);
    gpt_alloc_acts(&g, B, T);

    double fpt = gpt_flops_per_token(&cfg, T);
    double peak;
    const char *peak_src;
    if (peak_tflops > 0) { peak = peak_tflops * 1e12; peak_src = "--peak-tflops"; }
    else if (dev == DEV_CPU) { peak = cpu_peak_gflops(threads) * 1e9; peak_src = "OpenBLAS sgemm 1024^3, measured now"; }
    else { peak = 989.4e12; peak_src = "H100 SXM dense bf16 datasheet; this fp32 path cannot reach it"; }

    char pbytes[32];
    format_bytes(g.n_params * sizeof(float), pbytes, sizeof pbytes);
    log_info("model: L=%d C=%d NH=%d T=%d V=%d | %zu params (%s fp32) | device %s, %d thread%s\n",
             cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.seq_len, cfg.vocab, g.n_params, pbytes,
             device_name(dev), threads, threads == 1 ? "" : "s");
    log_info("data: %s, %zu tokens | batch %d x %d x %d accum | uniform-guess loss ln(V) = %.3f\n",
             dl.source, dl.n, B, T, accum, log((double)cfg.vocab));
    log_info("MFU = tokens/s x (6N + 12*L*H*Q*T) / peak, with 6N + 12LHQT = %.2f MFLOP/token and "
             "peak = %.1f GFLOP/s (%s)\n", fpt * 1e-6, peak * 1e-9, peak_src);

    int *inputs = malloc(sizeof(int) * B * T), *targets = malloc(sizeof(int) * B * T);
    double *step_ms = malloc(sizeof(double) * steps);
    CHECK(inputs && targets && step_ms, "out of host memory");
    float first_loss = 0, loss = 0;
    for (int step = 0; step < steps; step++) {
        ctx.ops->synchronize(&ctx);
        double t0 = now_seconds();
        gpt_zero_grad(&g);
        double loss_sum = 0;
        for (int micro = 0; micro < accum; micro++) {
            data_next(&dl, inputs, targets);
            loss_sum += gpt_forward(&g, inputs, targets, B, T);
            gpt_backward(&g, 1.0f / accum);
        }
        double norm = grad_global_norm(&g);
        adamw_step(&opt, &g, norm);
        ctx.ops->synchronize(&ctx);
        double dt = now_seconds() - t0;
        loss = (float)(loss_sum / accum);
        CHECK(isfinite(loss), "step %d: the loss is %f; training diverged", step + 1, loss);
        if (step == 0) first_loss = loss;
        step_ms[step] = dt * 1e3;
        double tok_s = (double)B * T * accum / dt;
        if ((step + 1) % log_every == 0 || step == 0 || step + 1 == steps) {
            char mem[256];
            ledger_format_peaks(&ctx.ledger, mem, sizeof mem);
            log_info("step %4d/%d | loss %.4f | norm %.3f | %8.1f ms | %9.0f tok/s | MFU %5.1f%% | "
                     "peak %s\n", step + 1, steps, loss, norm, dt * 1e3, tok_s,
                     100.0 * tok_s * fpt / peak, mem);
        }
    }

    // Summary: medians over the steps after the warm-up.
    int w = warmup < steps ? warmup : 0;
    qsort(step_ms + w, steps - w, sizeof(double), cmp_double);
    double med_ms = step_ms[w + (steps - w) / 2];
    double tok_s = (double)B * T * accum / (med_ms * 1e-3);
    log_info("done: loss %.4f -> %.4f (uniform guess %.4f) | median %.1f ms/step, %.0f tok/s, "
             "%.2f GFLOP/s, MFU %.1f%%\n", first_loss, loss, log((double)cfg.vocab), med_ms, tok_s,
             tok_s * fpt * 1e-9, 100.0 * tok_s * fpt / peak);
    ledger_print(&ctx.ledger, stdout);
    printf("RESULT train tokens_per_s=%.1f ms_per_step=%.3f gflops=%.3f mfu=%.4f first_loss=%.5f "
           "final_loss=%.5f\n", tok_s, med_ms, tok_s * fpt * 1e-9, tok_s * fpt / peak, first_loss,
           loss);

    free(inputs); free(targets); free(step_ms);
    adamw_free(&opt, &g);
    gpt_free(&g);
    data_close(&dl);
    ctx_destroy(&ctx);
    return 0;
}
