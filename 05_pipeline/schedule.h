// schedule.h — pipeline schedules as data.
//
// A pipeline of p stages (ranks) runs m micro-batches through the model, each
// rank holding v model chunks (v = 1 except for the interleaved schedule). The
// model's layers are cut into p·v consecutive virtual stages; virtual stage
// k = c·p + s is chunk c of rank s (Megatron-LM's interleaving: rank s holds
// layers of virtual stages s, s + p, s + 2p, ...). A schedule is, for every rank,
// the list of its actions in order:
//
//   FORWARD  mb c        forward of micro-batch mb through chunk c
//   BACKWARD mb c        its backward (input and weight gradients)
//   SEND_ACT / RECV_ACT  the activation at chunk c's output / input, to the next /
//                        from the previous virtual stage
//   SEND_GRAD/RECV_GRAD  the gradient at chunk c's input / output, to the previous /
//                        from the next virtual stage
//   BACKWARD_INPUT mb c  a zero-bubble schedule's backward in two: the input
//   BACKWARD_WEIGHT mb c gradient (what the previous stage waits for), and the
//                        weight gradients, which nobody waits for
//
// The generators (schedule.c: GPipe; sched_1f1b.c; sched_interleaved.c; sched_zb.c,
// which rewrites 1F1B's) write them; the checker (checker.c) proves a schedule sound
// before it runs; the engine (engine.c) executes any sound schedule. Sends and
// receives are posted, not waited for: a FORWARD waits for its activation, a
// BACKWARD for its gradient, and transfers overlap the compute between.
#pragma once
#include <stddef.h>

#define PP_MAX_STAGES 64

typedef enum {
    PP_FORWARD = 0, PP_BACKWARD, PP_SEND_ACT, PP_RECV_ACT, PP_SEND_GRAD, PP_RECV_GRAD,
    PP_BACKWARD_INPUT,   // zero-bubble: the backward's input-gradient pass (B) ...
    PP_BACKWARD_WEIGHT,  // ... and its weight-gradient pass (W), any time later
    PP_OPS
} PPOp;

typedef struct {
    PPOp op;
    int mb;      // micro-batch, 0..m-1
    int chunk;   // model chunk on this rank, 0..v-1
} PPAction;

typedef struct {
    const char *name;  // "gpipe", "1f1b", "interleaved", "zb-h1"
    int p, m, v;
    int n[PP_MAX_STAGES];           // actions of each rank
    PPAction *acts[PP_MAX_STAGES];  // acts[s][0..n[s])
    int cap[PP_MAX_STAGES];         // room allocated (pp_push grows it)
} PPSchedule;

typedef enum { SCHED_GPIPE = 0, SCHED_1F1B, SCHED_INTERLEAVED, SCHED_ZB_H1, SCHED_COUNT } SchedKind;
const char *sched_name(SchedKind k);              // "gpipe", "1f1b", "interleaved", "zb-h1"
int sched_parse(const char *s, SchedKind *out);   // 0 on success
// --chunks as given (0: the schedule's own: 2 interleaved, 1 otherwise).
int sched_chunks(SchedKind k, int given);

// Builds the schedule of kind k for p ranks, m micro-batches, v chunks per rank
// (1 unless interleaved). Returns NULL and a message naming the flags in err when
// the combination is not possible (interleaved needs v >= 2 and m a multiple of p).
PPSchedule *sched_build(SchedKind k, int p, int m, int v, char *err, size_t n);
void sched_free(PPSchedule *S);
// The file whose generator writes kind k's actions ("05_pipeline/sched_1f1b.c"; for
// ZB-H1, derived from 1F1B's, both): an unsound schedule's message names it (two of
// them are exercises).
const char *sched_source(SchedKind k);

// The generators: fill an empty schedule (p, m, v set) with every rank's actions.
void sched_gpipe(PPSchedule *S);
void sched_1f1b(PPSchedule *S);
void sched_interleaved(PPSchedule *S);
void sched_zb_h1(PPSchedule *S);  // builds 1F1B's (sched_build) and splits its backwards

// Helpers for generators. pp_push appends an action to rank s. The *_with
// functions append a compute action with its transfers around it: a forward
// posts the receive of its input first (unless its virtual stage is the first)
// and sends its output after (unless the last); a backward the same with
// gradients, the other way round.
void pp_push(PPSchedule *S, int s, PPOp op, int mb, int chunk);
void pp_forward_with(PPSchedule *S, int s, int mb, int chunk);
void pp_backward_with(PPSchedule *S, int s, int mb, int chunk);

// Virtual stages: k = chunk·p + s. The neighbours of rank s's chunk c.
int pp_vstage(const PPSchedule *S, int s, int chunk);
int pp_is_first(const PPSchedule *S, int s, int chunk);   // virtual stage 0: the embedding
int pp_is_last(const PPSchedule *S, int s, int chunk);    // the last: the head
// The rank and chunk of virtual stage k.
void pp_where(const PPSchedule *S, int k, int *rank, int *chunk);

// One action in words: "forward of micro-batch 3 (chunk 1)", "send of the
// activation of micro-batch 3 to rank 2".
void pp_action_str(const PPSchedule *S, int s, const PPAction *a, char *buf, size_t n);

// The checker (checker.c). 0 if the schedule is sound: every rank forwards and
// backwards every (micro-batch, chunk) once, each after what it needs (its input
// received, its forward done, its gradient received); every send has its
// receive, in the same order on both sides; and the ranks cannot wait on each
// other in a cycle (a simulation of the posting and waiting the engine does).
// Otherwise -1, with the first problem named in err.
int sched_check(const PPSchedule *S, char *err, size_t n);

// The same proof for a transport that runs each rank's messages in posting order,
// a group at a time (NCCL point to point: operations on one communicator are
// serialized, and a group's sends and receives progress together). The engine
// posts the sends and receives between two computes as one group. A message then
// completes only when the groups holding its send and its receive are both the
// oldest unfinished group of their rank; a compute waits for its message's
// completion, and the backward that releases a micro-batch for its activation's
// send. 0 if every rank gets to its end under those rules (after sched_check's
// passes); otherwise -1 and the first stuck ranks named in err.
int sched_check_serialized(const PPSchedule *S, char *err, size_t n);

// The most micro-batches whose activations rank s holds at once (forwarded, not
// yet backwarded, or with a weight pass still to come): what its activation
// memory is proportional to.
int sched_max_in_flight(const PPSchedule *S, int s);
