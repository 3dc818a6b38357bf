// pipe.h — pipeline parallelism: the model's layers cut into stages, one rank
// each, and a schedule (schedule.h) that moves m micro-batches through them.
//
//   schedule.c, sched_1f1b.c, sched_interleaved.c, sched_zb.c   the schedules, as data
//   checker.c        proves a schedule sound before it runs
//   engine.c         runs this rank's list of actions; engine_step.c, one action
//   pipe_model.c     the stages' models, the tied embedding, the step, gathering
//   pp_train.c       the driver
#pragma once
#include "collectives.h"
#include "ddp.h"
#include "model.h"
#include "optim.h"
#include "schedule.h"
#include "timeline.h"
#include "tp.h"
#include "trainer.h"

#define PP_MAX_CHUNKS 8

// A message between neighbouring stages, in flight (engine.c): a host message
// (comm.h) when the stages compute on the CPU, a GPU one (comm_cuda.h's
// gpu_isend / gpu_irecv: device buffer to device buffer) when they compute on GPUs.
typedef struct PipeMsg PipeMsg;

// What the engine keeps of one (micro-batch, chunk) between its actions.
typedef struct {
    GPTActs acts;           // its activations (allocated at its receive or forward)
    PipeMsg *recv_act;      // the input's receive, until the forward waits for it
    PipeMsg *send_act;      // the output's send, until the backward frees the activations
    float *grad;            // (N, C) the gradient at the chunk's output, then at its input
    float *keep;            // zero-bubble: what the weight pass needs, from B to W
    PipeMsg *recv_grad, *send_grad;
} PPSlot;

typedef struct {
    Comm *comm;
    Group *pp, *dp;         // the pipeline group (member s = stage s) and data parallelism
    TensorParallel *tp;     // stage 04 inside every stage (NULL: none)
    Algo algo;
    const PPSchedule *S;    // checked (sched_check) before the first step
    int v;                  // model chunks on this rank
    GPT *model[PP_MAX_CHUNKS];  // chunk c's model: chunk 0 is the trainer's GPT,
    GPT extra[PP_MAX_CHUNKS];   // the others live here
    AdamW opt[PP_MAX_CHUNKS];
    DDP ddp[PP_MAX_CHUNKS];
    int B, T, m;
    PPSlot *slots;          // [mb * v + chunk] during a step
    GPTActs *pool[PP_MAX_CHUNKS];  // activation sets no micro-batch holds, kept for the next
    int pooled[PP_MAX_CHUNKS];     // (allocating ~10 MB zero-filled per micro-batch costs
                                   // page faults inside the forward: measured, it doubled
                                   // stage 0's forward time)
    double loss_sum;        // over the micro-batches (the last stage's)
    Timeline *tl;           // the spans of every action (may be disabled)
    int zero1;              // ZeRO-1 over dp: each replica updates 1/dp of every chunk,
                            // then the replicas all-gather the weights
    int kill_at;            // fault test: this rank dies (SIGKILL) at its action number
                            // kill_at of the first step (-1: never)
    // --device cuda (set after pipe_init; NULL on the CPU):
    GpuComm *gpu;           // the pipeline group's: its messages over CUDA IPC
    GpuComm *gpu_dp;        // the data-parallel group's: DDP's all-reduce, ZeRO-1's all-gather
    GpuClock *clock;        // with a timeline: the actions' GPU times (engine.c)
    int mark0, mark1;       // the current action's first and last clock marks
    TrainStrategy strategy;
} Pipe;

// Layers of virtual stage k of K: consecutive, as even as they can be (the
// first L mod K stages one more). Needs L >= K.
void pp_layers(int L, int K, int k, int *l0, int *l1);
// NULL if the model can be cut into pp x chunks stages, else a message naming the flags.
const char *pp_error(const GPTConfig *c, int pp, int chunks, char *buf, size_t n);

// Sets up the strategy for this rank's stage: build (the trainer's), then the
// engine runs S each step. S must outlive the Pipe.
// tp: tensor parallelism inside each stage (stage 04; NULL for none).
// On GPUs set P->gpu (the pipeline group's GpuComm, created with GPU_IPC) and,
// with data parallelism, P->gpu_dp, after this and before the first step.
void pipe_init(Pipe *P, Comm *c, Group *pp, Group *dp, TensorParallel *tp, Algo algo,
               const PPSchedule *S, Timeline *tl);

// The engine (engine.c): runs this rank's actions for one step of m micro-batches
// (tokens/targets: m*B*T each); returns the mean loss (on every rank of the pipeline).
float pipe_run(Pipe *P, const int *tokens, const int *targets);
// One action (engine_step.c).
void pipe_step(Pipe *P, const PPAction *a, const int *tokens, const int *targets);
// Helpers the step uses (engine.c): post a send or a receive of the residual
// stream to or from a pp-group member (host buffers on the CPU, device buffers on
// a GPU); wait for one message while moving every other message of the step
// along; the chunk's model and its neighbours.
PipeMsg *pipe_isend(Pipe *P, int peer, const void *buf, size_t bytes);
PipeMsg *pipe_irecv(Pipe *P, int peer, void *buf, size_t bytes);
void pipe_wait(Pipe *P, PipeMsg **r);
int pipe_peer(const Pipe *P, int chunk, int next);   // pp-group member of the next/previous stage
size_t pipe_stream_bytes(const Pipe *P);            // an activation or gradient message
PPSlot *pipe_slot(Pipe *P, int mb, int chunk);
// A micro-batch's activations for chunk c: one the pool holds, or a new one; and
// back to the pool. The ledger keeps pooled sets charged, so its peak is still the
// most sets in use at once. Every field is written by the forward before it is read.
void pipe_acts_get(Pipe *P, int c, GPTActs *out);
void pipe_acts_put(Pipe *P, int c, GPTActs *a);

// The tied embedding (pipe_model.c): the first stage's wte and the last stage's
// copy get the sum of both gradients, so they stay equal (Megatron's embedding group).
void pipe_sync_embedding(Pipe *P);
// Both, then the mean over the data-parallel replicas: the gradients of the step.
void pipe_reduce_grads(Pipe *P);
// The global gradient norm over the pipeline (every tensor counted once).
double pipe_grad_norm(Pipe *P);
// AdamW on every chunk (with ZeRO-1: on this replica's shard, then the weights
// all-gathered over dp).
void pipe_update(Pipe *P, double norm);
// The whole model's weights (or gradients) in the single-process layout, on every rank.
void pipe_gather(Pipe *P, int grads, float *out);
