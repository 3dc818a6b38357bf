// safetensors_json.c — the parser for a safetensors file's JSON header.
//
// It handles exactly what the format needs: one top-level object whose values are
// either the string-to-string "__metadata__" object or a tensor object with
// "dtype", "shape" and "data_offsets". Anything else is an error with a message
// naming the file, the byte position in the header and what was expected. A
// loader is an attack surface (files come from the internet), so the parser never
// reads past the header's end and checks every integer for overflow; a general
// JSON library would accept far more than the format allows and check less.
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "safetensors_internal.h"

// A syntax error, located by its byte offset in the header.
static int json_error(StJson *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int json_error(StJson *j, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return st_error(j->err, j->errn, j->path, "bad header JSON at byte %zu: %s",
                    (size_t)(j->p - j->begin), msg);
}

static void skip_ws(StJson *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

// Skips whitespace and consumes c, or fails naming what it found instead.
static int expect(StJson *j, char c) {
    skip_ws(j);
    if (j->p >= j->end) return json_error(j, "expected '%c', found the end of the header", c);
    if (*j->p != c) return json_error(j, "expected '%c', found '%c'", c, *j->p);
    j->p++;
    return 0;
}

// Returns the next non-space character without consuming it, or 0 at the end.
static char peek(StJson *j) {
    skip_ws(j);
    return j->p < j->end ? *j->p : 0;
}

static int hex4(StJson *j, uint32_t *out) {
    if (j->end - j->p < 4) return json_error(j, "truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = j->p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return json_error(j, "bad hex digit '%c' in \\u escape", c);
    }
    j->p += 4;
    *out = v;
    return 0;
}

// Parses a string literal into out (at most cap - 1 bytes plus a NUL), decoding
// escapes; \uXXXX becomes UTF-8, with surrogate pairs joined. A string that does
// not fit is an error naming `what` ("tensor name", ...). Decoded strings are never
// longer than their escaped form, which is what lets st_parse_header size its
// string pool by the header length.
static int parse_string(StJson *j, char *out, size_t cap, const char *what) {
    if (expect(j, '"') != 0) return -1;
    size_t len = 0;
    for (;;) {
        if (j->p >= j->end) return json_error(j, "unterminated string");
        unsigned char c = (unsigned char)*j->p++;
        if (c == '"') break;
        if (c < 0x20) return json_error(j, "control character 0x%02x inside a string", c);
        char enc[4];
        size_t k = 1;
        enc[0] = (char)c;
        if (c == '\\') {
            if (j->p >= j->end) return json_error(j, "unterminated string");
            char e = *j->p++;
            switch (e) {
            case '"': enc[0] = '"'; break;
            case '\\': enc[0] = '\\'; break;
            case '/': enc[0] = '/'; break;
            case 'b': enc[0] = '\b'; break;
            case 'f': enc[0] = '\f'; break;
            case 'n': enc[0] = '\n'; break;
            case 'r': enc[0] = '\r'; break;
            case 't': enc[0] = '\t'; break;
            case 'u': {
                uint32_t cp;
                if (hex4(j, &cp) != 0) return -1;
                if (cp >= 0xd800 && cp <= 0xdbff) {
                    // A high surrogate must be followed by \u and a low surrogate;
                    // together they encode a code point above U+FFFF.
                    uint32_t lo;
                    if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u')
                        return json_error(j, "high surrogate \\u%04x without its pair", cp);
                    j->p += 2;
                    if (hex4(j, &lo) != 0) return -1;
                    if (lo < 0xdc00 || lo > 0xdfff)
                        return json_error(j, "high surrogate followed by \\u%04x", lo);
                    cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                } else if (cp >= 0xdc00 && cp <= 0xdfff) {
                    return json_error(j, "lone low surrogate \\u%04x", cp);
                }
                // Our strings are C strings: an embedded NUL would cut them short.
                if (cp == 0) return json_error(j, "\\u0000 is not allowed in a string");
                if (cp < 0x80) {
                    enc[0] = (char)cp;
                } else if (cp < 0x800) {
                    enc[0] = (char)(0xc0 | (cp >> 6));
                    enc[1] = (char)(0x80 | (cp & 0x3f));
                    k = 2;
                } else if (cp < 0x10000) {
                    enc[0] = (char)(0xe0 | (cp >> 12));
                    enc[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
                    enc[2] = (char)(0x80 | (cp & 0x3f));
                    k = 3;
                } else {
                    enc[0] = (char)(0xf0 | (cp >> 18));
                    enc[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
                    enc[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
                    enc[3] = (char)(0x80 | (cp & 0x3f));
                    k = 4;
                }
                break;
            }
            default: return json_error(j, "unknown escape '\\%c'", e);
            }
        }
        if (len + k >= cap)
            return json_error(j, "%s longer than %zu bytes", what, cap - 1);
        memcpy(out + len, enc, k);
        len += k;
    }
    out[len] = '\0';
    return 0;
}

// A non-negative JSON integer (no sign, no fraction, no exponent, no leading zeros).
static int parse_u64(StJson *j, uint64_t *out) {
    skip_ws(j);
    if (j->p >= j->end || *j->p < '0' || *j->p > '9')
        return json_error(j, "expected a non-negative integer");
    if (*j->p == '0' && j->p + 1 < j->end && j->p[1] >= '0' && j->p[1] <= '9')
        return json_error(j, "integer with a leading zero");
    uint64_t v = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        unsigned d = (unsigned)(*j->p - '0');
        if (v > (UINT64_MAX - d) / 10) return json_error(j, "integer overflows 64 bits");
        v = v * 10 + d;
        j->p++;
    }
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
        return json_error(j, "expected an integer, found a fraction or exponent");
    *out = v;
    return 0;
}

// [a, b, ...] of at most maxn integers; `what` names the array in errors.
static int parse_u64_array(StJson *j, uint64_t *vals, int maxn, int *count, const char *what) {
    if (expect(j, '[') != 0) return -1;
    *count = 0;
    if (peek(j) == ']') {
        j->p++;
        return 0;
    }
    for (;;) {
        if (*count == maxn) return json_error(j, "%s has more than %d entries", what, maxn);
        if (parse_u64(j, &vals[(*count)++]) != 0) return -1;
        char c = peek(j);
        if (c == ',') {
            j->p++;
        } else if (c == ']') {
            j->p++;
            return 0;
        } else {
            return json_error(j, "expected ',' or ']' in %s", what);
        }
    }
}

static int parse_metadata(StParse *ps) {
    StJson *j = &ps->j;
    if (ps->seen_metadata) return json_error(j, "__metadata__ appears twice");
    ps->seen_metadata = 1;
    if (expect(j, '{') != 0) return -1;
    if (peek(j) == '}') {
        j->p++;
        return 0;
    }
    for (;;) {
        if (ps->n_meta == ps->cap_meta) {
            int cap = ps->cap_meta ? 2 * ps->cap_meta : 8;
            StMeta *m = realloc(ps->meta, (size_t)cap * sizeof *m);
            if (!m) return st_error(j->err, j->errn, j->path, "out of memory");
            ps->meta = m;
            ps->cap_meta = cap;
        }
        char *key = ps->pool + ps->pool_len;
        if (parse_string(j, key, ps->pool_cap - ps->pool_len, "metadata key") != 0) return -1;
        ps->pool_len += strlen(key) + 1;
        for (int i = 0; i < ps->n_meta; i++)
            if (strcmp(ps->meta[i].key, key) == 0)
                return json_error(j, "metadata key '%s' appears twice", key);
        if (expect(j, ':') != 0) return -1;
        if (peek(j) != '"')
            return json_error(j, "metadata value for '%s' is not a string", key);
        char *value = ps->pool + ps->pool_len;
        if (parse_string(j, value, ps->pool_cap - ps->pool_len, "metadata value") != 0)
            return -1;
        ps->pool_len += strlen(value) + 1;
        ps->meta[ps->n_meta].key = key;
        ps->meta[ps->n_meta].value = value;
        ps->n_meta++;
        char c = peek(j);
        if (c == ',') {
            j->p++;
        } else if (c == '}') {
            j->p++;
            return 0;
        } else {
            return json_error(j, "expected ',' or '}' in __metadata__");
        }
    }
}

// {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]}, fields in any order.
static int parse_tensor(StParse *ps, const char *name) {
    StJson *j = &ps->j;
    if (ps->n == ps->cap) {
        int cap = ps->cap ? 2 * ps->cap : 16;
        StTensor *t = realloc(ps->t, (size_t)cap * sizeof *t);
        if (!t) return st_error(j->err, j->errn, j->path, "out of memory");
        ps->t = t;
        StSpan *s = realloc(ps->span, (size_t)cap * sizeof *s);
        if (!s) return st_error(j->err, j->errn, j->path, "out of memory");
        ps->span = s;
        ps->cap = cap;
    }
    StTensor *t = &ps->t[ps->n];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);

    int have_dtype = 0, have_shape = 0, have_offsets = 0;
    uint64_t shape[4], offs[2];
    int ndim = 0, noffs = 0;
    if (expect(j, '{') != 0) return -1;
    if (peek(j) != '}') {
        for (;;) {
            char key[32];
            if (parse_string(j, key, sizeof key, "tensor field name") != 0) return -1;
            if (expect(j, ':') != 0) return -1;
            if (strcmp(key, "dtype") == 0) {
                if (have_dtype++) return json_error(j, "tensor '%s': dtype given twice", name);
                char ds[16];
                if (parse_string(j, ds, sizeof ds, "dtype") != 0) return -1;
                int found = 0;
                for (int d = 0; d < DT_COUNT; d++) {
                    if (strcmp(ds, st_dtype_name[d]) == 0) {
                        t->dtype = (DType)d;
                        found = 1;
                    }
                }
                if (!found)
                    return st_error(j->err, j->errn, j->path,
                                    "tensor '%s' has dtype %s (supported: F32, BF16, F16, I32, F64, "
                                    "F8_E4M3, F8_E5M2)",
                                    name, ds);
            } else if (strcmp(key, "shape") == 0) {
                if (have_shape++) return json_error(j, "tensor '%s': shape given twice", name);
                if (parse_u64_array(j, shape, 4, &ndim, "shape") != 0) return -1;
            } else if (strcmp(key, "data_offsets") == 0) {
                if (have_offsets++)
                    return json_error(j, "tensor '%s': data_offsets given twice", name);
                if (parse_u64_array(j, offs, 2, &noffs, "data_offsets") != 0) return -1;
                if (noffs != 2)
                    return json_error(j, "tensor '%s': data_offsets needs 2 entries, has %d",
                                      name, noffs);
            } else {
                return json_error(j, "tensor '%s': unknown field '%s'", name, key);
            }
            char c = peek(j);
            if (c == ',') {
                j->p++;
            } else if (c == '}') {
                break;
            } else {
                return json_error(j, "expected ',' or '}' in tensor '%s'", name);
            }
        }
    }
    j->p++;  // the closing '}'
    if (!have_dtype || !have_shape || !have_offsets)
        return st_error(j->err, j->errn, j->path, "tensor '%s' lacks %s", name,
                        !have_dtype ? "dtype" : !have_shape ? "shape" : "data_offsets");

    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] > (uint64_t)INT64_MAX)
            return st_error(j->err, j->errn, j->path, "tensor '%s': dimension %d is too large",
                            name, d);
        t->shape[d] = (int64_t)shape[d];
    }
    ps->span[ps->n] = (StSpan){offs[0], offs[1], ps->n};
    ps->n++;
    return 0;
}

static int parse_header(StParse *ps) {
    StJson *j = &ps->j;
    if (expect(j, '{') != 0) return -1;
    if (peek(j) == '}') {
        j->p++;
    } else {
        for (;;) {
            char key[ST_MAX_NAME + 1];
            if (parse_string(j, key, sizeof key, "tensor name") != 0) return -1;
            if (key[0] == '\0') return json_error(j, "empty tensor name");
            if (expect(j, ':') != 0) return -1;
            int rc = strcmp(key, "__metadata__") == 0 ? parse_metadata(ps) : parse_tensor(ps, key);
            if (rc != 0) return -1;
            char c = peek(j);
            if (c == ',') {
                j->p++;
            } else if (c == '}') {
                j->p++;
                break;
            } else {
                return json_error(j, "expected ',' or '}' after a tensor");
            }
        }
    }
    // Only padding may follow the object.
    skip_ws(j);
    if (j->p != j->end) return json_error(j, "unexpected bytes after the header object");
    return 0;
}

int st_parse_header(StParse *ps, const char *text, size_t len, const char *path, char *err,
                    size_t errn) {
    ps->j.begin = ps->j.p = text;
    ps->j.end = text + len;
    ps->j.path = path;
    ps->j.err = err;
    ps->j.errn = errn;
    // parse_string never decodes a string longer than its escaped form, so the
    // header's length bounds all the metadata strings together.
    ps->pool_cap = len + 1;
    ps->pool = malloc(ps->pool_cap);
    if (!ps->pool) return st_error(err, errn, path, "out of memory");
    return parse_header(ps);
}
