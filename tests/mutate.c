// mutate.c — damage to bytes, for the fuzz tests (tests/mutate.h).
#include "mutate.h"

#include <stdlib.h>
#include <string.h>

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

// ---------------------------------------------------------------- byte buffers

void b_reserve(Bytes *b, size_t n) {
    if (n <= b->cap) return;
    b->cap = n * 2 + 16;
    b->p = realloc(b->p, b->cap);
    if (!b->p) exit(1);
}
void b_set(Bytes *b, const void *src, size_t n) {
    b_reserve(b, n);
    memcpy(b->p, src, n);
    b->n = n;
}
void b_insert(Bytes *b, size_t at, const void *src, size_t k) {
    b_reserve(b, b->n + k);
    memmove(b->p + at + k, b->p + at, b->n - at);
    memcpy(b->p + at, src, k);
    b->n += k;
}
void b_erase(Bytes *b, size_t at, size_t k) {
    memmove(b->p + at, b->p + at + k, b->n - at - k);
    b->n -= k;
}
uint64_t le64(const unsigned char *p) {  // a safetensors file's header length
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}
void put_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

// ---------------------------------------------------------------- mutations

const char *const MUT_NAME[M_KINDS] = {"bit_flips", "byte_sets", "insertions", "deletions",
                                        "truncations", "duplicated_spans", "absurd_numbers",
                                        "replaced_strings"};

static const char SPECIAL[] = "{}[]\",:\\/-+.eE0123456789 \t\nutfnal\x01\x7f\x80\xc3\xff";
static const char *TOKENS[] = {"{", "}", "[", "]", ",", ":", "\"", "\\", "\\u", "\\ud800", "\\u0000",
                               "null", "true", "-", "1e400", "\"\"", "{}", "[]", "[[[[[[[[", "\xff\xfe"};
const char *const MUTATE_NUMBERS[] = {"0", "1", "-1", "1.5", "1e308", "1e400", "-0", "00", "2147483647",
                                "2147483648", "4294967295", "4294967296", "1048577", "16777217",
                                "9223372036854775807", "9223372036854775808", "18446744073709551615",
                                "18446744073709551616", "999999999999999999999999999999"};
const int MUTATE_N_NUMBERS = (int)(sizeof MUTATE_NUMBERS / sizeof MUTATE_NUMBERS[0]);
static const char *STRINGS[] = {"", "params", "master", "momentum", "wte", "h.9.attn.c_attn.weight",
                                "F32", "BF16", "F16", "I32", "F64", "F8_E4M3", "F8_E5M2", "C64",
                                "f32", "../x", "a/b", "..", "step", "__metadata__", "dtype", "shape",
                                "data_offsets", "course-ckpt-1", "0x00beef", "\\u0000", "\\ud800",
                                // longer than any name the readers keep (95 bytes)
                                ("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                                 "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")};

size_t mutate_pick(Rng *r, size_t lo, size_t hi, int end) {
    size_t span = hi - lo + (end ? 1 : 0);
    return lo + (span ? rng_below(r, (uint32_t)span) : 0);
}

// Where a run of digits (digits) or a quoted span (!digits) starts.
static int run_starts(const Bytes *b, size_t i, size_t lo, int digits) {
    if (!digits) return b->p[i] == '"';
    return b->p[i] >= '0' && b->p[i] <= '9' && (i == lo || b->p[i - 1] < '0' || b->p[i - 1] > '9');
}

size_t mutate(Rng *r, Bytes *b, Mut m, size_t lo, size_t hi, const char *const *nums, int n_nums) {
    if (!nums) nums = MUTATE_NUMBERS, n_nums = MUTATE_N_NUMBERS;
    if (hi <= lo) m = M_INSERT;
    switch (m) {
    case M_FLIP:
        for (int k = 1 + (int)rng_below(r, 4); k > 0; k--)
            b->p[mutate_pick(r, lo, hi, 0)] ^= (unsigned char)(1u << rng_below(r, 8));
        return hi;
    case M_BYTE:
        b->p[mutate_pick(r, lo, hi, 0)] = (unsigned char)SPECIAL[rng_below(r, sizeof SPECIAL - 1)];
        return hi;
    case M_INSERT: {
        const char *t = TOKENS[rng_below(r, COUNT(TOKENS))];
        b_insert(b, mutate_pick(r, lo, hi, 1), t, strlen(t));
        return hi + strlen(t);
    }
    case M_DELETE: {
        size_t at = mutate_pick(r, lo, hi, 0), k = 1 + rng_below(r, 32);
        if (k > hi - at) k = hi - at;
        b_erase(b, at, k);
        return hi - k;
    }
    case M_CUT: {  // everything of the region from a point on
        size_t at = mutate_pick(r, lo, hi, 0);
        return b_erase(b, at, hi - at), at;
    }
    case M_DUPLICATE: {
        unsigned char copy[200];
        size_t a = mutate_pick(r, lo, hi, 0), k = 1 + rng_below(r, sizeof copy);
        if (k > hi - a) k = hi - a;
        memcpy(copy, b->p + a, k);
        b_insert(b, mutate_pick(r, lo, hi, 1), copy, k);
        return hi + k;
    }
    case M_NUMBER:
    case M_STRING: {
        // The n-th run of digits (or the n-th quoted span), for a random n.
        int want = m == M_NUMBER, runs = 0;
        for (size_t i = lo; i < hi; i++) runs += run_starts(b, i, lo, want);
        if (runs == 0) return mutate(r, b, M_FLIP, lo, hi, nums, n_nums);
        int target = (int)rng_below(r, (uint32_t)runs);
        for (size_t i = lo; i < hi; i++) {
            if (!run_starts(b, i, lo, want) || target-- > 0) continue;
            size_t a = want ? i : i + 1, e = a;
            while (e < hi && (want ? (b->p[e] >= '0' && b->p[e] <= '9') : b->p[e] != '"')) e++;
            const char *t = want ? nums[rng_below(r, (uint32_t)n_nums)]
                                 : STRINGS[rng_below(r, COUNT(STRINGS))];
            b_erase(b, a, e - a);
            b_insert(b, a, t, strlen(t));
            return hi - (e - a) + strlen(t);
        }
        return hi;
    }
    default: return hi;
    }
}

