// json_check.h — what the JSON tests (test_json.c, json_fuzz.c) share: parsing a
// buffer of exactly the document's length (no NUL after it, so ASan sees a read
// past the end), the located rejection, writing a tree back, comparing trees, and
// the seed documents.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "harness.h"
#include "json.h"

Json *parse_exact(const char *text, size_t len, char *err, size_t errn);
Json *parse_str(const char *text, char *err, size_t errn);
// The byte offset a rejection names ("test.json: byte N (line ..."), or -1.
long err_offset(const char *err);
uint64_t bits(double x);
// The tree back to text: integers as integers, other numbers as "%.17g".
void write_value(JsonBuf *b, const Json *j);
// Equal trees: same shape, keys, strings, and numbers to the bit.
int same(const Json *a, const Json *b);

// A checkpoint manifest, and the seeds for the truncation and fuzz tests (seed 0
// is the manifest): top-level containers with nothing after them, so that every
// proper prefix is invalid.
extern const char *const MANIFEST;
extern const int N_SEEDS;
const char *seed_text(int i);

// Mutants of the seeds parse (and write back to the same tree) or are rejected
// with a located message (json_fuzz.c).
void test_fuzz(TestState *ts);
