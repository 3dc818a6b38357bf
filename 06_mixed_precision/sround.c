// sround.c — stochastic rounding from fp32 to bf16, and its random numbers.
//
// Round-to-nearest (RNE, f32_to_bf16) is the best rounding for one value, and the
// wrong one for a long sum of small updates. A weight w = 1.0 stored in bf16 has
// neighbours 1.0 and 1.0078125 (an ulp of 2^-7): an update of 1e-3 moves it to
// 1.001, which RNE rounds back to 1.0. A thousand such updates, which should add up
// to 1.0, leave w where it was: training stalls. Stochastic rounding (SR) rounds
// 1.001 up to 1.0078125 with probability 0.001/0.0078125 = 0.128 and down otherwise:
// each result is off by more than RNE's, but the expected value is exactly 1.001,
// so the errors cancel over many steps and the sum comes out right on average.
//
// The random numbers come from a counter-based hash (sround_bits), not from a
// stream: the number for element i is a pure function of (seed, i), so any thread
// can compute it, in any order, on any device, and get the same bits.
#include <string.h>

#include "precision.h"

uint16_t f32_to_bf16_stochastic(float f, uint32_t r16) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    // inf and NaN: nothing to round (f32_to_bf16 keeps inf, and keeps a NaN a NaN).
    if ((u & 0x7fffffffu) >= 0x7f800000u) return f32_to_bf16(f);
    // The standard trick: add r16 to the 16 bits bf16 drops, then truncate. With d
    // those bits, the sum carries into the kept half exactly when r16 >= 65536 - d:
    // with probability d / 65536, the fraction of the gap f has covered. Signs need
    // no care: bf16 is sign-magnitude, so the carry moves the magnitude up, away
    // from zero, for a negative f as for a positive one. No overflow of u: the
    // largest finite magnitude plus the sign bit plus r16 is below 2^32.
    uint16_t h = (uint16_t)((u + r16) >> 16);
    // The overflow edge: a carry out of the largest finite bf16 lands on inf. There,
    // take RNE's answer instead: the largest finite value, or inf only where RNE
    // itself overflows (|f| at or above 0x7f7f8000). An inf in the weights is not a
    // rounding error the next steps can average out.
    if ((h & 0x7fffu) == 0x7f80u) return f32_to_bf16(f);
    return h;
}

uint32_t sround_bits(uint64_t seed, uint64_t index) {
    // Number index of splitmix64's stream from seed (Steele, Lea and Flood, "Fast
    // splittable pseudorandom number generators", 2014; rng.c seeds with it), computed
    // directly: the generator's state after index + 1 steps is seed + (index + 1) *
    // 2^64/golden ratio, and its output is that state through the finalizer below,
    // two multiply-xorshift rounds that make every output bit depend on every input
    // bit. No walk along the stream: any element's number in O(1), on any thread.
    uint64_t z = seed + 0x9e3779b97f4a7c15ull * (index + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return (uint32_t)(z >> 48);  // the top 16 bits, the best mixed
}
