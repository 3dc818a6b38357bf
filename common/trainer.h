// trainer.h — the training every driver shares: its flags, the start of a job, and
// the loop. A driver (build/train, stage 02's ddp_train, ...) parses its command
// line, launches its ranks, builds a strategy and calls train_run:
//
//   TrainJob j;
//   train_job_parse(&j, argc, argv, my_flags, n, "ddp_train [flags]", "...");
//   ... check the layout (flags_fail) ...
//   train_job_launch(&j, &cc, "--algo=ring");     // the ranks, the same flags, the context
//   ... build the strategy's hooks ...
//   train_run(&j, &hooks);                        // the loop: trainer.c
//   train_job_end(&j);
//
// The loop: micro-batches forward and backward (or a pipeline's schedule), the
// gradients synchronised (a hook: DDP plugs in here, a sharded strategy owns the
// whole step), clip, AdamW; loss, ms, tokens/s, MFU and peak memory per category
// every step, and a summary. Later stages plug into it as training extensions
// (train_ext.h: stage 06's loss scaling, stage 07's checkpoints and faults).
#pragma once
#include <stddef.h>

#include "comm.h"
#include "ctx.h"
#include "flags.h"
#include "model.h"
#include "optim.h"
#include "train_state.h"

// ---------------------------------------------------------------- the flags

#define TRAIN_MAX_EXTENSIONS 4
typedef struct TrainExtension TrainExtension;

typedef struct {
    const char *preset, *device, *data, *save_params;
    const char *precision;  // model.h's GPTRecipe: "fp32", "mixed-bf16", ...
    int acts_fp32;          // a 2-byte recipe's activations in fp32 slots (gpt_set_acts_fp32)
    const char *attention;  // "materialized" (the (T,T) probabilities kept) or "flash"
    int layers, width, heads, seq, vocab;  // 0 = from the preset
    int batch, accum, steps, threads, warmup, log_every;
    double lr, beta1, beta2, weight_decay, grad_clip, peak_tflops;
    unsigned long long seed;
    size_t device_mem;
    // The training extensions linked into this binary (train_ext.h), in their order,
    // and the values of their flags (ext_args[i]: extension i's own struct).
    int n_ext;
    const TrainExtension *ext[TRAIN_MAX_EXTENSIONS];
    void *ext_args[TRAIN_MAX_EXTENSIONS];
} TrainArgs;

#define TRAIN_MAX_FLAGS 64
// The defaults, the extensions' too (train_args_free releases theirs).
void train_args_default(TrainArgs *a);
void train_args_free(TrainArgs *a);
// Writes the training flags and every extension's into rows (room for
// TRAIN_MAX_FLAGS); returns how many.
int train_flags(TrainArgs *a, Flag *rows);
// Resolves preset + overrides into cfg, validating the training flags (exits 2
// naming the flag on bad input)...
void train_resolve(const TrainArgs *a, GPTConfig *cfg);
// ...and the extensions' (some check what exists: a checkpoint folder, made if missing).
void train_validate_extensions(const TrainArgs *a, const GPTConfig *cfg);
// The training flags every rank must share, as words ("--preset=small --layers=4 ...
// --precision=mixed-bf16 ...", then the extensions'), into buf: so that a rank
// started with other flags (mpirun and torchrun start each rank from its own command
// line) is named before any work.
void train_config_words(const TrainArgs *a, const GPTConfig *cfg, char *buf, size_t n);

// ---------------------------------------------------------------- a job's start

typedef struct {
    TrainArgs a;
    GPTConfig cfg;          // resolved
    Device dev;
    Flag flags[TRAIN_MAX_FLAGS + 32];
    int nf;                 // the parsed table (flag_given / flag_value for the driver's checks)
    Comm *comm;             // the ranks; NULL: one process with no supervisor (build/train)
    Ctx ctx;                // this rank's
} TrainJob;

// Parses the command line: the training flags, every extension's, then the driver's
// own (`extra`, n of them; NULL, 0 for none), and resolves the model. Bad input
// exits 2 naming it; a flag of a stage this binary was linked without is named with
// its stage. The job must not move afterwards (the table points into j->a).
void train_job_parse(TrainJob *j, int argc, char **argv, const Flag *extra, int n,
                     const char *usage, const char *about);
// Checks the extensions' flags (after the driver's own checks: a layout the driver
// refuses leaves nothing behind), launches the ranks (cc: --np, --transport,
// --timeout; the extensions add a supervisor's restarts), checks that every rank was
// started with the same flags
// (the training words, --np and the driver's `words`), and makes this rank's
// context on its device (a GPU picked by local rank). cc NULL: one process (build/
// train), launched only when a supervisor restarts it.
void train_job_launch(TrainJob *j, CommConfig *cc, const char *words);
void train_job_end(TrainJob *j);  // the context, the ranks, the flags' storage
int train_job_rank(const TrainJob *j);
int train_job_world(const TrainJob *j);

// ---------------------------------------------------------------- strategies

// A data-parallel strategy that shards what DDP replicates (stage 03: ZeRO-1/2/3,
// FSDP) owns the model states and the optimizer step; the trainer keeps the loop,
// the data, the timing and the log. NULL: every rank holds the whole model, and
// the sync_grads / sync_params hooks below are all there is (stage 02's DDP).
typedef struct {
    // Builds weights, gradients and optimizer state, in that order (a model too
    // big fails here, at step zero), and installs its hooks in g.
    void (*build)(GPT *g, Ctx *ctx, const GPTConfig *cfg, uint64_t seed, const AdamWConfig *oc,
                  void *arg);
    // Before micro-batch `micro` (0-based) of `accum`: at 0, gradients start from
    // zero; on the last one, communication is armed (none before it).
    void (*micro_begin)(GPT *g, int micro, int accum, void *arg);
    // After the last backward: finish the communication, clip by the global norm
    // (over every rank's shard), update. Returns that norm.
    double (*step)(GPT *g, void *arg);
    // A pipeline (stage 05) runs a step's m micro-batches itself, on its schedule:
    // when set, the trainer allocates no activations (the strategy keeps its own
    // per micro-batch in flight), hands it all m micro-batches (tokens and targets:
    // m*B*T ints each, micro-batch i at i*B*T) instead of its forward/backward
    // loop, and prints the mean loss it returns. micro_begin is not called.
    float (*run_micro_batches)(GPT *g, const int *tokens, const int *targets, int B, int T,
                               int m, void *arg);
    // The whole model's weights into host memory `out`, gpt_num_params(&g->cfg)
    // floats in the single-process layout (every rank calls it).
    void (*gather_params)(GPT *g, float *out, void *arg);
    // What this rank holds (train_state.h): its weights, moments and masters as views
    // of the flat layout, and its optimizers. NULL: the strategy does not expose it
    // (an extension that needs it refuses its flags).
    void (*state)(GPT *g, TrainState *st, void *arg);
    // The sum over every rank a job-wide decision needs (train_state.h's JobSum),
    // where the strategy's progress thread owns the Comm; NULL: the trainer's own,
    // point to point over the job's world.
    void (*sum)(float *buf, int n, void *arg);
    void (*destroy)(GPT *g, void *arg);
    void *arg;
} TrainStrategy;

typedef struct {
    // The data-parallel rank and size: ranks that hold the same model pieces read
    // different slices of the batch; the ranks of one tensor-parallel group read
    // the same one (stage 04). 0 and 0: the job's rank and world (every rank is a
    // replica).
    int data_rank, data_world;
    // After the backward passes of a step, before clipping and the update: DDP
    // averages the gradients over its group here. NULL for a single process.
    void (*sync_grads)(GPT *g, void *arg);
    // At start-up, after the weights exist: DDP broadcasts rank 0's weights (a
    // sharded strategy may wait here for the others, a barrier).
    void (*sync_params)(GPT *g, void *arg);
    void *arg;
    const char *label;    // "1 process", "DDP over 4 ranks (ring)", ...
    const TrainStrategy *strategy;  // NULL: the whole model on every rank
    // The layout in words, "dp=2 tp=2 pp=1 zero=0" (a checkpoint records it).
    const char *layout;
} TrainHooks;

typedef struct {
    double tokens_per_s, ms_per_step, gflops, mfu;  // mfu: 0 where the peak is unknown (see train_run)
    float first_loss, final_loss;
} TrainResult;

// Runs the whole training on the job's context. h NULL: one process, the whole
// model. Only rank 0 prints, and on the CPU only rank 0 measures the sgemm peak
// (its mfu is the only one filled in).
TrainResult train_run(TrainJob *j, const TrainHooks *h);
