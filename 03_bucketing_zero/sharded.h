// sharded.h — data parallelism that overlaps and shards: bucketed DDP, ZeRO-1/2/3,
// FSDP and HSDP, as one engine with a few switches.
//
// What each strategy keeps on a rank (Ψ parameters, N ranks, S = ceil(Ψ/N)):
//
//   strategy  weights      gradients           optimizer  per step, each rank sends
//   ddp       Ψ            Ψ                   2Ψ         all-reduce: 2Ψ(N-1)/N
//   zero1     Ψ            Ψ                   2S         reduce-scatter + all-gather: 2Ψ(N-1)/N
//   zero2     Ψ            S + buckets         2S         the same
//   zero3     S + units    S + buckets         2S         + an all-gather of the weights
//                                                         before forward and backward: 3Ψ(N-1)/N
//   fsdp      Σu ⌈|u|/N⌉   the same, per unit  2Σu⌈|u|/N⌉ the same as zero3
//   hsdp      fsdp inside a shard group of --shard-size ranks, replicated across groups
//
// (4 bytes each in fp32.) The pieces, one file each:
//   plan.c         who owns what: layer groups -> units (what stage 3 gathers at
//                  once) and the partition of the flat buffers into shards
//   buckets.c      the gradient side: groups -> buckets, each reduced as soon as
//                  backward completes it (the exercise's first part)
//   zero_step.c    after backward: finish the buckets, the global norm over the
//                  shards, AdamW on this rank's shard, the weights all-gathered
//                  (the second part)
//   fsdp_unit.c    stage 3's weights: gathered before use, freed after, the next
//                  unit prefetched (the third part)
//   sharded.c      building the model states in the framework's order; the
//                  strategy the trainer calls
// over async_coll.c (non-blocking collectives, a progress thread per rank) and
// collectives_v.c (reduce-scatter and all-gather over blocks of any size).
#pragma once
#include <stddef.h>

#include "async_coll.h"
#include "model.h"
#include "optim.h"
#include "trainer.h"

typedef enum { SH_DDP = 0, SH_ZERO1, SH_ZERO2, SH_ZERO3, SH_FSDP, SH_HSDP, SH_COUNT } ShardKind;
const char *shard_kind_name(ShardKind k);          // "ddp", "zero1", ...
int shard_kind_parse(const char *s, ShardKind *out);

typedef struct {
    ShardKind kind;
    Algo algo;            // ring (ours), naive (bitwise reference), mpi (under mpirun)
    size_t bucket_bytes;  // gradient buckets (--bucket-mb); 0: one bucket per layer group
    int overlap;          // collectives run on a progress thread while the rank computes
    int prefetch;         // stage 3: gather the next unit while this one computes
    int reshard;          // stage 3: free a unit's weights after its forward (else keep them
                          // gathered until its backward: ZeRO-2's memory for the weights)
    int unit_layers;      // fsdp/hsdp: layer groups per unit (zero3: 1)
    int shard_size;       // hsdp: ranks per shard group (must divide the world)
    // The types on the wire (stage 06): DT_F32 (the default, a zeroed config's) or
    // DT_BF16. Gradient buckets sent as bf16 are summed in fp32 and rounded after every
    // addition (06_mixed_precision/README.md §5); weights sent as bf16 lose nothing when
    // the recipe's weights are bf16 values, which is the only case the driver allows.
    DType grad_wire, param_wire;
} ShardConfig;

// ---------------------------------------------------------------- the plan (plan.c)

static inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

typedef struct {
    int groups;            // L + 2 layer groups: 0 embeddings, 1..L blocks, L+1 ln_f
    // Units: runs of consecutive groups that stage 3 gathers together.
    int n_units;
    int *unit_of;          // group -> unit
    size_t *unit_lo, *unit_hi;  // unit u: flat elements [lo, hi)
    // The partition: which elements this rank keeps, over a shard group of p ranks.
    int p, r;
    int per_unit;          // 1: every unit split evenly (FSDP); 0: [r*S, (r+1)*S) (ZeRO)
    size_t S;              // ZeRO: ceil(Ψ/p)
    size_t *unit_base;     // FSDP: where unit u's block starts in the shard buffers
    size_t shard_elems;    // the shard buffers' size, padded: S, or Σu ceil(|u|/p)
} ShardPlan;

void plan_build(ShardPlan *P, const GPT *g, const ShardConfig *cfg, int p, int r);
void plan_free(ShardPlan *P);
// The blocks of flat elements [lo, hi) (a bucket or, with per_unit, exactly one
// unit) over the p members, relative to lo; *mine (may be NULL) is where this
// rank's block starts in its shard buffers.
void plan_blocks(const ShardPlan *P, size_t lo, size_t hi, Blocks *b, size_t *mine);

// ---------------------------------------------------------------- the state

typedef struct {
    int n;                 // buckets
    int *of_group;         // group -> bucket
    size_t *lo, *hi;       // bucket b: flat elements [lo, hi) (its groups are consecutive)
    int *groups;           // how many groups bucket b holds
    int *pending;          // of those, how many backward has not completed yet
    float **buf;           // zero2/3, fsdp: b's gradients while it exists (MEM_COMM); else NULL
    uint16_t **wire;       // grad_wire bf16: b's bf16 copy while its collective runs, or NULL
    CollTask **task;       // b's collective in flight, or NULL
    CollTask **replica;    // hsdp: then its all-reduce across the replicas, or NULL
    int *launched;         // launched in this backward
} Buckets;

typedef enum { UNIT_FREE = 0, UNIT_GATHERING, UNIT_READY } UnitState;

// Gathered units and gradient buckets come and go every layer. Allocating and
// freeing them each time costs page faults on the CPU (the kernel zeroes every
// page handed back in) and a device-wide synchronisation on a GPU (cudaFree), so
// the engine keeps the buffers it has made and reuses them, as PyTorch's caching
// allocator does. The ledger charges what the pool holds (MEM_COMM): the memory
// the process really keeps, at most the working set's peak.
typedef struct {
    float *buf;
    size_t elems;
    int used;
    void *released;        // GPU: an event after the kernels that last used it
} PoolBuf;

// Launched buckets a rank keeps in flight at most while the backward pass goes on: a
// new bucket's buffer is made only after the oldest launched one beyond this is
// retired (its gradients taken into the shard), which bounds the gradient memory,
// and no collective is waited for before then, which keeps the overlap.
#define MAX_IN_FLIGHT 2

typedef struct Sharded {
    ShardConfig cfg;
    Comm *c;
    Group *world;          // every rank: the data-parallel group
    Group *dp;             // the group that shards: world, or hsdp's shard group
    Group shard_g, replica_g;  // hsdp: the ranks sharing a shard / holding the same shard
    AsyncComm *ac;
    GpuComm *gpu_dp, *gpu_replica;  // --device cuda: the GPU collectives of dp, replica_g
    Timeline *tl;
    GPT *g;
    ShardPlan plan;
    Buckets buckets;
    int armed;             // the gradient hook launches buckets (the last micro-batch)
    int micro;             // this step's micro-batch
    // This rank's shards (NULL where the strategy keeps the full buffer).
    float *pshard;         // zero3/fsdp/hsdp: its weights, shard_elems (MEM_PARAMS)
    float *gshard;         // zero2/3/fsdp/hsdp: its summed gradients (MEM_GRADS)
    int pshard_rounded;    // pshard holds the precision recipe's values (sharded.c)
    AdamW *opt;            // one per owned range: 1 (ddp, zero), n_units (fsdp, hsdp)
    int n_opt;
    // Stage 3's weights, unit by unit.
    float **unit_buf;      // the gathered unit (MEM_COMM), or NULL
    uint16_t **unit_wire;  // param_wire bf16: its bf16 copy while being gathered, or NULL
    CollTask **unit_task;  // its all-gather in flight
    UnitState *unit_state;
    int *use_seq;          // the use() calls of one micro-batch: unit needing weights, or -1
    int *use_op;           // the first call of the op each call belongs to (the LM head
                           // announces two groups before it computes)
    int n_use, use_at, fwd_uses;
    // With prefetch: the uses after which the next unit the model will need (another
    // than this use's) was still FREE, its gather not started (sharded.c counts them
    // after fsdp_on_use; the test wants 0).
    long prefetch_late;
    // What the buckets exist for, counted by the reference around your buckets.c
    // (grad_reduce.c): buckets launched while the backward pass was still computing
    // (0: nothing can overlap), and waits for a bucket's collective during the
    // backward pass while fewer than MAX_IN_FLIGHT launched buckets were in flight
    // (each stalls the compute the collective should hide behind; the test wants 0).
    // Under COURSE_LATE_COMPLETION=1 (async_coll.c) a collective reports done only
    // when waited for, so every such wait is seen, whatever the machine's timing.
    int in_backward;
    long launched_in_backward, early_waits;
    PoolBuf *pool;         // as many as the working set's peak needs (grown on demand)
    int n_pool, cap_pool;
    // Bytes this rank sent in the last step (all collectives).
    LinkBytes step_start, step_sent;  // sent when the step began; in the last step (inside, across)
    // The compute span in progress on the timeline (sharded.c).
    char span_name[32];
    double span_t0;
    TrainStrategy strategy;
} Sharded;

// Creates the strategy for this rank (a collective). c, world and ctx must outlive
// it; tl may be NULL. On a CUDA context the collectives of device buffers run on
// the GPU (NCCL, or the CUDA IPC ring), on a stream of their own when overlapped.
Sharded *sharded_new(Comm *c, Group *world, Ctx *ctx, const ShardConfig *cfg, Timeline *tl);
void sharded_free(Sharded *s);
// "ZeRO-2 over 4 ranks, ring, buckets of 25 MB, overlapped", for the log.
void sharded_describe(const Sharded *s, char *buf, size_t n);

// ---------------------------------------------------------------- the pieces

// buckets.c (exercise, part 1): assign the groups to buckets, in backward order
// (L+1 first), each at most cfg.bucket_bytes (0: one group each; a group larger
// than the cap is a bucket alone; fsdp/hsdp: a bucket per unit).
void buckets_assign(Sharded *s);
// The gradient hook (GradHook): `group`'s gradients are complete; a bucket whose
// groups are all complete is launched (when armed).
void buckets_on_grad_ready(GPT *g, int group, void *arg);
// Before backward writes `group`'s gradients: zero2/3, fsdp, hsdp make its
// bucket's buffer if it has none yet (and retire finished buckets to make room).
void grads_need(Sharded *s, int group);
// grad_reduce.c: starts bucket b's collective (ddp all-reduces it in place, the
// others reduce-scatter it over the partition's blocks); waits for it, and
// (zero2/3, fsdp, hsdp) adds this rank's block into gshard and frees the bucket.
void bucket_launch(Sharded *s, int b);
void bucket_retire(Sharded *s, int b);
// Every bucket the hook did not launch launched, in order, then all retired.
void buckets_finish(Sharded *s);
int sharded_grads(const Sharded *s);    // 1: gradients live in gshard + buckets

// zero_step.c (exercise, part 2): everything after the backward passes of a
// ZeRO/FSDP step: finish the buckets, the mean over the ranks, the global norm
// (reduced over the shards), AdamW on this rank's ranges, then (zero1/2) the
// weights all-gathered. Returns the norm. (DDP's step is stage 02's: sharded.c.)
double sharded_step(Sharded *s);

// fsdp_unit.c (exercise, part 3): stage 3's weights. Called at the model's use
// number `at` of the micro-batch (use_seq): units no longer needed are freed,
// this group's unit gathered (need & GPT_NEED_PARAMS), the next one prefetched.
void fsdp_on_use(Sharded *s, int group, int need, int at);
void unit_gather_start(Sharded *s, int u);   // allocate, put this rank's block in, all-gather
void unit_gather_wait(Sharded *s, int u);    // wait, then point the unit's groups at it
void unit_free(Sharded *s, int u);
// ZeRO-1/2 after the update: every rank's block of g->params all-gathered into every
// rank's weights (blocking), in cfg.param_wire.
void weights_all_gather(Sharded *s);

// A pool buffer of n 16-bit values (a collective's bf16 copy, MEM_COMM), and back.
uint16_t *wire_get(Sharded *s, size_t n);
void wire_put(Sharded *s, uint16_t *w);

// sharded.c: the sum of squares of the real (unpadded) elements of a shard buffer.
double sharded_sum_squares(const Sharded *s, const float *shard);
// A buffer of at least `elems` floats from the pool (zeroed when `zero`), and back.
float *pool_get(Sharded *s, size_t elems, int zero);
void pool_put(Sharded *s, float *buf);
