// train_args.c — the training flags every driver shares: their defaults, their
// table, their validation (bad input named before any work), and the words the ranks
// compare to be sure they were all started alike. Each linked extension (train_ext.h)
// adds its own flags, checks and words after the core's.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "train_ext.h"

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
    a->precision = "fp32";
    a->attention = "materialized";
    a->n_ext = train_extensions(a->ext);
    for (int i = 0; i < a->n_ext; i++) {
        a->ext_args[i] = calloc(1, a->ext[i]->args_size ? a->ext[i]->args_size : 1);
        CHECK(a->ext_args[i], "out of host memory");
        if (a->ext[i]->defaults) a->ext[i]->defaults(a->ext_args[i]);
    }
}

void train_args_free(TrainArgs *a) {
    for (int i = 0; i < a->n_ext; i++) free(a->ext_args[i]);
    a->n_ext = 0;
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
        F_CHOICE("--precision", &a->precision, GPT_RECIPES, "precision recipe (06_mixed_precision/README.md; mixed-fp16, bf16-sr and fp8 need that stage linked in)"),
        F_CHOICE("--attention", &a->attention, "materialized|flash", "causal attention keeping its (T,T) probabilities for the backward, or FlashAttention's tiles keeping each row's log-sum-exp (common/ops_cpu_flash.c)"),
        F_BOOL("--acts-fp32", &a->acts_fp32, "keep a 2-byte recipe's saved activations in fp32 slots (4 bytes a value, the same numbers: to compare memory and time)"),
    };
    int n = FLAG_COUNT(f);
    memcpy(rows, f, sizeof f);
    for (int i = 0; i < a->n_ext; i++) {
        Flag more[TRAIN_EXT_MAX_FLAGS];
        int k = a->ext[i]->flags ? a->ext[i]->flags(a->ext_args[i], more) : 0;
        CHECK(k <= TRAIN_EXT_MAX_FLAGS, "%s: %d flags, at most %d", a->ext[i]->name, k,
              TRAIN_EXT_MAX_FLAGS);
        n = flags_append(rows, n, TRAIN_MAX_FLAGS, more, k);
    }
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
                       "--device=%s --precision=%s --attention=%s --acts-fp32=%d --save-params=%d",
                       a->preset, cfg->n_layer, cfg->n_embd, cfg->n_head, cfg->seq_len,
                       cfg->vocab, a->batch, a->accum, a->steps, a->lr, a->beta1, a->beta2,
                       a->grad_clip, a->weight_decay, a->warmup, (unsigned long long)a->seed,
                       data, a->device, a->precision, a->attention, a->acts_fp32,
                       a->save_params != NULL);
    for (int i = 0; i < a->n_ext && len > 0 && (size_t)len < n; i++)
        if (a->ext[i]->words) {
            a->ext[i]->words(a->ext_args[i], buf + len, n - (size_t)len);
            len = (int)strlen(buf);
        }
    // Room for the driver's own words after these.
    CHECK(len > 0 && (size_t)len + 256 < n, "the training flags take %d bytes: more than %zu",
          len, n - 256);
}

// A recipe that needs an algorithm (gpt_recipe_needs) some linked extension provides.
static void recipe_check(const TrainArgs *a) {
    GPTRecipe recipe = PREC_FP32;
    if (gpt_recipe_parse(a->precision, &recipe) != 0) return;  // the table refused it
    if (a->acts_fp32 && gpt_recipe_dtype(recipe) == DT_F32)
        flags_fail("--acts-fp32: --precision %s keeps its activations in fp32 already (the "
                   "flag is for the 2-byte recipes)", a->precision);
    const char *need = gpt_recipe_needs(recipe);
    if (!need) return;
    for (int i = 0; i < a->n_ext; i++) {
        const char *p = a->ext[i]->provides;
        size_t k = strlen(need);
        for (; p && (p = strstr(p, need)); p += k)
            if (p[k] == 0 || p[k] == '|') return;
    }
    const char *stage = train_catalogue_stage(need);
    flags_fail("--precision %s needs %s, which %s teaches: this program was linked without "
               "that stage (make stage-N links the stages up to N; make links them all)",
               a->precision, need, stage ? stage : "a later stage");
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
    recipe_check(a);
    // What would fail after the training (or in every rank after the launch) is named
    // now: the corpus, the folder the weights go to.
    struct stat st;
    errno = 0;
    if (!synthetic && (stat(a->data, &st) != 0 || !S_ISREG(st.st_mode) || access(a->data, R_OK)))
        flags_fail("--data %s: not a readable file%s%s", a->data, errno ? ": " : "",
                   errno ? strerror(errno) : "");
    if (a->save_params) flags_check_output("--save-params", a->save_params);
}

void train_validate_extensions(const TrainArgs *a, const GPTConfig *cfg) {
    for (int i = 0; i < a->n_ext; i++)
        if (a->ext[i]->validate) a->ext[i]->validate(a->ext_args[i], a, cfg);
}
