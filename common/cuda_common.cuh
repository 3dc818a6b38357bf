// cuda_common.cuh — what every CUDA source of the course includes: the CUDA,
// cuBLAS and NCCL headers, their error-check macros, and the CUDA backend's
// private state (what ctx->backend points to when ctx->device == DEV_CUDA).
//
// The macros follow check.h: a failed call names the file, the line, the call
// and the library's own description of the error, then ends the run. CUDA
// errors are sticky (a failed kernel poisons the context), so there is nothing
// sensible to retry.
#pragma once
#include <cuda_runtime.h>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <nccl.h>

#include "check.h"

#include "ctx.h"

#define CUDA_CHECK(call)                                                              \
    do {                                                                              \
        cudaError_t err_ = (call);                                                    \
        if (err_ != cudaSuccess)                                                      \
            die_at(__FILE__, __LINE__, "CUDA error %s: %s (in %s)",                   \
                   cudaGetErrorName(err_), cudaGetErrorString(err_), #call);          \
    } while (0)

#define CUBLAS_CHECK(call)                                                            \
    do {                                                                              \
        cublasStatus_t st_ = (call);                                                  \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                             \
            die_at(__FILE__, __LINE__, "cuBLAS error %d: %s (in %s)", (int)st_,       \
                   cublasGetStatusString(st_), #call);                                \
    } while (0)

#define NCCL_CHECK(call)                                                              \
    do {                                                                              \
        ncclResult_t nr_ = (call);                                                    \
        if (nr_ != ncclSuccess)                                                       \
            die_at(__FILE__, __LINE__, "NCCL error %d: %s (in %s)", (int)nr_,         \
                   ncclGetErrorString(nr_), #call);                                   \
    } while (0)

// Checks the launch of the kernel just queued (bad grid, too much shared memory).
// Errors inside the kernel surface at the next synchronizing call.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

// The CUDA backend's state, created by ops->init and freed by ops->destroy.
typedef struct CudaBackend {
    cudaStream_t stream;    // every kernel, copy and GEMM of this rank, in order
    cublasHandle_t cublas;  // bound to `stream`; fp32 math (no TF32)
    // Grow-only device workspace for ops that need temporaries (partial sums of
    // deterministic reductions, the token index of the embedding backward).
    // Charged to the ledger as MEM_WORKSPACE. Reused by every op: work queued on
    // one stream runs in order, so one op's use ends before the next one's begins.
    void *scratch;
    size_t scratch_bytes;
    // Grow-only bf16 copies of the GEMM operands when ctx->gemm_dtype is DT_BF16
    // (cuda_gemm_scratch, ops_cuda_layers.cu's matmul), MEM_WORKSPACE too. A buffer
    // of its own, so that no other request (the bias sum inside the same matmul) can
    // move or overwrite the copies between their conversion and the GEMMs.
    void *gemm_scratch;
    size_t gemm_scratch_bytes;
    // The fp8 GEMMs (ops_cuda_fp8.cu): cuBLASLt's handle, its workspace (allocated at
    // the first fp8 GEMM, MEM_WORKSPACE), and whether to use them at all
    // (unless COURSE_FP8_GEMM=fp32; read when the backend starts).
    cublasLtHandle_t lt;
    void *lt_workspace;
    size_t lt_workspace_bytes;
    int fp8_lt;
} CudaBackend;
