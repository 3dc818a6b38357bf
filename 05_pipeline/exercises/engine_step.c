// exercises/engine_step.c — YOUR engine step: one action (part 2).
//   make grade-5 PART=engine_step
//
// pipe_run (../engine.c) calls pipe_step for each action of this rank's list, in
// order, and does everything else (zeroing the gradients, the timeline, waiting
// for the last sends, the loss). Read ../pipe.h (Pipe, PPSlot and the helpers) and
// the pieces of common/model.h a stage runs: gpt_set_batch,
// gpt_embed_forward, gpt_blocks_forward(g, x, g->l0, g->l1, B, T),
// gpt_head_forward, gpt_head_backward(g, x, dx, dloss_scale, B, T),
// gpt_blocks_backward(g, x, dx, l0, l1, B, T) (dx: the gradient at the output in,
// at the input out), its two halves gpt_blocks_backward_input / _weight,
// gpt_embed_backward; and pipe.h's pipe_isend / pipe_irecv
// (comm.h's comm_isend / comm_irecv on the CPU; device to device on a GPU).
//
// The slot of (micro-batch, chunk) carries what its actions pass each other:
//   - its activations, slot->acts: taken with pipe_acts_get by the receive of its
//     input (or by the forward on the first virtual stage, which receives nothing)
//     and returned with pipe_acts_put by its backward. Point g->acts at them before
//     computing, and again after pipe_acts_put (which empties slot->acts): a g->acts
//     still pointing at a set back in the pool is freed twice when the model goes.
//   - slot->grad, the gradient message (pipe_stream_bytes bytes, MEM_COMM):
//     allocated by its receive (or by the backward on the last virtual stage, whose
//     head makes it), sent to the previous stage (or freed on the first).
//   - the requests: post receives and sends and keep them in the slot; a forward
//     or backward that needs a message waits for it with pipe_wait (which keeps
//     every other message moving). Never wait for a send where the schedule does
//     not need it: a neighbour may be waiting for you (the interleaved part's
//     checks run your engine with messages larger than the channel, where the
//     last stage sends activations too: a wait there deadlocks).
//   - PP_SEND_ACT sends from the slot's own activations (slot->acts, the output
//     of its chunk's last layer), not through g->acts: in an interleaved steady
//     step a backward, which empties g->acts, runs between a forward and its send.
// The loss: each micro-batch's is 1/m of the step's (dloss_scale 1/P->m);
// P->loss_sum adds the last stage's forward losses.
#include "ops.h"
#include "pipe.h"

void pipe_step(Pipe *P, const PPAction *a, const int *tokens, const int *targets) {
    (void)P; (void)a; (void)tokens; (void)targets;
    // TODO(exercise): one case per op (PP_RECV_ACT, PP_FORWARD, PP_SEND_ACT,
    // PP_RECV_GRAD, PP_BACKWARD, PP_SEND_GRAD). The micro-batch's token ids are
    // tokens + a->mb * P->B * P->T (targets likewise). Before freeing the
    // activations in the backward, the send of the chunk's output must be done
    // (on the CPU's transports it always is by then: the gradient that starts the
    // backward comes after the next stage received the output; the wait keeps that
    // true where a send may still be reading the buffer).
    // Then the zero-bubble schedule's two halves of PP_BACKWARD: PP_BACKWARD_INPUT
    // does what PP_BACKWARD does but with gpt_blocks_backward_input, keeping in
    // slot->keep (gpt_keep_floats(g, g->l0, g->l1, B, T) floats, MEM_ACTIVATIONS)
    // what the weights need, and keeps the activations too; PP_BACKWARD_WEIGHT,
    // later, runs gpt_blocks_backward_weight from them and only then lets both go.
}
