// checkpoint.h — sharded, atomic, verified checkpoints that any layout can load.
//
// What a rank holds is a set of views: elements [lo, hi) of one kind of state
// (the weights, AdamW's two moments, the fp32 masters) in its model's flat
// layout. A view is saved as boxes of the whole model's tensors: the rank's
// piece of "h.3.mlp.c_fc.weight" under tensor parallelism, or the part of the
// flat buffer a ZeRO shard cuts out of it, are both sets of rectangles in that
// tensor's (rows x cols) -- a vector is 1 x n. So a checkpoint says, for every
// tensor, which rectangle of it each file holds, and a rank of ANY other layout
// (another world size, TP degree, pipeline split or ZeRO stage) finds the
// rectangles it needs by intersecting its own boxes with the stored ones: that
// is resharding, and it costs nothing extra.
//
// On disk, one directory per checkpoint:
//
//   DIR/step-00000120/rank-00000.safetensors   each rank's boxes (PyTorch opens them)
//   DIR/step-00000120/rank-00001.safetensors
//   DIR/step-00000120/manifest.json            rank 0's: step, layout, the training
//                                              progress (resume.c), every file's size
//                                              and CRC-32C, every box of every tensor
//   DIR/LATEST                                 "step-00000120": moved last
//
// written in an order that survives a crash at any instant (publish.c): the
// shards and the manifest go into step-N.tmp/, are fsync'd, the directory is
// renamed to step-N and its parent fsync'd, and only then does LATEST move. A
// load verifies sizes and checksums and falls back to the newest complete
// checkpoint that passes, naming what it refused.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "data.h"
#include "json.h"
#include "model.h"
#include "optim.h"
#include "precision.h"
#include "train_state.h"

// A rank's own state in its shard, beside the pieces: the fp8 recipe's scaling
// (gpt_fp8_state's rows). A resume on as many ranks reads its own rank's; on
// another number, rank r reads rank r mod the writers'.
#define CKPT_FP8_KEY "local/fp8_scaling"
// ...and the loss-spike check's history: the losses of the last accepted steps,
// oldest first, as a 1 x n F64 row (the losses as the check compared them, bit
// for bit). A checkpoint without it (spike checks off) resumes with none.
#define CKPT_SPIKE_KEY "local/loss_history"

// What is not a tensor but must be saved for a bit-exact resume (resume.c).
typedef struct {
    uint64_t step;          // optimizer steps done
    uint64_t data_step;     // the data loader's position (data.h: micro-batches served)
    uint64_t data_step_rows;  // ...in loader steps of this many rows (B x data-parallel
                            // ranks): set by fault_tolerance_ext.c, so that a resume in
                            // another layout converts the position (rows are the same data)
    uint64_t seed;          // the weights' and the corpus's; stochastic rounding's stream
    char recipe[16];        // the precision recipe (a resume must not change it)
    char data[160];         // the corpus: "synthetic" or "NAME, N bytes" (set by
                            // fault_tolerance_ext.c; a resume must not change it either)
    int opt_t;              // AdamW's step counter (bias correction, rounding streams)
    int master_filled;      // the fp32 masters hold the weights (mixed precision)
    long opt_skipped;       // steps the optimizer skipped (non-finite gradients)
    LossScaler scaler;      // mixed-fp16's dynamic loss scale, its counters
    long overflows;         // the trainer's count of skipped steps
} TrainProgress;

// The one collective checkpoints need: an element-wise sum of n floats over
// every rank of the job (agreeing on an outcome, broadcasting a name): the job's
// (train_state.h), which the trainer sets up (TrainLoop.sum).
typedef JobSum CkptSum;

// The host memory a rank's snapshots go through, kept from one save to the next
// (one is in flight at most, so one buffer does): pinned on a GPU (ops->host_alloc),
// so that the copy out of device memory, the stall an async save cannot hide,
// runs at the link's speed; grown when a save needs more.
typedef struct {
    Ctx *ctx;               // whose host_alloc made buf
    float *buf;
    size_t cap;             // floats
    int pinned;             // 0: host_alloc failed, buf is plain malloc
} CkptStaging;
void ckpt_staging_free(CkptStaging *s);
// Makes the buffer as large as a snapshot of st needs, before training starts: the
// allocation (pinning, or the pages' first touch) is then not part of a save's stall.
void ckpt_staging_reserve(CkptStaging *s, const TrainState *st);

typedef struct {
    const char *dir;        // the checkpoint directory (created if missing)
    int keep;               // complete checkpoints kept (older ones deleted), >= 1
    CkptSum sum;            // NULL: one process
    void *sum_arg;
    int rank, world;
    char layout[96];        // "dp=2 tp=2 pp=1 zero=3", recorded in the manifest
    const struct Fault *fault;  // an injected fault (faults.c), or NULL
    // The loss-spike check's history, saved in the rank's shard (CKPT_SPIKE_KEY)
    // and loaded back; NULL: spike checks are off.
    struct SpikeDetector *spike;
    // A resume continues the same training: a checkpoint of another precision
    // recipe, seed or corpus is refused (before anything is read) with both named.
    const char *recipe;
    uint64_t seed;
    const char *data;       // TrainProgress.data's form; NULL: not checked
    CkptStaging *staging;   // reused between saves; NULL: a buffer per save
} CkptConfig;

// Saves step p->step (a collective: every rank calls it). Returns 0, or -1 with
// a message in err (then no checkpoint of this step is published, the previous
// ones are intact, and every rank returns -1).
int ckpt_save(const CkptConfig *cc, const TrainState *st, const TrainProgress *p, char *err,
              size_t errn);
// The same in two halves (ckpt_save.c): start copies this rank's state to host
// memory and writes it, on a thread of its own when async; finish (at the next
// step) waits for the writer and publishes. Both are collectives.
typedef struct CkptSave CkptSave;
typedef struct {
    double snapshot_ms;     // the copy to host memory (training waits for it)
    double write_ms;        // writing the shard (in the background when async)
    double wait_ms;         // finish's wait for the writer (training waits for it)
    size_t bytes;           // this rank's shard's tensor bytes
    int async;
} CkptSaveStats;
int ckpt_save_start(const CkptConfig *cc, const TrainState *st, const TrainProgress *p, int async,
                    CkptSave **out, char *err, size_t errn);
int ckpt_save_finish(CkptSave *s, CkptSaveStats *stats, char *err, size_t errn);
int ckpt_save_written(CkptSave *s);  // this rank's writer is done (finish will not wait)
// Finds the newest complete checkpoint in cc->dir that verifies, and loads this
// rank's views and p from it (a collective). Returns 1 when loaded, 0 when the
// directory holds no checkpoint (a fresh start), -1 with a message when it holds
// only checkpoints that fail verification or that this layout cannot load.
// Every refused checkpoint is named on stderr with the reason.
int ckpt_load(const CkptConfig *cc, const TrainState *st, TrainProgress *p, char *err,
              size_t errn);

// ---------------------------------------------------------------- pieces (ckpt_layout.c)

// A rectangle of one tensor: global rows [r0, r0 + nr) x cols [c0, c0 + nc), and
// where it lies in a view's data: element `local` (relative to the view's lo),
// its rows `stride` elements apart.
typedef struct {
    int slice;              // index into g->slices
    int64_t r0, nr, c0, nc;
    size_t local, stride;
} CkptBox;
// The boxes covering elements [lo, hi) of g's flat layout (padding rows of a
// tensor-parallel vocabulary are in no box). Returns how many; *out is malloc'd.
int ckpt_boxes(const GPT *g, size_t lo, size_t hi, CkptBox **out);

// ---------------------------------------------------------------- checksums

uint32_t crc32c(uint32_t crc, const void *data, size_t n);  // start with crc = 0

// ---------------------------------------------------------------- publishing (publish.c)

// The file-system calls the commit protocol makes, as a table: the real ones
// (fs_posix), or a test's simulated disk that loses power between any two calls
// and keeps only what was made durable. Each returns 0, or -1 with errno set.
typedef struct FsOps {
    // Creates (or truncates) path and writes n bytes: in the page cache only,
    // durable after fsync_file, and its name durable after fsync_dir of its folder.
    int (*write_file)(const struct FsOps *fs, const char *path, const void *data, size_t n);
    int (*fsync_file)(const struct FsOps *fs, const char *path);
    int (*fsync_dir)(const struct FsOps *fs, const char *dir);
    // Atomic: readers see the old name or the new one. Durable after fsync_dir of
    // both folders (here always the same one).
    int (*rename)(const struct FsOps *fs, const char *from, const char *to);
    void *arg;
} FsOps;
const FsOps *fs_posix(void);

// publish.c (the exercise's first part): checkpoint `name`'s shard files are
// complete and durable in DIR/name.tmp/; write its manifest there and make it
// the latest checkpoint so that a crash at ANY instant leaves DIR/LATEST naming
// either the previous checkpoint or this one, whole. Returns 0, or -1 with a
// message naming the call that failed.
int ckpt_publish(const FsOps *fs, const char *dir, const char *name, const char *manifest,
                 size_t n, char *err, size_t errn);

// ---------------------------------------------------------------- progress (resume.c)

// resume.c (the exercise's second part): what a bit-exact resume needs besides
// the tensors. Capture it after `step` optimizer steps...
void resume_capture(TrainProgress *p, uint64_t step, uint64_t seed, const char *recipe,
                    const TrainState *st, const LossScaler *scaler, long overflows,
                    const DataLoader *dl);
// ...and put it back where training reads it: every optimizer's counters, the
// loss scaler, the trainer's overflow count, the data loader's position.
void resume_restore(const TrainProgress *p, const TrainState *st, LossScaler *scaler,
                    long *overflows, DataLoader *dl);

// ---------------------------------------------------------------- the manifest (manifest.c)

typedef struct {
    int kind;               // StateKind
    int tensor;             // index into the manifest's tensors
    int64_t r0, nr, c0, nc; // the rectangle
    int file;               // index into the manifest's files
} CkptPiece;

typedef struct {
    char name[64];          // "rank-00003.safetensors"
    int rank;
    uint64_t bytes;
    uint32_t crc;           // CRC-32C of the whole file
} CkptFile;

typedef struct {
    uint64_t step;
    int world;
    char layout[96];
    GPTConfig cfg;
    TrainProgress progress;
    int n_tensors;
    char (*tensor)[48];     // the whole model's tensor names, in layout order
    int64_t (*shape)[2];    // and their (rows, cols)
    int n_files;
    CkptFile *files;
    int n_pieces;
    CkptPiece *pieces;
} CkptManifest;

// The safetensors name of a piece in its file: "exp_avg/h.3.mlp.c_fc.weight@r0,c0".
void ckpt_piece_key(const CkptManifest *m, const CkptPiece *p, char *out, size_t n);
void ckpt_key(StateKind kind, const char *tensor, int64_t r0, int64_t c0, char *out, size_t n);
// A rank's entry of "files": its file's name, size, checksum and pieces (boxes of
// slices of g), as JSON text for rank 0 to splice in.
void manifest_file_entry(JsonBuf *b, const char *file, int rank, uint64_t bytes, uint32_t crc,
                         const GPT *g, const StateKind *kinds, const CkptBox *boxes, int n);
// The whole manifest, around the ranks' entries (`files`, JSON objects joined by commas).
void manifest_write(JsonBuf *b, uint64_t step, int world, const char *layout, const GPT *g,
                    const TrainProgress *p, const char *files);
// Parses and validates everything: names known, boxes inside their tensors,
// files indexed; -1 with a message naming `what` and the fault.
int manifest_parse(const char *text, size_t len, const char *what, CkptManifest *m, char *err,
                   size_t errn);
void manifest_free(CkptManifest *m);
int manifest_find_tensor(const CkptManifest *m, const char *name);  // -1 if absent

// ---------------------------------------------------------------- shared by save and load

void ckpt_step_name(uint64_t step, char *out, size_t n);     // "step-00000120"
int ckpt_list(const char *dir, uint64_t **steps);             // complete ones, newest first
void ckpt_remove_tree(const char *path);
// Before any work (every rank may ask): can dir hold this run's checkpoints? A
// writable folder (made if missing), not itself one checkpoint (a step-* folder, a
// common slip with --resume), and for a fresh run (not --resume, not a restart)
// holding no earlier run's checkpoints. 0, or -1 with the reason in err.
int ckpt_dir_check(const char *dir, int fresh, char *err, size_t n);
// Rank 0 notes each step reached in DIR/PROGRESS (not fsync'd: a hint, not state),
// so that a resume can say how many steps the failure cost. -1 if none noted.
void ckpt_note_step(const char *dir, int step);
int ckpt_noted_step(const char *dir);
int ckpt_crc_of_file(const char *path, uint64_t *bytes, uint32_t *crc);
// Every rank gets the AND of every rank's ok.
int ckpt_agree(const CkptConfig *cc, int ok);
void ckpt_broadcast_name(const CkptConfig *cc, char name[256]);

// ---------------------------------------------------------------- fault injection (faults.c)

// --inject "KIND,key=value,...": a fault the run gives itself, to test what the
// checkpoints and the supervisor recover. KIND is
//   kill    the rank dies (SIGKILL): as step `step` begins, or (during=ckpt)
//           after writing its shard of step `step`'s checkpoint, before it is
//           published, or (during=collective) in the middle of step `step`'s
//           first collective, after posting its first message (host transports)
//   hang    the rank stops responding as step `step` begins (the others' next
//           wait times out: stage 02's watchdog)
//   spike   the rank's batch of step `step` gets a single target token: its loss jumps
//   bitflip one bit of one of the rank's weights flips after step `step`'s update
//           (silent data corruption: nothing crashes)
//   slow    from step `step` on, the rank takes `factor` (default 3) times as long
//           for its forward and backward passes (a straggler: a throttled GPU, a
//           noisy neighbour): it sleeps for the difference
//   corrupt once the step-`step` checkpoint is published, one byte in the middle
//           of the rank's shard flips (bit rot, a bad disk): a resume must
//           refuse that checkpoint by its checksum and use the one before
// step and rank are numbers or "random" (drawn from seed: step in [1, steps],
// rank in [0, world)); rank defaults to 0. Under the supervisor (--max-restarts)
// the fault strikes in attempt `attempt` only (default 0, the first run), or with
// `permanent` in every attempt until the supervisor gives the rank up (--elastic).
typedef enum {
    FAULT_NONE = 0, FAULT_KILL, FAULT_HANG, FAULT_SPIKE, FAULT_BITFLIP, FAULT_SLOW, FAULT_CORRUPT
} FaultKind;
typedef struct Fault {
    FaultKind kind;
    int step, rank;
    int step_random;        // step=random: drawn from the seed
    int during_ckpt;        // kill: after writing its shard of step's checkpoint
    int during_coll;        // kill: in the middle of step's first collective
    int attempt;
    double factor;          // slow
    int permanent;          // strikes in every attempt (a rank that stays dead)
} Fault;
// Parses spec for a job of `world` ranks and `steps` steps; 0, or -1 with a message.
int fault_parse(const char *spec, int world, int steps, Fault *f, char *err, size_t errn);
// Called by every rank at the named points: does the fault when it is due here.
void fault_at_step(const Fault *f, int rank, int step);        // step (1-based) begins
void fault_in_ckpt(const Fault *f, int rank, uint64_t step);   // its shard of step is written
// corrupt: the rank's shard of the published checkpoint of step, in dir/name.
void fault_after_publish(const Fault *f, int rank, uint64_t step, const char *dir, const char *name);
// during=collective: as step begins, arms c (comm_inject_kill_mid) on the rank.
void fault_arm_collective(const Fault *f, int rank, int step, Comm *c);
// spike: makes the n targets of the rank's batch at `step` one token.
void fault_spike_batch(const Fault *f, int rank, int step, int *targets, size_t n);
// bitflip: flips bit 22 (the top of the mantissa) of one weight the rank holds.
void fault_bitflip(const Fault *f, int rank, int step, const TrainState *st);
// slow: after a forward and backward that took ms, sleeps (factor - 1) x ms.
void fault_slow(const Fault *f, int rank, int step, double ms);

// ---------------------------------------------------------------- stragglers (straggler.c)

// A synchronous job runs at the pace of its slowest rank. Every step each rank
// reports how long its forward and backward took; a rank slower than `factor` x
// the (lower) median of all ranks for STRAGGLER_STEPS steps in a row is named
// (once per episode), so that it can be drained or replaced instead of slowing
// everyone.
#define STRAGGLER_STEPS 3
typedef struct {
    double factor;          // 0: off
    int world;
    int *run;               // per rank: slow steps in a row
    int *named;             // per rank: named in this episode
    long episodes;
} StragglerDetector;
void straggler_init(StragglerDetector *d, double factor, int world);
void straggler_free(StragglerDetector *d);
// A collective: every rank's compute time (ms) of this step; returns how many
// ranks were newly named, described in msg.
int straggler_step(StragglerDetector *d, const CkptConfig *cc, double ms, char *msg, size_t n);

// A slow link slows no rank's compute: the ranks behind it wait. So each rank also
// watches how fast every peer's messages arrive (comm_take_flows: from a message's first
// byte to its last, whatever the wait before it): a peer whose rate falls below its own
// first steps' by `factor`, STRAGGLER_STEPS steps in a row, is named, with the link.
#define LINK_BASE_STEPS 3  // the steps whose mean rate is a peer's baseline
typedef struct {
    double factor;                     // 0: off
    double base[COMM_MAX_RANKS];       // bytes/s: the mean of the first LINK_BASE_STEPS samples
    int samples[COMM_MAX_RANKS], run[COMM_MAX_RANKS], named[COMM_MAX_RANKS];
} LinkWatch;
// After a step's communication (c: this rank's Comm, never NULL): 1 when a peer was
// newly named (described in msg).
int link_watch_step(LinkWatch *w, Comm *c, char *msg, size_t n);

// ---------------------------------------------------------------- silent errors (sdc.c)

// Replicas must hold the same weights, bit for bit. Every rank hashes its weights
// (CRC-32C of its params views) and what it holds (which pieces: the replica key);
// ranks with the same key are compared, and one whose hash differs from the
// majority's is named. Returns how many ranks differ (0: all agree), with a
// message; `compared` = how many ranks had a replica to compare with.
int sdc_check(const CkptConfig *cc, const TrainState *st, int *compared, char *msg, size_t n);

// Loss spikes: a step whose loss exceeds `factor` x the median of the last
// SPIKE_WINDOW accepted steps' losses is a spike (its update is skipped).
#define SPIKE_WINDOW 16
typedef struct SpikeDetector {
    double factor;          // 0: off
    double loss[SPIKE_WINDOW];
    int n, next;
    long spikes;
} SpikeDetector;
// 1 if loss is a spike (after at least SPIKE_WINDOW / 2 steps of history).
int spike_check(const SpikeDetector *d, double loss, double *median);
void spike_accept(SpikeDetector *d, double loss);  // a step's loss, its update taken
