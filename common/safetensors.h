// safetensors.h — read and write the safetensors format (huggingface/safetensors).
//
//   8 bytes little-endian u64 N | N bytes JSON header | raw little-endian data
//   header: {"__metadata__": {"k": "v", ...},
//            "name": {"dtype": "F32", "shape": [r, c], "data_offsets": [b, e]}, ...}
//
// PyTorch tools open these files, which is why the course uses the format for model
// dumps (tests compare against PyTorch through it) and, in stage 07, checkpoints.
// Files are written atomically: to "<path>.tmp", fsync, then rename.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    char name[96];
    DType dtype;          // F32, BF16, F16, I32, F64, F8_E4M3, F8_E5M2
    int ndim;             // 0..4
    int64_t shape[4];
    const void *data;     // on save: the bytes to write; on load: points into the file image
    size_t nbytes;
} StTensor;

typedef struct {
    const char *key, *value;
} StMeta;

// Returns 0 on success; on failure -1 with a message in err.
int st_save(const char *path, const StTensor *tensors, int n, const StMeta *meta, int n_meta,
            char *err, size_t errn);

typedef struct {
    void *image;          // the whole file, read into memory
    size_t image_bytes;
    StTensor *tensors; int n;
    StMeta *meta; int n_meta;   // strings point into a private copy
    char *strings;
} StFile;

// Validates everything: header length within the file, JSON well formed, dtypes
// known, shape product * dtype size == data_offsets span, spans inside the data
// and non-overlapping. Returns 0, or -1 with a message naming the file and fault.
int st_load(const char *path, StFile *f, char *err, size_t errn);
const StTensor *st_find(const StFile *f, const char *name);
const char *st_meta_get(const StFile *f, const char *key);   // NULL if absent
void st_close(StFile *f);

#ifdef __cplusplus
}
#endif
