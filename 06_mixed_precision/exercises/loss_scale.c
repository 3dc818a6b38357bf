// exercises/loss_scale.c — YOUR dynamic loss scaling.   make grade-6 PART=loss_scale
//
// Read ../precision.h (LossScaler, and what loss_scaler_update must do). fp16
// gradients below 2^-25 (half its smallest subnormal) become 0, so the loss is
// multiplied by a scale S before the backward pass and the gradients are divided by
// S before the update. Too large an
// S overflows some gradient to inf, and the scale is found at run time:
//
//   found_inf:  skip the step (return 0); S *= backoff_factor, but not below
//               min_scale; good_steps = 0; count it in skipped (and in backoffs
//               when S actually shrank);
//   otherwise:  apply the step (return 1); good_steps++; when good_steps reaches
//               growth_interval, S *= growth_factor, but not above max_scale, and
//               good_steps = 0 (count it in growths when S actually grew).
//   Always:     steps++.
//
// The tests (tests/test_precision.c, the mp.scaler.* checks) drive the scaler
// through sequences of good and overflowing steps and compare every field.
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
