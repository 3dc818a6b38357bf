// rng.h — deterministic random numbers: same seed, same numbers, every machine.
// splitmix64 for seeding, xoshiro256** for the stream; normals by Box-Muller
// in double precision. No libc rand(), no time-based seeds.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct { uint64_t s[4]; } Rng;

void rng_seed(Rng *r, uint64_t seed);
uint64_t rng_u64(Rng *r);
uint32_t rng_below(Rng *r, uint32_t n);   // uniform in [0, n)
double rng_uniform(Rng *r);               // uniform in [0, 1)
double rng_normal(Rng *r);                // standard normal
void rng_fill_normal(Rng *r, float *x, size_t n, float mean, float std);

#ifdef __cplusplus
}
#endif
