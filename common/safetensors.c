// safetensors.c — the safetensors file format, written and read by hand.
//
// The format (https://github.com/huggingface/safetensors) is deliberately simple:
//
//   [8 bytes]  N, the header length, unsigned 64-bit little-endian
//   [N bytes]  a JSON object, UTF-8, padded at the end with spaces
//   [rest]     the tensors' bytes, little-endian, each tensor contiguous
//
//   {"__metadata__":{"step":"100"},
//    "wte":{"dtype":"F32","shape":[50257,768],"data_offsets":[0,154389504]}, ...}
//
// data_offsets are [begin, end) byte offsets into the data section (not the file).
// There are no pointers, no compression and no code execution on load (the reason
// the format exists: pickle-based checkpoints run arbitrary code when opened).
//
// The JSON parser below handles exactly what the format needs: one top-level object
// whose values are either the string-to-string "__metadata__" object or a tensor
// object with "dtype", "shape" and "data_offsets". Anything else is an error with a
// message naming the file, the byte position in the header and what was expected.
// A loader is an attack surface (files come from the internet), so every length
// and offset is checked before it is used, and every size computation is checked
// for overflow.
//
// Alignment: the writer keeps tensors in the order given, contiguous. The data
// section starts 8-byte aligned (the header is padded for that), but a tensor
// follows the previous one directly, so an fp32 tensor placed after a bf16 tensor
// with an odd element count starts on a 2-byte boundary. Callers who control the
// order put the 4-byte dtypes first (PyTorch's writer sorts by dtype for the same
// reason); st_load hands out pointers into the file image as they are.
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "safetensors.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c writes tensor bytes as they are in memory: it needs a little-endian host"
#endif

// The reference implementation refuses headers above 100 MB; so do we, so that a
// corrupt length cannot make us parse gigabytes of tensor data as JSON.
#define ST_MAX_HEADER 100000000ull

enum { ST_MAX_NAME = (int)sizeof(((StTensor *)0)->name) - 1 };  // 95

static const char *const g_st_dtype[DT_COUNT] = {"F32", "BF16", "F16", "I32"};

// Writes "<path>: <message>" into err. Always returns -1, for "return st_error(...)".
static int st_error(char *err, size_t errn, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int st_error(char *err, size_t errn, const char *path, const char *fmt, ...) {
    if (!err || errn == 0) return -1;
    int k = snprintf(err, errn, "%s: ", path);
    if (k >= 0 && (size_t)k < errn) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + k, errn - (size_t)k, fmt, ap);
        va_end(ap);
    }
    return -1;
}

// Number of elements of a shape, or -1 if a dimension is negative or the product
// overflows. A 0-d tensor (a scalar) has one element.
static int shape_numel(const int64_t *shape, int ndim, uint64_t *out) {
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) return -1;
        uint64_t s = (uint64_t)shape[d];
        if (s != 0 && n > UINT64_MAX / s) return -1;
        n *= s;
    }
    *out = n;
    return 0;
}

// =================================================================================
// Writing

// A growable byte buffer for the JSON header.
typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} Buf;

static void buf_put(Buf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->len + n + 1 > cap) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void buf_str(Buf *b, const char *s) { buf_put(b, s, strlen(s)); }

static void buf_u64(Buf *b, uint64_t v) {
    char tmp[24];
    int k = snprintf(tmp, sizeof tmp, "%llu", (unsigned long long)v);
    buf_put(b, tmp, (size_t)k);
}

// A JSON string literal. Bytes >= 0x80 pass through: names and metadata are UTF-8.
static void buf_json_string(Buf *b, const char *s) {
    buf_put(b, "\"", 1);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        char esc[8];
        switch (*c) {
        case '"': buf_put(b, "\\\"", 2); break;
        case '\\': buf_put(b, "\\\\", 2); break;
        case '\n': buf_put(b, "\\n", 2); break;
        case '\t': buf_put(b, "\\t", 2); break;
        case '\r': buf_put(b, "\\r", 2); break;
        default:
            if (*c < 0x20) {
                snprintf(esc, sizeof esc, "\\u%04x", *c);
                buf_put(b, esc, 6);
            } else {
                buf_put(b, (const char *)c, 1);
            }
        }
    }
    buf_put(b, "\"", 1);
}

// Everything st_save refuses, checked before a byte is written: a file with a
// wrong size in its header would be rejected by every reader later, far from here.
static int validate_for_save(const char *path, const StTensor *t, int n, const StMeta *meta,
                             int n_meta, char *err, size_t errn) {
    if (n < 0 || n_meta < 0 || (n > 0 && !t) || (n_meta > 0 && !meta))
        return st_error(err, errn, path, "invalid arguments (n %d, n_meta %d)", n, n_meta);
    for (int i = 0; i < n; i++) {
        if (!memchr(t[i].name, '\0', sizeof t[i].name) || t[i].name[0] == '\0')
            return st_error(err, errn, path, "tensor %d has an empty or unterminated name", i);
        if (strcmp(t[i].name, "__metadata__") == 0)
            return st_error(err, errn, path, "tensor %d is named __metadata__, a reserved key", i);
        for (int j = 0; j < i; j++)
            if (strcmp(t[i].name, t[j].name) == 0)
                return st_error(err, errn, path, "tensor name '%s' appears twice", t[i].name);
        if ((int)t[i].dtype < 0 || t[i].dtype >= DT_COUNT)
            return st_error(err, errn, path, "tensor '%s' has invalid dtype %d", t[i].name,
                            (int)t[i].dtype);
        if (t[i].ndim < 0 || t[i].ndim > 4)
            return st_error(err, errn, path, "tensor '%s' has %d dimensions (0..4 allowed)",
                            t[i].name, t[i].ndim);
        uint64_t numel;
        if (shape_numel(t[i].shape, t[i].ndim, &numel) != 0 ||
            numel > UINT64_MAX / dtype_size(t[i].dtype))
            return st_error(err, errn, path, "tensor '%s' has a negative or overflowing shape",
                            t[i].name);
        uint64_t want = numel * dtype_size(t[i].dtype);
        if (want != (uint64_t)t[i].nbytes)
            return st_error(err, errn, path,
                            "tensor '%s': shape needs %llu bytes of %s but nbytes is %zu",
                            t[i].name, (unsigned long long)want, g_st_dtype[t[i].dtype],
                            t[i].nbytes);
        if (t[i].nbytes > 0 && !t[i].data)
            return st_error(err, errn, path, "tensor '%s' has no data", t[i].name);
    }
    for (int i = 0; i < n_meta; i++) {
        if (!meta[i].key || !meta[i].value)
            return st_error(err, errn, path, "metadata entry %d has a NULL key or value", i);
        for (int j = 0; j < i; j++)
            if (strcmp(meta[i].key, meta[j].key) == 0)
                return st_error(err, errn, path, "metadata key '%s' appears twice", meta[i].key);
    }
    return 0;
}

// fsync on the directory makes the rename itself durable: without it, a power
// loss after st_save returns can bring back the old directory entry.
static int sync_parent_dir(const char *path) {
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) {
        snprintf(dir, sizeof dir, ".");
    } else if (slash == path) {
        snprintf(dir, sizeof dir, "/");
    } else {
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    }
    int fd = open(dir, O_RDONLY);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    // Some file systems cannot sync a directory and say so with EINVAL; there is
    // nothing more we can do for durability there, and the data itself is synced.
    if (rc != 0 && errno == EINVAL) rc = 0;
    close(fd);
    return rc;
}

int st_save(const char *path, const StTensor *tensors, int n, const StMeta *meta, int n_meta,
            char *err, size_t errn) {
    if (validate_for_save(path, tensors, n, meta, n_meta, err, errn) != 0) return -1;

    // Data offsets: back to back, widest element type first (4-byte, then 2-byte
    // types), so that every tensor starts aligned for its type when the file image
    // is read into memory — the order PyTorch's writer uses too. The header lists
    // the tensors in the order given.
    uint64_t *offsets = malloc(sizeof(uint64_t) * (n > 0 ? n : 1));
    if (!offsets) return st_error(err, errn, path, "out of memory");
    uint64_t offset = 0;
    for (size_t width = 8; width >= 1; width /= 2)
        for (int i = 0; i < n; i++)
            if (dtype_size(tensors[i].dtype) == width) {
                offsets[i] = offset;
                offset += tensors[i].nbytes;
            }

    // The header, compact like the reference writer's: __metadata__ first (and only
    // when there is some), then the tensors in the order given.
    Buf h = {0};
    buf_str(&h, "{");
    if (n_meta > 0) {
        buf_str(&h, "\"__metadata__\":{");
        for (int i = 0; i < n_meta; i++) {
            if (i) buf_str(&h, ",");
            buf_json_string(&h, meta[i].key);
            buf_str(&h, ":");
            buf_json_string(&h, meta[i].value);
        }
        buf_str(&h, "}");
    }
    for (int i = 0; i < n; i++) {
        const StTensor *t = &tensors[i];
        if (i || n_meta > 0) buf_str(&h, ",");
        buf_json_string(&h, t->name);
        buf_str(&h, ":{\"dtype\":\"");
        buf_str(&h, g_st_dtype[t->dtype]);
        buf_str(&h, "\",\"shape\":[");
        for (int d = 0; d < t->ndim; d++) {
            if (d) buf_str(&h, ",");
            buf_u64(&h, (uint64_t)t->shape[d]);
        }
        buf_str(&h, "],\"data_offsets\":[");
        buf_u64(&h, offsets[i]);
        buf_str(&h, ",");
        buf_u64(&h, offsets[i] + t->nbytes);
        buf_str(&h, "]}");
    }
    buf_str(&h, "}");
    // Pad with spaces to a multiple of 8 (the reference does the same), so that the
    // data section, at 8 + N, starts 8-byte aligned in the file and in memory.
    while (h.len % 8 != 0) buf_str(&h, " ");
    free(offsets);
    if (h.oom) {
        free(h.p);
        return st_error(err, errn, path, "out of memory building a header");
    }

    // Write to <path>.tmp and rename over <path>: rename is atomic, so a reader (or
    // a restart after a crash in the middle of a save) sees the old file or the new
    // one, never half of one. This is stage 07's whole checkpoint guarantee.
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 5);
    if (!tmp) {
        free(h.p);
        return st_error(err, errn, path, "out of memory");
    }
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);

    int rc = -1;
    FILE *fp = fopen(tmp, "wb");
    if (!fp) {
        st_error(err, errn, path, "cannot open %s for writing: %s", tmp, strerror(errno));
        goto done;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++) len8[i] = (unsigned char)((uint64_t)h.len >> (8 * i));
    int ok = fwrite(len8, 1, 8, fp) == 8 && fwrite(h.p, 1, h.len, fp) == h.len;
    for (size_t width = 8; width >= 1; width /= 2)  // the order the offsets were given in
        for (int i = 0; ok && i < n; i++) {
            if (tensors[i].nbytes == 0 || dtype_size(tensors[i].dtype) != width) continue;
            ok = fwrite(tensors[i].data, 1, tensors[i].nbytes, fp) == tensors[i].nbytes;
        }
    // fflush moves stdio's buffer to the kernel; fsync moves the kernel's to the disk.
    // Both must succeed before the rename publishes the file.
    if (ok) ok = fflush(fp) == 0 && fsync(fileno(fp)) == 0;
    int saved_errno = errno;
    if (fclose(fp) != 0 && ok) {
        ok = 0;
        saved_errno = errno;
    }
    if (!ok) {
        st_error(err, errn, path, "writing %s failed: %s", tmp, strerror(saved_errno));
        unlink(tmp);
        goto done;
    }
    if (rename(tmp, path) != 0) {
        st_error(err, errn, path, "renaming %s failed: %s", tmp, strerror(errno));
        unlink(tmp);
        goto done;
    }
    if (sync_parent_dir(path) != 0) {
        st_error(err, errn, path, "syncing the directory failed: %s", strerror(errno));
        goto done;
    }
    rc = 0;
done:
    free(tmp);
    free(h.p);
    return rc;
}

// =================================================================================
// Reading: a JSON parser for the safetensors header

typedef struct {
    const char *begin, *p, *end;  // the header text and the cursor
    const char *path;
    char *err;
    size_t errn;
} Json;

// A syntax error, located by its byte offset in the header.
static int json_error(Json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int json_error(Json *j, const char *fmt, ...) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return st_error(j->err, j->errn, j->path, "bad header JSON at byte %zu: %s",
                    (size_t)(j->p - j->begin), msg);
}

static void skip_ws(Json *j) {
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

// Skips whitespace and consumes c, or fails naming what it found instead.
static int expect(Json *j, char c) {
    skip_ws(j);
    if (j->p >= j->end) return json_error(j, "expected '%c', found the end of the header", c);
    if (*j->p != c) return json_error(j, "expected '%c', found '%c'", c, *j->p);
    j->p++;
    return 0;
}

// Returns the next non-space character without consuming it, or 0 at the end.
static char peek(Json *j) {
    skip_ws(j);
    return j->p < j->end ? *j->p : 0;
}

static int hex4(Json *j, uint32_t *out) {
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
// longer than their escaped form, which is what lets st_load size its string pool
// by the header length.
static int parse_string(Json *j, char *out, size_t cap, const char *what) {
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
static int parse_u64(Json *j, uint64_t *out) {
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
static int parse_u64_array(Json *j, uint64_t *vals, int maxn, int *count, const char *what) {
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

// What the parser keeps per tensor before the checks that need all of them.
typedef struct {
    uint64_t begin, end;
    int idx;
} Span;

typedef struct {
    Json j;
    StTensor *t;
    Span *span;
    int n, cap;
    StMeta *meta;
    int n_meta, cap_meta;
    char *pool;  // meta strings: bump-allocated, sized by the header length
    size_t pool_len, pool_cap;
    int seen_metadata;
} Parse;

static int parse_metadata(Parse *ps) {
    Json *j = &ps->j;
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
static int parse_tensor(Parse *ps, const char *name) {
    Json *j = &ps->j;
    if (ps->n == ps->cap) {
        int cap = ps->cap ? 2 * ps->cap : 16;
        StTensor *t = realloc(ps->t, (size_t)cap * sizeof *t);
        if (!t) return st_error(j->err, j->errn, j->path, "out of memory");
        ps->t = t;
        Span *s = realloc(ps->span, (size_t)cap * sizeof *s);
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
                    if (strcmp(ds, g_st_dtype[d]) == 0) {
                        t->dtype = (DType)d;
                        found = 1;
                    }
                }
                if (!found)
                    return st_error(j->err, j->errn, j->path,
                                    "tensor '%s' has dtype %s (supported: F32, BF16, F16, I32)",
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
    ps->span[ps->n] = (Span){offs[0], offs[1], ps->n};
    ps->n++;
    return 0;
}

static int parse_header(Parse *ps) {
    Json *j = &ps->j;
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

static int cmp_name(const void *a, const void *b) {
    const StTensor *x = *(const StTensor *const *)a, *y = *(const StTensor *const *)b;
    return strcmp(x->name, y->name);
}

static int cmp_span(const void *a, const void *b) {
    const Span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

// The checks that need the whole header: each span fits the data section and its
// dtype and shape, names are unique, and no two tensors share bytes.
static int check_tensors(Parse *ps, unsigned char *data, uint64_t data_bytes) {
    const char *path = ps->j.path;
    char *err = ps->j.err;
    size_t errn = ps->j.errn;
    for (int i = 0; i < ps->n; i++) {
        StTensor *t = &ps->t[i];
        Span s = ps->span[i];
        if (s.begin > s.end)
            return st_error(err, errn, path, "tensor '%s': data_offsets [%llu, %llu] run backwards",
                            t->name, (unsigned long long)s.begin, (unsigned long long)s.end);
        if (s.end > data_bytes)
            return st_error(err, errn, path,
                            "tensor '%s': data_offsets [%llu, %llu] exceed the %llu bytes of data",
                            t->name, (unsigned long long)s.begin, (unsigned long long)s.end,
                            (unsigned long long)data_bytes);
        uint64_t numel, es = dtype_size(t->dtype);
        if (shape_numel(t->shape, t->ndim, &numel) != 0 || numel > UINT64_MAX / es)
            return st_error(err, errn, path, "tensor '%s': shape overflows", t->name);
        if (numel * es != s.end - s.begin)
            return st_error(err, errn, path,
                            "tensor '%s': shape has %llu elements of %s (%llu bytes) but "
                            "data_offsets span %llu bytes",
                            t->name, (unsigned long long)numel, g_st_dtype[t->dtype],
                            (unsigned long long)(numel * es), (unsigned long long)(s.end - s.begin));
        t->data = data + s.begin;
        t->nbytes = (size_t)(s.end - s.begin);
    }
    if (ps->n < 2) return 0;

    const StTensor **byname = malloc((size_t)ps->n * sizeof *byname);
    if (!byname) return st_error(err, errn, path, "out of memory");
    for (int i = 0; i < ps->n; i++) byname[i] = &ps->t[i];
    qsort(byname, (size_t)ps->n, sizeof *byname, cmp_name);
    for (int i = 1; i < ps->n; i++) {
        if (strcmp(byname[i - 1]->name, byname[i]->name) == 0) {
            st_error(err, errn, path, "tensor name '%s' appears twice", byname[i]->name);
            free(byname);
            return -1;
        }
    }
    free(byname);

    // Sorted by begin, spans are disjoint iff each starts at or after the previous
    // one ends. Empty tensors (begin == end) hold no bytes and overlap nothing.
    Span *spans = malloc((size_t)ps->n * sizeof *spans);
    if (!spans) return st_error(err, errn, path, "out of memory");
    int k = 0;
    for (int i = 0; i < ps->n; i++)
        if (ps->span[i].end > ps->span[i].begin) spans[k++] = ps->span[i];
    qsort(spans, (size_t)k, sizeof *spans, cmp_span);
    for (int i = 1; i < k; i++) {
        if (spans[i].begin < spans[i - 1].end) {
            st_error(err, errn, path, "tensors '%s' [%llu, %llu] and '%s' [%llu, %llu] overlap",
                     ps->t[spans[i - 1].idx].name, (unsigned long long)spans[i - 1].begin,
                     (unsigned long long)spans[i - 1].end, ps->t[spans[i].idx].name,
                     (unsigned long long)spans[i].begin, (unsigned long long)spans[i].end);
            free(spans);
            return -1;
        }
    }
    free(spans);
    return 0;
}

// Reads the whole file. Returns 0 or -1 with err set.
static int read_file(const char *path, unsigned char **out, size_t *size, char *err, size_t errn) {
    FILE *fp = fopen(path, "rb");
    if (!fp) return st_error(err, errn, path, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(fp);
        return st_error(err, errn, path, "not a regular file");
    }
    size_t n = (size_t)st.st_size;
    // One byte more than needed so that an empty file still gets a real pointer.
    unsigned char *buf = malloc(n + 1);
    if (!buf) {
        fclose(fp);
        return st_error(err, errn, path, "out of memory reading %zu bytes", n);
    }
    size_t got = fread(buf, 1, n, fp);
    int failed = ferror(fp);
    fclose(fp);
    if (failed || got != n) {
        free(buf);
        return st_error(err, errn, path, "read %zu of %zu bytes", got, n);
    }
    *out = buf;
    *size = n;
    return 0;
}

int st_load(const char *path, StFile *f, char *err, size_t errn) {
    memset(f, 0, sizeof *f);
    unsigned char *image = NULL;
    size_t size = 0;
    if (read_file(path, &image, &size, err, errn) != 0) return -1;

    if (size < 8) {
        free(image);
        return st_error(err, errn, path, "file is %zu bytes, too short for the 8-byte header length",
                        size);
    }
    uint64_t hlen = 0;
    for (int i = 0; i < 8; i++) hlen |= (uint64_t)image[i] << (8 * i);
    if (hlen > size - 8) {
        free(image);
        return st_error(err, errn, path, "header length %llu exceeds file size %zu",
                        (unsigned long long)hlen, size);
    }
    if (hlen > ST_MAX_HEADER) {
        free(image);
        return st_error(err, errn, path, "header length %llu exceeds the format's limit of %llu",
                        (unsigned long long)hlen, ST_MAX_HEADER);
    }

    Parse ps = {0};
    ps.j.begin = ps.j.p = (const char *)image + 8;
    ps.j.end = ps.j.begin + hlen;
    ps.j.path = path;
    ps.j.err = err;
    ps.j.errn = errn;
    ps.pool_cap = (size_t)hlen + 1;
    ps.pool = malloc(ps.pool_cap);
    int rc = ps.pool ? parse_header(&ps) : st_error(err, errn, path, "out of memory");
    if (rc == 0) rc = check_tensors(&ps, image + 8 + hlen, (uint64_t)(size - 8 - hlen));
    if (rc != 0) {
        free(ps.t);
        free(ps.span);
        free(ps.meta);
        free(ps.pool);
        free(image);
        return -1;
    }
    free(ps.span);
    f->image = image;
    f->image_bytes = size;
    f->tensors = ps.t;
    f->n = ps.n;
    f->meta = ps.meta;
    f->n_meta = ps.n_meta;
    f->strings = ps.pool;
    return 0;
}

const StTensor *st_find(const StFile *f, const char *name) {
    for (int i = 0; i < f->n; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

const char *st_meta_get(const StFile *f, const char *key) {
    for (int i = 0; i < f->n_meta; i++)
        if (strcmp(f->meta[i].key, key) == 0) return f->meta[i].value;
    return NULL;
}

void st_close(StFile *f) {
    free(f->image);
    free(f->tensors);
    free(f->meta);
    free(f->strings);
    memset(f, 0, sizeof *f);
}
