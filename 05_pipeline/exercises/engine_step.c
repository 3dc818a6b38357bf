// exercises/engine_step.c — YOUR engine step: one action (part 2).
//   make grade-5 PART=engine_step
// Stuck? make hint-5 PART=engine_step   (tier 1 a nudge; TIER=2, 3 more)
//
// pipe_run (../engine.c) calls pipe_step for each action of this rank's list, in
// order, and does everything else (zeroing the gradients once per step, the timeline,
// waiting for the last sends, the loss). Read ../pipe.h (Pipe, PPSlot and the helpers),
// ../schedule.h (what each PPOp means) and the pieces of common/model.h a stage runs:
// gpt_set_batch, gpt_embed_forward, gpt_blocks_forward(g, x, g->l0, g->l1, B, T),
// gpt_head_forward, gpt_head_backward(g, x, dx, dloss_scale, B, T),
// gpt_blocks_backward(g, x, dx, l0, l1, B, T) (dx: the gradient at the output in,
// at the input out), its two halves gpt_blocks_backward_input / _weight (with
// gpt_keep_floats), gpt_embed_backward, gpt_layer_output; and pipe.h's pipe_isend,
// pipe_irecv, pipe_wait, pipe_peer, pipe_slot, pipe_stream_bytes, pipe_acts_get /
// pipe_acts_put, pp_is_first / pp_is_last (schedule.h), mem_alloc / mem_free.
//
// THE CONTRACT of pipe_step(P, a, tokens, targets): carry out action a (op, micro-batch
// a->mb, chunk a->chunk) of this rank's schedule. The micro-batch's token ids are
// tokens + a->mb * P->B * P->T (targets likewise). Together, a step's actions must
// leave this stage's gradients the sum over the micro-batches of each one's gradient
// of 1/m of its loss (dloss_scale 1/P->m), and P->loss_sum the sum of the last
// stage's forward losses. The slot of (micro-batch, chunk) (pipe_slot) carries what
// the actions pass each other:
//   - its activations, slot->acts: a set taken from the pool (pipe_acts_get) by the
//     first action that needs it (the receive of its input, or the forward on the
//     first virtual stage, which receives nothing) and given back (pipe_acts_put) by
//     its backward (its weight pass, in the zero-bubble split). The model computes on
//     g->acts: it must point at this micro-batch's set whenever the model computes,
//     and never at a set back in the pool (one freed twice when the model goes);
//   - slot->grad, the gradient message (pipe_stream_bytes bytes, MEM_COMM): made by
//     its receive (or, on the last virtual stage, by the backward, whose head makes
//     it), sent to the previous stage by PP_SEND_GRAD, or, on the first virtual stage,
//     freed as soon as the backward that read it is done;
//   - PP_SEND_ACT sends from the slot's own activations (the output of its chunk's last
//     layer), not through g->acts: in an interleaved steady step a backward runs
//     between a forward and its send;
//   - the requests (slot->recv_act, send_act, recv_grad, send_grad): sends and
//     receives are posted, not waited for; a compute waits (pipe_wait, which keeps
//     every other message moving) only for the message it needs, and the
//     activations are released only once the send of the chunk's output is done
//     (waited for: the CPU's transports copy a message as it is posted, a GPU's do
//     not, so pipe_acts_put refuses a set whose send is still in flight). Nothing
//     else waits.
//   - PP_BACKWARD_INPUT (zero bubble) does what PP_BACKWARD does for the gradient
//     that flows on, but leaves the weight gradients for later: what they need is
//     kept in slot->keep (gpt_keep_floats(g, g->l0, g->l1, B, T) floats,
//     MEM_ACTIVATIONS) and the activations are kept too; PP_BACKWARD_WEIGHT, later,
//     adds the weight gradients from them and only then lets both go. Same calls on
//     the same data: the same bits as PP_BACKWARD.
//
// What the grader checks (tests/stage05.sh, pp.*): GPipe, 1F1B and ZB-H1 (on the
// reference's generators: your engine alone) and interleaved 1F1B against one process
// (loss, gradients, weights) on 1-4 stages and on meshes with DP, TP, SP and ZeRO-1;
// messages larger than the shm channel (where any needless wait deadlocks); the
// activation ledger = micro-batches in flight x one set; the message buffers freed as
// the schedule goes (the same peak after 1 and 3 steps, with 4 and 8 micro-batches); the
// tied embedding's two copies bitwise equal; the driver, a killed rank, the trace.
// Pitfalls: waiting for a send where the schedule does not (in interleaved 1F1B the
// last stage sends activations to the first while the first sends to it); gradients
// zeroed per micro-batch instead of summed; a weight pass computing from another
// micro-batch's activations; a received gradient on the first stage kept to the step's
// end, or never freed (after a whole backward AND after an input pass).
#include "ops.h"
#include "pipe.h"

void pipe_step(Pipe *P, const PPAction *a, const int *tokens, const int *targets) {
    (void)P; (void)a; (void)tokens; (void)targets;
    // TODO(exercise): one case per op (PP_RECV_ACT, PP_FORWARD, PP_SEND_ACT,
    // PP_RECV_GRAD, PP_BACKWARD, PP_SEND_GRAD; then PP_BACKWARD_INPUT and
    // PP_BACKWARD_WEIGHT), as the contract above says.
}
