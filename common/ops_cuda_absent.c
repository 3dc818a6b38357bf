// ops_cuda_absent.c — stands in for ops_cuda.cu in builds without nvcc.
//
// ctx_init(DEV_CUDA) sees the NULL table and says that this binary has no CUDA;
// tests/test_gpu.c sees zero devices and reports itself skipped.
#include <stddef.h>

#include "ops.h"

int cuda_device_count(void);  // declared for C++ in cuda_common.cuh, which C code cannot include

const Ops *ops_cuda_table(void) { return NULL; }
int cuda_device_count(void) { return 0; }
