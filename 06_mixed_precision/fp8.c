// fp8.c — the per-tensor scale of fp8 training: Transformer Engine's delayed scaling.
//
// e4m3 spans 2^-9 .. 448 and e5m2 2^-16 .. 57344: a few dozen binades, where a
// tensor's values may spread over more, and sit anywhere. So a tensor x is stored
// as fp8(x * scale), with one fp32 scale for the whole tensor, chosen to put its
// largest magnitude (amax) just under the format's largest finite value: large
// values keep all their precision, and only values far below amax underflow.
//
// The amax of the tensor being quantized is known only after reading all of it,
// and the fast kernels read it once: they quantize with a scale computed from the
// amaxes of PREVIOUS steps (the history) and record this step's amax for the next.
// A history of several steps (Transformer Engine's amax_history_len, up to 1024)
// takes the maximum over a window, so one unusually small step does not shrink the
// scale and make the next ordinary step overflow. The margin leaves headroom for a
// tensor whose amax grows between steps: each unit of margin halves the scale.
// Values that still overflow are clipped to max (the cast saturates: dtype.h).
#include <float.h>
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "precision.h"

float fp8_format_max(DType fmt) {
    switch (fmt) {
    case DT_E4M3: return E4M3_MAX;
    case DT_E5M2: return E5M2_MAX;
    default: DIE("fp8 scaling: %s is not an fp8 format (e4m3 or e5m2)", dtype_name(fmt));
    }
}

void fp8_scaling_init(Fp8Scaling *s, int len, DType fmt, float margin) {
    CHECK(len >= 1, "fp8 scaling: the amax history needs at least 1 entry, not %d", len);
    (void)fp8_format_max(fmt);  // refuses a format that is not fp8, here rather than later
    s->history = calloc((size_t)len, sizeof(float));
    CHECK(s->history, "out of host memory");
    s->len = len, s->pos = 0, s->filled = 0, s->margin = margin, s->fmt = fmt;
}

void fp8_scaling_free(Fp8Scaling *s) {
    free(s->history);
    s->history = NULL;
    s->len = s->pos = s->filled = 0;
}

void fp8_record(Fp8Scaling *s, float amax) {
    s->history[s->pos] = amax;  // overwrites the oldest once the ring is full
    s->pos = (s->pos + 1) % s->len;
    if (s->filled < s->len) s->filled++;
}

float fp8_scale(const Fp8Scaling *s) {
    // The entries recorded so far are history[0..filled) in some rotation: the max
    // does not care which.
    float amax = 0.0f;
    for (int i = 0; i < s->filled; i++)
        if (isfinite(s->history[i]) && s->history[i] > amax) amax = s->history[i];
    if (amax == 0.0f) return 1.0f;
    // In fp32 and in this order, as Transformer Engine computes it.
    float scale = fp8_format_max(s->fmt) / amax / exp2f(s->margin);
    return isfinite(scale) ? scale : FLT_MAX;
}
