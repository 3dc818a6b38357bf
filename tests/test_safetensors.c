// test_safetensors.c — files round-trip exactly, and corrupt files are rejected
// with a message naming the file and the fault (never a crash: ASan watches).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "harness.h"
#include "safetensors.h"

static char g_dir[64];  // this run's scratch directory

static void path_in_dir(char *buf, size_t n, const char *name) {
    snprintf(buf, n, "%s/%s", g_dir, name);
}

static long file_size(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 ? (long)st.st_size : -1;
}

// Writes a file by hand: 8-byte length, header text, then data_bytes bytes of
// data. hlen_override >= 0 puts that number in the length field instead.
static void write_raw(const char *path, const char *header, size_t data_bytes,
                      long long hlen_override) {
    FILE *f = fopen(path, "wb");
    if (!f) {
        perror(path);
        exit(1);
    }
    uint64_t h = hlen_override >= 0 ? (uint64_t)hlen_override : strlen(header);
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)(h >> (8 * i));
    fwrite(len8, 1, 8, f);
    fwrite(header, 1, strlen(header), f);
    for (size_t i = 0; i < data_bytes; i++) fputc((int)(i & 0xff), f);
    fclose(f);
}

static StTensor make_tensor(const char *name, DType dt, int ndim, const int64_t *shape,
                            const void *data, size_t nbytes) {
    StTensor t;
    memset(&t, 0, sizeof t);
    snprintf(t.name, sizeof t.name, "%s", name);
    t.dtype = dt;
    t.ndim = ndim;
    for (int d = 0; d < ndim; d++) t.shape[d] = shape[d];
    t.data = data;
    t.nbytes = nbytes;
    return t;
}

static void test_roundtrip(TestState *ts) {
    char path[128], tmp[160];
    path_in_dir(path, sizeof path, "model.safetensors");
    snprintf(tmp, sizeof tmp, "%s.tmp", path);

    float wte[12];
    for (int i = 0; i < 12; i++) wte[i] = 0.5f * (float)i - 2.0f;
    uint16_t bias[5] = {0x3f80, 0xbf80, 0x0000, 0x7f80, 0x4049};  // odd count: 10 bytes
    uint16_t scale = 0x3c00;
    int32_t tokens[4] = {50256, 0, -1, 7};
    const char *odd_name = "h.0/\"q\\k\"\xc3\xa9";  // quote, backslash, UTF-8
    StTensor in[6] = {
        make_tensor("wte", DT_F32, 2, (int64_t[]){3, 4}, wte, sizeof wte),
        make_tensor("ln.bias", DT_BF16, 1, (int64_t[]){5}, bias, sizeof bias),
        make_tensor("scale", DT_F16, 0, NULL, &scale, 2),
        make_tensor("tokens", DT_I32, 2, (int64_t[]){2, 2}, tokens, sizeof tokens),
        make_tensor("empty", DT_F32, 2, (int64_t[]){0, 3}, NULL, 0),
        make_tensor(odd_name, DT_F32, 4, (int64_t[]){1, 1, 2, 1}, wte, 8),
    };
    StMeta meta[3] = {
        {"step", "100"},
        {"note", "line1\nline2\ttab \"q\" \\ \xc3\xa9"},
        {"ctrl", "\x01\x1f"},
    };
    char err[512] = "";
    int rc = st_save(path, in, 6, meta, 3, err, sizeof err);
    test_report(ts, rc == 0 && access(tmp, F_OK) != 0, "st_save_ok", "rc %d, .tmp left behind %d %s",
                rc, access(tmp, F_OK) == 0, err);

    // The header length is a multiple of 8 and the file is exactly 8 + N + data.
    FILE *f = fopen(path, "rb");
    unsigned char len8[8] = {0};
    size_t got = f ? fread(len8, 1, 8, f) : 0;
    if (f) fclose(f);
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)len8[i] << (8 * i);
    long want_size = (long)(8 + hlen + sizeof wte + sizeof bias + 2 + sizeof tokens + 8);
    test_report(ts, got == 8 && hlen % 8 == 0 && file_size(path) == want_size,
                "st_save_layout", "header %llu bytes (multiple of 8), file %ld bytes (want %ld)",
                (unsigned long long)hlen, file_size(path), want_size);

    StFile sf;
    rc = st_load(path, &sf, err, sizeof err);
    int bad = 0;
    if (rc == 0) {
        bad += sf.n != 6;
        const unsigned char *data = (const unsigned char *)sf.image + 8 + hlen;
        for (int i = 0; i < 6 && i < sf.n; i++) {
            const StTensor *t = &sf.tensors[i];
            int ok = strcmp(t->name, in[i].name) == 0 && t->dtype == in[i].dtype &&
                     t->ndim == in[i].ndim && t->nbytes == in[i].nbytes &&
                     (in[i].nbytes == 0 || memcmp(t->data, in[i].data, in[i].nbytes) == 0) &&
                     // inside the data section, aligned for its element type
                     (const unsigned char *)t->data >= data &&
                     ((uintptr_t)t->data - (uintptr_t)data) % dtype_size(in[i].dtype) == 0;
            for (int d = 0; d < t->ndim; d++) ok = ok && t->shape[d] == in[i].shape[d];
            if (!ok) {
                bad++;
                printf("  tensor %d (%s) differs\n", i, in[i].name);
            }
        }
        bad += st_find(&sf, "tokens") != &sf.tensors[3];
        bad += st_find(&sf, odd_name) != &sf.tensors[5];
        bad += st_find(&sf, "nope") != NULL;
        bad += sf.n_meta != 3;
        for (int i = 0; i < 3; i++) {
            const char *v = st_meta_get(&sf, meta[i].key);
            if (!v || strcmp(v, meta[i].value) != 0) {
                bad++;
                printf("  metadata %s differs\n", meta[i].key);
            }
        }
        bad += st_meta_get(&sf, "nope") != NULL;
        st_close(&sf);
    }
    test_report(ts, rc == 0 && bad == 0, "st_roundtrip", "rc %d, %d differences %s", rc, bad,
                rc ? err : "");

    // Saving again over the same path replaces the file (through the rename).
    float one = 42.0f;
    StTensor again = make_tensor("x", DT_F32, 1, (int64_t[]){1}, &one, 4);
    rc = st_save(path, &again, 1, NULL, 0, err, sizeof err);
    int rc2 = rc == 0 ? st_load(path, &sf, err, sizeof err) : -1;
    int ok = rc2 == 0 && sf.n == 1 && sf.n_meta == 0 && *(const float *)sf.tensors[0].data == 42.0f;
    if (rc2 == 0) st_close(&sf);
    test_report(ts, ok, "st_save_replaces", "rc %d/%d %s", rc, rc2, (rc || rc2) ? err : "");

    // No tensors, no metadata: "{}" padded to 8 bytes.
    path_in_dir(path, sizeof path, "empty.safetensors");
    rc = st_save(path, NULL, 0, NULL, 0, err, sizeof err);
    rc2 = rc == 0 ? st_load(path, &sf, err, sizeof err) : -1;
    ok = rc2 == 0 && sf.n == 0 && sf.n_meta == 0 && file_size(path) == 16;
    if (rc2 == 0) st_close(&sf);
    test_report(ts, ok, "st_empty_file", "rc %d/%d, size %ld (want 16)", rc, rc2, file_size(path));
}

// The loader must fail, with a message that names the file and contains `want`.
static void expect_reject(TestState *ts, const char *name, const char *path, const char *want) {
    StFile sf;
    char err[512] = "";
    int rc = st_load(path, &sf, err, sizeof err);
    int names_file = strncmp(err, path, strlen(path)) == 0;
    int ok = rc == -1 && names_file && strstr(err, want) != NULL;
    if (rc == 0) st_close(&sf);
    test_report(ts, ok, name, "rc %d: \"%s\"", rc, err);
    // A failed load leaves nothing to free; st_close on it is still harmless.
    if (rc != 0) st_close(&sf);
}

static void test_corrupt(TestState *ts) {
    char path[128];
    path_in_dir(path, sizeof path, "bad.safetensors");

    // Too short for the length field.
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite("abcde", 1, 5, f) == 5 && fclose(f) == 0, "cannot write %s", path);
    expect_reject(ts, "st_rejects_too_short", path, "too short");

    write_raw(path, "{}", 1224, 9999999);
    expect_reject(ts, "st_rejects_header_length_too_large", path,
                  "header length 9999999 exceeds file size 1234");

    // A valid file, truncated: first inside the data, then inside the header.
    char good[128];
    path_in_dir(good, sizeof good, "good.safetensors");
    float x[64] = {0};
    StTensor t = make_tensor("x", DT_F32, 2, (int64_t[]){8, 8}, x, sizeof x);
    char err[256];
    st_save(good, &t, 1, NULL, 0, err, sizeof err);
    long full = file_size(good);
    if (truncate(good, full - 4) != 0) perror("truncate");
    expect_reject(ts, "st_rejects_truncated_data", good, "exceed the 252 bytes of data");
    if (truncate(good, 20) != 0) perror("truncate");
    expect_reject(ts, "st_rejects_truncated_header", good, "exceeds file size 20");

    static const struct { const char *name, *header; size_t data; const char *want; } cases[] = {
        {"st_rejects_not_an_object", "[1,2]", 0, "expected '{', found '['"},
        {"st_rejects_unclosed_object",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8,
         "expected ',' or '}' after a tensor"},
        {"st_rejects_missing_colon", "{\"a\" {}}", 0, "expected ':', found '{'"},
        {"st_rejects_trailing_garbage",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}} x", 8,
         "unexpected bytes after the header object"},
        {"st_rejects_unterminated_string", "{\"abc", 0, "unterminated string"},
        {"st_rejects_bad_escape", "{\"a\\q\":{}}", 0, "unknown escape '\\q'"},
        {"st_rejects_lone_surrogate", "{\"a\\udc00\":{}}", 0, "lone low surrogate"},
        {"st_rejects_unpaired_surrogate", "{\"a\\ud83d\":{}}", 0, "without its pair"},
        {"st_rejects_nul_escape", "{\"a\\u0000\":{}}", 0, "\\u0000 is not allowed"},
        {"st_rejects_control_char", "{\"a\tb\":{}}", 0, "control character 0x09"},
        {"st_rejects_leading_zero",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[02],\"data_offsets\":[0,8]}}", 8, "leading zero"},
        {"st_rejects_negative_dim",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8,
         "expected a non-negative integer"},
        {"st_rejects_fractional_dim",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]}}", 8,
         "found a fraction or exponent"},
        {"st_rejects_huge_integer",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,99999999999999999999]}}", 8,
         "overflows 64 bits"},
        {"st_rejects_offsets_out_of_range",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 8,
         "data_offsets [0, 16] exceed the 8 bytes of data"},
        {"st_rejects_shape_size_mismatch",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
         "shape has 3 elements of F32 (12 bytes) but data_offsets span 8 bytes"},
        {"st_rejects_shape_overflow",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}",
         8, "shape overflows"},
        {"st_rejects_backwards_offsets",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,0]}}", 8, "run backwards"},
        {"st_rejects_overlap",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
         12, "tensors 'a' [0, 8] and 'b' [4, 12] overlap"},
        {"st_rejects_unknown_dtype",
         "{\"a\":{\"dtype\":\"C64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8,
         "tensor 'a' has dtype C64"},
        {"st_rejects_duplicate_name",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         8, "tensor name 'a' appears twice"},
        {"st_rejects_five_dims",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
         "shape has more than 4 entries"},
        {"st_rejects_three_offsets",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 8,
         "data_offsets has more than 2 entries"},
        {"st_rejects_one_offset",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", 8,
         "data_offsets needs 2 entries, has 1"},
        {"st_rejects_missing_field", "{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4,
         "tensor 'a' lacks shape"},
        {"st_rejects_unknown_field",
         "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}", 4,
         "unknown field 'x'"},
        {"st_rejects_repeated_field",
         "{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
         "dtype given twice"},
        {"st_rejects_non_string_metadata", "{\"__metadata__\":{\"step\":100}}", 0,
         "metadata value for 'step' is not a string"},
        {"st_rejects_duplicate_metadata", "{\"__metadata__\":{},\"__metadata__\":{}}", 0,
         "__metadata__ appears twice"},
        {"st_rejects_long_name",
         "{\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaa\":{}}",
         0, "tensor name longer than 95 bytes"},
        {"st_rejects_empty_header", "", 0, "expected '{', found the end of the header"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_raw(path, cases[i].header, cases[i].data, -1);
        expect_reject(ts, cases[i].name, path, cases[i].want);
    }
}

// Escapes in a header written by someone else (Python's json.dumps escapes
// non-ASCII by default): \uXXXX becomes UTF-8, surrogate pairs are joined.
static void test_escapes(TestState *ts) {
    char path[128];
    path_in_dir(path, sizeof path, "esc.safetensors");
    write_raw(path,
              "{\"__metadata__\" : {\"k\\/1\" : \"caf\\u00e9 \\ud83d\\ude00 \\u20ac\\\"\"},\n"
              "  \"w\\u00e9\": {\"shape\": [], \"dtype\": \"BF16\", \"data_offsets\": [0, 2]},\n"
              "  \"empty\": {\"dtype\":\"I32\",\"shape\":[0],\"data_offsets\":[2,2]}}   ",
              2, -1);
    StFile sf;
    char err[256] = "";
    int rc = st_load(path, &sf, err, sizeof err);
    int ok = 0;
    if (rc == 0) {
        const char *v = st_meta_get(&sf, "k/1");
        const StTensor *w = st_find(&sf, "w\xc3\xa9");
        ok = v && strcmp(v, "caf\xc3\xa9 \xf0\x9f\x98\x80 \xe2\x82\xac\"") == 0 && w &&
             w->dtype == DT_BF16 && w->ndim == 0 && w->nbytes == 2 && sf.n == 2;
        st_close(&sf);
    }
    test_report(ts, rc == 0 && ok, "st_load_decodes_escapes", "rc %d %s", rc, err);
}

static void test_save_errors(TestState *ts) {
    char path[128];
    path_in_dir(path, sizeof path, "never.safetensors");
    float x[4] = {0};
    char err[256] = "";

    StTensor wrong = make_tensor("w", DT_F32, 2, (int64_t[]){2, 3}, x, sizeof x);
    int rc = st_save(path, &wrong, 1, NULL, 0, err, sizeof err);
    test_report(ts, rc == -1 && strstr(err, "'w'") && strstr(err, "24 bytes") &&
                        access(path, F_OK) != 0,
                "st_save_rejects_size_mismatch", "\"%s\"", err);

    StTensor twice[2] = {make_tensor("a", DT_F32, 1, (int64_t[]){4}, x, sizeof x),
                         make_tensor("a", DT_F32, 1, (int64_t[]){4}, x, sizeof x)};
    rc = st_save(path, twice, 2, NULL, 0, err, sizeof err);
    test_report(ts, rc == -1 && strstr(err, "appears twice"), "st_save_rejects_duplicate_name",
                "\"%s\"", err);

    StTensor ok = make_tensor("a", DT_F32, 1, (int64_t[]){4}, x, sizeof x);
    rc = st_save("/nonexistent-dir/x.safetensors", &ok, 1, NULL, 0, err, sizeof err);
    test_report(ts, rc == -1 && strstr(err, "/nonexistent-dir/x.safetensors: cannot open"),
                "st_save_reports_open_failure", "\"%s\"", err);

    StFile sf;
    rc = st_load("/nonexistent-dir/x.safetensors", &sf, err, sizeof err);
    test_report(ts, rc == -1 && strstr(err, "cannot open"), "st_load_reports_missing_file",
                "\"%s\"", err);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/test_safetensors_XXXXXX");
    if (!mkdtemp(g_dir)) {
        perror("mkdtemp");
        return 1;
    }
    TestState ts = {0};
    test_roundtrip(&ts);
    test_corrupt(&ts);
    test_escapes(&ts);
    test_save_errors(&ts);

    const char *files[] = {"model.safetensors", "empty.safetensors", "bad.safetensors",
                           "good.safetensors", "esc.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char p[128];
        path_in_dir(p, sizeof p, files[i]);
        unlink(p);
    }
    rmdir(g_dir);
    return test_finish(&ts);
}
