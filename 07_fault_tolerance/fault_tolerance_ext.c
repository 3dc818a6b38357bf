// fault_tolerance_ext.c — stage 07 in the training loop, as an extension (common/
// train_ext.h): checkpoints (saved, resumed, asynchronous), the supervisor's
// restarts, injected faults, replica checks (silent data corruption), loss spikes
// and stragglers. Linked into a driver, it adds their flags and does, at each point
// of the loop:
//
//   start          the injected fault, now that the world is known
//   begin          what the rank holds (its views), the checkpoints' set-up, a resume
//   step_begin     a fault due now strikes; an async save whose writers are done is
//                  published
//   micro_batch    an injected spike spoils the batch
//   after_loss     a loss spike: this rank asks to skip the update
//   after_backward the straggler check (every rank's compute time) and a slow rank
//   after_update   an injected bit flip, the replica check, the spike history
//   step_end       the checkpoint of this step
//   end            the checkpoint in flight finishes; one that failed fails the run
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "checkpoint.h"
#include "ops.h"
#include "precision_ext.h"
#include "timer.h"
#include "train_ext.h"

extern const TrainExtension fault_tolerance_extension;  // (below)

typedef struct {
    const char *ckpt_dir, *inject;
    int ckpt_every, ckpt_keep, ckpt_async, resume;
    int max_restarts, elastic;
    int sdc_every;
    double spike_factor, straggler_factor;
} ToleranceArgs;

// A checkpoint in two halves (ckpt_save.c): start at the end of a step, finish at
// once (sync) or at the first step start at which every writer is done
// (--ckpt-async: the writing overlaps compute). The training's stall is the time
// spent in both calls.
typedef struct {
    CkptSave *save;
    int step;
    double stall_ms;
    int failed;  // the step of the last save, if it failed (0: it did not)
} PendingCkpt;

typedef struct {
    const ToleranceArgs *args;
    Fault fault;
    CkptConfig cc;
    CkptStaging staging;  // the snapshots' host buffer, reused from save to save
    PendingCkpt pending;
    StragglerDetector slow;
    LinkWatch links;      // the same factor, on how fast each peer's messages arrive
    SpikeDetector spike;
    char corpus[160];
    int views;            // a checkpoint, a replica check or a bit flip reads the views
    int spiked;           // this rank's loss spiked this step
    long spikes, spike_steps;  // this rank's spikes; the steps some rank's spike skipped
} Tolerance;

// ---------------------------------------------------------------- flags

static void defaults(void *args) { ((ToleranceArgs *)args)->ckpt_keep = 2; }

static int flags(void *args, Flag *rows) {
    ToleranceArgs *t = args;
    Flag f[] = {
        F_STRING("--ckpt-dir", &t->ckpt_dir, "save sharded checkpoints into this directory (stage 07)"),
        F_INT("--ckpt-every", &t->ckpt_every, 0, 1 << 30, "with --ckpt-dir: a checkpoint every n steps (0: only at the end)"),
        F_BOOL("--ckpt-async", &t->ckpt_async, "with --ckpt-dir: copy the state to host memory and write it on a thread while training goes on"),
        F_INT("--ckpt-keep", &t->ckpt_keep, 1, 1 << 20, "with --ckpt-dir: complete checkpoints kept (older ones deleted)"),
        F_INT("--max-restarts", &t->max_restarts, 0, 1000, "when a rank dies or hangs, restart the job from the latest good checkpoint up to N times (needs --ckpt-dir)"),
        F_BOOL("--elastic", &t->elastic, "with --max-restarts: a rank that fails first twice in a row is given up, and the job goes on with one rank fewer (data parallelism only)"),
        F_BOOL("--resume", &t->resume, "continue from the newest good checkpoint in --ckpt-dir (from step 0 if it holds none)"),
        F_INT("--sdc-check", &t->sdc_every, 0, 1 << 30, "every n steps, compare a hash of the data-parallel replicas' weights: a rank that differs is named and the run stops (0 = off)"),
        F_DOUBLE("--spike-factor", &t->spike_factor, 0, 1e6, "skip the update of a step whose loss exceeds this x the median of the last 16 (0 = off)"),
        F_DOUBLE("--straggler-factor", &t->straggler_factor, 0, 1e6, "name a rank whose forward and backward take over this x the median of all ranks', 3 steps in a row, and a peer whose messages arrive this x slower than in the first steps (a slow link) (0 = off)"),
        F_STRING("--inject", &t->inject, "fault injection: kill|hang|spike|bitflip|slow|corrupt,step=N|random[,rank=R|random][,during=ckpt|collective][,attempt=A][,factor=F][,seed=S][,permanent] (07_fault_tolerance)"),
    };
    memcpy(rows, f, sizeof f);
    return FLAG_COUNT(f);
}

// Faults that could never strike as asked (the run would end as if none were asked).
static void validate_fault(const ToleranceArgs *t, int steps) {
    Fault f = {0};
    char ferr[256];
    if (t->inject && fault_parse(t->inject, COMM_MAX_RANKS, steps, &f, ferr, sizeof ferr) != 0)
        flags_fail("%s", ferr);
    int saves = f.step == steps || (t->ckpt_every && f.step % t->ckpt_every == 0);
    int in_ckpt = t->inject && (f.kind == FAULT_CORRUPT || f.during_ckpt);
    if (in_ckpt && !t->ckpt_dir)
        flags_fail("--inject %s: %s strikes a checkpoint: it needs --ckpt-dir", t->inject,
                   f.during_ckpt ? "during=ckpt" : "corrupt");
    if (in_ckpt && !saves)
        flags_fail("--inject %s: no checkpoint is saved at step %d%s (--ckpt-every %d; the last "
                   "step, %d, always saves)", t->inject, f.step, f.step_random ? ", which "
                   "step=random drew (another seed= draws another)" : "", t->ckpt_every, steps);
    if (t->inject && !comm_supervised() && f.attempt > t->max_restarts)
        flags_fail("--inject %s: attempt %d never comes: the job runs attempts 0 to %d "
                   "(--max-restarts; more under 07_fault_tolerance/supervise.sh)", t->inject,
                   f.attempt, t->max_restarts);
}

static void validate(const void *args, const TrainArgs *a, const GPTConfig *cfg) {
    const ToleranceArgs *t = args;
    (void)cfg;
    if (!t->ckpt_dir && (t->resume || t->ckpt_every || t->max_restarts || t->ckpt_async))
        flags_fail("%s needs --ckpt-dir", t->resume ? "--resume" : t->ckpt_every ? "--ckpt-every"
                   : t->ckpt_async ? "--ckpt-async"
                   : "--max-restarts (a restart resumes from the latest checkpoint)");
    if (t->elastic && !t->max_restarts)
        flags_fail("--elastic needs --max-restarts (it decides how a restart goes on)");
    if (t->straggler_factor > 0 && t->straggler_factor <= 1)
        flags_fail("--straggler-factor %g: a straggler is slower than the median, so the factor "
                   "must exceed 1", t->straggler_factor);
    if (t->spike_factor > 0 && t->spike_factor <= 1)
        flags_fail("--spike-factor %g: a spike is a loss above the median, so the factor must "
                   "exceed 1", t->spike_factor);
    // A checkpoint folder's problems (not one, not writable, an earlier run's, one
    // checkpoint given for the folder of them) before the model is built.
    char cerr[4400];
    if (t->ckpt_dir && ckpt_dir_check(t->ckpt_dir, !t->resume && comm_attempt() == 0, cerr, sizeof cerr))
        flags_fail("%s", cerr);
    validate_fault(t, a->steps);
}

// What decides which collectives run, and when: every rank must agree.
static void words(const void *args, char *buf, size_t n) {
    const ToleranceArgs *t = args;
    snprintf(buf, n, " --ckpt-dir=%d --ckpt-every=%d --ckpt-async=%d --resume=%d --sdc-check=%d "
             "--spike-factor=%g --straggler-factor=%g --inject=%s", t->ckpt_dir != NULL,
             t->ckpt_every, t->ckpt_async, t->resume, t->sdc_every, t->spike_factor,
             t->straggler_factor, t->inject ? t->inject : "-");
}

// The supervisor (common/launch.c) starts a job whose rank died again, up to
// --max-restarts times; a restarted job resumes from its checkpoints.
static void launch(const void *args, CommConfig *cc) {
    const ToleranceArgs *t = args;
    cc->max_restarts = t->max_restarts;
    cc->elastic = t->elastic;
}

// ---------------------------------------------------------------- checkpoints

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

// A checkpoint of another layout counts its data position in its own loader steps:
// the same rows (sequences) are this layout's step rows / (B x dp), rounded up when
// they are not a whole number of them (the rows in between are skipped: no layout
// can serve part of a step).
static void convert_data_position(const TrainProgress *p, DataLoader *dl, int rank) {
    uint64_t unit = (uint64_t)dl->B * (uint64_t)dl->world;
    if (p->data_step_rows == unit) return;
    uint64_t rows = dl->step * p->data_step_rows, was = dl->step;
    dl->step = (rows + unit - 1) / unit;
    if (rank == 0)
        log_info("--resume: the data position, %llu loader steps of %llu rows, is step %llu of "
                 "this layout's %llu%s", (unsigned long long)was,
                 (unsigned long long)p->data_step_rows, (unsigned long long)dl->step,
                 (unsigned long long)unit, rows % unit ? " (the rows up to it skipped)" : "");
}

// Where the run starts: step 0, or the step of the newest good checkpoint when
// resuming (its state loaded). A job the supervisor restarted resumes, as --resume
// does. A new run starts at step 0 (a folder holding an earlier run's checkpoints
// would mix the two: validate refused it, on every rank, before the model was built).
static int ckpt_begin(TrainLoop *L, Tolerance *T) {
    const ToleranceArgs *t = T->args;
    if (!t->resume && comm_attempt() == 0) return 0;
    TrainProgress p;
    char err[4096];
    if (L->rank == 0) log_event("load_start");
    double t0 = now_seconds();
    int r = ckpt_load(&T->cc, &L->st, &p, err, sizeof err);
    if (L->rank == 0) log_event("loaded");
    CHECK(r >= 0, "--resume: %s", err);
    if (r == 0) {
        if (L->rank == 0) log_info("--resume: no checkpoint in %s yet: starting at step 0", t->ckpt_dir);
        return 0;
    }
    CHECK(p.step <= (uint64_t)L->steps, "--resume: the checkpoint is of step %llu, past --steps %d",
          (unsigned long long)p.step, L->steps);
    resume_restore(&p, &L->st, precision_loss_scaler(L), &L->overflows, &L->dl);
    convert_data_position(&p, &L->dl, L->rank);
    if (L->rank == 0) log_info("checkpoint loaded in %.1f ms", (now_seconds() - t0) * 1e3);
    int reached = ckpt_noted_step(t->ckpt_dir);
    if (L->rank == 0 && reached > (int)p.step)
        log_info("the run that stopped had reached step %d: %d step%s lost, to be trained again",
                 reached, reached - (int)p.step, reached - (int)p.step == 1 ? "" : "s");
    return (int)p.step;
}

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

static void ckpt_start(TrainLoop *L, Tolerance *T, int step) {
    PendingCkpt *pc = &T->pending;
    ckpt_finish(&T->cc, pc);  // one save in flight at most
    TrainProgress p;
    resume_capture(&p, (uint64_t)step, L->a->seed, L->a->precision, &L->st,
                   precision_loss_scaler(L), L->overflows, &L->dl);
    p.data_step_rows = (uint64_t)L->dl.B * (uint64_t)L->dl.world;  // the position's unit
    snprintf(p.data, sizeof p.data, "%s", T->corpus);
    char err[4096];
    double t0 = now_seconds();
    if (ckpt_save_start(&T->cc, &L->st, &p, T->args->ckpt_async, &pc->save, err, sizeof err) != 0) {
        log_warn("checkpoint of step %d NOT saved: %s", step, err);
        pc->failed = step;
        return;
    }
    *pc = (PendingCkpt){pc->save, step, (now_seconds() - t0) * 1e3, 0};
    if (!T->args->ckpt_async) ckpt_finish(&T->cc, pc);
}

// ---------------------------------------------------------------- the loop's points

// The injected fault, now that the world is known (its rank must be in it), before
// any work. A permanent fault's rank is gone once the supervisor has given one up
// (--elastic): the smaller world has no such rank to strike.
static void start(TrainLoop *L, void *self) {
    Tolerance *T = self;
    const ToleranceArgs *t = T->args = train_ext_args(L, &fault_tolerance_extension);
    // A checkpoint holds stage 06's loss scaler: every build with this stage has it.
    CHECK(precision_loss_scaler(L), "stage 07's extension is linked without stage 06's");
    char ferr[300];
    int gone = t->inject && strstr(t->inject, "permanent") && comm_ranks_dropped() > 0;
    CHECK(!t->inject || gone || fault_parse(t->inject, L->world, L->steps, &T->fault, ferr,
                                            sizeof ferr) == 0, "%s", ferr);
    CHECK(!T->fault.during_coll || L->ctx->device == DEV_CPU, "--inject %s: during=collective "
          "strikes in the host transports' messages; on %s the collectives are the GPU's (NCCL, "
          "CUDA IPC)", t->inject, device_name(L->ctx->device));
    // A fault strikes in its attempt only (a job no supervisor started is attempt 0); a
    // permanent one in every attempt until the supervisor gives its rank up (--elastic).
    if (!T->fault.permanent && comm_attempt() != T->fault.attempt) T->fault.kind = FAULT_NONE;
    T->views = t->ckpt_dir || t->sdc_every || (t->inject && strncmp(t->inject, "bitflip", 7) == 0);
    int spikes = t->spike_factor > 0 || (t->inject && strncmp(t->inject, "spike", 5) == 0);
    CHECK(!L->pipeline || !spikes, "--spike-factor and --inject spike: not for pipelines yet "
          "(their micro-batches run inside the schedule)");
    if (spikes) train_may_skip(L, "loss spike");
    straggler_init(&T->slow, t->straggler_factor, L->world);
    T->links.factor = t->straggler_factor;
    T->spike.factor = t->spike_factor;
}

// What the rank holds, the checkpoints' configuration, and a resume.
static void begin(TrainLoop *L, void *self) {
    Tolerance *T = self;
    const ToleranceArgs *t = T->args;
    if (T->views && train_state_collect(L) != 0)
        flags_fail("--ckpt-dir, --sdc-check and --inject bitflip: this parallel layout does not "
                   "expose its state yet");
    corpus_identity(L->a->data, T->corpus, sizeof T->corpus);
    T->cc = (CkptConfig){.dir = t->ckpt_dir, .keep = t->ckpt_keep, .rank = L->rank,
                         .world = L->world, .recipe = L->a->precision, .seed = L->a->seed,
                         .sum = L->sum, .sum_arg = L->sum_arg, .fault = &T->fault,
                         .data = T->corpus, .staging = &T->staging};
    snprintf(T->cc.layout, sizeof T->cc.layout, "%s", L->h->layout ? L->h->layout : "1 process");
    if (T->spike.factor > 0) T->cc.spike = &T->spike;  // its history goes into checkpoints
    if (!t->ckpt_dir) return;
    L->start = ckpt_begin(L, T);
    ckpt_staging_reserve(&T->staging, &L->st);  // not in the first save's stall
}

static void step_begin(TrainLoop *L, void *self) {
    Tolerance *T = self;
    fault_at_step(&T->fault, L->rank, L->step + 1);
    fault_arm_collective(&T->fault, L->rank, L->step + 1, L->job->comm);
    // An async save whose writers are all done is published now (every rank asks its
    // own writer; the answer is agreed, so all finish together).
    if (T->pending.save && ckpt_agree(&T->cc, ckpt_save_written(T->pending.save)))
        ckpt_finish(&T->cc, &T->pending);
    T->spiked = 0;
}

static void micro_batch(TrainLoop *L, void *self, int *targets, size_t n) {
    fault_spike_batch(&((Tolerance *)self)->fault, L->rank, L->step + 1, targets, n);
}

// A loss spike: its gradients become infinite, so that every rank's optimizer skips
// the step (the global norm is not finite).
static void after_loss(TrainLoop *L, void *self, float loss) {
    Tolerance *T = self;
    double median;
    if (T->spiked || !spike_check(&T->spike, loss, &median)) return;
    log_warn("rank %d: step %d: loss %.4f is over %.1fx the median %.4f of the last %d steps: a "
             "loss spike, the update is skipped", L->rank, L->step + 1, loss, T->spike.factor,
             median, T->spike.n);
    T->spiked = 1;
    train_skip_step(L);
}

// How long this rank computed: a straggler is named, an injected slow rank sleeps.
static void after_backward(TrainLoop *L, void *self) {
    Tolerance *T = self;
    if (T->slow.factor <= 0 && T->fault.kind != FAULT_SLOW) return;
    L->ctx->ops->synchronize(L->ctx);
    fault_slow(&T->fault, L->rank, L->step + 1, (now_seconds() - L->t0) * 1e3);
    char msg[512];
    if (straggler_step(&T->slow, &T->cc, (now_seconds() - L->t0) * 1e3, msg, sizeof msg) &&
        L->rank == 0)
        log_warn("step %d: straggler: %s", L->step + 1, msg);
}

static void after_update(TrainLoop *L, void *self) {
    Tolerance *T = self;
    const ToleranceArgs *t = T->args;
    char slow[1024];
    if (L->job->comm && link_watch_step(&T->links, L->job->comm, slow, sizeof slow))
        log_warn("step %d: slow link: %s", L->step + 1, slow);
    fault_bitflip(&T->fault, L->rank, L->step + 1, &L->st);
    if (t->sdc_every && (L->step + 1) % t->sdc_every == 0) {
        char msg[1024];
        int compared, bad = sdc_check(&T->cc, &L->st, &compared, msg, sizeof msg);
        CHECK(bad == 0, "step %d: silent data corruption: %s (--sdc-check: the replicas of the "
              "weights differ; resume from a checkpoint)", L->step + 1, msg);
        if (L->step == L->start && L->rank == 0)
            log_info("--sdc-check: %d rank%s compared with their replicas every %d step%s",
                     compared, compared == 1 ? "" : "s", t->sdc_every, t->sdc_every == 1 ? "" : "s");
    }
    if (!L->found_inf && T->spike.factor > 0) spike_accept(&T->spike, L->loss_sum / L->accum);
    T->spikes += T->spiked;
    T->spike_steps += L->skip_cause != NULL;
}

static void step_end(TrainLoop *L, void *self) {
    Tolerance *T = self;
    const ToleranceArgs *t = T->args;
    int step = L->step + 1;
    if (!t->ckpt_dir) return;
    if (L->rank == 0) ckpt_note_step(t->ckpt_dir, step);
    if ((t->ckpt_every && step % t->ckpt_every == 0) || step == L->steps) ckpt_start(L, T, step);
}

// The run's end is in no checkpoint: it cannot be resumed or restarted from there,
// whatever its summary says. Not a success.
static void end(TrainLoop *L, void *self) {
    Tolerance *T = self;
    ckpt_finish(&T->cc, &T->pending);
    if (T->pending.failed)
        snprintf(L->failure, sizeof L->failure, "the last checkpoint (step %d) was NOT saved (the "
                 "warning above says why): the run's end cannot be resumed", T->pending.failed);
}

static void summary(TrainLoop *L, void *self) {
    Tolerance *T = self;
    (void)L;
    if (T->spike_steps)
        log_info("%ld step%s skipped for a loss spike (%ld on this rank)", T->spike_steps,
                 T->spike_steps == 1 ? "" : "s", T->spikes);
}

static void finish(TrainLoop *L, void *self) {
    Tolerance *T = self;
    (void)L;
    ckpt_staging_free(&T->staging);
    straggler_free(&T->slow);
}

const TrainExtension fault_tolerance_extension = {
    .name = "checkpoints and faults",
    .stage = "07_fault_tolerance",
    .order = 7,
    .args_size = sizeof(ToleranceArgs),
    .state_size = sizeof(Tolerance),
    .defaults = defaults,
    .flags = flags,
    .validate = validate,
    .words = words,
    .launch = launch,
    .start = start,
    .begin = begin,
    .step_begin = step_begin,
    .micro_batch = micro_batch,
    .after_loss = after_loss,
    .after_backward = after_backward,
    .after_update = after_update,
    .step_end = step_end,
    .end = end,
    .summary = summary,
    .finish = finish,
};
TRAIN_EXTENSION(fault_tolerance_extension);
