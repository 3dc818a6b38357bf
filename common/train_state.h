// train_state.h — what a rank holds of the training, as views of the flat layout,
// and the one collective a job-wide decision needs.
//
// Every strategy holds some pieces of the model's weights and optimizer state: DDP
// all of them (as every other replica), ZeRO a shard of the moments, tensor
// parallelism a piece of each matrix, a pipeline stage some layers. A piece is
// elements [lo, hi) of one kind of state in the model's flat layout (g->slices), so
// a strategy describes what it holds as a list of views (TrainStrategy.state in
// trainer.h). Whatever needs a rank's whole state reads the list and nothing else:
// a checkpoint saves and loads the views (07_fault_tolerance), a replica check
// hashes them, a fault injection flips a bit in one. The core builds the list and
// knows nothing of those uses.
#pragma once
#include <stddef.h>

#include "comm.h"
#include "model.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { ST_PARAMS = 0, ST_EXP_AVG, ST_EXP_AVG_SQ, ST_MASTER, ST_KINDS } StateKind;
const char *state_kind_name(StateKind k);  // "params", "exp_avg", "exp_avg_sq", "master"

// One piece of a rank's state: elements [lo, hi) of `kind` in model g's flat
// layout (g->slices), at data (device memory, hi - lo floats). `replicas` ranks
// hold the same piece (DDP: every rank); this one is number `replica` of them,
// and saves only that share of it, so replicated state is written once, by
// all replicas in parallel.
typedef struct {
    StateKind kind;
    const GPT *g;
    size_t lo, hi;
    float *data;
    int replicas, replica;
} StateView;

// A rank's whole state: its views and its optimizers (their step counters).
typedef struct {
    StateView *views;
    int n_views, cap;
    AdamW **opts;
    int n_opts, opt_cap;
    // The model whose own state (not a tensor of the whole model) goes with the
    // rank's: the fp8 recipe's amax histories, which each rank measures itself.
    GPT *model;
} TrainState;
void train_state_add(TrainState *s, StateKind kind, const GPT *g, size_t lo, size_t hi,
                     float *data, int replicas, int replica);
// An optimizer's moments (and masters) over its whole range as views, and the
// optimizer among those whose counters a checkpoint keeps.
void train_state_add_opt(TrainState *s, AdamW *opt, const GPT *g, int replicas, int replica);
// The two halves of that, for a rank whose replicas differ from piece to piece
// (a pipeline's tied embedding): the counters, and the views of [lo, hi) of the
// optimizer's range.
void train_state_track_opt(TrainState *s, AdamW *opt);
void train_state_opt_views(TrainState *s, const AdamW *opt, const GPT *g, size_t lo, size_t hi,
                           int replicas, int replica);
void train_state_free(TrainState *s);

// The one collective a decision of the whole job needs: an element-wise sum of n
// floats over every rank (do all agree? who was slowest? which file?). Whoever
// drives the rank's communication provides it: a strategy whose progress thread
// owns the Comm routes it through that thread (TrainStrategy.sum).
typedef void (*JobSum)(float *buf, int n, void *arg);
// The plain one: to member 0 of group and back, point to point (arg: a JobSumP2P).
// Member 0 adds in member order, so every rank gets the same bits.
typedef struct { Comm *comm; const Group *group; } JobSumP2P;
void job_sum_p2p(float *buf, int n, void *arg);

#ifdef __cplusplus
}
#endif
