// json_fuzz.c — the JSON reader under fuzzing (part of test_json).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json_check.h"
#include "rng.h"

// ---------------------------------------------------------------------------------
// Fuzzing: mutants of the seeds parse (and write back to the same tree) or are
// rejected with a located message; nothing crashes or leaks (ASan, LSan).

static void mutate(Rng *r, char *buf, size_t *len, size_t cap) {
    static const char *const inserts[] = {
        "{", "}", "[", "]", "\"", ",", ":", "\\", "\\u", "\\ud83d", "\\udc00", "\\u0000", "-", "0",
        "e", ".", "1e999", "-0.0e-0", "18446744073709551616", "nan", "true", "null", " ", "\n",
        "\x01", "\xff", "\xc3\xa9", "{\"a\":1,\"a\":2}", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    };
    size_t n = *len, at = n ? rng_below(r, (uint32_t)n) : 0;
    char piece[4096];
    size_t k = 0;
    switch (rng_below(r, 9)) {
    case 0:  // any byte
        if (n) buf[at] = (char)rng_below(r, 256);
        return;
    case 1:  // one bit
        if (n) buf[at] ^= (char)(1u << rng_below(r, 8));
        return;
    case 2: {  // delete a span
        size_t d = 1 + rng_below(r, 8);
        if (at + d > n) d = n - at;
        memmove(buf + at, buf + at + d, n - at - d);
        *len = n - d;
        return;
    }
    case 3: *len = at; return;  // truncate
    case 4: {  // duplicate a span
        size_t from = n ? rng_below(r, (uint32_t)n) : 0;
        k = 1 + rng_below(r, 64);
        if (from + k > n) k = n - from;
        memcpy(piece, buf + from, k);
        break;
    }
    case 5: {  // a huge number
        k = (size_t)sprintf(piece, "%s", rng_below(r, 2) ? "-" : "");
        size_t digits = 20 + rng_below(r, 2000);
        for (size_t i = 0; i < digits; i++) piece[k++] = (char)('0' + (i ? rng_below(r, 10) : 1));
        if (rng_below(r, 2)) k += (size_t)sprintf(piece + k, "e%d", (int)rng_below(r, 800) - 400);
        break;
    }
    case 6: {  // deep nesting
        size_t levels = 30 + rng_below(r, 60);
        for (size_t i = 0; i < levels; i++)
            k += (size_t)sprintf(piece + k, rng_below(r, 2) ? "[" : "{\"k\":");
        for (size_t i = 0; i < levels && rng_below(r, 4); i++) piece[k++] = ']';
        break;
    }
    default:  // a JSON-ish token
        k = (size_t)sprintf(piece, "%s", inserts[rng_below(r, sizeof inserts / sizeof inserts[0])]);
        break;
    }
    if (n + k > cap) return;
    memmove(buf + at + k, buf + at, n - at);
    memcpy(buf + at, piece, k);
    *len = n + k;
}

void test_fuzz(TestState *ts) {
    enum { PER_SEED = 4000, CAP = 1 << 16 };
    Rng r;
    rng_seed(&r, 7);
    char *buf = xmalloc(CAP), err[512];
    int parsed = 0, rejected = 0, bad_msg = 0, bad_trip = 0;
    for (int s = 0; s < N_SEEDS; s++) {
        for (int t = 0; t < PER_SEED; t++) {
            size_t len = strlen(seed_text(s));
            memcpy(buf, seed_text(s), len);
            for (int m = 1 + (int)rng_below(&r, 4); m > 0; m--) mutate(&r, buf, &len, CAP);
            err[0] = '\0';
            Json *j = parse_exact(buf, len, err, sizeof err);
            if (!j) {
                rejected++;
                long off = err_offset(err);
                if (off < 0 || off > (long)len) {
                    if (bad_msg++ < 3)
                        printf("  seed %d mutant %d: bad message \"%s\"\n", s, t, err);
                }
                continue;
            }
            parsed++;
            // What was accepted writes back to text that parses to the same tree,
            // and writing that tree gives the same text again.
            JsonBuf a = {0}, b = {0};
            write_value(&a, j);
            Json *k = parse_exact(a.s, a.len, err, sizeof err);
            if (k) write_value(&b, k);
            if (!k || !same(j, k) || strcmp(a.s, b.s) != 0) {
                if (bad_trip++ < 3)
                    printf("  seed %d mutant %d: write-back differs: %s\n", s, t, k ? a.s : err);
            }
            json_free(k);
            json_free(j);
            jb_free(&a);
            jb_free(&b);
        }
    }
    free(buf);
    test_report(ts, bad_msg == 0, "json_fuzz_rejections_are_located",
                "%d mutants: %d parsed, %d rejected, %d without a located message",
                parsed + rejected, parsed, rejected, bad_msg);
    test_report(ts, parsed > 100 && bad_trip == 0, "json_fuzz_accepted_mutants_round_trip",
                "%d of %d parsed mutants differ after writing back", bad_trip, parsed);
}

