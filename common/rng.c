// rng.c — deterministic random numbers.
//
// Equivalence tests in every stage compare a distributed run against a single
// process, bit for bit or within a tolerance. That only works if "initialize with
// seed 1337" means the same numbers on every machine, compiler and libc. libc's
// rand() promises nothing of the kind, so we carry our own generator:
//
//   xoshiro256** (Blackman & Vigna, 2018): 256 bits of state, period 2^256 - 1,
//   passes BigCrush, four xors/shifts/rotates and two multiplies per output.
//   splitmix64 expands a 64-bit seed into the 256-bit state, as its authors
//   recommend: nearby seeds (0, 1, 2, ...) give unrelated states, and the state is
//   never all zeros (the one state xoshiro cannot leave).
//
// Reference: https://prng.di.unimi.it/ (xoshiro256starstar.c, splitmix64.c).
#include <math.h>
#include <stddef.h>

#include "check.h"
#include "rng.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void rng_seed(Rng *r, uint64_t seed) {
    uint64_t x = seed;
    // splitmix64 is a bijection of its counter, so four consecutive outputs cannot
    // all be zero: the state is always valid.
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

uint64_t rng_u64(Rng *r) {
    uint64_t *s = r->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

// Uniform integer in [0, n) without modulo bias (Lemire, "Fast Random Integer
// Generation in an Interval", 2019). x * n / 2^32 maps 32 random bits onto [0, n);
// because 2^32 is not a multiple of n, some results would get one more x than
// others. The low 32 bits of the product tell whether x fell into that uneven
// leftover (2^32 mod n values); those draws are rejected and redrawn. The modulo is
// computed only in the rare case where a rejection is possible at all.
uint32_t rng_below(Rng *r, uint32_t n) {
    CHECK(n > 0, "rng_below: the range [0, 0) is empty");
    uint64_t m = (uint64_t)(uint32_t)(rng_u64(r) >> 32) * n;
    uint32_t low = (uint32_t)m;
    if (low < n) {
        uint32_t threshold = (uint32_t)(-n) % n;  // 2^32 mod n
        while (low < threshold) {
            m = (uint64_t)(uint32_t)(rng_u64(r) >> 32) * n;
            low = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

// The top 53 bits (the high bits of xoshiro** are its best) times 2^-53: every
// double k * 2^-53 for k in [0, 2^53) equally likely; 1.0 is never returned.
double rng_uniform(Rng *r) { return (double)(rng_u64(r) >> 11) * 0x1.0p-53; }

// Box-Muller: for u1, u2 uniform, sqrt(-2 ln u1) * cos(2 pi u2) is standard normal.
// The transform makes two normals per pair (the other uses sin); we return one and
// drop the other, so the Rng stays plain state with nothing cached, and the n-th
// normal of a stream depends only on the seed and n. u1 = 1 - uniform lies in
// (0, 1], so log(u1) is finite.
double rng_normal(Rng *r) {
    const double two_pi = 6.283185307179586;  // 2 pi to double precision; M_PI is not C11
    double u1 = 1.0 - rng_uniform(r);
    double u2 = rng_uniform(r);
    return sqrt(-2.0 * log(u1)) * cos(two_pi * u2);
}

void rng_fill_normal(Rng *r, float *x, size_t n, float mean, float std) {
    for (size_t i = 0; i < n; i++) x[i] = (float)((double)mean + (double)std * rng_normal(r));
}
