// safetensors_write.c — st_save: checks the tensors, builds the JSON header and
// writes the file atomically.
//
// The writer is separate from the reader because the two share only the format:
// the reader distrusts every byte, the writer trusts its caller but refuses
// anything the reader would reject later (validate_for_save), and its hard part
// is durability, not parsing.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "safetensors_internal.h"

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
        if (st_shape_numel(t[i].shape, t[i].ndim, &numel) != 0 ||
            numel > UINT64_MAX / dtype_size(t[i].dtype))
            return st_error(err, errn, path, "tensor '%s' has a negative or overflowing shape",
                            t[i].name);
        uint64_t want = numel * dtype_size(t[i].dtype);
        if (want != (uint64_t)t[i].nbytes)
            return st_error(err, errn, path,
                            "tensor '%s': shape needs %llu bytes of %s but nbytes is %zu",
                            t[i].name, (unsigned long long)want, st_dtype_name[t[i].dtype],
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

    // Data offsets: back to back, widest element type first (8-, 4-, then 2-byte
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
        buf_str(&h, st_dtype_name[t->dtype]);
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
