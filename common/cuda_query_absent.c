// cuda_query_absent.c — stands in for cuda_query.cu in builds without nvcc: the
// answer is always "this build has no CUDA", which the tests report as skipped.
#include "cuda_probe.h"

void cuda_probe_query(CudaProbe *p) { p->state = CUDA_NOT_BUILT; }
