// trainer.c — the training loop shared by build/train and the stage drivers (its flags:
// train_args.c).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "cuda_probe.h"
#include "data.h"
#include "ops.h"
#include "optim.h"
#include "perf.h"
#include "precision.h"
#include "safetensors.h"
#include "timer.h"
#include "trainer.h"

// Rank 0 writes the whole model's weights (a sharded strategy gathers them first:
// every rank takes part in that).
static void save_params(const char *path, GPT *g, const TrainStrategy *S, int rank) {
    size_t n = gpt_num_params(&g->cfg), bytes = n * sizeof(float);  // the whole model
    float *host = malloc(bytes);
    CHECK(host, "out of host memory");
    if (S) S->gather_params(g, host, S->arg);
    else if (rank == 0) g->ctx->ops->to_host(g->ctx, host, g->params, bytes);
    if (rank != 0) {
        free(host);
        return;
    }
    StTensor t = {.name = "params", .dtype = DT_F32, .ndim = 1, .data = host, .nbytes = bytes};
    t.shape[0] = (int64_t)n;
    char err[256];
    CHECK(st_save(path, &t, 1, NULL, 0, err, sizeof err) == 0, "%s", err);
    free(host);
}

// The peak MFU is quoted against, in FLOP/s, and how it was found (into `how`).
// On the CPU: one core's sgemm rate, measured now, times the cores the job can
// use. Counting ranks instead would print MFU above 100 % as soon as ranks
// outnumber cores (3 ranks on 2 cores share 2 cores' FLOPs). Only rank 0 measures
// and prints; the others return 0. Ranks measuring at once would measure their
// contention, so train_run calls this while the other ranks wait for rank 0's
// weights.
static double mfu_peak(const TrainArgs *a, const Ctx *ctx, const TrainHooks *h, int rank,
                       int world, char *how, size_t n) {
    if (a->peak_tflops > 0) {
        snprintf(how, n, "(--peak-tflops)");
        return a->peak_tflops * 1e12;
    }
    int local = h && h->local_ranks > 0 ? h->local_ranks : world;
    int machines = (world + local - 1) / local;  // assumed alike when a job spans several
    if (ctx->device != DEV_CPU) {
        // Ranks that share a GPU share its peak: count the GPUs in use, not the ranks.
        CudaProbe pr;
        cuda_probe(&pr);
        int gpus = pr.devices > 0 && pr.devices < local ? pr.devices : local;
        snprintf(how, n, "= 989.4 TFLOP/s per GPU (H100 SXM dense bf16 datasheet; this fp32 path "
                 "cannot reach it) x %d GPU%s (%d rank%s on %d visible) x %d machine%s", gpus,
                 gpus == 1 ? "" : "s", local, local == 1 ? "" : "s", pr.devices, machines,
                 machines == 1 ? "" : "s");
        return 989.4e12 * gpus * machines;
    }
    if (rank != 0) {
        snprintf(how, n, "(measured by rank 0)");
        return 0;
    }
    int cores = h && h->local_cores > 0 ? h->local_cores : cores_available();
    int used = usable_cores(local, a->threads, cores);
    double core = cpu_peak_gflops(1);
    char many[64] = "";
    if (machines > 1) snprintf(many, sizeof many, " x %d machines", machines);
    snprintf(how, n, "= %.1f GFLOP/s per core (OpenBLAS sgemm 1024^3, 1 thread, best of ~0.3 s, "
             "now) x %d core%s (%d rank%s x %d thread%s on %d core%s)%s", core, used,
             used == 1 ? "" : "s",
             local, local == 1 ? "" : "s", a->threads, a->threads == 1 ? "" : "s", cores,
             cores == 1 ? "" : "s", many);
    return core * 1e9 * used * machines;
}

// The corpus as a checkpoint records it (a resume must read the same): "synthetic",
// or the file's name (not its folder: a run may move) and size.
static void corpus_identity(const char *data, char *out, size_t n) {
    struct stat sb;
    const char *base = strrchr(data, '/');
    if (strcmp(data, "synthetic") == 0) snprintf(out, n, "synthetic");
    else if (stat(data, &sb) == 0)
        snprintf(out, n, "%.100s, %lld bytes", base ? base + 1 : data, (long long)sb.st_size);
    else snprintf(out, n, "%.100s", base ? base + 1 : data);
}

// Checkpoints (stage 07): what this rank holds, and where the run starts: step 0,
// or the step of the newest good checkpoint when resuming (its state loaded).
// What this rank holds (stage 07: checkpoints, replica checks, injected bit flips)
// and the one collective those need.
static void state_begin(const TrainArgs *a, const TrainHooks *h, GPT *g, AdamW *opt,
                        TrainState *st, CkptConfig *cc, CkptP2P *p2p, int drank, int dworld,
                        int views) {
    const TrainStrategy *S = h ? h->strategy : NULL;
    if (views && S && !S->state)
        flags_fail("--ckpt-dir, --sdc-check and --inject bitflip: this parallel layout does not "
                   "expose its state yet");
    if (views && S) {
        S->state(g, st, S->arg);
    } else if (views) {  // every data-parallel replica holds the same: each saves its share
        train_state_add(st, ST_PARAMS, g, 0, g->n_params, g->params, dworld, drank);
        train_state_add_opt(st, opt, g, dworld, drank);
    }
    st->model = g;
    *cc = (CkptConfig){.dir = a->ckpt_dir, .keep = a->ckpt_keep, .rank = h ? h->rank : 0,
                       .world = h ? h->world : 1, .recipe = a->precision, .seed = a->seed};
    if (S && S->sum) {
        cc->sum = S->sum;
        cc->sum_arg = S->arg;
    } else if (cc->world > 1) {
        CHECK(h->comm && h->group, "a driver of %d ranks set no TrainHooks.comm", cc->world);
        *p2p = (CkptP2P){h->comm, h->group};
        cc->sum = ckpt_sum_p2p;
        cc->sum_arg = p2p;
    }
    snprintf(cc->layout, sizeof cc->layout, "%s", h && h->layout ? h->layout : "1 process");
}

// Checkpoints: where the run starts: step 0, or the step of the newest good
// checkpoint when resuming (its state loaded).
static int ckpt_begin(const TrainArgs *a, TrainState *st, CkptConfig *cc, LossScaler *scaler,
                      long *overflows, DataLoader *dl) {
    // (A folder that cannot hold checkpoints was refused before the model was built,
    // and a missing one made: train_resolve's ckpt_dir_check.)
    // A job the supervisor restarted (comm.c) resumes, as --resume does.
    // A new run starts at step 0. (A folder holding an earlier run's checkpoints would
    // mix the two: pruning keeps the highest steps, whichever run wrote them, and a
    // restart would resume the other run. train_resolve refused it, on every rank,
    // before the model was built: ckpt_dir_check.)
    if (!a->resume && comm_attempt() == 0) return 0;
    TrainProgress p;
    char err[4096];
    if (cc->rank == 0) log_event("load_start");
    double t0 = now_seconds();
    int r = ckpt_load(cc, st, &p, err, sizeof err);
    if (cc->rank == 0) log_event("loaded");
    CHECK(r >= 0, "--resume: %s", err);
    if (r == 0) {
        if (cc->rank == 0) log_info("--resume: no checkpoint in %s yet: starting at step 0", a->ckpt_dir);
        return 0;
    }
    CHECK(p.step <= (uint64_t)a->steps, "--resume: the checkpoint is of step %llu, past --steps %d",
          (unsigned long long)p.step, a->steps);
    resume_restore(&p, st, scaler, overflows, dl);
    // A checkpoint of another layout counts its data position in its own loader
    // steps: the same rows (sequences) are this layout's step rows / (B x dp),
    // rounded up when they are not a whole number of them (the rows in between
    // are skipped: no layout can serve part of a step).
    uint64_t unit = (uint64_t)dl->B * (uint64_t)dl->world;
    if (p.data_step_rows != unit) {
        uint64_t rows = dl->step * p.data_step_rows, was = dl->step;
        dl->step = (rows + unit - 1) / unit;
        if (cc->rank == 0)
            log_info("--resume: the data position, %llu loader steps of %llu rows, is step %llu "
                     "of this layout's %llu%s", (unsigned long long)was,
                     (unsigned long long)p.data_step_rows, (unsigned long long)dl->step,
                     (unsigned long long)unit, rows % unit ? " (the rows up to it skipped)" : "");
    }
    if (cc->rank == 0) log_info("checkpoint loaded in %.1f ms", (now_seconds() - t0) * 1e3);
    int reached = ckpt_noted_step(a->ckpt_dir);
    if (cc->rank == 0 && reached > (int)p.step)
        log_info("the run that stopped had reached step %d: %d step%s lost, to be trained again",
                 reached, reached - (int)p.step, reached - (int)p.step == 1 ? "" : "s");
    return (int)p.step;
}

// A checkpoint in two halves (ckpt_save.c): start at the end of a step, finish
// at once (sync) or at the first step start at which every writer is done
// (--ckpt-async: the writing overlaps compute). The training's stall is the time
// spent in both calls.
typedef struct {
    CkptSave *save;
    int step;
    double stall_ms;
    int failed;  // the step of the last save, if it failed (0: it did not)
} PendingCkpt;

static void ckpt_finish(const CkptConfig *cc, PendingCkpt *pc) {
    if (!pc->save) return;
    CkptSaveStats s;
    char err[4096];
    double t0 = now_seconds();
    int rc = ckpt_save_finish(pc->save, &s, err, sizeof err);
    pc->save = NULL;
    pc->stall_ms += (now_seconds() - t0) * 1e3;
    pc->failed = rc != 0 ? pc->step : 0;
    if (rc != 0)  // training goes on: the older checkpoints are intact
        log_warn("checkpoint of step %d NOT saved: %s", pc->step, err);
    else if (cc->rank == 0)
        log_info("checkpoint step %d saved to %s: %.2f MB from rank 0 | snapshot %.1f ms, write "
                 "%.1f ms%s | training stalled %.1f ms", pc->step, cc->dir, s.bytes / 1e6,
                 s.snapshot_ms, s.write_ms, s.async ? " in the background" : "", pc->stall_ms);
}

static void ckpt_start(const TrainArgs *a, const CkptConfig *cc, const TrainState *st, int step,
                       const LossScaler *scaler, long overflows, const DataLoader *dl,
                       PendingCkpt *pc) {
    ckpt_finish(cc, pc);  // one save in flight at most
    TrainProgress p;
    resume_capture(&p, (uint64_t)step, a->seed, a->precision, st, scaler, overflows, dl);
    p.data_step_rows = (uint64_t)dl->B * (uint64_t)dl->world;  // the position's unit
    snprintf(p.data, sizeof p.data, "%s", cc->data ? cc->data : "");
    char err[4096];
    double t0 = now_seconds();
    if (ckpt_save_start(cc, st, &p, a->ckpt_async, &pc->save, err, sizeof err) != 0) {
        log_warn("checkpoint of step %d NOT saved: %s", step, err);
        pc->failed = step;
        return;
    }
    *pc = (PendingCkpt){pc->save, step, (now_seconds() - t0) * 1e3, 0};
    if (!a->ckpt_async) ckpt_finish(cc, pc);
}

TrainResult train_run(const TrainArgs *a, Ctx *ctx, const TrainHooks *h) {
    GPTConfig cfg;
    train_resolve(a, &cfg);
    int rank = h ? h->rank : 0, world = h ? h->world : 1, quiet = rank != 0;
    int drank = h && h->data_world ? h->data_rank : rank;
    int dworld = h && h->data_world ? h->data_world : world;
    int B = a->batch, T = cfg.seq_len, accum = a->accum, steps = a->steps;

    // The injected fault, now that the world is known (its rank must be in it), before
    // any work. A permanent fault's rank is gone once the supervisor has given one up
    // (--elastic): the smaller world has no such rank to strike.
    Fault fault = {0};
    char ferr[300];
    int gone = a->inject && strstr(a->inject, "permanent") && comm_ranks_dropped() > 0;
    CHECK(!a->inject || gone || fault_parse(a->inject, world, steps, &fault, ferr, sizeof ferr) == 0,
          "%s", ferr);
    CHECK(!fault.during_coll || ctx->device == DEV_CPU, "--inject %s: during=collective strikes in "
          "the host transports' messages; on %s the collectives are the GPU's (NCCL, CUDA IPC)",
          a->inject, device_name(ctx->device));
    // A fault strikes in its attempt only (a job no supervisor started is attempt 0); a
    // permanent one in every attempt until the supervisor gives its rank up (--elastic).
    if (!fault.permanent && comm_attempt() != fault.attempt) fault.kind = FAULT_NONE;

    DataLoader dl;
    if (strcmp(a->data, "synthetic") == 0)
        data_open_synthetic(&dl, cfg.vocab, (size_t)1 << 22, a->seed, B, T, drank, dworld);
    else
        data_open_text(&dl, a->data, B, T, drank, dworld);

    // Build in the order a framework does: weights, gradients, optimizer state,
    // then activations. A model too large for --device-mem fails here, at step
    // zero, before any forward pass.
    GPT g;
    AdamW opt;
    GPTRecipe recipe = PREC_FP32;
    gpt_recipe_parse(a->precision, &recipe);
    AdamWConfig oc = {(float)a->lr, (float)a->beta1, (float)a->beta2, 1e-8f,
                      (float)a->weight_decay, (float)a->grad_clip,
                      gpt_recipe_master(recipe)};
    const TrainStrategy *S = h ? h->strategy : NULL;
    if (S) S->build(&g, ctx, &cfg, a->seed, &oc, S->arg);
    else gpt_init(&g, ctx, &cfg, a->seed);
    GPTRecompute rc = GPT_RECOMPUTE_NONE;
    gpt_recompute_parse(a->recompute, &rc);
    gpt_set_recompute(&g, rc, a->recompute_every);
    gpt_set_precision(&g, recipe, a->seed);
    gpt_set_acts_fp32(&g, a->acts_fp32);
    // Dynamic loss scaling (06_mixed_precision/loss_scale.c), for fp16 only: bf16 has
    // fp32's exponent range, so its gradients neither overflow nor flush to zero.
    int fp16 = recipe == PREC_MIXED_FP16;
    LossScaler scaler = loss_scaler_default();
    scaler.scale = (float)a->loss_scale;
    scaler.growth_interval = a->loss_scale_window;
    long overflows = 0;
    char peak_how[256];  // measured here: the other ranks now wait in sync_params
    double peak = mfu_peak(a, ctx, h, rank, world, peak_how, sizeof peak_how);
    if (h && h->sync_params) h->sync_params(&g, h->arg);
    if (!S) {
        gpt_alloc_grads(&g);
        adamw_init(&opt, &g, &oc, 0, g.n_params);
    }
    int pipeline = S && S->run_micro_batches;
    if (!pipeline) gpt_alloc_acts(&g, B, T);
    CHECK(!pipeline || (a->spike_factor == 0 && !(a->inject && strncmp(a->inject, "spike", 5) == 0)),
          "--spike-factor and --inject spike: not for pipelines yet (their micro-batches run "
          "inside the schedule)");
    TrainState st = {0};
    CkptConfig cc = {0};
    CkptStaging staging = {0};  // the snapshots' host buffer, reused from save to save
    CkptP2P p2p;
    PendingCkpt pending = {0};
    int views = a->ckpt_dir || a->sdc_every || (a->inject && strncmp(a->inject, "bitflip", 7) == 0);
    int spikes_on = a->spike_factor > 0 || (a->inject && strncmp(a->inject, "spike", 5) == 0);
    if (views || a->straggler_factor > 0 || spikes_on)  // (spikes: the ranks' agreement, cc.sum)
        state_begin(a, h, &g, &opt, &st, &cc, &p2p, drank, dworld, views);
    char corpus[160];
    corpus_identity(a->data, corpus, sizeof corpus);
    cc.data = corpus;
    cc.staging = &staging;
    StragglerDetector slow;
    straggler_init(&slow, a->straggler_factor, world);
    SpikeDetector spike = {.factor = a->spike_factor};
    if (spike.factor > 0) st.spike = &spike;  // its history goes into checkpoints
    int start = a->ckpt_dir ? ckpt_begin(a, &st, &cc, &scaler, &overflows, &dl) : 0;
    if (a->ckpt_dir) ckpt_staging_reserve(&staging, &st);  // not in the first save's stall
    long spikes = 0, spike_steps = 0;  // this rank's spikes; the steps some rank's spike skipped
    cc.fault = &fault;

    double fpt = gpt_flops_per_token(&cfg, T);

    if (!quiet) {
        char pbytes[32];
        format_bytes(gpt_num_params(&cfg) * sizeof(float), pbytes, sizeof pbytes);
        log_info("model: L=%d C=%d NH=%d T=%d V=%d | %zu params (%s fp32) | device %s, %d thread%s "
                 "| %s", cfg.n_layer, cfg.n_embd, cfg.n_head, cfg.seq_len, cfg.vocab, gpt_num_params(&cfg),
                 pbytes, device_name(ctx->device), a->threads, a->threads == 1 ? "" : "s",
                 h && h->label ? h->label : "1 process");
        char every[32] = "";
        if (a->recompute_every > 1) snprintf(every, sizeof every, ", every %d layers", a->recompute_every);
        log_info("precision %s | recompute %s%s%s", a->precision, a->recompute, every,
                 a->acts_fp32 ? " | activations in fp32 slots (--acts-fp32)" : "");
        log_info("data: %s, %zu tokens | batch %d x %d x %d accum x %d rank%s | uniform-guess loss "
                 "ln(V) = %.3f%s", dl.source, dl.n, B, T, accum, dworld, dworld == 1 ? "" : "s",
                 log((double)cfg.vocab), dworld > 1 ? " | the loss printed is rank 0's, the mean "
                 "over its share of each step's batch" : "");
        log_info("MFU = tokens/s x (6N + 12*L*H*Q*T) / peak, with 6N + 12LHQT = %.2f MFLOP/token "
                 "and peak = %.1f GFLOP/s %s", fpt * 1e-6, peak * 1e-9, peak_how);
    }

    size_t batch_ints = (size_t)B * T * (pipeline ? accum : 1);  // a pipeline takes all m at once
    int *inputs = malloc(sizeof(int) * batch_ints), *targets = malloc(sizeof(int) * batch_ints);
    double *step_ms = malloc(sizeof(double) * steps);
    CHECK(inputs && targets && step_ms, "out of host memory");
    float first_loss = 0, loss = 0;
    double tokens_per_step = (double)B * T * accum * dworld;
    for (int step = start; step < steps; step++) {
        fault_at_step(&fault, rank, step + 1);
        fault_arm_collective(&fault, rank, step + 1, h ? h->comm : NULL);
        // An async save whose writers are all done is published now (every rank asks
        // its own writer; the answer is agreed, so all finish together).
        if (pending.save && ckpt_agree(&cc, ckpt_save_written(pending.save))) ckpt_finish(&cc, &pending);
        ctx->ops->synchronize(ctx);
        double t0 = now_seconds();
        if (!S) gpt_zero_grad(&g);
        double loss_sum = 0;
        // The loss scale of this step's backward; an injected overflow multiplies the
        // loss gradient by infinity instead, on every rank.
        float scale = fp16 ? scaler.scale : 1.0f;
        g.prec.loss_scale = step + 1 == a->inject_overflow ? INFINITY : scale;
        if (pipeline) {
            for (int micro = 0; micro < accum; micro++)
                data_next(&dl, inputs + (size_t)micro * B * T, targets + (size_t)micro * B * T);
            loss_sum = accum * (double)S->run_micro_batches(&g, inputs, targets, B, T, accum, S->arg);
        }
        int spiked = 0;
        for (int micro = 0; micro < accum && !pipeline; micro++) {
            if (S) S->micro_begin(&g, micro, accum, S->arg);
            data_next(&dl, inputs, targets);
            fault_spike_batch(&fault, rank, step + 1, targets, (size_t)B * T);
            float l = gpt_forward(&g, inputs, targets, B, T);
            loss_sum += l;
            // A loss spike: its gradients become infinite, so that every rank's
            // optimizer skips the step (the global norm is not finite).
            double median;
            if (!spiked && spike_check(&spike, l, &median)) {
                log_warn("rank %d: step %d: loss %.4f is over %.1fx the median %.4f of the last %d "
                         "steps: a loss spike, the update is skipped", rank, step + 1, l,
                         spike.factor, median, spike.n);
                spiked = 1;
                g.prec.loss_scale = INFINITY;
            }
            gpt_backward(&g, 1.0f / accum);
        }
        if (slow.factor > 0 || fault.kind == FAULT_SLOW) {  // stage 07: how long this rank computed
            ctx->ops->synchronize(ctx);
            fault_slow(&fault, rank, step + 1, (now_seconds() - t0) * 1e3);
            char msg[512];
            if (straggler_step(&slow, &cc, (now_seconds() - t0) * 1e3, msg, sizeof msg) && rank == 0)
                log_warn("step %d: straggler: %s", step + 1, msg);
        }
        double norm;
        if (S) {
            norm = S->step(&g, S->arg);
        } else {
            if (h && h->sync_grads) h->sync_grads(&g, h->arg);
            norm = grad_global_norm(&g);
            adamw_step(&opt, &g, norm);
        }
        g.prec.loss_scale = scale;
        gpt_fp8_step_end(&g);             // fp8: the next step's scales
        int found_inf = !isfinite(norm);  // then every rank's optimizer skipped the step
        fault_bitflip(&fault, rank, step + 1, &st);
        if (a->sdc_every && (step + 1) % a->sdc_every == 0) {
            char msg[1024];
            int compared, bad = sdc_check(&cc, &st, &compared, msg, sizeof msg);
            CHECK(bad == 0, "step %d: silent data corruption: %s (--sdc-check: the replicas of the "
                  "weights differ; resume from a checkpoint)", step + 1, msg);
            if (step == start && rank == 0)
                log_info("--sdc-check: %d rank%s compared with their replicas every %d step%s",
                         compared, compared == 1 ? "" : "s", a->sdc_every, a->sdc_every == 1 ? "" : "s");
        }
        if (!found_inf && spike.factor > 0) spike_accept(&spike, loss_sum / accum);
        // A skipped step was a loss spike on some rank, or an overflow: the ranks agree
        // which, so that fp16's scaler backs off for an overflow only (a spike says
        // nothing about the scale).
        int any_spike = found_inf && spikes_on && !ckpt_agree(&cc, !spiked);
        spikes += spiked;
        spike_steps += any_spike;
        overflows += found_inf && !any_spike;
        if (fp16 && !any_spike) loss_scaler_update(&scaler, found_inf);
        norm /= scale;                    // the gradients' own norm, for the log
        ctx->ops->synchronize(ctx);
        double dt = now_seconds() - t0;
        loss = (float)(loss_sum / accum);  // this rank's loss (printed by rank 0)
        CHECK(isfinite(loss), "step %d: the loss is %f; training diverged", step + 1, loss);
        if (step == start) {
            first_loss = loss;
            if (rank == 0) log_event("first_step");  // the first step of this run is done
        }
        step_ms[step - start] = dt * 1e3;
        double tok_s = tokens_per_step / dt;
        if (!quiet && ((step + 1) % a->log_every == 0 || step == 0 || step + 1 == steps)) {
            char mem[256];
            ledger_format_peaks(&ctx->ledger, mem, sizeof mem);
            char extra[96] = "";
            if (fp16)
                snprintf(extra, sizeof extra, " | scale %g%s", scale, found_inf ? " overflow: skipped" : "");
            else if (found_inf)
                snprintf(extra, sizeof extra, " | %s: skipped", spiked ? "loss spike"
                         : spike.factor > 0 ? "non-finite gradients (a spike elsewhere?)" : "overflow");
            log_info("step %4d/%d | loss %.4f | norm %.3f | %8.1f ms | %9.0f tok/s | MFU %5.1f%% | "
                     "peak %s%s", step + 1, steps, loss, norm, dt * 1e3, tok_s,
                     100.0 * tok_s * fpt / peak, mem, extra);
        }
        if (a->ckpt_dir && rank == 0) ckpt_note_step(a->ckpt_dir, step + 1);
        if (a->ckpt_dir && ((a->ckpt_every && (step + 1) % a->ckpt_every == 0) || step + 1 == steps))
            ckpt_start(a, &cc, &st, step + 1, &scaler, overflows, &dl, &pending);
    }
    ckpt_finish(&cc, &pending);

    // Summary: medians over the steps after the warm-up.
    int ran = steps - start, w = a->warmup < ran ? a->warmup : 0;
    TrainResult res;
    res.ms_per_step = ran > 0 ? median(step_ms + w, ran - w) : 0;
    res.tokens_per_s = ran > 0 ? tokens_per_step / (res.ms_per_step * 1e-3) : 0;
    res.gflops = res.tokens_per_s * fpt * 1e-9;
    res.mfu = peak > 0 ? res.tokens_per_s * fpt / peak : 0;
    res.first_loss = first_loss;
    res.final_loss = loss;
    if (!quiet && ran == 0) {  // resumed at the last step: no step ran, so nothing measured
        log_info("done: the checkpoint was at step %d of --steps %d: nothing left to train (no "
                 "loss or timing to report; the weights are the checkpoint's)", start, steps);
        ledger_print(&ctx->ledger, stdout);
        fflush(stdout);
    } else if (!quiet) {
        log_info("done: loss %.4f -> %.4f (uniform guess %.4f) | median %.1f ms/step, %.0f tok/s, "
                 "%.2f GFLOP/s, MFU %.1f%%", first_loss, loss, log((double)cfg.vocab),
                 res.ms_per_step, res.tokens_per_s, res.gflops, 100.0 * res.mfu);
        if (fp16)
            log_info("loss scale: %g at the end | %ld overflow%s (steps skipped), %ld backoff%s, "
                     "%ld growth%s", scaler.scale, overflows, overflows == 1 ? "" : "s",
                     scaler.backoffs, scaler.backoffs == 1 ? "" : "s", scaler.growths,
                     scaler.growths == 1 ? "" : "s");
        else if (overflows)
            log_info("%ld step%s skipped: the gradients were not finite", overflows,
                     overflows == 1 ? "" : "s");
        if (spike_steps)
            log_info("%ld step%s skipped for a loss spike (%ld on this rank)", spike_steps,
                     spike_steps == 1 ? "" : "s", spikes);
        ledger_print(&ctx->ledger, stdout);
        printf("RESULT train tokens_per_s=%.1f ms_per_step=%.3f gflops=%.3f mfu=%.4f "
               "first_loss=%.5f final_loss=%.5f ranks=%d\n", res.tokens_per_s, res.ms_per_step,
               res.gflops, res.mfu, first_loss, loss, world);
        fflush(stdout);
    }
    if (a->save_params) save_params(a->save_params, &g, S, rank);
    // The run's end is in no checkpoint: it cannot be resumed or restarted from there,
    // whatever it printed above. Not a success.
    CHECK(!pending.failed, "the last checkpoint (step %d) was NOT saved (the warning above "
          "says why): the run's end cannot be resumed", pending.failed);

    free(inputs); free(targets); free(step_ms);
    train_state_free(&st);
    ckpt_staging_free(&staging);
    straggler_free(&slow);
    if (S) S->destroy(&g, S->arg);
    else adamw_free(&opt, &g);
    gpt_free(&g);
    data_close(&dl);
    return res;
}
