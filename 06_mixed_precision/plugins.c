// plugins.c — what this stage lends the model (model.h's GPTPlugins): recompute,
// stochastic rounding's rule and the fp8 recipe's casts. A model built with them
// (g->plugins = &precision_plugins) can take every recipe and recompute level; the
// core's own model, without, takes fp32, mixed-bf16 and bf16, recompute none.
#include "precision.h"

const GPTPlugins precision_plugins = {
    .recompute_layer = gpt_recompute_layer,
    .sround = {f32_to_bf16_stochastic, sround_bits},
    .fp8_enable = gpt_fp8_enable,
    .fp8_free = gpt_fp8_free,
    .fp8_linear_forward = gpt_fp8_linear_forward,
    .fp8_linear_backward = gpt_fp8_linear_backward,
};
