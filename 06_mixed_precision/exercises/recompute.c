// recompute.c — activation recompute: what layer l's backward does first.
// EXERCISE: fill in gpt_recompute_layer. `make grade-6 PART=recompute` checks it.
//
// The forward pass of a layer saves what its backward reads (LayerActs, common/
// model.h). Recompute trades compute for memory by saving less and computing the
// rest again when the backward needs it. The model chooses what its forward keeps
// (gpt_set_recompute, g->recompute); this function must return, for the backward
// of layer l, every tensor that backward reads:
//
//   NONE       the forward kept everything: g->acts.layers[l] as it is.
//   SELECTIVE  the forward kept all but the attention probabilities att
//              (B x NH x T x T per layer, the part that grows with T^2). Recompute
//              them from the saved qkv into the shared buffer g->remat.att with
//              gpt_attention_forward (model.h), the call the forward made. It writes
//              the attention output too: the same bits as the saved atty.
//   FULL       (gpt_layer_recomputed(g, l)) the forward kept only the layer's
//              output res_mlp, the next layer's input. Run the layer's forward
//              again (gpt_layer_forward) from its input x into the shared layer
//              g->remat, and return that. Do not write into the saved output: it
//              is layer l+1's input (and a pipeline stage's send buffer, which a
//              GPU may still be sending). The same bits would land there, so the
//              grader poisons it before each recompute and wants it untouched.
//
// The recomputed tensors must be the saved ones bit for bit: the same calls on the
// same inputs. Which inputs are those? (What did the forward of layer l read?)
#include "precision.h"

LayerActs gpt_recompute_layer(GPT *g, const float *x, int l, int B, int T) {
    LayerActs a = g->acts.layers[l];
    // TODO: SELECTIVE and FULL (see above). As it is, the backward of a layer whose
    // activations were not kept reads buffers that hold nothing of this layer's.
    (void)x; (void)B; (void)T;
    if (gpt_layer_recomputed(g, l)) a = g->remat;
    else if (g->recompute == GPT_RECOMPUTE_SELECTIVE) a.att = g->remat.att;
    return a;
}
