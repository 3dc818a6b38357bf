// trainer.h — the training loop every driver shares: build the model, then
// step: micro-batches forward and backward, synchronise gradients (a hook: DDP
// plugs in here), clip, AdamW. Prints loss, ms, tokens/s, MFU and peak memory
// per category every step, and a summary.
#pragma once
#include <stddef.h>

#include "checkpoint.h"
#include "comm.h"
#include "ctx.h"
#include "flags.h"
#include "model.h"
#include "optim.h"

typedef struct {
    const char *preset, *device, *data, *save_params;
    const char *recompute;  // "none", "selective", "full" (model.h's GPTRecompute)
    int recompute_every;    // full: every k-th layer
    const char *precision;  // model.h's GPTRecipe: "fp32", "mixed-bf16", ...
    int acts_fp32;          // a 2-byte recipe's activations in fp32 slots (gpt_set_acts_fp32)
    double loss_scale;      // mixed-fp16: the initial loss scale
    int loss_scale_window;  // mixed-fp16: good steps before the scale grows
    int inject_overflow;    // > 0: that step's gradients overflow (a test of the skip)
    int layers, width, heads, seq, vocab;  // 0 = from the preset
    int batch, accum, steps, threads, warmup, log_every;
    double lr, beta1, beta2, weight_decay, grad_clip, peak_tflops;
    unsigned long long seed;
    size_t device_mem;
    // Checkpoints (stage 07): saved into ckpt_dir every ckpt_every steps and at the
    // end, the last ckpt_keep kept; resume: continue from the newest good one.
    const char *ckpt_dir;
    int ckpt_every, ckpt_keep, resume;
    int ckpt_async;  // write checkpoints on a thread while training goes on
    int sdc_every;          // compare the replicas' weights (a hash) every n steps
    double spike_factor;    // skip an update whose loss exceeds this x the recent median
    double straggler_factor;  // name a rank this much slower than the median, 3 steps running
    // The launcher's supervisor starts a job whose rank died up to max_restarts times
    // again (CommConfig.max_restarts); a restarted job resumes from its checkpoints.
    int max_restarts;
    int elastic;            // a rank that keeps failing is dropped: go on with fewer
    // Fault injection (stage 07's faults.c): "kill,step=8,rank=1" and the like.
    const char *inject;
} TrainArgs;

#define TRAIN_MAX_FLAGS 48
void train_args_default(TrainArgs *a);
// Writes the training flags into rows (room for TRAIN_MAX_FLAGS); returns how many.
int train_flags(TrainArgs *a, Flag *rows);
// Resolves preset + overrides into cfg, validating everything (exits 2 naming
// the flag on bad input).
void train_resolve(const TrainArgs *a, GPTConfig *cfg);
// The training flags every rank must share, as words ("--preset=small --layers=4 ...
// --precision=mixed-bf16 ..."), into buf: a driver appends its own and hands the
// line to comm_check_same_config, so a rank started with other flags (mpirun and
// torchrun start each rank from its own command line) is named before any work.
void train_config_words(const TrainArgs *a, const GPTConfig *cfg, char *buf, size_t n);

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
    // What this rank holds, for a checkpoint (stage 07): its weights, moments and
    // masters as views of the flat layout, and its optimizers. NULL: the strategy
    // cannot be checkpointed (the trainer refuses --ckpt-dir).
    void (*state)(GPT *g, TrainState *st, void *arg);
    // The sum over every rank that a checkpoint's agreements need (checkpoint.h's
    // CkptSum), where the strategy's progress thread owns the Comm; NULL: the
    // trainer's own, point to point over TrainHooks.comm.
    void (*sum)(float *buf, int n, void *arg);
    void (*destroy)(GPT *g, void *arg);
    void *arg;
} TrainStrategy;

typedef struct {
    int rank, world;      // this rank's slice of each global batch
    // The ranks of the job on this machine and the cores they may use together
    // (comm_local_size/comm_local_cores): the CPU's MFU peak counts these cores.
    // 0 = unknown: the world, and this process's own cores.
    int local_ranks, local_cores;
    // The data-parallel rank and size: ranks that hold the same model pieces read
    // different slices of the batch; the ranks of one tensor-parallel group read
    // the same one (stage 04). 0 and 0: rank and world (every rank is a replica).
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
    // Checkpoints: the job's ranks (a save and a load are collectives over them),
    // and the layout the manifest records ("dp=2 tp=2 pp=1 zero=0"). NULL: one process.
    Comm *comm;
    const Group *group;
    const char *layout;
} TrainHooks;

typedef struct {
    double tokens_per_s, ms_per_step, gflops, mfu;  // mfu: 0 where the peak is unknown (see train_run)
    float first_loss, final_loss;
} TrainResult;

// Runs the whole training on ctx's device. Only rank 0 prints, and on the CPU
// only rank 0 measures the sgemm peak (its mfu is the only one filled in).
TrainResult train_run(const TrainArgs *a, Ctx *ctx, const TrainHooks *h);
