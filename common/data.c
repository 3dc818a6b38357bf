// data.c — deterministic token streams (see data.h for the batching rule).
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "data.h"
#include "rng.h"

static void data_setup(DataLoader *d, int B, int T, int rank, int world) {
    CHECK(B >= 1 && T >= 1, "data: batch %d x %d must be positive", B, T);
    CHECK(world >= 1 && rank >= 0 && rank < world, "data: rank %d of %d", rank, world);
    CHECK(d->n >= (size_t)T + 2, "data: %s has %zu tokens, fewer than seq+2 = %d", d->source, d->n,
          T + 2);
    d->B = B; d->T = T; d->rank = rank; d->world = world; d->step = 0;
}

// The synthetic language. Every token a has four successors succ(a, 0..3). Which
// successor is likely depends on the token before a: with probabilities
// (0.6, 0.25, 0.1, 0.05) rotated by (prev2 mod 4). A model that sees only one
// token back can at best guess among four (about 1.3 nats); one that attends two
// back reaches the chain's entropy, about 1.0 nats. ln(V) is the uniform guess.
static uint32_t mix32(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
    return (uint32_t)(x ^ (x >> 33));
}

void data_open_synthetic(DataLoader *d, int vocab, size_t n_tokens, uint64_t seed, int B, int T,
                         int rank, int world) {
    memset(d, 0, sizeof *d);
    CHECK(vocab >= 4, "data: the synthetic corpus needs a vocabulary of at least 4 (got %d)", vocab);
    d->tokens = malloc(n_tokens * sizeof(int));
    CHECK(d->tokens, "data: out of host memory for %zu tokens", n_tokens);
    d->n = n_tokens;
    d->vocab = vocab;
    snprintf(d->source, sizeof d->source, "synthetic(vocab=%d, seed=%llu)", vocab,
             (unsigned long long)seed);
    static const double cum[4] = {0.6, 0.85, 0.95, 1.0};
    Rng rng;
    rng_seed(&rng, seed);
    int prev2 = 0, prev1 = 1 % vocab;
    for (size_t i = 0; i < n_tokens; i++) {
        double u = rng_uniform(&rng);
        int rank4 = 0;
        while (rank4 < 3 && u >= cum[rank4]) rank4++;
        int slot = (rank4 + prev2) & 3;  // rotate which successor is the likely one
        int next = (int)(mix32(seed * 0x9e3779b97f4a7c15ULL + (uint64_t)prev1 * 4 + slot) % vocab);
        d->tokens[i] = next;
        prev2 = prev1;
        prev1 = next;
    }
    data_setup(d, B, T, rank, world);
}

void data_open_text(DataLoader *d, const char *path, int B, int T, int rank, int world) {
    memset(d, 0, sizeof *d);
    FILE *f = fopen(path, "rb");
    CHECK(f, "--data %s: cannot open (%s)", path, strerror(errno));
    struct stat st;
    CHECK(fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode), "--data %s: not a regular file", path);
    CHECK(fseek(f, 0, SEEK_END) == 0, "--data %s: cannot seek", path);
    long len = ftell(f);
    CHECK(len >= 0, "--data %s: cannot tell its size", path);
    rewind(f);
    unsigned char *bytes = malloc((size_t)len + 1);
    CHECK(bytes, "--data %s: out of host memory for %ld bytes", path, len);
    CHECK(fread(bytes, 1, (size_t)len, f) == (size_t)len, "--data %s: short read", path);
    fclose(f);
    d->tokens = malloc(((size_t)len + 1) * sizeof(int));
    CHECK(d->tokens, "--data %s: out of host memory", path);
    for (long i = 0; i < len; i++) d->tokens[i] = bytes[i];
    free(bytes);
    d->n = (size_t)len;
    d->vocab = 256;
    snprintf(d->source, sizeof d->source, "%s", path);
    CHECK(d->n >= (size_t)T + 2, "--data %s: %zu bytes is too short for --seq %d (need %d)", path,
          d->n, T, T + 2);
    data_setup(d, B, T, rank, world);
}

void data_next(DataLoader *d, int *inputs, int *targets) {
    size_t span = d->n - (size_t)d->T - 1;  // valid starts: [0, span)
    for (int i = 0; i < d->B; i++) {
        uint64_t row = d->step * (uint64_t)d->world * d->B + (uint64_t)d->rank * d->B + i;
        size_t start = (size_t)((row * (uint64_t)d->T) % span);
        for (int t = 0; t < d->T; t++) {
            inputs[i * d->T + t] = d->tokens[start + t];
            targets[i * d->T + t] = d->tokens[start + t + 1];
        }
    }
    d->step++;
}

void data_close(DataLoader *d) {
    free(d->tokens);
    d->tokens = NULL;
}
