// train_args.c — the training flags every driver shares: their defaults, their
// table, their validation (bad input named before any work), and the words the ranks
// compare to be sure they were all started alike.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "trainer.h"

// mixed-fp16's loss scaling, unless --loss-scale / --loss-scale-window say otherwise.
#define LOSS_SCALE_START 65536
#define LOSS_SCALE_WINDOW 2000

void train_args_default(TrainArgs *a) {
    memset(a, 0, sizeof *a);
    a->preset = "small";
    a->device = "cpu";
    a->data = "synthetic";
    a->batch = 8;
    a->accum = 1;
    a->steps = 50;
    a->threads = 1;
    a->warmup = 2;
    a->log_every = 1;
    a->lr = 3e-4;
    a->beta1 = 0.9;
    a->beta2 = 0.95;
    a->weight_decay = 0.1;
    a->grad_clip = 1.0;
    a->seed = 1;
    a->recompute = "none";
    a->recompute_every = 1;
    a->precision = "fp32";
    a->loss_scale = LOSS_SCALE_START;
    a->loss_scale_window = LOSS_SCALE_WINDOW;
    a->ckpt_keep = 2;
}

int train_flags(TrainArgs *a, Flag *rows) {
    Flag f[] = {
        F_CHOICE("--preset", &a->preset, "tiny|small|gpt2-124m", "model preset; the size flags below override it"),
        F_INT_SENTINEL("--layers", &a->layers, 1, 4096, "0 = preset", "transformer blocks L"),
        F_INT_SENTINEL("--width", &a->width, 1, 65536, "0 = preset", "channels C"),
        F_INT_SENTINEL("--heads", &a->heads, 1, 4096, "0 = preset", "attention heads; must divide --width"),
        F_INT_SENTINEL("--seq", &a->seq, 1, 1 << 20, "0 = preset", "sequence length T"),
        F_INT_SENTINEL("--vocab", &a->vocab, 2, 1 << 24, "0 = preset", "vocabulary V (byte-level text needs >= 256)"),
        F_INT("--batch", &a->batch, 1, 1 << 20, "sequences per micro-batch B, per rank"),
        F_INT("--grad-accum", &a->accum, 1, 1 << 20, "micro-batches per optimizer step"),
        F_INT("--steps", &a->steps, 1, 1 << 30, "optimizer steps"),
        F_DOUBLE("--lr", &a->lr, 0, 10, "AdamW learning rate"),
        F_DOUBLE("--beta1", &a->beta1, 0, 0.999999, "AdamW beta1"),
        F_DOUBLE("--beta2", &a->beta2, 0, 0.999999, "AdamW beta2"),
        F_DOUBLE("--weight-decay", &a->weight_decay, 0, 10, "decoupled weight decay (matrices only)"),
        F_DOUBLE("--grad-clip", &a->grad_clip, 0, 1e6, "max global gradient norm (0 = off)"),
        F_U64("--seed", &a->seed, 0, 1.8e19, "seed for weights and the synthetic corpus"),
        F_STRING("--data", &a->data, "'synthetic' or the path of a text file (byte-level)"),
        F_CHOICE("--device", &a->device, "cpu|cuda", "where to compute"),
        F_INT("--threads", &a->threads, 1, 1024, "CPU threads (BLAS) per rank"),
        F_BYTES("--device-mem", &a->device_mem, 0, 1e18, "simulated device capacity, e.g. 80GB (0 = unlimited)"),
        F_DOUBLE("--peak-tflops", &a->peak_tflops, 0, 1e6, "peak for MFU (0 = measured sgemm on cpu, 989.4 on cuda)"),
        F_INT("--warmup", &a->warmup, 0, 1 << 20, "steps left out of the median timings"),
        F_INT("--log-every", &a->log_every, 1, 1 << 30, "print every n-th step"),
        F_STRING("--save-params", &a->save_params, "write the final weights to this .safetensors file"),
        F_CHOICE("--recompute", &a->recompute, "none|selective|full", "activation recompute: keep all, all but the attention matrices, or each layer's output only"),
        F_INT("--recompute-every", &a->recompute_every, 1, 1 << 20, "with --recompute full: only every k-th layer (l % k == 0) recomputes"),
        F_CHOICE("--precision", &a->precision, GPT_RECIPES, "precision recipe (06_mixed_precision/README.md)"),
        F_BOOL("--acts-fp32", &a->acts_fp32, "keep a 2-byte recipe's saved activations in fp32 slots (4 bytes a value, the same numbers: to compare memory and time)"),
        F_DOUBLE("--loss-scale", &a->loss_scale, 1, 16777216, "mixed-fp16: the initial loss scale (dynamic: halved on overflow, doubled after --loss-scale-window good steps)"),
        F_INT("--loss-scale-window", &a->loss_scale_window, 1, 1 << 30, "mixed-fp16: good steps before the loss scale doubles"),
        F_INT("--inject-overflow", &a->inject_overflow, 0, 1 << 30, "make step N's gradients overflow (0 = never): the step is skipped"),
        F_STRING("--ckpt-dir", &a->ckpt_dir, "save sharded checkpoints into this directory (stage 07)"),
        F_INT("--ckpt-every", &a->ckpt_every, 0, 1 << 30, "with --ckpt-dir: a checkpoint every n steps (0: only at the end)"),
        F_BOOL("--ckpt-async", &a->ckpt_async, "with --ckpt-dir: copy the state to host memory and write it on a thread while training goes on"),
        F_INT("--ckpt-keep", &a->ckpt_keep, 1, 1 << 20, "with --ckpt-dir: complete checkpoints kept (older ones deleted)"),
        F_INT("--max-restarts", &a->max_restarts, 0, 1000, "when a rank dies or hangs, restart the job from the latest good checkpoint up to N times (needs --ckpt-dir)"),
        F_BOOL("--elastic", &a->elastic, "with --max-restarts: a rank that fails first twice in a row is given up, and the job goes on with one rank fewer (data parallelism only)"),
        F_BOOL("--resume", &a->resume, "continue from the newest good checkpoint in --ckpt-dir (from step 0 if it holds none)"),
        F_INT("--sdc-check", &a->sdc_every, 0, 1 << 30, "every n steps, compare a hash of the data-parallel replicas' weights: a rank that differs is named and the run stops (0 = off)"),
        F_DOUBLE("--spike-factor", &a->spike_factor, 0, 1e6, "skip the update of a step whose loss exceeds this x the median of the last 16 (0 = off)"),
        F_DOUBLE("--straggler-factor", &a->straggler_factor, 0, 1e6, "name a rank whose forward and backward take over this x the median of all ranks', 3 steps in a row (0 = off)"),
        F_STRING("--inject", &a->inject, "fault injection: kill|hang|spike|bitflip|slow|corrupt,step=N|random[,rank=R|random][,during=ckpt|collective][,attempt=A][,factor=F][,seed=S][,permanent] (07_fault_tolerance)"),
    };
    int n = FLAG_COUNT(f);
    CHECK(n <= TRAIN_MAX_FLAGS, "TRAIN_MAX_FLAGS too small");
    memcpy(rows, f, sizeof f);
    return n;
}

void train_config_words(const TrainArgs *a, const GPTConfig *cfg, char *buf, size_t n) {
    // A long --data path is compared by a hash (FNV-1a), so the line stays short.
    uint32_t h = 2166136261u;
    for (const char *p = a->data; *p; p++) h = (h ^ (unsigned char)*p) * 16777619u;
    char data[96];
    if (strlen(a->data) < 64) snprintf(data, sizeof data, "%s", a->data);
    else snprintf(data, sizeof data, "%.40s...#%08x", a->data, h);
    int len = snprintf(buf, n, "--preset=%s --layers=%d --width=%d --heads=%d --seq=%d --vocab=%d "
                       "--batch=%d --grad-accum=%d --steps=%d --lr=%g --beta1=%g --beta2=%g "
                       "--grad-clip=%g --weight-decay=%g --warmup=%d --seed=%llu --data=%s "
                       "--device=%s --precision=%s --recompute=%s --recompute-every=%d "
                       "--acts-fp32=%d --loss-scale=%g --loss-scale-window=%d "
                       // what decides which collectives run, and when
                       "--ckpt-dir=%d --ckpt-every=%d --ckpt-async=%d --resume=%d --sdc-check=%d "
                       "--spike-factor=%g --straggler-factor=%g --save-params=%d --inject=%s",
                       a->preset, cfg->n_layer, cfg->n_embd, cfg->n_head, cfg->seq_len,
                       cfg->vocab, a->batch, a->accum, a->steps, a->lr, a->beta1, a->beta2,
                       a->grad_clip, a->weight_decay, a->warmup, (unsigned long long)a->seed,
                       data, a->device, a->precision, a->recompute, a->recompute_every,
                       a->acts_fp32, a->loss_scale, a->loss_scale_window, a->ckpt_dir != NULL,
                       a->ckpt_every, a->ckpt_async, a->resume, a->sdc_every, a->spike_factor,
                       a->straggler_factor, a->save_params != NULL, a->inject ? a->inject : "-");
    // Room for the driver's own words after these.
    CHECK(len > 0 && (size_t)len + 256 < n, "the training flags take %d bytes: more than %zu",
          len, n - 256);
}

void train_resolve(const TrainArgs *a, GPTConfig *cfg) {
    CHECK(gpt_preset(a->preset, cfg) == 0, "unknown preset %s", a->preset);
    if (a->layers) cfg->n_layer = a->layers;
    if (a->width) cfg->n_embd = a->width;
    if (a->heads) cfg->n_head = a->heads;
    if (a->seq) cfg->seq_len = a->seq;
    if (a->vocab) cfg->vocab = a->vocab;
    char err[200];
    if (gpt_config_error(cfg, err, sizeof err)) flags_fail("%s", err);
    int synthetic = strcmp(a->data, "synthetic") == 0;
    if (!synthetic && cfg->vocab < 256)
        flags_fail("--data %s is byte-level text and needs --vocab >= 256 (the model has %d)",
                   a->data, cfg->vocab);
    if (synthetic && cfg->vocab < 4) flags_fail("the synthetic corpus needs --vocab >= 4");
    // Flags of one recipe given with another do nothing: say so rather than ignore them.
    GPTRecipe recipe = PREC_FP32;
    if (gpt_recipe_parse(a->precision, &recipe) == 0) {
        if (recipe != PREC_MIXED_FP16 && (a->loss_scale != LOSS_SCALE_START ||
                                          a->loss_scale_window != LOSS_SCALE_WINDOW))
            flags_fail("--loss-scale and --loss-scale-window are mixed-fp16's (dynamic loss "
                       "scaling); --precision %s does not scale the loss", a->precision);
        if (a->acts_fp32 && gpt_recipe_dtype(recipe) == DT_F32)
            flags_fail("--acts-fp32: --precision %s keeps its activations in fp32 already (the "
                       "flag is for the 2-byte recipes)", a->precision);
    }
    if (a->recompute_every != 1 && strcmp(a->recompute, "full") != 0)
        flags_fail("--recompute-every %d needs --recompute full", a->recompute_every);
    if (!a->ckpt_dir && (a->resume || a->ckpt_every || a->max_restarts || a->ckpt_async))
        flags_fail("%s needs --ckpt-dir", a->resume ? "--resume" : a->ckpt_every ? "--ckpt-every"
                   : a->ckpt_async ? "--ckpt-async"
                   : "--max-restarts (a restart resumes from the latest checkpoint)");
    if (a->elastic && !a->max_restarts)
        flags_fail("--elastic needs --max-restarts (it decides how a restart goes on)");
    if (a->straggler_factor > 0 && a->straggler_factor <= 1)
        flags_fail("--straggler-factor %g: a straggler is slower than the median, so the factor "
                   "must exceed 1", a->straggler_factor);
    if (a->spike_factor > 0 && a->spike_factor <= 1)
        flags_fail("--spike-factor %g: a spike is a loss above the median, so the factor must "
                   "exceed 1", a->spike_factor);
    // What would fail after the training (or in every rank after the launch) is named
    // now: the corpus, the folder the weights go to, the fault's syntax.
    struct stat st;
    errno = 0;
    if (!synthetic && (stat(a->data, &st) != 0 || !S_ISREG(st.st_mode) || access(a->data, R_OK)))
        flags_fail("--data %s: not a readable file%s%s", a->data, errno ? ": " : "",
                   errno ? strerror(errno) : "");
    if (a->save_params) flags_check_output("--save-params", a->save_params);
    // A checkpoint folder's problems (not one, not writable, an earlier run's, one
    // checkpoint given for the folder of them) before the model is built.
    char cerr[4400];
    if (a->ckpt_dir && ckpt_dir_check(a->ckpt_dir, !a->resume && comm_attempt() == 0, cerr, sizeof cerr))
        flags_fail("%s", cerr);
    Fault f = {0};
    char ferr[256];
    if (a->inject && fault_parse(a->inject, COMM_MAX_RANKS, a->steps, &f, ferr, sizeof ferr) != 0)
        flags_fail("%s", ferr);
    // Faults that could never strike as asked (the run would end as if none were asked).
    int saves = f.step == a->steps || (a->ckpt_every && f.step % a->ckpt_every == 0);
    int in_ckpt = a->inject && (f.kind == FAULT_CORRUPT || f.during_ckpt);
    if (in_ckpt && !a->ckpt_dir)
        flags_fail("--inject %s: %s strikes a checkpoint: it needs --ckpt-dir", a->inject,
                   f.during_ckpt ? "during=ckpt" : "corrupt");
    if (in_ckpt && !saves)
        flags_fail("--inject %s: no checkpoint is saved at step %d%s (--ckpt-every %d; the last "
                   "step, %d, always saves)", a->inject, f.step, f.step_random ? ", which "
                   "step=random drew (another seed= draws another)" : "", a->ckpt_every, a->steps);
    if (a->inject && !comm_supervised() && f.attempt > a->max_restarts)
        flags_fail("--inject %s: attempt %d never comes: the job runs attempts 0 to %d "
                   "(--max-restarts; more under 07_fault_tolerance/supervise.sh)", a->inject,
                   f.attempt, a->max_restarts);
}
