// json.h — a small, strict JSON reader and writer for the course's own files.
//
// Stage 07's checkpoint manifest is written by rank 0 and read back on resume,
// maybe from a disk that cut it short or flipped a byte. The reader is therefore
// strict and bounded: it accepts RFC 8259 JSON within the limits below (no
// extensions: no comments, trailing commas, single quotes), never reads outside
// [text, text + len) (the text need not be NUL-terminated), and names the byte
// where a bad document goes wrong.
//
// Limits that make hostile input harmless:
//   - nesting deeper than JSON_MAX_DEPTH (64) containers is rejected, so the
//     recursive descent cannot exhaust the stack;
//   - every value costs at least one byte of input and a decoded string is never
//     longer than its quoted form, so the tree is linear in len (at worst about
//     64 bytes of tree per byte of "[0,0,...]"); arrays grow by doubling and
//     duplicate keys are found by sorting, so time is O(len log len), never
//     quadratic;
//   - duplicate keys in one object are an error (which of two "step"s is right?);
//   - numbers follow the JSON grammar: no leading zeros, no '+', no hex, no
//     NaN or Infinity; a value beyond a double's range (1e400) is rejected, one
//     too small for it (1e-400) reads as zero, as strtod rounds it;
//   - raw control characters (< 0x20) in strings are rejected, and so is \u0000,
//     because the decoded strings are C strings.
//
// UTF-8 policy: strings are byte strings. The reader passes bytes >= 0x80
// through as they are, without checking that they form valid UTF-8, and the
// writer writes them as they are, so any C string (a tensor name, a file path)
// round-trips exactly. Validating would reject a name the program itself wrote,
// and only at resume time, the worst moment; a corrupt manifest is caught by its
// syntax and by the checks its reader makes on every field, not by the encoding.
// (Strict tools, Python's json on a text file, may refuse invalid UTF-8: keep
// names UTF-8 where other tools must read them.)
//
// Out of memory dies through the core's CHECK (check.h), in the reader as in
// the writer: the sizes are bounded by the input, so it means the machine is out.
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { JSON_MAX_DEPTH = 64 };

typedef enum { JSON_NULL, JSON_BOOL, JSON_NUMBER, JSON_STRING, JSON_ARRAY, JSON_OBJECT } JsonType;

typedef struct Json Json;
struct Json {
    JsonType type;
    int boolean;          // JSON_BOOL
    double num;           // JSON_NUMBER (always set)
    int is_u64;           // JSON_NUMBER written as a non-negative integer (no '-', '.', 'e')
                          // that fits in uint64_t
    uint64_t u64;         // the exact value when is_u64 (offsets, sizes, steps round-trip)
    char *str;            // JSON_STRING: NUL-terminated, escapes decoded (\uXXXX to UTF-8)
    int n;                // JSON_ARRAY / JSON_OBJECT: element count
    Json *items;          // the n values
    char **keys;          // JSON_OBJECT: the n keys, NUL-terminated, in document order
};

// Parses exactly one JSON value; whitespace may surround it, nothing else may.
// Returns the tree (free it with json_free), or NULL with a message in err that
// names `what` (e.g. the file path), the byte offset (from 0) with its line and
// column (from 1), and the fault:
//   "manifest.json: byte 113 (line 4, column 9): expected ',' or '}' in an object"
// A fault at the very end of the text adds "(the input ends here: truncated?)".
Json *json_parse(const char *text, size_t len, const char *what, char *err, size_t errn);
void json_free(Json *j);
const char *json_type_name(JsonType t);   // "null", "a boolean", "a number", ... "an object"

// The member `key` of an object; NULL if obj is not an object or lacks the key.
const Json *json_get(const Json *obj, const char *key);

// Typed lookups for required fields: return 0, or -1 with a message naming `what`
// and the key ("manifest.json: \"step\" is missing", "... \"step\" is not a
// non-negative integer"). json_get_string's *out points into the tree.
int json_get_u64(const Json *obj, const char *key, const char *what, uint64_t *out, char *err,
                 size_t errn);
int json_get_double(const Json *obj, const char *key, const char *what, double *out, char *err,
                    size_t errn);
int json_get_string(const Json *obj, const char *key, const char *what, const char **out,
                    char *err, size_t errn);
// The member if it has the given type, else NULL with a message (as above).
const Json *json_get_typed(const Json *obj, const char *key, JsonType type, const char *what,
                           char *err, size_t errn);

// Writer: a growing, always NUL-terminated buffer; start from JsonBuf b = {0}.
// The caller writes the structure with jb_printf ("{\"step\":%llu,", ...) and the
// strings with jb_string. Out of memory dies via CHECK.
typedef struct {
    char *s;
    size_t len, cap;
} JsonBuf;

void jb_printf(JsonBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// s quoted and escaped: '"' and '\' with a backslash, control characters as \u00XX,
// every other byte as it is (see the UTF-8 policy above).
void jb_string(JsonBuf *b, const char *s);
// x as "%.17g", which json_parse reads back to the identical double. Dies if x is
// NaN or infinite: JSON cannot hold them, and a manifest that cannot be read back
// must not be written.
void jb_double(JsonBuf *b, double x);
void jb_free(JsonBuf *b);

#ifdef __cplusplus
}
#endif
