// json_check.c — what the JSON tests share (tests/json_check.h).
#include "check.h"
#include "json_check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Json *parse_exact(const char *text, size_t len, char *err, size_t errn) {
    char *buf = xmalloc(len ? len : 1);
    if (!buf) exit(1);
    memcpy(buf, text, len);
    Json *j = json_parse(buf, len, "test.json", err, errn);
    free(buf);  // the tree must not point into the text
    return j;
}
Json *parse_str(const char *text, char *err, size_t errn) {
    return parse_exact(text, strlen(text), err, errn);
}

// The byte offset a rejection names ("test.json: byte N (line ..."), or -1.
long err_offset(const char *err) {
    long off = -1;
    if (strncmp(err, "test.json: byte ", 16) != 0 || sscanf(err + 16, "%ld", &off) != 1) return -1;
    return strstr(err, " (line ") && strstr(err, ", column ") ? off : -1;
}

uint64_t bits(double x) {
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

// The tree back to text: integers as integers, other numbers as "%.17g".
void write_value(JsonBuf *b, const Json *j) {
    switch (j->type) {
    case JSON_NULL: jb_printf(b, "null"); break;
    case JSON_BOOL: jb_printf(b, "%s", j->boolean ? "true" : "false"); break;
    case JSON_NUMBER:
        if (j->is_u64) jb_printf(b, "%llu", (unsigned long long)j->u64);
        else jb_double(b, j->num);
        break;
    case JSON_STRING: jb_string(b, j->str); break;
    case JSON_ARRAY:
    case JSON_OBJECT:
        jb_printf(b, "%c", j->type == JSON_ARRAY ? '[' : '{');
        for (int i = 0; i < j->n; i++) {
            if (i) jb_printf(b, ",");
            if (j->type == JSON_OBJECT) {
                jb_string(b, j->keys[i]);
                jb_printf(b, ":");
            }
            write_value(b, &j->items[i]);
        }
        jb_printf(b, "%c", j->type == JSON_ARRAY ? ']' : '}');
        break;
    }
}

// Equal trees: same shape, keys, strings, and numbers to the bit ("1.0" and "1"
// are the same double; only one of them is_u64).
int same(const Json *a, const Json *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case JSON_NULL: return 1;
    case JSON_BOOL: return a->boolean == b->boolean;
    case JSON_NUMBER:
        return bits(a->num) == bits(b->num) && (!a->is_u64 || !b->is_u64 || a->u64 == b->u64);
    case JSON_STRING: return strcmp(a->str, b->str) == 0;
    default:
        if (a->n != b->n) return 0;
        for (int i = 0; i < a->n; i++)
            if ((a->keys && strcmp(a->keys[i], b->keys[i]) != 0) ||
                !same(&a->items[i], &b->items[i]))
                return 0;
        return 1;
    }
}

const char *const MANIFEST =
    "{\"format\":\"course-ckpt-1\",\"step\":1200,\"world\":{\"dp\":2,\"tp\":2,\"pp\":1,\"zero\":3},"
    "\"files\":[{\"name\":\"shard-00000.safetensors\",\"bytes\":123456,\"crc32c\":\"8f3a01c2\"}],"
    "\"tensors\":[{\"name\":\"h.0.attn.c_attn.weight\",\"shape\":[192,64],\"shards\":[{\"file\":0,"
    "\"key\":\"params/h.0.attn.c_attn.weight/0\",\"box\":[0,96,0,64]}]}], "
    "\"scaler\":{\"scale\":65536.0}}";

// Seeds for the truncation and fuzz tests: top-level containers with nothing
// after them, so that every proper prefix is invalid.
static const char *const SEEDS[] = {
    NULL,  // MANIFEST
    "{\n  \"format\": \"course-ckpt-1\",\n  \"step\": 18446744073709551615,\n"
    "  \"lr\": -3.0000000000000001e-04,\n"
    "  \"loss\": [2.5, 1.25e+1, 0, -0, 1E-7],\n  \"ok\": true, \"bad\": false, \"none\": null,\n"
    "  \"note\": \"tab\\t quote\\\" slash\\/ back\\\\ \\u00e9\\ud83d\\ude00 \\uD834\\uDD1E\"\n}",
    "[[[[[[[[[[[]]]]]]]]]],{\"a\":{\"b\":{\"c\":{\"d\":[{},[],\"\",0]}}}}]",
    "{\"rng\":[1,2,3,4],\"opt\":{\"m\":\"params/m\",\"v\":\"params/v\",\"t\":77},"
    "\"data\":{\"pos\":987654321,\"epoch\":3},\"unicode key \\u2603\":\"snow\",\"\":\"empty key\"}",
    "[\"\\\"\",\"\\\\\",\"\\b\\f\\n\\r\\t\",123.456e-7,-0.5,1e308,5e-324,"
    "{\"k\":[null,true,false]}]",
};
const int N_SEEDS = (int)(sizeof SEEDS / sizeof SEEDS[0]);
const char *seed_text(int i) { return i == 0 ? MANIFEST : SEEDS[i]; }

