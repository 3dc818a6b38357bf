// test_json.c — the JSON reader accepts exactly JSON and reads back what the
// writer wrote (integers and doubles bit for bit); every malformed document —
// truncated, mutated, hostile — is rejected with a message naming the byte,
// never a crash or an over-read (every parse reads a buffer of exactly the
// document's length, with no NUL after it, so ASan sees a read past the end).
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "json_check.h"
#include "rng.h"

// ---------------------------------------------------------------------------------
// Well-formed documents

static void test_wellformed(TestState *ts) {
    char err[512];
    Json *j = parse_str(
        " {\"a\" : {\"b\":[1,[2,{\"c\":null}],true,false]},\n\t\"s\":\"x\",\r\n"
        "\"e\":{},\"f\":[]} \n",
        err, sizeof err);
    const Json *b = j ? json_get(json_get(j, "a"), "b") : NULL;
    int ok = j && j->type == JSON_OBJECT && j->n == 4 && b && b->type == JSON_ARRAY && b->n == 4 &&
             b->items[0].is_u64 && b->items[0].u64 == 1 && b->items[1].n == 2 &&
             json_get(&b->items[1].items[1], "c")->type == JSON_NULL &&
             b->items[2].type == JSON_BOOL && b->items[2].boolean == 1 &&
             b->items[3].boolean == 0 && strcmp(json_get(j, "s")->str, "x") == 0 &&
             json_get(j, "e")->type == JSON_OBJECT && json_get(j, "e")->n == 0 &&
             json_get(j, "f")->type == JSON_ARRAY && json_get(j, "f")->n == 0 &&
             !json_get(j, "missing") && !json_get(b, "a");
    test_report(ts, ok, "json_nested_objects_and_arrays", "%s", j ? "structure as written" : err);
    json_free(j);

    j = parse_str(
        "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00e9\\u20AC\\ud83d\\ude00\\uD834\\uDD1E\\u007f\"",
        err, sizeof err);
    const char *want = "\"\\/\b\f\n\r\tA\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\xf0\x9d\x84\x9e\x7f";
    test_report(ts, j && j->type == JSON_STRING && strcmp(j->str, want) == 0,
                "json_every_escape_and_surrogate_pairs", "%s",
                j ? "decoded to the UTF-8 expected" : err);
    json_free(j);

    j = parse_str(
        "[0,18446744073709551615,18446744073709551616,9007199254740993,-0,1.0,1e2,-5,"
        "99999999999999999999999]",
        err, sizeof err);
    ok = j && j->n == 9 && j->items[0].is_u64 && j->items[0].u64 == 0 && j->items[1].is_u64 &&
         j->items[1].u64 == UINT64_MAX && j->items[1].num == 18446744073709551616.0 &&
         !j->items[2].is_u64 && j->items[2].type == JSON_NUMBER &&
         j->items[2].num == 18446744073709551616.0 && j->items[3].is_u64 &&
         j->items[3].u64 == 9007199254740993ull &&  // 2^53 + 1: no double has it
         !j->items[4].is_u64 && signbit(j->items[4].num) && !j->items[5].is_u64 &&
         j->items[5].num == 1.0 && !j->items[6].is_u64 && j->items[6].num == 100.0 &&
         !j->items[7].is_u64 && j->items[7].num == -5.0 && !j->items[8].is_u64 &&
         j->items[8].num == 1e23;
    test_report(ts, ok, "json_u64_limits", "%s",
                j ? "2^64-1 exact and is_u64; 2^64, -0, 1.0, 1e2 not" : err);
    json_free(j);

    static const double nums[] = {-12.5e-3, 3.25, -0.0, 1E+2, 2.5E-1, 0.1, -1.7976931348623157e308,
                                  2.2250738585072014e-308, 4.9406564584124654e-324,
                                  0.0};  // 1e-400 underflows to zero
    j = parse_str(
        "[-12.5e-3, 3.25, -0.0, 1E+2, 2.5E-1, 0.1, -1.7976931348623157e308, "
        "2.2250738585072014e-308, 4.9406564584124654e-324, 1e-400]",
        err, sizeof err);
    int bad = j ? 0 : 1;
    for (int i = 0; j && i < 10; i++)
        bad += j->items[i].is_u64 || bits(j->items[i].num) != bits(nums[i]);
    test_report(ts, bad == 0, "json_negative_and_fractional_numbers", "%d of 10 differ%s%s", bad,
                j ? "" : ": ", j ? "" : err);
    json_free(j);

    // "%.17g" is enough digits for every double; strtod must round to the same bits.
    Rng r;
    rng_seed(&r, 20261124);
    enum { ND = 600 };
    double d[ND];
    JsonBuf w = {0};
    jb_printf(&w, "[");
    for (int i = 0; i < ND; i++) {
        do {
            uint64_t u = rng_u64(&r);
            if (i % 3 == 0) memcpy(&d[i], &u, sizeof d[i]);  // any bit pattern
            else if (i % 3 == 1) d[i] = rng_normal(&r) * pow(10, (int)rng_below(&r, 40) - 20);
            else d[i] = (double)(u >> rng_below(&r, 64)) * (i % 2 ? 1 : -1);  // integral values
        } while (!isfinite(d[i]));
        if (i) jb_printf(&w, ",");
        jb_double(&w, d[i]);
    }
    jb_printf(&w, "]");
    j = parse_exact(w.s, w.len, err, sizeof err);
    bad = j && j->n == ND ? 0 : ND;
    for (int i = 0; !bad && i < ND; i++) bad += bits(j->items[i].num) != bits(d[i]);
    test_report(ts, bad == 0, "json_double_17g_roundtrip_exact",
                "%d of %d random doubles differ in bits", bad, ND);
    json_free(j);
    jb_free(&w);

    static const char *const small[] = {"{}",   "[]",    " \t\r\n[ ]\n", "[{},[],{\"\":[]}]",
                                        "true", "false", "null",         "0",
                                        "-1.5", "\"\"",  " \"s\" "};
    bad = 0;
    for (int i = 0; i < (int)(sizeof small / sizeof small[0]); i++) {
        j = parse_str(small[i], err, sizeof err);
        if (!j) printf("  %s: %s\n", small[i], err);
        bad += !j;
        json_free(j);
    }
    test_report(ts, bad == 0, "json_empty_containers_scalars_whitespace", "%d of %d rejected", bad,
                (int)(sizeof small / sizeof small[0]));
}

static void test_getters(TestState *ts) {
    char err[512] = "";
    Json *m = parse_str(MANIFEST, err, sizeof err);
    uint64_t step = 0, dp = 0, bytes = 0;
    double scale = 0;
    const char *fmt = NULL;
    const char *w = "test.json";
    const Json *files = json_get_typed(m, "files", JSON_ARRAY, w, err, sizeof err);
    int ok = files && files->n == 1 && json_get_u64(m, "step", w, &step, err, sizeof err) == 0 &&
             json_get_u64(json_get(m, "world"), "dp", w, &dp, err, sizeof err) == 0 &&
             json_get_string(m, "format", w, &fmt, err, sizeof err) == 0 &&
             json_get_double(json_get(m, "scaler"), "scale", w, &scale, err, sizeof err) == 0 &&
             json_get_u64(&files->items[0], "bytes", w, &bytes, err, sizeof err) == 0;
    ok = ok && step == 1200 && dp == 2 && strcmp(fmt, "course-ckpt-1") == 0 && scale == 65536.0 &&
         bytes == 123456;
    test_report(ts, ok, "json_getters_read_the_manifest", "%s",
                ok ? "step 1200, dp 2, scale 65536" : err);

    struct {
        int rc;
        const char *want;
    } c[6];
    c[0].rc = json_get_u64(m, "nope", w, &step, err, sizeof err);
    c[0].want = strstr(err, "test.json: \"nope\" is missing") ? err : NULL;
    c[1].rc = json_get_u64(m, "format", w, &step, err, sizeof err);
    c[1].want = strstr(err, "test.json: \"format\" is not a non-negative integer") ? err : NULL;
    Json *neg = parse_str("{\"step\":-3,\"big\":18446744073709551616,\"frac\":1.5,\"s\":\"x\"}",
                          err, sizeof err);
    c[2].rc = json_get_u64(neg, "step", w, &step, err, sizeof err) |
              json_get_u64(neg, "big", w, &step, err, sizeof err) |
              json_get_u64(neg, "frac", w, &step, err, sizeof err);
    c[2].want = strstr(err, "\"frac\" is not a non-negative integer") ? err : NULL;
    c[3].rc = json_get_typed(m, "world", JSON_ARRAY, w, err, sizeof err) ? 0 : -1;
    c[3].want = strstr(err, "\"world\" is an object, not an array") ? err : NULL;
    c[4].rc = json_get_double(neg, "s", w, &scale, err, sizeof err) |
              json_get_string(neg, "step", w, &fmt, err, sizeof err);
    c[4].want = strstr(err, "\"step\" is a number, not a string") ? err : NULL;
    c[5].rc = json_get_u64(files, "bytes", w, &step, err, sizeof err);
    c[5].want = strstr(err, "\"bytes\" cannot be looked up") ? err : NULL;
    int bad = 0;
    for (int i = 0; i < 6; i++) {
        if (c[i].rc != -1 || !c[i].want) printf("  case %d: rc %d, \"%s\"\n", i, c[i].rc, err);
        bad += c[i].rc != -1 || !c[i].want;
    }
    test_report(ts, bad == 0, "json_getters_name_the_key_and_fault",
                "%d of 6 cases wrong; last: \"%s\"", bad, err);
    json_free(neg);
    json_free(m);
}

// ---------------------------------------------------------------------------------
// Malformed documents

typedef struct {
    const char *name, *doc;
    size_t len;  // 0: strlen(doc)
    long at;     // the byte the message must name
    const char *fault;
} Bad;

static int check_bad(TestState *ts, const Bad *c, int report) {
    char err[512] = "";
    size_t len = c->len ? c->len : strlen(c->doc);
    Json *j = parse_exact(c->doc, len, err, sizeof err);
    int ok = !j && err_offset(err) == c->at && strstr(err, c->fault);
    if (report || !ok)
        test_report(ts, ok, c->name, "\"%s\" (want byte %ld, \"%s\")", err, c->at, c->fault);
    json_free(j);
    return ok;
}

static void test_malformed(TestState *ts) {
    static const Bad cases[] = {
        {"json_rejects_trailing_garbage", "{\"a\":1} x", 0, 8, "unexpected 'x' after the value"},
        {"json_rejects_two_values", "1 2", 0, 2, "after the value"},
        {"json_rejects_unknown_escape", "[\"\\q\"]", 0, 2, "unknown escape"},
        {"json_rejects_hex_escape", "\"\\x41\"", 0, 1, "unknown escape"},
        {"json_rejects_bad_hex_digit", "\"\\u12G4\"", 0, 5, "bad hex digit 'G'"},
        {"json_rejects_short_u_escape", "\"\\u12\"", 0, 5, "truncated \\u escape"},
        {"json_rejects_lone_high_surrogate", "\"\\ud800\"", 0, 1, "lone high surrogate"},
        {"json_rejects_high_surrogate_then_char", "\"\\ud800x\"", 0, 1, "lone high surrogate"},
        {"json_rejects_high_surrogate_then_non_low", "\"\\ud800\\u0041\"", 0, 1,
         "lone high surrogate"},
        {"json_rejects_lone_low_surrogate", "\"\\udc00\"", 0, 1, "lone low surrogate"},
        {"json_rejects_u0000", "\"a\\u0000b\"", 0, 2, "\\u0000 is not allowed"},
        {"json_rejects_control_char", "\"a\x01z\"", 0, 2, "control character 0x01"},
        {"json_rejects_raw_newline", "[\"a\nb\"]", 0, 3, "control character 0x0a"},
        {"json_rejects_raw_tab", "\"\t\"", 0, 1, "control character 0x09"},
        {"json_rejects_nul_in_string", "\"a\0b\"", 5, 2, "control character 0x00"},
        {"json_rejects_nul_outside_string", "[1,\0]", 5, 3, "expected a value, found byte 0x00"},
        {"json_rejects_leading_zero", "01", 0, 0, "leading zero"},
        {"json_rejects_leading_zero_negative", "[-012]", 0, 2, "leading zero"},
        {"json_rejects_double_zero", "{\"a\":00}", 0, 5, "leading zero"},
        {"json_rejects_duplicate_key", "{\"a\":1,\"b\":2,\"a\":3}", 0, 13, "duplicate key \"a\""},
        {"json_rejects_duplicate_key_nested", "{\"x\":{\"k\":1,\"k\":[]}}", 0, 12,
         "duplicate key \"k\""},
        {"json_rejects_NaN", "NaN", 0, 0, "NaN and Infinity are not JSON numbers"},
        {"json_rejects_nan_lowercase", "[nan]", 0, 1, "NaN and Infinity"},
        {"json_rejects_minus_nan", "[1,-nan]", 0, 3, "NaN and Infinity"},
        {"json_rejects_infinity", "{\"x\":Infinity}", 0, 5, "NaN and Infinity"},
        {"json_rejects_minus_inf", "-inf", 0, 0, "NaN and Infinity"},
        {"json_rejects_unterminated_string", "[\"abc", 0, 1, "unterminated string"},
        {"json_rejects_escaped_last_quote", "\"abc\\\"", 0, 0, "unterminated string"},
        {"json_rejects_missing_colon", "{\"a\" 1}", 0, 5, "expected ':' after a key in an object"},
        {"json_rejects_missing_comma_array", "[1 2]", 0, 3, "expected ',' or ']' in an array"},
        {"json_rejects_missing_comma_object", "{\"a\":1 \"b\":2}", 0, 7,
         "expected ',' or '}' in an object"},
        {"json_rejects_trailing_comma_array", "[1,]", 0, 3, "expected a value, found ']'"},
        {"json_rejects_trailing_comma_object", "{\"a\":1,}", 0, 7, "expected a string key"},
        {"json_rejects_unquoted_key", "{a:1}", 0, 1, "expected a string key"},
        {"json_rejects_single_quotes", "['a']", 0, 1, "expected a value, found '''"},
        {"json_rejects_hex_number", "0x10", 0, 0, "malformed number"},
        {"json_rejects_plus_sign", "+1", 0, 0, "expected a value, found '+'"},
        {"json_rejects_bare_fraction", ".5", 0, 0, "expected a value"},
        {"json_rejects_empty_fraction", "[1.]", 0, 3, "expected a digit after the decimal point"},
        {"json_rejects_empty_exponent", "1e", 0, 2, "expected a digit in the exponent"},
        {"json_rejects_sign_only_exponent", "1e+", 0, 3, "expected a digit in the exponent"},
        {"json_rejects_two_points", "1.2.3", 0, 0, "malformed number"},
        {"json_rejects_lone_minus", "-", 0, 1, "expected a digit after '-'"},
        {"json_rejects_out_of_range", "[1e400]", 0, 1, "beyond the range of a double"},
        {"json_rejects_empty_input", "", 0, 0,
         "expected a value (the input ends here: truncated?)"},
        {"json_rejects_whitespace_only", "  \n ", 0, 4, "expected a value"},
        {"json_rejects_bad_literal", "[trux]", 0, 1, "invalid literal (expected true)"},
        {"json_rejects_truncated_literal", "nul", 0, 0, "invalid literal (expected null)"},
        {"json_rejects_truncated_object", "{\"a\":1", 0, 6,
         "expected ',' or '}' in an object (the input ends here: truncated?)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_bad(ts, &cases[i], 1);

    // The message in full, with line and column.
    char err[512];
    Json *j = parse_str("{\n  \"a\": 1,\n  \"b\" 2\n}", err, sizeof err);
    test_report(ts,
                !j && strcmp(err,
                             "test.json: byte 18 (line 3, column 7): expected ':' after a "
                             "key in an object") == 0,
                "json_error_names_line_and_column", "\"%s\"", err);
    json_free(j);

    // Depth: 64 nested containers parse, 65 do not, and a million are refused at 65.
    enum { DEEP = 1000000 };
    char *deep = xmalloc(2 * DEEP + 8);
    for (int levels = 64; levels <= 65; levels++) {
        memset(deep, '[', (size_t)levels);
        memset(deep + levels, ']', (size_t)levels);
        Bad c = {"json_rejects_depth_65", deep, 2 * (size_t)levels, 64,
                 "nesting deeper than 64 levels"};
        if (levels == 65) {
            check_bad(ts, &c, 1);
        } else {
            j = parse_exact(deep, 2 * (size_t)levels, err, sizeof err);
            test_report(ts, j != NULL, "json_accepts_depth_64", "%s", j ? "parsed" : err);
            json_free(j);
        }
    }
    size_t n = 0;
    for (int i = 0; i < 65; i++) n += (size_t)sprintf(deep + n, "{\"k\":");
    Bad c = {"json_rejects_object_depth_65", deep, n, n - 5, "nesting deeper than 64 levels"};
    check_bad(ts, &c, 1);
    memset(deep, '[', DEEP);
    c = (Bad){"json_rejects_a_million_open_brackets", deep, DEEP, 64, "nesting deeper than 64"};
    check_bad(ts, &c, 1);
    free(deep);

    // Every proper prefix of every seed: a truncated file is always an error.
    for (int s = 0; s < N_SEEDS; s++) {
        const char *doc = seed_text(s);
        size_t len = strlen(doc);
        int bad = 0;
        j = parse_exact(doc, len, err, sizeof err);
        if (!j) printf("  seed %d does not parse: %s\n", s, err);
        bad += !j;
        json_free(j);
        for (size_t k = 0; k < len; k++) {
            j = parse_exact(doc, k, err, sizeof err);
            long off = err_offset(err);
            if (j || off < 0 || off > (long)k) {
                if (bad < 3) printf("  prefix of %zu bytes: %s\n", k, j ? "parsed" : err);
                bad++;
            }
            json_free(j);
        }
        char name[64];
        snprintf(name, sizeof name, "json_rejects_every_truncation_%d", s);
        test_report(ts, bad == 0, name,
                    "%d of %zu prefixes wrong (parsed, or no offset within them)", bad, len);
    }
}

// ---------------------------------------------------------------------------------
// Hostile sizes: linear time, no quadratic blow-ups

static void test_hostile(TestState *ts) {
    enum { NK = 100000 };
    char err[512];
    JsonBuf b = {0};
    jb_printf(&b, "{");
    for (int i = 0; i < NK; i++) jb_printf(&b, "%s\"key%d\":%d", i ? "," : "", (i * 7919) % NK, i);
    jb_printf(&b, "}");
    Json *j = parse_exact(b.s, b.len, err, sizeof err);
    uint64_t v = 0;
    int ok = j && j->n == NK && json_get_u64(j, "key7919", "test.json", &v, err, sizeof err) == 0 &&
             v == 1;
    test_report(ts, ok, "json_parses_100k_keys", "%s",
                ok ? "one object, sorted for duplicates" : err);
    json_free(j);
    size_t at = b.len - 1;
    b.len--;  // drop the '}' and repeat a key from the middle
    jb_printf(&b, ",\"key%d\":0}", (50000 * 7919) % NK);
    Bad c = {"json_rejects_duplicate_among_100k_keys", b.s, b.len, (long)at + 1, "duplicate key"};
    check_bad(ts, &c, 1);
    jb_free(&b);

    // 650 KB of escapes in one string; 100000-digit numbers (0.00...01 underflows
    // to zero, 100...0e-100000 is exactly 1); 200000 values in one array.
    jb_printf(&b, "[\"");
    for (int i = 0; i < 1 << 15; i++) jb_printf(&b, "\\n\\u00e9\\ud83d\\ude00");
    jb_printf(&b, "\",0.%0100000d,1%0100000de-100000", 1, 0);
    for (int i = 0; i < 200000; i++) jb_printf(&b, ",%d", i & 1);
    jb_printf(&b, "]");
    j = parse_exact(b.s, b.len, err, sizeof err);
    ok = j && j->n == 200003 && strlen(j->items[0].str) == (size_t)(1 << 15) * 7 &&
         j->items[1].num == 0.0 && j->items[2].num == 1.0 && !j->items[2].is_u64;
    test_report(ts, ok, "json_parses_huge_strings_numbers_arrays", "%s (%zu bytes)",
                ok ? "a string of 2^15 escape runs, 100000-digit numbers, 200000 values" : err,
                b.len);
    json_free(j);
    jb_free(&b);
}

// ---------------------------------------------------------------------------------
// Writer

static void child_write_nan(void *arg) {
    (void)arg;
    JsonBuf b = {0};
    jb_double(&b, NAN);
    printf("wrote %s\n", b.s);
}

static void test_writer(TestState *ts) {
    char err[512];
    JsonBuf b = {0};
    jb_string(&b, "a\"b\\c\n\x01/\x7f\xc3\xa9");
    const char *want = "\"a\\\"b\\\\c\\u000a\\u0001/\x7f\xc3\xa9\"";
    test_report(ts, strcmp(b.s, want) == 0 && b.len == strlen(b.s), "jb_string_escapes", "%s", b.s);
    jb_free(&b);

    // Every byte but NUL, alone and between letters; then all of them in one string.
    int bad = 0, raw_ctrl = 0;
    char all[256];
    for (int i = 1; i < 256; i++) all[i - 1] = (char)i;
    all[255] = '\0';
    for (int i = 0; i <= 510; i++) {
        char s[4];
        if (i < 510) snprintf(s, sizeof s, i % 2 ? "a%cz" : "%c", 1 + i / 2);
        const char *in = i < 510 ? s : all;
        jb_string(&b, in);
        for (size_t k = 0; k < b.len; k++) raw_ctrl += (unsigned char)b.s[k] < 0x20;
        Json *j = parse_exact(b.s, b.len, err, sizeof err);
        if (!j || j->type != JSON_STRING || strcmp(j->str, in) != 0) {
            if (bad++ < 3) printf("  string %d: %s\n", i, j ? "differs" : err);
        }
        json_free(j);
        jb_free(&b);
    }
    test_report(ts, bad == 0 && raw_ctrl == 0, "jb_string_roundtrips_bytes_1_to_255",
                "%d of 511 strings differ; %d raw control bytes written", bad, raw_ctrl);

    // The writer's use: a manifest written piece by piece (growing past the first
    // 256 bytes many times) reads back field for field.
    jb_printf(&b, "{\"format\":");
    jb_string(&b, "course-ckpt-1");
    jb_printf(&b, ",\"step\":%llu,\"scale\":", (unsigned long long)UINT64_MAX);
    jb_double(&b, 0.1);
    jb_printf(&b, ",\"tensors\":[");
    for (int i = 0; i < 2000; i++) {
        char name[64];
        snprintf(name, sizeof name, "h.%d.attn \"w\"\t", i);
        jb_printf(&b, "%s{\"name\":", i ? "," : "");
        jb_string(&b, name);
        jb_printf(&b, ",\"offset\":%llu}", (unsigned long long)i * 4294967311ull);
    }
    jb_printf(&b, "]}");
    Json *j = parse_exact(b.s, b.len, err, sizeof err);
    uint64_t step = 0, off = 0;
    double scale = 0;
    const char *name = NULL;
    const char *w = "test.json";
    const Json *t = json_get_typed(j, "tensors", JSON_ARRAY, w, err, sizeof err);
    int ok = t && t->n == 2000 && json_get_u64(j, "step", w, &step, err, sizeof err) == 0 &&
             json_get_double(j, "scale", w, &scale, err, sizeof err) == 0 &&
             json_get_u64(&t->items[1999], "offset", w, &off, err, sizeof err) == 0 &&
             json_get_string(&t->items[7], "name", w, &name, err, sizeof err) == 0;
    ok = ok && step == UINT64_MAX && scale == 0.1 && off == 1999 * 4294967311ull &&
         strcmp(name, "h.7.attn \"w\"\t") == 0;
    test_report(ts, ok && b.len == strlen(b.s), "jb_writes_a_manifest_that_reads_back",
                "%zu bytes; %s", b.len, ok ? "every field as written" : err);
    json_free(j);
    jb_free(&b);

    char out[512];
    int status = run_child(child_write_nan, NULL, out, sizeof out);
    test_report(ts, status == 1 && strstr(out, "NaN") && !strstr(out, "wrote"),
                "jb_double_refuses_nan", "status %d: \"%s\"", status, out);
}

int main(void) {
    TestState ts = {0};
    test_wellformed(&ts);
    test_getters(&ts);
    test_malformed(&ts);
    test_hostile(&ts);
    test_fuzz(&ts);
    test_writer(&ts);
    return test_finish(&ts);
}
