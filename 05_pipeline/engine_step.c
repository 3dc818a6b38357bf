// engine_step.c — one action of the schedule (the engine's inner step).
//
// pipe_run (engine.c) calls this for each action of this rank's list, in order.
// The slot of (micro-batch, chunk) carries what the actions pass each other: the
// activations (slot->acts: taken from the pool by the receive of the input, or by
// the forward on the first stage; returned by the backward) and the gradient message
// (slot->grad: allocated by its receive, or by the backward on the last stage;
// sent to the previous stage, or dropped on the first). pipe_isend / pipe_irecv
// (engine.c) move it between host buffers on the CPU, device buffers on a GPU.
#include "ops.h"
#include "pipe.h"

// The activations of this micro-batch for chunk c, with its token ids.
static void activations_for(Pipe *P, PPSlot *x, int c, const int *tokens, const int *targets) {
    GPT *g = P->model[c];
    pipe_acts_get(P, c, &x->acts);
    g->acts = x->acts;
    gpt_set_batch(g, tokens, targets, P->B, P->T);
}

static size_t keep_bytes(const Pipe *P, const GPT *g) {
    return gpt_keep_floats(g, g->l0, g->l1, P->B, P->T) * sizeof(float);
}

// The end of a micro-batch on this chunk: its output must have left before its
// activations go.
static void release(Pipe *P, PPSlot *x, int c) {
    if (x->send_act) pipe_wait(P, &x->send_act);
    pipe_acts_put(P, c, &x->acts);
    P->model[c]->acts = x->acts;
}

void pipe_step(Pipe *P, const PPAction *a, const int *tokens, const int *targets) {
    int c = a->chunk, s = P->pp->rank, B = P->B, T = P->T;
    int first = pp_is_first(P->S, s, c), last = pp_is_last(P->S, s, c);
    GPT *g = P->model[c];
    PPSlot *x = pipe_slot(P, a->mb, c);
    size_t bytes = pipe_stream_bytes(P), off = (size_t)a->mb * B * T;
    switch (a->op) {
    case PP_RECV_ACT:  // post the receive of the input straight into the activations
        activations_for(P, x, c, tokens + off, targets + off);
        x->recv_act = pipe_irecv(P, pipe_peer(P, c, 0), x->acts.encoded, bytes);
        break;
    case PP_FORWARD:
        if (!x->acts.buffer) activations_for(P, x, c, tokens + off, targets + off);
        if (x->recv_act) pipe_wait(P, &x->recv_act);
        g->acts = x->acts;
        g->last_B = B;
        g->last_T = T;
        if (first) gpt_embed_forward(g, B, T);
        gpt_blocks_forward(g, g->acts.encoded, g->l0, g->l1, B, T);
        if (last) P->loss_sum += gpt_head_forward(g, gpt_layer_output(g, g->l1 - 1), B, T, 1);
        break;
    case PP_SEND_ACT:  // the chunk's output stays in its activations until its backward
        x->send_act = pipe_isend(P, pipe_peer(P, c, 1), x->acts.layers[g->l1 - 1].res_mlp, bytes);
        break;
    case PP_RECV_GRAD:
        x->grad = mem_alloc(g->ctx, MEM_COMM, bytes);
        x->recv_grad = pipe_irecv(P, pipe_peer(P, c, 1), x->grad, bytes);
        break;
    case PP_BACKWARD: case PP_BACKWARD_INPUT:
        if (x->recv_grad) pipe_wait(P, &x->recv_grad);
        g->acts = x->acts;
        if (last) {  // the loss of this micro-batch is 1/m of the step's
            x->grad = mem_alloc(g->ctx, MEM_COMM, bytes);
            gpt_head_backward(g, gpt_layer_output(g, g->l1 - 1), x->grad, 1.0f / P->m, B, T);
        }
        if (a->op == PP_BACKWARD) {
            gpt_blocks_backward(g, g->acts.encoded, x->grad, g->l0, g->l1, B, T);
        } else {  // zero-bubble: the weights' gradients wait, kept, for the weight pass
            x->keep = mem_alloc(g->ctx, MEM_ACTIVATIONS, keep_bytes(P, g));
            gpt_blocks_backward_input(g, g->acts.encoded, x->grad, g->l0, g->l1, B, T, x->keep);
        }
        if (first) {
            gpt_embed_backward(g, x->grad, B, T);
            mem_free(g->ctx, MEM_COMM, x->grad, bytes);
            x->grad = NULL;
        }
        if (a->op == PP_BACKWARD) release(P, x, c);
        break;
    case PP_BACKWARD_WEIGHT:
        g->acts = x->acts;
        gpt_blocks_backward_weight(g, g->acts.encoded, g->l0, g->l1, B, T, x->keep);
        mem_free(g->ctx, MEM_ACTIVATIONS, x->keep, keep_bytes(P, g));
        x->keep = NULL;
        release(P, x, c);
        break;
    case PP_SEND_GRAD:
        x->send_grad = pipe_isend(P, pipe_peer(P, c, 0), x->grad, bytes);
        break;
    default:
        break;
    }
}
