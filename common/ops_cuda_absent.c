// ops_cuda_absent.c — stands in for ops_cuda.cu in builds without nvcc.
//
// ctx_init(DEV_CUDA) sees the NULL table and says that this binary has no CUDA;
// tests/test_gpu.c asks cuda_probe (cuda_query_absent.c: "not built") and skips.
#include <stddef.h>

#include "ops.h"

const Ops *ops_cuda_table(void) { return NULL; }
