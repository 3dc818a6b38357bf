// exercises/sround.c — YOUR stochastic rounding to bf16.   make grade-6 PART=stochastic_rounding
//
// Read ../precision.h (what f32_to_bf16_stochastic must do, and why) and
// ../../common/dtype.c (f32_to_bf16: round to nearest even, the bit layout of bf16).
// Write f32_to_bf16_stochastic(f, r16): f rounded to one of the two bf16 values
// around it, up (away from zero) with probability equal to the fraction of the gap
// f has covered, so that the expected result is f. r16 is uniform in [0, 65536).
//
//   - bf16 is the top 16 bits of an fp32; the 16 bits it drops, as an integer d,
//     are that fraction in units of 1/65536; round up exactly when r16 >= 65536 - d
//     (add r16 to those bits and truncate: the carry is the rounding up), which is
//     what the GPU's twin does, so that both devices give the same bits;
//   - a value bf16 holds exactly (d = 0) must come back unchanged for every r16;
//   - inf and NaN come back as f32_to_bf16 gives them;
//   - where the carry would reach inf, return f32_to_bf16(f): the largest finite
//     value, or inf where RNE itself overflows (precision.h: the overflow edge).
// Read the bits of f with memcpy (as dtype.c does), not through a pointer cast.
//
// The tests (tests/test_precision.c, the mp.sround.* checks) count, for some f, how
// many of the 65536 values of r16 round up, measure the mean of 65536 roundings
// against f, and accumulate many tiny updates the way an optimizer does.
//
// sround_bits, the counter-based hash that makes r16, is given: it is not part of
// the exercise.
#include <string.h>

#include "precision.h"

uint16_t f32_to_bf16_stochastic(float f, uint32_t r16) {
    (void)r16;
    // TODO(exercise): stochastic rounding. Until then this truncates (always rounds
    // towards zero): a valid bf16, biased towards zero, which is what the tests see.
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return f32_to_bf16(f);  // keep NaN a NaN
    return (uint16_t)(u >> 16);
}

uint32_t sround_bits(uint64_t seed, uint64_t index) {
    // Number index of splitmix64's stream from seed, computed directly (precision.h).
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (index + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (uint32_t)(z >> 48);
}
