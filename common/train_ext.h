// train_ext.h — training extensions: how a later stage plugs into the loop.
//
// The core's loop trains; what later stages add around it (stage 06: loss scaling,
// fp8's scales, recompute; stage 07: checkpoints, faults, replica checks, loss
// spikes, stragglers, restarts) comes as extensions. An extension is a table of
// hooks at named points of the loop, with its own flags and state:
//
//   flags, validate, words, launch       before any rank starts (train_args.c, train_job.c)
//   start         the world is known, nothing is built yet
//   model         the model is built: before its precision and its activations
//   begin         everything is built: a resume moves L->start here
//   step_begin    each step, before the first micro-batch
//   micro_batch   each micro-batch's targets, before its forward
//   after_loss    each micro-batch's loss, before its backward
//   after_backward  every micro-batch done, before the gradients are synchronised
//   after_update  the update done (or skipped): L->norm, L->found_inf
//   step_end      the step timed and logged
//   end           the loop is over (what is in flight finishes); may fail the run
//   summary       lines of the run's summary
//   finish        its state released
//
// Each hook is optional and receives the loop (TrainLoop, below) and the
// extension's own state. At every point the extensions run in their `order`.
//
// An extension is in a binary when its object is on the link line: the
// TRAIN_EXTENSION line puts a pointer to it in the linker section "course_ext",
// which the loop reads (train_ext.c). So a driver built for stage 03 (make stage-3)
// has no stage-06 or -07 code in it, and the same driver built by `make` has both,
// and the core depends on neither. A flag of a stage a binary was linked without is
// refused naming that stage: the course's catalogue (train_ext.c) lists the later
// stages' flags, as data, for that message alone.
#pragma once
#include <stddef.h>

#include "data.h"
#include "trainer.h"

typedef struct TrainLoop TrainLoop;

struct TrainExtension {
    const char *name;       // "loss scaling and recompute", "checkpoints and faults"
    const char *stage;      // the stage that teaches it: "06_mixed_precision"
    int order;              // its place at every point: lower first
    // What it adds to the recipes (model.h's gpt_recipe_needs), "|"-separated.
    const char *provides;
    size_t args_size;       // its flags' values: TrainArgs.ext_args[i], zeroed, then defaults
    size_t state_size;      // its state during a run: zeroed
    void (*defaults)(void *args);
    int (*flags)(void *args, Flag *rows);  // its rows (at most TRAIN_EXT_MAX_FLAGS)
    // Before any rank starts: bad input exits 2 (flags_fail). a: the trainer's flags.
    void (*validate)(const void *args, const TrainArgs *a, const GPTConfig *cfg);
    void (*words)(const void *args, char *buf, size_t n);  // appended to the shared words
    void (*launch)(const void *args, CommConfig *cc);       // a supervisor's restarts
    void (*start)(TrainLoop *L, void *self);
    void (*model)(TrainLoop *L, void *self);
    void (*begin)(TrainLoop *L, void *self);
    void (*step_begin)(TrainLoop *L, void *self);
    void (*micro_batch)(TrainLoop *L, void *self, int *targets, size_t n);
    void (*after_loss)(TrainLoop *L, void *self, float loss);
    void (*after_backward)(TrainLoop *L, void *self);
    void (*after_update)(TrainLoop *L, void *self);
    void (*step_end)(TrainLoop *L, void *self);
    void (*end)(TrainLoop *L, void *self);
    void (*summary)(TrainLoop *L, void *self);
    void (*finish)(TrainLoop *L, void *self);
};
#define TRAIN_EXT_MAX_FLAGS 16

// Registers extension x (a const TrainExtension) by linking: one line at file scope.
#define TRAIN_EXTENSION(x)                                                                 \
    static const TrainExtension *const x##_in_course_ext                                     \
        __attribute__((used, section("course_ext"))) = &(x)

// The extensions linked into this binary, in their order (at most TRAIN_MAX_EXTENSIONS):
// how many, into out.
int train_extensions(const TrainExtension **out);
// The stage that teaches a flag or an algorithm no linked extension has (the
// course's catalogue: "--ckpt-dir" -> "07_fault_tolerance"), or NULL.
const char *train_catalogue_stage(const char *flag_or_need);
// Its entries, for the test that keeps it equal to what the extensions register:
// entry i's flag (or need) and stage; 0 past the end.
int train_catalogue_entry(int i, const char **name, const char **stage);

// The run as the extensions see it (trainer.c owns it).
struct TrainLoop {
    const TrainArgs *a;
    const TrainHooks *h;    // never NULL: one process gets the defaults
    TrainJob *job;
    Ctx *ctx;
    GPTConfig cfg;
    GPT g;
    AdamW opt;              // without a strategy: the whole model's optimizer
    DataLoader dl;
    int rank, world;        // in the job
    int data_rank, data_world;
    int B, T, accum, steps;
    int pipeline;           // the strategy runs the micro-batches (stage 05)
    JobSum sum;             // the job's sum (NULL: one process), train_state.h
    void *sum_arg;
    JobSumP2P p2p;
    TrainState st;          // what the rank holds, once train_state_collect made it
    char about[256];        // the banner's precision line: extensions append words
    int start;              // the first step (a resume moves it)

    // The step under way.
    int step;               // 0-based
    double t0;              // its start, seconds
    float loss_scale;       // what the backward multiplies the loss gradient by (1,
                            // unless an extension scales the loss: g.prec.loss_scale)
    double loss_sum;        // of its micro-batches' losses
    float loss;             // their mean
    double norm;            // the gradients' global norm (scaled by loss_scale)
    int found_inf;          // the norm was not finite: every optimizer skipped the step
    const char *skip_cause; // why, when an extension skipped it on purpose (the same on
                            // every rank); NULL: an overflow
    char note[160];         // words for the step's log line (extensions append)
    long overflows;         // steps skipped for non-finite gradients not asked for

    // Set by extensions.
    const char *skip_reason;  // what an extension may skip steps for (train_may_skip)
    int skip_asked;           // this rank asked to skip this step (train_skip_step)
    char failure[512];        // why the run failed after all: said (exit 1) after its summary

    void *ext_state[TRAIN_MAX_EXTENSIONS];
};

// This rank's state as views (train_state.h): the strategy's, or the whole model's
// replica. 0, or -1 when the strategy does not expose it. Made once; L->st.
int train_state_collect(TrainLoop *L);
// An extension may skip steps on purpose, for `why` ("loss spike"): after an update
// that was skipped, the ranks then agree whether one of them asked (a skip nobody
// asked for is an overflow). Call at start.
void train_may_skip(TrainLoop *L, const char *why);
// This rank asks to skip this step: its gradients become infinite (the loss
// gradient is scaled by inf), so that every rank's optimizer skips the update.
void train_skip_step(TrainLoop *L);
// An extension's flags' values (its args struct) and its state; NULL for an extension
// that is not linked in. (Stage 07 saves stage 06's loss scaler.)
const void *train_ext_args(const TrainLoop *L, const TrainExtension *x);
void *train_ext_state(TrainLoop *L, const TrainExtension *x);
// Appends to a note (L->note, L->about): snprintf at its end.
void train_note(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
