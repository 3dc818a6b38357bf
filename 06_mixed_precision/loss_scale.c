// loss_scale.c — dynamic loss scaling, as PyTorch's torch.cuda.amp.GradScaler.
//
// fp16 holds magnitudes from 2^-24 to 65504, and below 2^-14 with fewer and fewer
// bits (subnormals). Gradients of a language model are mostly small: many lose their
// bits there, and those below 2^-25 become 0 when the backward pass runs in fp16:
// those weights stop learning. Multiplying the loss by a scale S multiplies
// every gradient by S (the backward pass is linear in its incoming gradient), which
// lifts them into range; dividing by S before the optimizer step undoes it exactly
// (S is a power of two). Too large an S pushes the largest gradients past 65504 to
// inf, so S is found at run time:
//
//   - a step whose gradients hold an inf or NaN is skipped (its update would be
//     garbage) and S is halved;
//   - after growth_interval good steps in a row, S is doubled, to probe whether a
//     larger scale (fewer underflows) now fits.
//
// The scale thus settles just below the largest that does not overflow, paying one
// skipped step every growth_interval steps or so. bf16 has fp32's exponent range and
// needs none of this: loss scaling is an fp16 technique.
#include "precision.h"

LossScaler loss_scaler_default(void) {
    return (LossScaler){.scale = 65536.0f,
                        .growth_factor = 2.0f,
                        .backoff_factor = 0.5f,
                        .min_scale = 1.0f,
                        .max_scale = 16777216.0f,  // 2^24
                        .growth_interval = 2000};
}

int loss_scaler_update(LossScaler *s, int found_inf) {
    s->steps++;
    if (found_inf) {
        // Overflow: skip the update, shrink the scale, start counting good steps again.
        float shrunk = s->scale * s->backoff_factor;
        if (shrunk < s->min_scale) shrunk = s->min_scale;
        if (shrunk < s->scale) s->backoffs++;
        s->scale = shrunk;
        s->good_steps = 0;
        s->skipped++;
        return 0;
    }
    if (++s->good_steps >= s->growth_interval) {
        float grown = s->scale * s->growth_factor;
        if (grown > s->max_scale) grown = s->max_scale;
        if (grown > s->scale) s->growths++;
        s->scale = grown;
        s->good_steps = 0;
    }
    return 1;
}
