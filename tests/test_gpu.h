// test_gpu.h — what the two files of tests/test_gpu share: the environment (both
// backends, the random source, the PASS/FAIL counts), a shape set, the buffer
// helpers that hold one tensor on both backends and compare the GPU's copy with
// the CPU's, and the op-by-op checks main runs.
//
// tests/test_gpu.c defines the helpers and holds main, the memory ops and the
// model; tests/test_gpu_ops.c holds the checks of the Ops table, op by op, and
// tests/test_gpu_fp8.c those of the fp8 GEMMs. All are linked into the one
// program build/tests/test_gpu.
#pragma once
#include <stddef.h>
#include <stdlib.h>  // free, in RERUN_GPU_SAME_BITS

#include "ctx.h"
#include "harness.h"
#include "ops.h"
#include "rng.h"

// Relative error allowed for forward outputs and for gradients (why these: the
// comment at the top of test_gpu.c).
#define TOL_FWD 1e-5
#define TOL_GRAD 1e-4

typedef struct {
    Ctx cpu, gpu;
    Ctx gpu_lt;        // the same GPU, its backend started with COURSE_FP8_GEMM=cublaslt
    TestState ts;
    Rng rng;
    const char *size;  // name of the current shape set, appended to test names
} Env;

// One shape set (test_gpu.c's dims[]): batch, context, width, heads, vocabulary.
typedef struct { const char *name; int B, T, C, NH, V; } Dims;

// ---------------------------------------------------------------- buffers

// One tensor three times: the host values as drawn, and a copy on each backend.
typedef struct { size_t bytes; void *host, *c, *g; } Buf;

// The buffer on device 0 (CPU) or 1 (GPU), so each op is called in a loop
// `for (dev = 0; dev < 2; dev++)` with the same arguments on both backends.
static inline void *on(const Buf *b, int dev) { return dev ? b->g : b->c; }
static inline Ctx *ctx_of(Env *e, int dev) { return dev ? &e->gpu : &e->cpu; }

// b's host values onto both backends.
void buf_upload(Env *e, Buf *b);
// Zeros, on the host and on both backends.
Buf buf_zero(Env *e, size_t bytes);
// n floats drawn from N(mean, std^2), on the host and on both backends.
Buf buf_normal(Env *e, size_t n, float mean, float std);
// Token ids in [0, V), half of them from the first 8 ids so that many positions
// share a token (the case the deterministic embedding backward is about).
Buf buf_tokens(Env *e, size_t n, int V);
void buf_free(Env *e, Buf *b);
// A malloc'ed host copy of `bytes` bytes at p on x's device.
void *read_back(Ctx *x, const void *p, size_t bytes);

// PASS when the GPU's copy of b is within tol of the CPU's.
void check_buf(Env *e, const char *what, const Buf *b, double tol);
// PASS when two GPU results are the same bits.
void check_same_bits(Env *e, const char *what, const void *a, const void *b, size_t bytes);

// Runs the GPU op again from b's initial host values and checks that the result
// has the same bits as `first` (read back after the first run). Only b is reset:
// the op's other outputs accumulate twice, and are not looked at again.
#define RERUN_GPU_SAME_BITS(e, what, b, first, call)                   \
    do {                                                               \
        (e)->gpu.ops->to_device(&(e)->gpu, (b).g, (b).host, (b).bytes); \
        call;                                                          \
        void *again_ = read_back(&(e)->gpu, (b).g, (b).bytes);         \
        check_same_bits((e), (what), (first), again_, (b).bytes);      \
        free(again_);                                                  \
    } while (0)

// ---------------------------------------------------------------- the ops (test_gpu_ops.c)

// Each runs its ops at one shape set on both backends and compares; main calls
// them in this order for every shape set.
void test_matmul(Env *e, const Dims *d);
void test_matmul_bf16(Env *e, const Dims *d);     // ctx->gemm_dtype = DT_BF16 (test_gpu_bf16.c)
void test_attention_bf16(Env *e, const Dims *d);  // the same for the attention's GEMMs
void test_matmul_fp8(Env *e, const Dims *d);   // through cuBLASLt (test_gpu_fp8.c)
void test_embedding(Env *e, const Dims *d);
void test_layernorm(Env *e, const Dims *d);
void test_attention(Env *e, const Dims *d);
void test_flash_attention(Env *e, const Dims *d);  // attention without (T,T) (test_gpu_bf16.c)
void test_elementwise(Env *e, const Dims *d);
void test_crossentropy(Env *e, const Dims *d);
void test_vocab_split(Env *e, const Dims *d);
void test_optimizer(Env *e, const Dims *d);
void test_low_precision(Env *e, const Dims *d);
