// memcalc.c — the memory of a training run, per GPU, from the model and the setup.
//
//   build/memcalc --preset llama2-70b                          # 16 B/param, one GPU: no fit
//   build/memcalc --preset llama2-70b --gpus 64                # ... the smallest sharding that fits
//   build/memcalc --params 7.5e9 --zero 3 --dp 64              # ZeRO's Figure 1: 1.88 GB
//   build/memcalc --preset gpt3-175b --tp 8 --sp --recompute selective --json
//   build/memcalc --preset small --recipe course --micro-batch 8   # what build/train will hold
//   build/memcalc --preset small --recipe course --tp 2 --sp       # ... on each of 2 TP ranks
//   build/memcalc --preset small --recipe course --cp 2 --seq 2048 # ... on each of 2 CP ranks
//   build/memcalc --preset small --recipe course --pp 2 --microbatches 8 --stage 1
//                                          # ... stage 1 of build/pp_train --pp 2 --grad-accum 8
//
// Every number comes from memory_model.c's formulas; see 01_memory_wall/README.md.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "flags.h"
#include "ledger.h"
#include "memory_model.h"
#include "model.h"

static void gb(double bytes, char *buf, size_t n) {
    format_bytes_f(bytes, buf, n);
}

static void print_json(const ModelSpec *m, const Setup *s, const MemEstimate *e, double cap,
                       int gpus, int found, const Setup *fit, const MemEstimate *fe) {
    const char *oom = mm_first_oom(e, cap);
    printf("{\"params\": %.0f, \"params_per_gpu\": %.0f, \"bytes_per_param\": %g, "
           "\"bytes_per_param_params\": %g, \"bytes_per_param_grads\": %g, "
           "\"bytes_per_param_optimizer\": %g, ",
           e->params, e->params_per_gpu, e->bpp.params + e->bpp.grads + e->bpp.optimizer,
           e->bpp.params, e->bpp.grads, e->bpp.optimizer);
    printf("\"bytes_params\": %.0f, \"bytes_grads\": %.0f, \"bytes_optimizer\": %.0f, "
           "\"bytes_activations\": %.0f, \"bytes_act_per_layer\": %.0f, \"bytes_workspace\": %.0f, "
           "\"bytes_comm\": %.0f, \"bytes_total\": %.0f, \"cp\": %d, ",
           e->bytes_params, e->bytes_grads, e->bytes_optimizer, e->bytes_activations,
           e->act_per_layer, e->bytes_workspace, e->bytes_comm, e->bytes_total,
           s->cp > 1 ? s->cp : 1);
    printf("\"capacity\": %.0f, \"fits\": %s, \"first_oom\": %s%s%s, ", cap,
           e->bytes_total <= cap ? "true" : "false", oom ? "\"" : "", oom ? oom : "null",
           oom ? "\"" : "");
    printf("\"recipe\": \"%s\", \"optimizer\": \"%s\", \"micro_batch\": %d, \"seq\": %d, "
           "\"recompute\": \"%s\", \"sp\": %s, \"dropout\": %s, \"dp\": %d, \"tp\": %d, "
           "\"pp\": %d, \"zero\": %d, \"layers_per_stage\": %d, \"in_flight\": %d, "
           "\"stage\": %d, \"schedule\": \"%s\", \"microbatches\": %d",
           mm_recipe_name(s->recipe), mm_optim_name(s->optim), s->micro_batch, s->seq,
           mm_recompute_name(s->recompute), s->sp ? "true" : "false",
           m->dropout ? "true" : "false", s->dp, s->tp, s->pp, s->zero, e->layers_per_stage,
           e->in_flight, e->stage, s->gpipe ? "gpipe" : "1f1b",
           s->microbatches > 0 ? s->microbatches : s->pp);
    if (gpus > 0) {
        if (found)
            printf(", \"gpus\": %d, \"fit\": {\"dp\": %d, \"tp\": %d, \"pp\": %d, \"zero\": %d, "
                   "\"bytes_total\": %.0f}", gpus, fit->dp, fit->tp, fit->pp, fit->zero,
                   fe->bytes_total);
        else
            printf(", \"gpus\": %d, \"fit\": null", gpus);
    }
    printf("}\n");
}

static void print_human(const char *label, const ModelSpec *m, const Setup *s,
                        const MemEstimate *e, double cap, int gpus, int found, const Setup *fit,
                        const MemEstimate *fe) {
    char a[32], b[32], c[32];
    if (m->raw_params > 0) {
        printf("model       %.0f parameters (raw count: no architecture, so no activations)\n",
               e->params);
    } else {
        printf("model       %s: %s L=%d h=%d heads=%d", label, m->arch == ARCH_LLAMA ? "llama" : "gpt",
               m->layers, m->hidden, m->heads);
        if (m->kv_heads != m->heads) printf(" (kv %d)", m->kv_heads);
        printf(" ffn=%d V=%d s=%d | %.0f params (%.3f B)\n", m->ffn, m->vocab, m->seq, e->params,
               e->params * 1e-9);
    }
    printf("recipe      %s, %s: %g + %g + %g = %g bytes/param (%s)\n", mm_recipe_name(s->recipe),
           mm_optim_name(s->optim), e->bpp.params, e->bpp.grads, e->bpp.optimizer,
           e->bpp.params + e->bpp.grads + e->bpp.optimizer, mm_recipe_help(s->recipe));
    if (m->raw_params > 0)
        printf("setup       DP %d, TP %d, PP %d | ZeRO-%d\n", s->dp, s->tp, s->pp, s->zero);
    else
        printf("setup       micro-batch %d x seq %d | DP %d, TP %d, PP %d (%s, %d micro-batch%s in "
               "flight) | ZeRO-%d | SP %s | recompute %s | dropout %s\n",
               s->micro_batch, s->seq, s->dp, s->tp, s->pp, s->gpipe ? "GPipe" : "1F1B",
               e->in_flight, e->in_flight == 1 ? "" : "es", s->zero, s->sp ? "on" : "off",
               mm_recompute_name(s->recompute), m->dropout ? "on" : "off");
    int staged = s->recipe == RECIPE_COURSE && m->raw_params <= 0 && s->pp > 1;
    if (staged) {
        int l0, l1, last = e->stage == s->pp - 1;
        mm_stage_layers(m->layers, s->pp, e->stage, &l0, &l1);
        printf("pipeline    stage %d of %d: layers %d..%d%s%s | %.0f of the %.0f params%s\n", e->stage,
               s->pp, l0, l1 - 1, e->stage == 0 ? " + the embedding (wte, wpe)" : "",
               last ? " + the head (ln_f, a copy of wte: the tied LM head)" : "",
               e->params_per_gpu, e->params, s->tp > 1 ? " on each TP rank" : "");
    }
    printf("per GPU     %-12s %14s %10s%s\n", "category", "bytes", "share",
           staged ? "   (this stage)" : "");
    const char *names[] = {"params", "grads", "optimizer", "activations", "workspace", "comm"};
    double v[] = {e->bytes_params, e->bytes_grads, e->bytes_optimizer, e->bytes_activations,
                  e->bytes_workspace, e->bytes_comm};
    for (int i = 0; i < 6; i++) {
        if (i >= 4 && s->recipe != RECIPE_COURSE) continue;
        if (i == 5 && !(s->cp > 1)) continue;
        if (i == 3 && m->raw_params > 0) continue;
        gb(v[i], a, sizeof a);
        printf("            %-12s %14s %9.1f%%\n", names[i], a,
               e->bytes_total > 0 ? 100.0 * v[i] / e->bytes_total : 0.0);
    }
    gb(e->bytes_total, a, sizeof a);
    printf("            %-12s %14s\n", "total", a);
    if (m->raw_params <= 0) {
        gb(e->act_per_layer, a, sizeof a);
        printf("activations %s per layer per micro-batch; %d layer%s on %s x %d in "
               "flight%s%s\n", a, e->layers_per_stage, e->layers_per_stage == 1 ? "" : "s",
               staged ? (e->stage == s->pp - 1 ? "this stage, with the head,"
                                               : "this stage, with its input,")
                      : "the first stage",
               e->in_flight, s->recompute == RECOMPUTE_FULL ? " + 1 layer recomputed" : "",
               staged ? (s->tp > 1 ? " (one gpt_acts_alloc set each, on each TP rank)"
                                   : " (one gpt_acts_alloc set each)")
               : s->recipe == RECIPE_COURSE
                   ? (s->tp > 1 ? " (as gpt_alloc_acts allocates them, on each TP rank)"
                                : " (as gpt_alloc_acts allocates them)")
               : s->pp <= 1 ? " + head (norm, LM-head inputs, fp32 logits)" : "");
    }
    gb(cap, a, sizeof a);
    const char *oom = mm_first_oom(e, cap);
    if (!oom) {
        gb(cap - e->bytes_total, b, sizeof b);
        printf("device      %s: fits, %s to spare\n", a, b);
    } else {
        printf("device      %s: does NOT fit (%.2fx); allocating weights, grads, optimizer, "
               "activations in that order, the first to fail is: %s\n",
               a, cap > 0 ? e->bytes_total / cap : INFINITY, oom);
    }
    if (gpus > 0) {
        if (found) {
            gb(fe->bytes_total, c, sizeof c);
            printf("on %d GPUs  smallest sharding that fits: DP %d x TP %d x PP %d, ZeRO-%d: %s "
                   "per GPU\n", gpus, fit->dp, fit->tp, fit->pp, fit->zero, c);
        } else {
            printf("on %d GPUs  nothing fits (tried TP <= 8, PP, ZeRO 0-3); more GPUs, a smaller "
                   "micro-batch or recompute\n", gpus);
        }
    }
}

// Data for the plots: activations vs sequence length for the three recompute levels.
static void sweep_seq(const ModelSpec *m, const Setup *base) {
    printf("# activation bytes per GPU vs sequence length; recipe %s, micro-batch %d, TP %d, "
           "SP %s, dropout %s\n# seq none selective full\n", mm_recipe_name(base->recipe),
           base->micro_batch, base->tp, base->sp ? "on" : "off", m->dropout ? "on" : "off");
    for (int sq = 256; sq <= 65536; sq *= 2) {
        Setup s = *base;
        s.seq = sq;
        printf("%d", sq);
        for (int r = RECOMPUTE_NONE; r <= RECOMPUTE_FULL; r++) {
            s.recompute = (Recompute)r;
            printf(" %.0f", mm_act_bytes_model(m, &s));
        }
        printf("\n");
    }
}

// Data for the plots: per-GPU breakdown for several presets and recipes, one GPU,
// the preset's own sequence length, micro-batch 1.
static void sweep_breakdown(const Setup *base) {
    const char *presets[] = {"gpt2-xl", "llama2-7b", "llama2-13b", "llama2-70b"};
    Recipe recipes[] = {RECIPE_FP32, RECIPE_MIXED_BF16, RECIPE_MEGATRON_BF16,
                        RECIPE_MEGATRON_FP16, RECIPE_BF16};
    printf("# preset recipe params grads optimizer activations (bytes per GPU; micro-batch %d, "
           "preset's seq, recompute %s, one GPU)\n", base->micro_batch,
           mm_recompute_name(base->recompute));
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++) {
        ModelSpec m;
        mm_preset(presets[i], &m);
        if (i) printf("\n\n");  // one gnuplot data block (index) per preset
        for (size_t r = 0; r < sizeof recipes / sizeof recipes[0]; r++) {
            Setup s = *base;
            s.recipe = recipes[r];
            s.seq = m.seq;
            MemEstimate e = mm_estimate(&m, &s);
            printf("%s %s %.0f %.0f %.0f %.0f\n", presets[i], mm_recipe_name(recipes[r]),
                   e.bytes_params, e.bytes_grads, e.bytes_optimizer, e.bytes_activations);
        }
    }
}

int main(int argc, char **argv) {
    const char *preset = "gpt2-124m", *arch = "preset", *recipe = "mixed-bf16";
    const char *optim = "adamw", *recompute = "none", *dropout = "preset", *schedule = "1f1b";
    const char *sweep = "none";
    double raw_params = 0;
    int layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, vocab = 0, seq = 0;
    int micro_batch = 1, dp = 1, tp = 1, pp = 1, zero = 0, microbatches = 0, sp = 0, gpus = 0;
    int cp = 1;
    const char *cp_attention = "ring";
    int json = 0, stage = 0, recompute_every = 1;
    const char *precision = "fp32";
    size_t device_mem = (size_t)80e9;
    Flag flags[] = {
        F_CHOICE("--preset", &preset, MM_PRESETS, "model; the size flags below override it"),
        F_DOUBLE("--params", &raw_params, 0, 1e16, "a raw parameter count instead of an architecture (0 = from the model)"),
        F_CHOICE("--arch", &arch, "preset|gpt|llama", "block type: GPT (LayerNorm, GELU, biases, tied) or Llama (RMSNorm, SwiGLU, GQA)"),
        F_INT("--layers", &layers, 0, 100000, "transformer blocks L (0 = preset)"),
        F_INT("--hidden", &hidden, 0, 1 << 20, "hidden size h (0 = preset)"),
        F_INT("--heads", &heads, 0, 1 << 16, "attention heads a; must divide --hidden (0 = preset)"),
        F_INT("--kv-heads", &kv_heads, 0, 1 << 16, "key/value heads (GQA); must divide --heads (0 = preset, or = heads)"),
        F_INT("--ffn", &ffn, 0, 1 << 22, "MLP width (0 = preset, or 4h)"),
        F_INT("--vocab", &vocab, 0, 1 << 24, "vocabulary V (0 = preset)"),
        F_INT("--seq", &seq, 0, 1 << 24, "sequence length s (0 = preset)"),
        F_CHOICE("--recipe", &recipe, "fp32|mixed-bf16|mixed-fp16|megatron-bf16|megatron-fp16|bf16|course", "precision recipe (01_memory_wall/README.md says what each holds)"),
        F_CHOICE("--optimizer", &optim, "adamw|sgd-momentum|sgd", "optimizer"),
        F_INT("--micro-batch", &micro_batch, 1, 1 << 20, "sequences per micro-batch per GPU (b)"),
        F_CHOICE("--recompute", &recompute, "none|selective|full", "activation recomputation"),
        F_CHOICE("--precision", &precision, GPT_RECIPES, "--recipe course: stage 06's recipe as this code runs it (the masters and fp8's casts added; the layers' saved activations in 2 bytes; weights and gradients still fp32 slots)"),
        F_INT("--recompute-every", &recompute_every, 1, 1 << 20, "--recipe course, full recompute: every k-th layer (l % k == 0) recomputes"),
        F_BOOL("--sp", &sp, "sequence parallelism (with --tp > 1)"),
        F_CHOICE("--dropout", &dropout, "preset|on|off", "count 1-byte dropout masks (GPT presets: on)"),
        F_INT("--dp", &dp, 1, 1 << 20, "data-parallel degree"),
        F_INT("--tp", &tp, 1, 1 << 16, "tensor-parallel degree; must divide --heads"),
        F_INT("--cp", &cp, 1, 1 << 16, "--recipe course: context-parallel ranks sharing each "
              "sequence (stage 04's cp_train, flash attention: --cp 1 is its one rank); must "
              "divide --seq"),
        F_CHOICE("--cp-attention", &cp_attention, "ring|ulysses", "--cp's attention: the ring's "
                 "blocks, or Ulysses' all-to-all (--heads divisible by --cp)"),
        F_INT("--pp", &pp, 1, 1 << 16, "pipeline-parallel degree; at most --layers"),
        F_INT("--zero", &zero, 0, 3, "ZeRO stage over the DP ranks: 1 optimizer, 2 +grads, 3 +weights"),
        F_INT("--microbatches", &microbatches, 0, 1 << 20, "micro-batches per step per pipeline (0 = --pp)"),
        F_CHOICE("--schedule", &schedule, "1f1b|gpipe", "pipeline schedule: in-flight micro-batches min(p,m) or m"),
        F_INT("--stage", &stage, 0, 1 << 16, "--recipe course with --pp > 1: the pipeline stage to report (0..pp-1; in flight 1F1B min(pp - stage, m), GPipe m)"),
        F_BYTES("--device-mem", &device_mem, 1, 1e18, "device capacity per GPU (80GB: H100)"),
        F_INT("--gpus", &gpus, 0, 1 << 20, "find the smallest sharding of this many GPUs that fits (0 = off)"),
        F_BOOL("--json", &json, "print one JSON object instead of the table"),
        F_CHOICE("--sweep", &sweep, "none|seq|breakdown", "print plot data instead: activations vs seq, or a breakdown per preset and recipe"),
    };
    int nf = FLAG_COUNT(flags);
    flags_parse(flags, nf, argc, argv, "memcalc [flags]",
                "Per-GPU memory of a training run: weights, gradients, optimizer state, activations.");

    ModelSpec m;
    mm_preset(preset, &m);  // F_CHOICE admits only known presets
    if (strcmp(arch, "gpt") == 0) m.arch = ARCH_GPT;
    if (strcmp(arch, "llama") == 0) m.arch = ARCH_LLAMA;
    if (layers) m.layers = layers;
    if (hidden) m.hidden = hidden;
    if (heads) { m.heads = heads; if (!kv_heads) m.kv_heads = heads; }
    if (kv_heads) m.kv_heads = kv_heads;
    if (hidden && !ffn && m.arch == ARCH_GPT) m.ffn = 4 * m.hidden;
    if (ffn) m.ffn = ffn;
    if (vocab) m.vocab = vocab;
    if (seq) m.seq = seq;
    if (strcmp(dropout, "on") == 0) m.dropout = 1;
    if (strcmp(dropout, "off") == 0) m.dropout = 0;
    m.raw_params = raw_params;

    Setup s = mm_default_setup(&m);
    mm_recipe_parse(recipe, &s.recipe);
    mm_optim_parse(optim, &s.optim);
    mm_recompute_parse(recompute, &s.recompute);
    s.recompute_every = recompute_every;
    GPTRecipe prec = PREC_FP32;
    gpt_recipe_parse(precision, &prec);
    s.course_precision = prec == PREC_FP8 ? 2 : gpt_recipe_master(prec);
    s.course_half = dtype_size(gpt_recipe_dtype(prec)) == 2;
    if (prec != PREC_FP32 && s.recipe != RECIPE_COURSE)
        flags_fail("--precision is for --recipe course (the other recipes are precisions themselves)");
    // The course's fp8 casts the serial linear layers of one process or data parallelism
    // (ZeRO-1/2): what the drivers refuse, the calculator does not describe.
    if (prec == PREC_FP8 && (tp > 1 || pp > 1 || zero >= 3))
        flags_fail("--precision fp8 with %s: the course's fp8 runs on one process or under "
                   "DDP and ZeRO-1/2 only", tp > 1 ? "--tp" : pp > 1 ? "--pp" : "--zero 3");
    s.micro_batch = micro_batch;
    s.sp = sp;
    s.dp = dp; s.tp = tp; s.pp = pp; s.zero = zero;
    // --cp given, even 1: cp_train's model (flash attention); not given: the course's
    // default attention, whose (T, T) scores are kept.
    s.cp = flag_given(flags, nf, "--cp") ? cp : 0;
    s.cp_ulysses = strcmp(cp_attention, "ulysses") == 0;
    s.microbatches = microbatches;
    s.gpipe = strcmp(schedule, "gpipe") == 0;
    s.stage = stage;
    int stage_given = 0;
    for (int i = 0; i < nf; i++)
        if (strcmp(flags[i].name, "--stage") == 0) stage_given = flags[i].given;

    // Cross-flag checks, before any arithmetic.
    if (m.hidden % m.heads)
        flags_fail("--heads %d does not divide --hidden %d (head size must be whole)", m.heads, m.hidden);
    if (m.heads % m.kv_heads)
        flags_fail("--kv-heads %d does not divide --heads %d", m.kv_heads, m.heads);
    if (raw_params <= 0) {
        if (m.heads % tp)
            flags_fail("--tp %d does not divide --heads %d (each rank takes whole heads)", tp, m.heads);
        if (m.kv_heads % tp)
            flags_fail("--tp %d does not divide --kv-heads %d", tp, m.kv_heads);
        if (pp > m.layers)
            flags_fail("--pp %d exceeds --layers %d (a pipeline stage needs at least one layer)", pp,
                       m.layers);
    }
    if (sp && tp < 2)
        flags_fail("--sp needs --tp > 1 (sequence parallelism splits the tokens over the "
                   "tensor-parallel ranks)");
    if (s.recipe == RECIPE_COURSE) {
        // The course recipe describes this repository's code, which has none of these
        // (yet): no other block, no other optimizer, no dropout.
        if (m.arch != ARCH_GPT || m.ffn != 4 * m.hidden || m.kv_heads != m.heads)
            flags_fail("--recipe course describes this code's GPT (--arch gpt, --ffn 4h, no GQA)");
        if (s.optim != OPTIM_ADAMW)
            flags_fail("--recipe course: this code's optimizer is AdamW (--optimizer adamw)");
        // Tensor parallelism (stage 04) it has: --tp divides the heads (checked above),
        // and SP splits the micro-batch's tokens evenly over the TP ranks.
        // Pipeline parallelism (stage 05, one chunk per rank): --pp <= --layers
        // (checked above), one stage reported.
        if (stage >= pp)
            flags_fail("--stage %d outside --pp %d (the stages are 0..%d)", stage, pp, pp - 1);
        if (sp && ((long)micro_batch * m.seq) % tp)
            flags_fail("--sp: --micro-batch %d x --seq %d = %ld tokens do not split evenly over "
                       "--tp %d", micro_batch, m.seq, (long)micro_batch * m.seq, tp);
        // Context parallelism (stage 04's cp_train): whole replicas, flash attention, fp32.
        if (s.cp >= 1) {
            if (tp > 1 || pp > 1 || sp)
                flags_fail("--cp %d with %s: the calculator models context parallelism with "
                           "data parallelism only", cp, tp > 1 ? "--tp" : pp > 1 ? "--pp" : "--sp");
            if (m.seq % cp)
                flags_fail("--cp %d does not divide --seq %d", cp, m.seq);
            if (s.cp_ulysses && m.heads % cp)
                flags_fail("--cp-attention ulysses: --heads %d is not divisible by --cp %d",
                           m.heads, cp);
            if (prec != PREC_FP32)
                flags_fail("--cp %d: cp_train runs fp32 (--precision fp32)", cp);
            if (s.recompute != RECOMPUTE_NONE)
                flags_fail("--cp %d: the calculator models context parallelism without "
                           "recompute (--recompute none)", cp);
            if (gpus > 0 || zero > 0)
                flags_fail("--cp %d with %s: cp_train is whole replicas over dp x cp (no ZeRO; "
                           "--gpus searches other layouts)", cp, gpus > 0 ? "--gpus" : "--zero");
        }
        // Recompute (stage 06): none, selective or full, every k-th layer.
        if (strcmp(dropout, "on") == 0)
            flags_fail("--dropout on: this code's GPT has no dropout (--recipe course)");
        m.dropout = 0;
    } else if (stage_given) {
        flags_fail("--stage needs --recipe course (the other recipes give the first stage)");
    }
    if (cp > 1 && s.recipe != RECIPE_COURSE)
        flags_fail("--cp needs --recipe course (this code's context parallelism)");
    if (recompute_every != 1 && (s.recipe != RECIPE_COURSE || s.recompute != RECOMPUTE_FULL))
        flags_fail("--recompute-every needs --recipe course --recompute full");
    s.seq = m.seq;

    if (strcmp(sweep, "seq") == 0) {
        if (raw_params > 0) flags_fail("--sweep seq needs an architecture, not --params");
        if (s.recipe == RECIPE_COURSE && pp > 1)
            flags_fail("--sweep seq: --recipe course gives the whole model (--pp 1)");
        sweep_seq(&m, &s);
        return 0;
    }
    if (strcmp(sweep, "breakdown") == 0) {
        sweep_breakdown(&s);
        return 0;
    }

    MemEstimate e = mm_estimate(&m, &s);
    Setup fit;
    MemEstimate fe;
    memset(&fit, 0, sizeof fit);
    memset(&fe, 0, sizeof fe);
    int found = gpus > 0 && mm_find_fit(&m, &s, gpus, (double)device_mem, &fit, &fe) == 0;
    char label[64];
    int custom = layers || hidden || heads || kv_heads || ffn || vocab || seq || strcmp(arch, "preset");
    snprintf(label, sizeof label, "%s%s", preset, custom ? " (modified)" : "");
    if (json) print_json(&m, &s, &e, (double)device_mem, gpus, found, &fit, &fe);
    else print_human(label, &m, &s, &e, (double)device_mem, gpus, found, &fit, &fe);
    return 0;
}
