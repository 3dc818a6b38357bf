// recompute.c — activation recompute: what layer l's backward does first.
//
// The forward pass of a layer saves what its backward reads (LayerActs, common/
// model.h). Recompute trades compute for memory by saving less and computing the
// rest again when the backward needs it (Chen et al. 2016; Korthikanti et al.
// 2022). The model chooses what its forward keeps (gpt_set_recompute); this
// function gives the backward of layer l every tensor it reads:
//
//   NONE       the forward kept everything: the saved tensors as they are.
//   SELECTIVE  the forward kept all but the attention probabilities att, the
//              B x NH x T x T part (the one that grows with T^2, cheap to recompute:
//              a few percent of the layer's FLOPs). Recompute them from the saved
//              qkv into the shared buffer g->remat.att (gpt_attention_forward, which
//              writes the attention's output too: the same bits as the saved atty, so
//              it may go there).
//   FULL       the forward kept only the layer's output (the next layer's input).
//              Run the layer's forward again, from its input x, into the shared
//              layer g->remat: the whole layer, about a third more FLOPs per step.
//
// Why the recomputed tensors are the saved ones, bit for bit: the same calls on
// the same inputs (x, the same weights) in the same order. Two things would break
// that, and a real framework guards both: an input that changed in between (here
// x is the previous layer's output, untouched since the forward; a recomputation
// from anything else is wrong), and randomness (dropout draws its masks from an
// RNG; Megatron saves the RNG state at the forward and restores it for the
// recomputation. This course's GPT has no dropout, so there is no RNG to restore).
#include "precision.h"

LayerActs gpt_recompute_layer(GPT *g, const float *x, int l, int B, int T) {
    LayerActs a = g->acts.layers[l];
    if (gpt_layer_recomputed(g, l)) {
        // The whole layer, into the shared buffers (its output too: g->remat's
        // res_mlp, so the saved output, the input of layer l+1, stays untouched).
        a = g->remat;
        gpt_layer_forward(g, &a, x, l, B, T);
    } else if (g->recompute == GPT_RECOMPUTE_SELECTIVE) {
        // The attention probabilities, from the saved qkv of this rank's heads.
        a.att = g->remat.att;
        gpt_attention_forward(g, &a, B, T);
    }
    return a;
}
