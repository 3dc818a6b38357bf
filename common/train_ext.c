// train_ext.c — the extensions linked into a binary, the course's catalogue of the
// flags later stages add, and what the loop offers extensions (train_ext.h).
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "train_ext.h"

// The linker gathers every TRAIN_EXTENSION pointer into the section course_ext and
// marks its ends with these two symbols. Weak: a binary linked with no extension
// has no such section, and both are then NULL.
extern const TrainExtension *const __start_course_ext[] __attribute__((weak));
extern const TrainExtension *const __stop_course_ext[] __attribute__((weak));

int train_extensions(const TrainExtension **out) {
    int n = 0;
    for (const TrainExtension *const *p = __start_course_ext; p && p < __stop_course_ext; p++) {
        CHECK(n < TRAIN_MAX_EXTENSIONS, "more than %d training extensions linked in",
              TRAIN_MAX_EXTENSIONS);
        // In order: insertion, into what is sorted so far (a handful at most).
        int i = n++;
        for (; i > 0 && out[i - 1]->order > (*p)->order; i--) out[i] = out[i - 1];
        out[i] = *p;
    }
    return n;
}

// The course's table of contents for what later stages add to training: their
// flags, and the algorithms some recipes need (model.h's gpt_recipe_needs). A
// binary linked without such a stage (make stage-3 builds the stages up to 03 only)
// cannot parse the flag; it names the stage that teaches it instead of saying
// "unknown flag". Data only: the core calls nothing of a stage. test_extensions
// keeps it equal to what the extensions register.
static const struct { const char *name, *stage; } catalogue[] = {
    {"--recompute", "06_mixed_precision"},
    {"--recompute-every", "06_mixed_precision"},
    {"--loss-scale", "06_mixed_precision"},
    {"--loss-scale-window", "06_mixed_precision"},
    {"--inject-overflow", "06_mixed_precision"},
    {"dynamic loss scaling", "06_mixed_precision"},
    {"stochastic rounding", "06_mixed_precision"},
    {"fp8 delayed scaling", "06_mixed_precision"},
    {"--ckpt-dir", "07_fault_tolerance"},
    {"--ckpt-every", "07_fault_tolerance"},
    {"--ckpt-async", "07_fault_tolerance"},
    {"--ckpt-keep", "07_fault_tolerance"},
    {"--resume", "07_fault_tolerance"},
    {"--max-restarts", "07_fault_tolerance"},
    {"--elastic", "07_fault_tolerance"},
    {"--sdc-check", "07_fault_tolerance"},
    {"--spike-factor", "07_fault_tolerance"},
    {"--straggler-factor", "07_fault_tolerance"},
    {"--inject", "07_fault_tolerance"},
};

const char *train_catalogue_stage(const char *name) {
    for (size_t i = 0; i < sizeof catalogue / sizeof catalogue[0]; i++)
        if (strcmp(catalogue[i].name, name) == 0) return catalogue[i].stage;
    return NULL;
}

int train_catalogue_entry(int i, const char **name, const char **stage) {
    if (i < 0 || (size_t)i >= sizeof catalogue / sizeof catalogue[0]) return 0;
    *name = catalogue[i].name;
    *stage = catalogue[i].stage;
    return 1;
}

// ---------------------------------------------------------------- for the extensions

int train_state_collect(TrainLoop *L) {
    if (L->st.model) return 0;  // made already
    const TrainStrategy *S = L->h->strategy;
    if (S && !S->state) return -1;
    if (S) {
        S->state(&L->g, &L->st, S->arg);
    } else {  // every data-parallel replica holds the same: each saves its share
        train_state_add(&L->st, ST_PARAMS, &L->g, 0, L->g.n_params, L->g.params, L->data_world,
                        L->data_rank);
        train_state_add_opt(&L->st, &L->opt, &L->g, L->data_world, L->data_rank);
    }
    L->st.model = &L->g;
    return 0;
}

void train_may_skip(TrainLoop *L, const char *why) { L->skip_reason = why; }

void train_skip_step(TrainLoop *L) {
    CHECK(L->skip_reason, "train_skip_step without train_may_skip");
    L->skip_asked = 1;
    L->g.prec.loss_scale = INFINITY;
}

const void *train_ext_args(const TrainLoop *L, const TrainExtension *x) {
    for (int i = 0; i < L->a->n_ext; i++)
        if (L->a->ext[i] == x) return L->a->ext_args[i];
    return NULL;
}

void *train_ext_state(TrainLoop *L, const TrainExtension *x) {
    for (int i = 0; i < L->a->n_ext; i++)
        if (L->a->ext[i] == x) return L->ext_state[i];
    return NULL;
}

void train_note(char *buf, size_t n, const char *fmt, ...) {
    size_t len = strlen(buf);
    if (len + 1 >= n) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, n - len, fmt, ap);
    va_end(ap);
}
