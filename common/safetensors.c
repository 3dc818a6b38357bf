// safetensors.c — the safetensors file format, written and read by hand: the
// helpers both directions share, and st_load with the checks that need the
// whole file. The JSON header parser is in safetensors_json.c, st_save in
// safetensors_write.c.
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
// A loader is an attack surface (files come from the internet), so every length
// and offset is checked before it is used, and every size computation is checked
// for overflow.
//
// Alignment: the data section starts 8-byte aligned (the writer pads the header
// to a multiple of 8), and st_save lays out the tensors' bytes widest dtype first,
// so in a file it wrote every tensor starts aligned for its type. A file written
// elsewhere need not be: st_load hands out pointers into the file image as they
// are.
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "safetensors_internal.h"

// The reference implementation refuses headers above 100 MB; so do we, so that a
// corrupt length cannot make us parse gigabytes of tensor data as JSON.
#define ST_MAX_HEADER 100000000ull

const char *const st_dtype_name[DT_COUNT] = {"F32", "BF16", "F16", "I32", "F64", "F8_E4M3",
                                             "F8_E5M2"};

int st_error(char *err, size_t errn, const char *path, const char *fmt, ...) {
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

int st_shape_numel(const int64_t *shape, int ndim, uint64_t *out) {
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

static int cmp_name(const void *a, const void *b) {
    const StTensor *x = *(const StTensor *const *)a, *y = *(const StTensor *const *)b;
    return strcmp(x->name, y->name);
}

static int cmp_span(const void *a, const void *b) {
    const StSpan *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

// The checks that need the whole header: each span fits the data section and its
// dtype and shape, names are unique, and no two tensors share bytes.
static int check_tensors(StParse *ps, unsigned char *data, uint64_t data_bytes) {
    const char *path = ps->j.path;
    char *err = ps->j.err;
    size_t errn = ps->j.errn;
    for (int i = 0; i < ps->n; i++) {
        StTensor *t = &ps->t[i];
        StSpan s = ps->span[i];
        if (s.begin > s.end)
            return st_error(err, errn, path, "tensor '%s': data_offsets [%llu, %llu] run backwards",
                            t->name, (unsigned long long)s.begin, (unsigned long long)s.end);
        if (s.end > data_bytes)
            return st_error(err, errn, path,
                            "tensor '%s': data_offsets [%llu, %llu] exceed the %llu bytes of data",
                            t->name, (unsigned long long)s.begin, (unsigned long long)s.end,
                            (unsigned long long)data_bytes);
        uint64_t numel, es = dtype_size(t->dtype);
        if (st_shape_numel(t->shape, t->ndim, &numel) != 0 || numel > UINT64_MAX / es)
            return st_error(err, errn, path, "tensor '%s': shape overflows", t->name);
        if (numel * es != s.end - s.begin)
            return st_error(err, errn, path,
                            "tensor '%s': shape has %llu elements of %s (%llu bytes) but "
                            "data_offsets span %llu bytes",
                            t->name, (unsigned long long)numel, st_dtype_name[t->dtype],
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
    StSpan *spans = malloc((size_t)ps->n * sizeof *spans);
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

    StParse ps = {0};
    int rc = st_parse_header(&ps, (const char *)image + 8, (size_t)hlen, path, err, errn);
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
