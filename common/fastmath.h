// fastmath.h — exp and tanh that the compiler can vectorize.
//
// libm's expf/tanhf are scalar calls: in GELU and softmax they would cost more
// than the matrix multiplies around them. These inline versions use only
// arithmetic, comparisons and bit casts, so gcc -O3 turns a loop over them into
// AVX2/AVX-512 code. Accuracy: fast_expf is within 2 ulp of expf over its whole
// range (Cephes polynomial after range reduction by ln 2); fast_tanhf has an
// absolute error below 1e-7, which is what GELU (0.5 x (1 + tanh)) needs.
#pragma once
#include <math.h>
#include <stdint.h>
#include <string.h>

static inline float fast_expf(float x) {
    // exp(x) = 2^n * exp(r), n = round(x / ln2), r = x - n ln2 in [-ln2/2, ln2/2].
    // Plain comparisons, not fminf/fmaxf: those are library calls (NaN rules)
    // that stop the loop from vectorizing.
    x = x < -87.33654f ? -87.33654f : x;           // keep 2^n a normal float
    x = x > 88.0f ? 88.0f : x;
    // Round to nearest by adding and subtracting 1.5 * 2^23 (no rintf call).
    float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = x - n * 0.693359375f;                // ln2 split in two parts so that
    r = r - n * -2.12194440e-4f;                   // n*hi is exact (Cody-Waite)
    float p = 1.9875691500e-4f;                    // Cephes expf minimax polynomial
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    // 2^n as a float bit pattern. A NaN x gives a NaN p (the answer) and a NaN n,
    // which no integer conversion may see: n = 0 then, and the shift is unsigned.
    n = n == n ? n : 0.0f;
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, sizeof scale);
    return p * scale;
}

static inline float fast_tanhf(float x) {
    // tanh(x) = 1 - 2 / (exp(2x) + 1): saturates cleanly to +-1 for large |x|.
    return 1.0f - 2.0f / (fast_expf(2.0f * x) + 1.0f);
}
