// data.h — token streams for training: a synthetic corpus and byte-level text.
//
// Both are one array of tokens. Batches are cut from it deterministically by the
// step number, so the loader's whole state is one integer (saved in checkpoints)
// and a rank's rows are a fixed slice of the global batch:
//
//   global step s has world*B rows; rank r takes rows [r*B, (r+1)*B);
//   row i of the global batch starts at token ((s*world*B + i) * T) mod (n - T - 1).
//
// Hence N ranks with batch B see exactly the rows one process with batch N*B
// sees — the property stage 02's DDP equivalence test relies on.
#pragma once
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int *tokens;       // the corpus (host)
    size_t n;          // tokens in the corpus
    int vocab;         // tokens are in [0, vocab)
    int B, T;          // rows and columns per rank per step
    int rank, world;
    uint64_t step;     // next step to serve: the whole state
    char source[256];  // "synthetic(seed=1)" or the file path
} DataLoader;

// A synthetic language with learnable structure: each token is drawn from a
// small set of successors chosen by the previous two tokens (a sparse order-2
// Markov chain with skewed probabilities), so the uniform-guess loss ln(V) can
// fall to about 1.3 nats for a model that learns it. n_tokens of it, from seed.
void data_open_synthetic(DataLoader *d, int vocab, size_t n_tokens, uint64_t seed,
                         int B, int T, int rank, int world);
// Byte-level text: every byte of the file is a token (vocab 256). Dies with a
// message naming the path if it is missing, unreadable or shorter than T+2 bytes.
void data_open_text(DataLoader *d, const char *path, int B, int T, int rank, int world);
// Fills inputs and targets (B*T each, targets shifted by one) for this rank's
// rows of the current step, then advances to the next step.
void data_next(DataLoader *d, int *inputs, int *targets);
void data_close(DataLoader *d);
