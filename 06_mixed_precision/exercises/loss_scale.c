// exercises/loss_scale.c — YOUR dynamic loss scaling.   make grade-6 PART=loss_scale
// Stuck? make hint-6 PART=loss_scale   (tier 1 a nudge; TIER=2 the steps; TIER=3 more)
//
// Why (the lesson's §3, ../precision.h): fp16 flushes gradients below 2^-25 to 0, so
// the loss is multiplied by a scale S before the backward pass and the gradients are
// divided by S before the update. Too large an S overflows some gradient to inf or
// NaN. The scale is therefore found at run time, as PyTorch's GradScaler finds it:
// backed off when it overflows, grown again after a long enough run of good steps.
//
// THE CONTRACT of loss_scaler_update(s, found_inf), called once per optimizer step
// after the backward pass (found_inf: some gradient is inf or NaN):
//
//   returns   1: apply this step's update; 0: skip it. A step whose gradients
//             overflowed is never applied; every other step is.
//   scale     shrinks by the scaler's backoff_factor on every overflow; grows by its
//             growth_factor once growth_interval good steps have come IN A ROW (no
//             overflow among them, none of them already spent on an earlier growth);
//             changes on no other call.
//   bounds    the scale never leaves [min_scale, max_scale]. A change that would
//             cross a bound ends ON the bound (not where it was): from 3 with
//             backoff 0.5 and min 1, two overflows give 1.5, then 1.
//   good_steps  the current run of good steps not yet spent on a growth:
//             0 <= good_steps < growth_interval after every call, also when the scale
//             already sits at max_scale and cannot grow.
//   counters  steps: every call. skipped: the calls that returned 0. growths and
//             backoffs: the calls that actually changed the scale (a clamp that
//             leaves it where it was counts as neither).
//   own numbers  factors, bounds and interval are the fields of *s (a run may set
//             any of them), never PyTorch's 2, 0.5 and 2000 written into the code.
//
// What the grader checks (tests/test_precision.c, mp.scaler.*): every field of *s and
// the return value after sequences of good and overflowing steps, against traces
// worked out by hand, with the defaults and with factors, bounds and intervals of
// their own (a growth exactly at the growth_interval-th good step, not one later).
//
// Pitfalls: a skipped step that leaves the scale where it was (every later step
// then overflows the same way); counting a growth or a backoff that the clamp made a
// no-op; a streak that survives an overflow or a growth; literals for the factors.
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
    (void)s;
    (void)found_inf;
    // TODO(exercise): until then every step is applied and nothing changes.
    return 1;
}
