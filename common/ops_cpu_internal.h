// ops_cpu_internal.h — the CPU backend's ops that live outside ops_cpu.c, for its
// table (ops_cpu_precision.c: the low-precision ops; ops_cpu_flash.c: attention
// without the T x T matrix). Not for the stages: ops.h.
#pragma once
#include "ops.h"

void cpu_round_to(Ctx *ctx, float *x, size_t n, DType dt);
void cpu_round_stochastic_bf16(Ctx *ctx, float *x, size_t n, uint64_t seed, uint64_t offset,
                               const SRoundRule *rule);
void cpu_quantize_fp8(Ctx *ctx, float *x, size_t n, DType fmt, float scale, float *amax);
void cpu_pack_half(Ctx *ctx, uint16_t *dst, const float *src, size_t n, DType dt);
void cpu_unpack_half(Ctx *ctx, float *dst, const uint16_t *src, size_t n, DType dt);
// ops_cpu_flash.c
void cpu_flash_attention_forward(Ctx *ctx, float *out, float *lse, const float *qkv, int B, int T,
                                 int C, int NH, DType rt);
void cpu_flash_attention_backward(Ctx *ctx, float *dqkv, const float *dout, const float *qkv,
                                  const float *out, const float *lse, int B, int T, int C, int NH,
                                  DType rt);
