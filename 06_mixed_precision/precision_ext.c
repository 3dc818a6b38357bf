// precision_ext.c — stage 06 in the training loop, as an extension (common/
// train_ext.h): linked into a driver, it gives the model this stage's plugins (the
// recipes mixed-fp16, bf16-sr and fp8, activation recompute) and scales the loss of
// mixed-fp16 around every step. A driver linked without it trains fp32, mixed-bf16
// and bf16 without recompute, and refuses the rest naming this stage.
//
// Dynamic loss scaling, each step (loss_scale.c): the backward multiplies the loss
// gradient by the scale; the optimizer divides it out of the gradients before the
// update, or skips the update when they overflowed (their norm is not finite). The
// scaler then halves the scale, or doubles it after --loss-scale-window good steps.
// A step another extension skipped on purpose (stage 07's loss spikes: the ranks
// agree which it was, L->skip_cause) says nothing about the scale: not counted.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "precision_ext.h"

// mixed-fp16's loss scaling, unless --loss-scale / --loss-scale-window say otherwise.
#define LOSS_SCALE_START 65536
#define LOSS_SCALE_WINDOW 2000

typedef struct {
    const char *recompute;  // "none", "selective", "full" (model.h's GPTRecompute)
    int recompute_every;    // full: every k-th layer
    double loss_scale;      // mixed-fp16: the initial loss scale
    int loss_scale_window;  // mixed-fp16: good steps before the scale grows
    int inject_overflow;    // > 0: that step's gradients overflow (a test of the skip)
} PrecisionArgs;

typedef struct {
    const PrecisionArgs *args;
    int fp16;               // the recipe scales its loss
    LossScaler scaler;
} Precision;

static void defaults(void *args) {
    PrecisionArgs *p = args;
    p->recompute = "none";
    p->recompute_every = 1;
    p->loss_scale = LOSS_SCALE_START;
    p->loss_scale_window = LOSS_SCALE_WINDOW;
}

static int flags(void *args, Flag *rows) {
    PrecisionArgs *p = args;
    Flag f[] = {
        F_CHOICE("--recompute", &p->recompute, "none|selective|full", "activation recompute: keep all, all but the attention matrices, or each layer's output only"),
        F_INT("--recompute-every", &p->recompute_every, 1, 1 << 20, "with --recompute full: only every k-th layer (l % k == 0) recomputes"),
        F_DOUBLE("--loss-scale", &p->loss_scale, 1, 16777216, "mixed-fp16: the initial loss scale (dynamic: halved on overflow, doubled after --loss-scale-window good steps)"),
        F_INT("--loss-scale-window", &p->loss_scale_window, 1, 1 << 30, "mixed-fp16: good steps before the loss scale doubles"),
        F_INT("--inject-overflow", &p->inject_overflow, 0, 1 << 30, "make step N's gradients overflow (0 = never): the step is skipped"),
    };
    memcpy(rows, f, sizeof f);
    return FLAG_COUNT(f);
}

// Flags of one recipe given with another do nothing: say so rather than ignore them.
static void validate(const void *args, const TrainArgs *a, const GPTConfig *cfg) {
    const PrecisionArgs *p = args;
    (void)cfg;
    GPTRecipe recipe = PREC_FP32;
    if (gpt_recipe_parse(a->precision, &recipe) == 0 && recipe != PREC_MIXED_FP16 &&
        (p->loss_scale != LOSS_SCALE_START || p->loss_scale_window != LOSS_SCALE_WINDOW))
        flags_fail("--loss-scale and --loss-scale-window are mixed-fp16's (dynamic loss "
                   "scaling); --precision %s does not scale the loss", a->precision);
    if (p->recompute_every != 1 && strcmp(p->recompute, "full") != 0)
        flags_fail("--recompute-every %d needs --recompute full", p->recompute_every);
}

static void words(const void *args, char *buf, size_t n) {
    const PrecisionArgs *p = args;
    snprintf(buf, n, " --recompute=%s --recompute-every=%d --loss-scale=%g --loss-scale-window=%d",
             p->recompute, p->recompute_every, p->loss_scale, p->loss_scale_window);
}

static void start(TrainLoop *L, void *self) {
    Precision *P = self;
    P->args = train_ext_args(L, &precision_extension);
    P->fp16 = strcmp(L->a->precision, "mixed-fp16") == 0;
    P->scaler = loss_scaler_default();
    P->scaler.scale = (float)P->args->loss_scale;
    P->scaler.growth_interval = P->args->loss_scale_window;
}

// The model takes this stage's plugins, and keeps what --recompute says.
static void model(TrainLoop *L, void *self) {
    const PrecisionArgs *p = ((Precision *)self)->args;
    GPTRecompute rc = GPT_RECOMPUTE_NONE;
    gpt_recompute_parse(p->recompute, &rc);
    L->g.plugins = &precision_plugins;
    gpt_set_recompute(&L->g, rc, p->recompute_every);
    train_note(L->about, sizeof L->about, " | recompute %s", p->recompute);
    if (p->recompute_every > 1)
        train_note(L->about, sizeof L->about, ", every %d layers", p->recompute_every);
}

// The loss scale of this step's backward; an injected overflow multiplies the loss
// gradient by infinity instead, on every rank.
static void step_begin(TrainLoop *L, void *self) {
    Precision *P = self;
    L->loss_scale = P->fp16 ? P->scaler.scale : 1.0f;
    L->g.prec.loss_scale = L->step + 1 == P->args->inject_overflow ? INFINITY : L->loss_scale;
}

static void after_update(TrainLoop *L, void *self) {
    Precision *P = self;
    gpt_fp8_step_end(&L->g);  // fp8: this step's amaxes fix the next step's scales
    if (!P->fp16) return;
    if (!L->skip_cause) loss_scaler_update(&P->scaler, L->found_inf);
    train_note(L->note, sizeof L->note, " | scale %g", L->loss_scale);
}

static void summary(TrainLoop *L, void *self) {
    Precision *P = self;
    const LossScaler *s = &P->scaler;
    if (P->fp16)
        log_info("loss scale: %g at the end | %ld overflow%s (steps skipped), %ld backoff%s, "
                 "%ld growth%s", s->scale, L->overflows, L->overflows == 1 ? "" : "s",
                 s->backoffs, s->backoffs == 1 ? "" : "s", s->growths, s->growths == 1 ? "" : "s");
}

LossScaler *precision_loss_scaler(TrainLoop *L) {
    Precision *P = train_ext_state(L, &precision_extension);
    return P ? &P->scaler : NULL;
}

const TrainExtension precision_extension = {
    .name = "mixed precision and recompute",
    .stage = "06_mixed_precision",
    .order = 6,
    .provides = "dynamic loss scaling|stochastic rounding|fp8 delayed scaling",
    .args_size = sizeof(PrecisionArgs),
    .state_size = sizeof(Precision),
    .defaults = defaults,
    .flags = flags,
    .validate = validate,
    .words = words,
    .start = start,
    .model = model,
    .step_begin = step_begin,
    .after_update = after_update,
    .summary = summary,
};
TRAIN_EXTENSION(precision_extension);
