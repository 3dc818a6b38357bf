// mutate.h — damage to bytes, for the fuzz tests (tests/test_ckpt_fuzz.c): a
// growable byte buffer, and mutations of a region of it that a bad disk, a bad
// copy or a hostile file could make (flipped bits, bytes set to the grammar's
// special characters, tokens inserted, spans deleted, duplicated or cut off,
// numbers at every limit, strings replaced by names the readers know or must
// refuse). Every choice comes from an Rng: a failure reproduces from its seed.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "rng.h"

typedef struct { unsigned char *p; size_t n, cap; } Bytes;
void b_reserve(Bytes *b, size_t n);                               // room for n bytes
void b_set(Bytes *b, const void *src, size_t n);                  // b = src
void b_insert(Bytes *b, size_t at, const void *src, size_t k);
void b_erase(Bytes *b, size_t at, size_t k);
uint64_t le64(const unsigned char *p);  // a safetensors file's header length
void put_le64(unsigned char *p, uint64_t v);

typedef enum { M_FLIP, M_BYTE, M_INSERT, M_DELETE, M_CUT, M_DUPLICATE, M_NUMBER, M_STRING, M_KINDS } Mut;
extern const char *const MUT_NAME[M_KINDS];  // "bit_flips", ... for check names
// Numbers at and beyond every limit the readers enforce (int32, int64, uint64, a
// double's range), and the JSON grammar's edges.
extern const char *const MUTATE_NUMBERS[];
extern const int MUTATE_N_NUMBERS;

// A random position in [lo, hi) (hi > lo), or in [lo, hi] with `end`.
size_t mutate_pick(Rng *r, size_t lo, size_t hi, int end);
// Mutation m of b's bytes [lo, hi); returns the new hi. nums: the numbers that
// replace a run of digits (NULL: MUTATE_NUMBERS).
size_t mutate(Rng *r, Bytes *b, Mut m, size_t lo, size_t hi, const char *const *nums, int n_nums);
