// json.c — the strict, bounded JSON reader and the small writer of json.h.
//
// The reader is a recursive descent over [s, s + len) that keeps a position, not
// a pointer, and tests it against len before every byte it looks at: the text is
// not NUL-terminated and a truncated file must end the parse, not the process.
// The tree is consistent at every moment (a container counts a child before
// parsing it, into a zeroed slot), so an error anywhere frees everything with one
// json_free of the root, and no error path needs a clean-up of its own.
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "check.h"
#include "json.h"

typedef struct {
    const char *s, *what;  // the text; what to call it in messages
    size_t len, pos, errn;
    char *err;
} Parser;

static void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    CHECK(q, "json: out of memory (%zu bytes)", n);
    return q;
}

// A fault at byte `at`, located by line and column too (editors show those).
static int fail(Parser *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(Parser *p, size_t at, const char *fmt, ...) {
    if (!p->err || p->errn == 0) return -1;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < at && i < p->len; i++, col++)
        if (p->s[i] == '\n') line++, col = 0;
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(p->err, p->errn, "%s: byte %zu (line %zu, column %zu): %s%s", p->what, at, line, col,
             msg, at >= p->len ? " (the input ends here: truncated?)" : "");
    return -1;
}

// What lies at `at`, for messages: "'x'", "byte 0x01" or "the end of the input".
static const char *found(const Parser *p, size_t at, char *buf, size_t n) {
    if (at >= p->len) return "the end of the input";
    unsigned char c = (unsigned char)p->s[at];
    snprintf(buf, n, c > 0x20 && c < 0x7f ? "'%c'" : "byte 0x%02x", c);
    return buf;
}

static int at_char(const Parser *p, char c) { return p->pos < p->len && p->s[p->pos] == c; }
static int is_digit(const Parser *p, size_t i) {
    return i < p->len && isdigit((unsigned char)p->s[i]);
}
// "NaN", "nan", "Infinity", "inf": what printf writes for a non-finite double.
static int non_finite(const Parser *p, size_t i) {
    return p->len - i >= 3 &&
           (strncasecmp(p->s + i, "nan", 3) == 0 || strncasecmp(p->s + i, "inf", 3) == 0);
}
static void skip_ws(Parser *p) {
    while (p->pos < p->len && p->s[p->pos] && strchr(" \t\n\r", p->s[p->pos])) p->pos++;
}

// Four hex digits at p->pos, all before `end` (the closing quote).
static int hex4(Parser *p, size_t end, uint32_t *out) {
    *out = 0;
    for (int i = 0; i < 4; i++) {
        if (p->pos >= end) return fail(p, p->pos, "truncated \\u escape (needs 4 hex digits)");
        char c = p->s[p->pos++], b[16];
        if (!isxdigit((unsigned char)c))
            return fail(p, p->pos - 1, "bad hex digit %s in a \\u escape",
                        found(p, p->pos - 1, b, sizeof b));
        *out = *out << 4 | (uint32_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    return 0;
}

// The XXXX of a \uXXXX at p->pos (the escape began at `at`), a surrogate pair
// joined into one code point.
static int unicode_escape(Parser *p, size_t at, size_t end, uint32_t *cp) {
    uint32_t lo;
    if (hex4(p, end, cp) != 0) return -1;
    if (*cp >= 0xdc00 && *cp <= 0xdfff)
        return fail(p, at, "lone low surrogate \\u%04x in a string", (unsigned)*cp);
    if (*cp >= 0xd800 && *cp <= 0xdbff) {
        if (p->pos + 1 >= end || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u')
            return fail(p, at, "lone high surrogate \\u%04x in a string (no \\u low surrogate "
                        "follows)", (unsigned)*cp);
        p->pos += 2;
        if (hex4(p, end, &lo) != 0) return -1;
        if (lo < 0xdc00 || lo > 0xdfff)
            return fail(p, at, "lone high surrogate \\u%04x in a string (followed by \\u%04x)",
                        (unsigned)*cp, (unsigned)lo);
        *cp = 0x10000 + ((*cp - 0xd800) << 10) + (lo - 0xdc00);
    }
    // The decoded strings are C strings: a NUL would silently cut them short.
    if (*cp == 0) return fail(p, at, "\\u0000 is not allowed in a string");
    return 0;
}

// A code point (<= U+10FFFF, not a surrogate) as 1 to 4 bytes of UTF-8.
static size_t put_utf8(char *o, uint32_t cp) {
    static const unsigned char lead[] = {0, 0, 0xc0, 0xe0, 0xf0};
    size_t n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    for (size_t i = n - 1; i > 0; i--, cp >>= 6) o[i] = (char)(0x80 | (cp & 0x3f));
    o[0] = (char)(lead[n] | cp);
    return n;
}

// A string at p->pos (the opening quote) into a fresh *out. A first pass finds
// the closing quote, which sizes the buffer: a decoded string is never longer
// than its quoted form (\uXXXX is 6 bytes for at most 3, a pair 12 for 4).
static int parse_string(Parser *p, char **out) {
    static const char from[] = "\"\\/bfnrt", into[] = "\"\\/\b\f\n\r\t";
    size_t open = p->pos, end = open + 1, k = 0;
    while (end < p->len && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
    if (end >= p->len) return fail(p, open, "unterminated string");
    char *o = xrealloc(NULL, end - open), b[16];
    int rc = 0;
    for (p->pos = open + 1; rc == 0 && p->pos < end;) {
        unsigned char c = (unsigned char)p->s[p->pos++];
        uint32_t cp;
        if (c < 0x20) {
            rc = fail(p, p->pos - 1, "control character 0x%02x in a string (escape it)", c);
        } else if (c != '\\') {
            o[k++] = (char)c;
        } else {
            // The first pass stepped over every backslash's partner: it lies before end.
            char e = p->s[p->pos++];
            const char *hit = e ? strchr(from, e) : NULL;
            if (hit) o[k++] = into[hit - from];
            else if (e != 'u') rc = fail(p, p->pos - 2, "unknown escape in a string: '\\' "
                                         "followed by %s", found(p, p->pos - 1, b, sizeof b));
            else if ((rc = unicode_escape(p, p->pos - 2, end, &cp)) == 0) k += put_utf8(o + k, cp);
        }
    }
    if (rc != 0) {
        free(o);
        return -1;
    }
    o[k] = '\0';
    p->pos = end + 1;
    *out = o;
    return 0;
}

// -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? with nothing glued to it. The
// integer part is accumulated exactly for is_u64; the double comes from strtod
// on a NUL-terminated copy (correctly rounded, so "%.17g" output reads back to
// the same bits). Without setlocale, strtod's decimal point is '.'.
static int parse_number(Parser *p, Json *out) {
    size_t st = p->pos, i = st + (p->s[st] == '-');
    int plain = p->s[st] != '-', fits = 1;
    uint64_t u = 0;
    if (non_finite(p, i)) return fail(p, st, "NaN and Infinity are not JSON numbers");
    if (!is_digit(p, i)) return fail(p, i, "expected a digit after '-'");
    if (p->s[i] == '0' && is_digit(p, i + 1)) return fail(p, i, "leading zero in a number");
    for (; is_digit(p, i); i++) {
        unsigned d = (unsigned)(p->s[i] - '0');
        if (u > (UINT64_MAX - d) / 10) fits = 0;
        else if (fits) u = u * 10 + d;
    }
    if (i < p->len && p->s[i] == '.') {
        plain = 0;
        if (!is_digit(p, ++i)) return fail(p, i, "expected a digit after the decimal point");
        while (is_digit(p, i)) i++;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        plain = 0;
        i += 1 + (size_t)(i + 1 < p->len && (p->s[i + 1] == '+' || p->s[i + 1] == '-'));
        if (!is_digit(p, i)) return fail(p, i, "expected a digit in the exponent");
        while (is_digit(p, i)) i++;
    }
    // "0x1f", "1.2.3", "12abc": one token that is not a number, not two values.
    if (i < p->len && p->s[i] && (isalnum((unsigned char)p->s[i]) || strchr(".+-", p->s[i])))
        return fail(p, st, "malformed number");
    char small[64], *tok = i - st < sizeof small ? small : xrealloc(NULL, i - st + 1);
    memcpy(tok, p->s + st, i - st);
    tok[i - st] = '\0';
    double x = strtod(tok, NULL);
    if (tok != small) free(tok);
    if (isinf(x)) return fail(p, st, "number beyond the range of a double");
    out->type = JSON_NUMBER;
    out->num = x;
    out->is_u64 = plain && fits;
    out->u64 = out->is_u64 ? u : 0;
    p->pos = i;
    return 0;
}

// Orders pointers into an object's keys array by key, and equal keys by their
// place in that array, which is document order.
static int key_cmp(const void *a, const void *b) {
    char *const *x = *(char *const *const *)a, *const *y = *(char *const *const *)b;
    int c = strcmp(*x, *y);
    return c ? c : (x > y) - (x < y);
}

// Duplicate keys by sorting (n log n: a hostile object of 10^5 keys stays fast).
// Reports the first key, in document order, that repeats an earlier one.
static int check_duplicates(Parser *p, const Json *obj, const size_t *key_at) {
    if (obj->n < 2) return 0;
    char *const **k = xrealloc(NULL, (size_t)obj->n * sizeof *k);
    for (int i = 0; i < obj->n; i++) k[i] = &obj->keys[i];
    qsort(k, (size_t)obj->n, sizeof *k, key_cmp);
    int dup = obj->n;
    for (int i = 1; i < obj->n; i++)
        if (strcmp(*k[i], *k[i - 1]) == 0 && k[i] - obj->keys < dup)
            dup = (int)(k[i] - obj->keys);
    free(k);
    if (dup == obj->n) return 0;
    char shown[48];  // the key on one line: control characters as '?'
    size_t j = 0;
    for (const char *c = obj->keys[dup]; *c && j + 4 < sizeof shown; c++)
        shown[j++] = (unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c;
    shown[j] = '\0';
    return fail(p, key_at[dup], "duplicate key \"%s%s\" in an object", shown,
                obj->keys[dup][j] ? "..." : "");
}

static int parse_value(Parser *p, Json *out, int depth);

// An array or object at p->pos. Children go into out->items as they are parsed
// (see the top of the file); capacities double, so growth is linear overall.
static int parse_container(Parser *p, Json *out, int depth) {
    int is_obj = p->s[p->pos] == '{', cap = 0, rc = 0;
    char close = is_obj ? '}' : ']';
    if (depth > JSON_MAX_DEPTH)
        return fail(p, p->pos, "nesting deeper than %d levels", JSON_MAX_DEPTH);
    out->type = is_obj ? JSON_OBJECT : JSON_ARRAY;
    size_t *key_at = NULL;  // each key's offset, for the duplicate-key message
    p->pos++;
    skip_ws(p);
    while (!(out->n == 0 && at_char(p, close))) {
        if (out->n == cap) {
            // n is an int; 2^29 values would already be 32 GiB of tree.
            if (cap >= 1 << 29) rc = fail(p, p->pos, "more than 2^29 values in one container");
            if (rc) break;
            cap = cap ? 2 * cap : 4;
            out->items = xrealloc(out->items, (size_t)cap * sizeof *out->items);
            if (is_obj) {
                out->keys = xrealloc(out->keys, (size_t)cap * sizeof *out->keys);
                key_at = xrealloc(key_at, (size_t)cap * sizeof *key_at);
            }
        }
        Json *v = &out->items[out->n];
        memset(v, 0, sizeof *v);
        if (is_obj) {
            skip_ws(p);
            key_at[out->n] = p->pos;
            if (!at_char(p, '"')) rc = fail(p, p->pos, "expected a string key in an object");
            if (rc || (rc = parse_string(p, &out->keys[out->n])) != 0) break;
            skip_ws(p);
            if (!at_char(p, ':')) {
                free(out->keys[out->n]);
                rc = fail(p, p->pos, "expected ':' after a key in an object");
                break;
            }
            p->pos++;
        }
        out->n++;
        if ((rc = parse_value(p, v, depth + 1)) != 0) break;
        skip_ws(p);
        if (at_char(p, ',')) {
            p->pos++;
            continue;
        }
        if (!at_char(p, close))
            rc = fail(p, p->pos, is_obj ? "expected ',' or '}' in an object"
                                        : "expected ',' or ']' in an array");
        break;
    }
    if (rc == 0) {
        p->pos++;  // the closing bracket
        if (is_obj) rc = check_duplicates(p, out, key_at);
    }
    free(key_at);
    return rc;
}

static int parse_value(Parser *p, Json *out, int depth) {
    static const char *const lit[] = {"null", "true", "false"};
    char b[16];
    skip_ws(p);
    if (p->pos >= p->len) return fail(p, p->pos, "expected a value");
    if (non_finite(p, p->pos)) return fail(p, p->pos, "NaN and Infinity are not JSON numbers");
    char c = p->s[p->pos];
    if (c == '{' || c == '[') return parse_container(p, out, depth);
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, out);
    if (c == '"') {
        out->type = JSON_STRING;
        return parse_string(p, &out->str);
    }
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(lit[i]);
        if (c != lit[i][0]) continue;
        if (p->len - p->pos < n || memcmp(p->s + p->pos, lit[i], n) != 0)
            return fail(p, p->pos, "invalid literal (expected %s)", lit[i]);
        out->type = i == 0 ? JSON_NULL : JSON_BOOL;
        out->boolean = i == 1;
        p->pos += n;
        return 0;
    }
    return fail(p, p->pos, "expected a value, found %s", found(p, p->pos, b, sizeof b));
}

Json *json_parse(const char *text, size_t len, const char *what, char *err, size_t errn) {
    Parser p = {text, what ? what : "JSON", len, 0, errn, err};
    char b[16];
    if (err && errn) err[0] = '\0';
    Json *root = xrealloc(NULL, sizeof *root);
    memset(root, 0, sizeof *root);
    if (parse_value(&p, root, 1) == 0) {
        skip_ws(&p);
        if (p.pos == len) return root;
        fail(&p, p.pos, "unexpected %s after the value", found(&p, p.pos, b, sizeof b));
    }
    json_free(root);
    return NULL;
}

static void free_members(Json *j) {
    for (int i = 0; i < j->n; i++) {
        free_members(&j->items[i]);
        if (j->keys) free(j->keys[i]);
    }
    free(j->items);
    free(j->keys);
    free(j->str);
}

void json_free(Json *j) {
    if (!j) return;
    free_members(j);
    free(j);
}

const char *json_type_name(JsonType t) {
    static const char *const names[] = {"null", "a boolean", "a number",
                                        "a string", "an array", "an object"};
    return (unsigned)t < 6 ? names[t] : "an unknown type";
}

const Json *json_get(const Json *obj, const char *key) {
    if (!obj || obj->type != JSON_OBJECT) return NULL;
    for (int i = 0; i < obj->n; i++)
        if (strcmp(obj->keys[i], key) == 0) return &obj->items[i];
    return NULL;
}

static int get_fail(const char *what, const char *key, const char *fault, char *err, size_t errn) {
    if (err && errn) snprintf(err, errn, "%s: \"%s\" %s", what ? what : "JSON", key, fault);
    return -1;
}

// The member, or NULL with "is missing" (or why it cannot be looked up).
static const Json *lookup(const Json *obj, const char *key, const char *what, char *err,
                          size_t errn) {
    const Json *v = json_get(obj, key);
    if (!v) get_fail(what, key, obj && obj->type == JSON_OBJECT ? "is missing"
                     : "cannot be looked up: the enclosing value is not an object", err, errn);
    return v;
}

const Json *json_get_typed(const Json *obj, const char *key, JsonType type, const char *what,
                           char *err, size_t errn) {
    const Json *v = lookup(obj, key, what, err, errn);
    if (!v || v->type == type) return v;
    char fault[64];
    snprintf(fault, sizeof fault, "is %s, not %s", json_type_name(v->type), json_type_name(type));
    get_fail(what, key, fault, err, errn);
    return NULL;
}

int json_get_u64(const Json *obj, const char *key, const char *what, uint64_t *out, char *err,
                 size_t errn) {
    const Json *v = lookup(obj, key, what, err, errn);
    if (v && !v->is_u64)
        return get_fail(what, key, "is not a non-negative integer (of at most 64 bits)", err, errn);
    if (v) *out = v->u64;
    return v ? 0 : -1;
}

int json_get_double(const Json *obj, const char *key, const char *what, double *out, char *err,
                    size_t errn) {
    const Json *v = json_get_typed(obj, key, JSON_NUMBER, what, err, errn);
    if (v) *out = v->num;
    return v ? 0 : -1;
}

int json_get_string(const Json *obj, const char *key, const char *what, const char **out,
                    char *err, size_t errn) {
    const Json *v = json_get_typed(obj, key, JSON_STRING, what, err, errn);
    if (v) *out = v->str;
    return v ? 0 : -1;
}

// ---------------------------------------------------------------------------------
// Writer

// Room for `extra` more bytes and the NUL after them.
static void jb_reserve(JsonBuf *b, size_t extra) {
    CHECK(extra < SIZE_MAX / 4 - b->len, "json: a buffer of more than SIZE_MAX/4 bytes");
    if (b->len + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) cap *= 2;
    b->s = xrealloc(b->s, cap);
    b->cap = cap;
}

void jb_printf(JsonBuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    CHECK(k >= 0, "json: jb_printf cannot format \"%s\"", fmt);
    jb_reserve(b, (size_t)k);
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)k;
}

void jb_string(JsonBuf *b, const char *s) {
    jb_reserve(b, 6 * strlen(s) + 2);  // at worst every byte is \u00XX
    char *o = b->s + b->len;
    *o++ = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') *o++ = '\\';
        if (c < 0x20) o += sprintf(o, "\\u%04x", c);
        else *o++ = (char)c;
    }
    *o++ = '"';
    *o = '\0';
    b->len = (size_t)(o - b->s);
}

void jb_double(JsonBuf *b, double x) {
    CHECK(isfinite(x), "json: cannot write %g: JSON has no NaN or infinity", x);
    jb_printf(b, "%.17g", x);
}

void jb_free(JsonBuf *b) {
    free(b->s);
    *b = (JsonBuf){0};
}
