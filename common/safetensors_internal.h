// safetensors_internal.h — what the pieces of the safetensors code share, and
// nothing callers need: they include safetensors.h.
//
//   safetensors.c        the format, shared helpers, st_load and its checks
//   safetensors_json.c   the parser for the JSON header
//   safetensors_write.c  st_save
//
// The parser is its own file because it is the largest part and the one that
// reads untrusted bytes; keeping it apart lets it be read (and audited) alone.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "safetensors.h"

// Both directions use tensor bytes as they are in memory: st_save writes them
// out unconverted and st_load hands out pointers into the file image.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors needs a little-endian host: tensor bytes are used as they are in memory"
#endif

enum { ST_MAX_NAME = (int)sizeof(((StTensor *)0)->name) - 1 };  // 95

// The format's dtype strings, indexed by DType.
extern const char *const st_dtype_name[DT_COUNT];

// Writes "<path>: <message>" into err. Always returns -1, for "return st_error(...)".
int st_error(char *err, size_t errn, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

// Number of elements of a shape, or -1 if a dimension is negative or the product
// overflows. A 0-d tensor (a scalar) has one element.
int st_shape_numel(const int64_t *shape, int ndim, uint64_t *out);

// The parser's cursor over the header text, and where its errors go.
typedef struct {
    const char *begin, *p, *end;
    const char *path;
    char *err;
    size_t errn;
} StJson;

// A tensor's data_offsets, kept apart from the StTensor until st_load has checked
// them against the data section and against each other.
typedef struct {
    uint64_t begin, end;
    int idx;
} StSpan;

typedef struct {
    StJson j;
    StTensor *t;      // data and nbytes unset: st_load fills them from span
    StSpan *span;
    int n, cap;
    StMeta *meta;
    int n_meta, cap_meta;
    char *pool;       // meta strings: bump-allocated, sized by the header length
    size_t pool_len, pool_cap;
    int seen_metadata;
} StParse;

// Parses the len bytes of header text into ps, which the caller zeroes first and
// frees (t, span, meta, pool) afterwards, whether or not the parse succeeded.
// Checks syntax, field names and types, dtype names and that the shape is at most
// 4-d; the checks that need the data section or all tensors at once are st_load's.
// Returns 0, or -1 with err set.
int st_parse_header(StParse *ps, const char *text, size_t len, const char *path, char *err,
                    size_t errn);
