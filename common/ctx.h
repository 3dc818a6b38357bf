// ctx.h — the per-rank context: who we are, which device we compute on, and
// the memory ledger. One Ctx exists per rank and is passed explicitly to
// everything that allocates or computes; there is no other mutable global state.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "dtype.h"
#include "ledger.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { DEV_CPU = 0, DEV_CUDA } Device;

typedef struct Ops Ops;

typedef struct Ctx {
    int rank, world;        // this rank and the number of ranks (1 until stage 02)
    Device device;
    int cuda_device;        // which GPU, when device == DEV_CUDA
    int threads;            // CPU threads for BLAS and our own loops
    Ledger ledger;
    const Ops *ops;         // the compute backend for `device`
    void *backend;          // backend private state (cuBLAS handle, stream, ...)
    // What the linear layers' GEMMs (ops->matmul_forward/backward) read:
    // DT_F32 (the default; ctx_init sets it), or DT_BF16 when every input they are
    // given is known to hold a bf16-representable value, so that converting it to
    // bf16 loses nothing (stage 06's bf16 recipes). The CUDA backend then runs its
    // GEMMs on the tensor cores in bf16 with an fp32 accumulator; the CPU backend
    // ignores it (ops.h, matmul_forward). A model sets it to its recipe's before it
    // computes (model_internal.h's gpt_claim_gemm), so models of different recipes
    // may share a context; code that calls the ops directly sets it itself.
    DType gemm_dtype;
} Ctx;

// Sets up the context for a device: picks the backend, creates its handles.
// capacity: simulated device memory in bytes (0 = unlimited).
void ctx_init(Ctx *ctx, Device dev, int threads, size_t capacity);
// The same on GPU number `cuda_device` (one process per GPU: see gpu_pick_device).
void ctx_init_device(Ctx *ctx, Device dev, int cuda_device, int threads, size_t capacity);
void ctx_destroy(Ctx *ctx);
const char *device_name(Device d);  // "cpu" / "cuda"
int device_parse(const char *s, Device *out);

// Device memory, charged to the ledger. Memory is zero-filled (a fresh buffer that
// is read before it is written is a bug we want to see deterministically).
void *mem_alloc(Ctx *ctx, MemCategory cat, size_t bytes);
void mem_free(Ctx *ctx, MemCategory cat, void *p, size_t bytes);

#ifdef __cplusplus
}
#endif
