// ops.h — the compute backend: every op of the GPT as a forward/backward pair.
//
// One table of function pointers per device (ops_cpu.c, ops_cuda.cu). The model
// calls ctx->ops->op(...) and never asks which device it runs on; a test can hold
// both tables and compare them op by op.
//
// Shape letters, used the same way everywhere:
//   B batch, T time (sequence), C channels (width), OC output channels,
//   NH heads, hs = C/NH head size, V vocabulary, N = B*T rows.
// All tensors are row-major, contiguous, fp32, in the device's memory (but the
// 2-byte copies of pack_half); token ids are int32 in the device's memory.
//
// Gradient convention (as in llm.c): every backward ACCUMULATES (+=) into the
// parameter gradients and into the input gradients. The caller zeroes them when
// a fresh sum is wanted. Accumulation is what makes the residual stream, tied
// embeddings and gradient accumulation over micro-batches free.
#pragma once
#include <stddef.h>
#include <stdint.h>
#include "ctx.h"
#include "dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

struct Ops {
    const char *name;  // "cpu" / "cuda"

    // ---- set-up ----
    void (*init)(Ctx *);      // creates ctx->backend (handles, streams); may be NULL
    void (*destroy)(Ctx *);

    // ---- memory ----
    void *(*alloc)(Ctx *, size_t bytes);           // zero-filled; NULL on failure
    void (*free)(Ctx *, void *p);
    void (*memset0)(Ctx *, void *p, size_t bytes);
    void (*to_device)(Ctx *, void *dst, const void *host_src, size_t bytes);
    void (*to_host)(Ctx *, void *host_dst, const void *src, size_t bytes);
    void (*copy)(Ctx *, void *dst, const void *src, size_t bytes);  // device to device
    // Host memory that to_host and to_device move at the link's full speed: pinned
    // (page-locked) on a GPU, which DMA reads and writes without a bounce buffer;
    // plain on the CPU. Not zero-filled; NULL on failure (the OS limits pinning).
    void *(*host_alloc)(Ctx *, size_t bytes);
    void (*host_free)(Ctx *, void *p);
    void (*synchronize)(Ctx *);                     // wait for queued work (timers)

    // ---- ops ----
    // out(N,OC) = inp(N,C) @ w(OC,C)^T + bias(OC); bias may be NULL.
    // With ctx->gemm_dtype == DT_BF16 (ctx.h: the caller promises that inp, w and,
    // in the backward, dout hold bf16-representable values) the CUDA backend reads
    // them as bf16 on the tensor cores, accumulating and writing fp32. The CPU
    // backend ignores the field: its sgemm on such values already computes what a
    // bf16 tensor core does, exact products summed in fp32, up to the order of the
    // sum. Outputs and gradients are fp32 either way; rounding them is the caller's.
    void (*matmul_forward)(Ctx *, float *out, const float *inp, const float *w,
                           const float *bias, int N, int C, int OC);
    // dinp += dout @ w; dw += dout^T @ inp; dbias += colsum(dout).
    // Any of dinp, dw, dbias may be NULL (not needed): a zero-bubble pipeline
    // computes the input gradient and the weight gradients in separate passes.
    void (*matmul_backward)(Ctx *, float *dinp, float *dw, float *dbias,
                            const float *dout, const float *inp, const float *w,
                            int N, int C, int OC);

    // out(B,T,C) = wte[tokens[b,t]] + wpe[t]
    void (*embedding_forward)(Ctx *, float *out, const int *tokens,
                              const float *wte, const float *wpe, int B, int T, int C);
    // dwte[tokens[b,t]] += dout[b,t]; dwpe[t] += sum_b dout[b,t]. Deterministic:
    // the sum for each row is taken in a fixed order (no float atomics).
    // host_tokens: the same ids in host memory (the model keeps them; the CUDA
    // backend groups positions by token on the host, and without them would copy
    // the ids back and wait for the GPU every step). Required on CUDA.
    void (*embedding_backward)(Ctx *, float *dwte, float *dwpe, const float *dout,
                               const int *tokens, const int *host_tokens, int B, int T, int C);

    // out = (inp - mean)/sqrt(var + 1e-5) * w + b over the last dim C.
    // Saves mean(N) and rstd(N) for the backward pass.
    void (*layernorm_forward)(Ctx *, float *out, float *mean, float *rstd,
                              const float *inp, const float *w, const float *b,
                              int N, int C);
    // dinp += d(out)/d(inp), dw and db += their gradients; any may be NULL, and
    // each is the same computed alone or with the others.
    void (*layernorm_backward)(Ctx *, float *dinp, float *dw, float *db,
                               const float *dout, const float *inp, const float *w,
                               const float *mean, const float *rstd, int N, int C);

    // Causal self-attention. qkv(B,T,3C) holds q | k | v, head h at columns
    // h*hs..(h+1)*hs of each. att(B,NH,T,T) receives the softmax probabilities
    // (row t is zero past column t); out(B,T,C) = att @ v, heads side by side.
    // rt, a precision recipe's type (DT_F32: none): with bf16 or fp16 the caller
    // promises that qkv, and in the backward dout and att, hold values of that type,
    // and the op rounds the two it makes itself to it before its GEMMs read them:
    // the probabilities att (before att @ v) and their gradient (before the GEMMs of
    // dq and dk), as a low-precision softmax and its backward write them
    // (FlashAttention does the same). So every operand of the six GEMMs is a value of
    // that type: in bf16 the CUDA backend runs all six on the tensor cores
    // (ops_cuda_attention.cu).
    void (*attention_forward)(Ctx *, float *out, float *att, const float *qkv,
                              int B, int T, int C, int NH, DType rt);
    // dqkv += d(out)/d(qkv) given dout. scratch: B*NH*T*T floats of workspace.
    void (*attention_backward)(Ctx *, float *dqkv, float *scratch, const float *dout,
                               const float *qkv, const float *att,
                               int B, int T, int C, int NH, DType rt);
    // The same attention without the (T,T) matrix (FlashAttention-2's tiles and online
    // softmax: ops_cpu_flash.c says how, flash_tiles.h which tiles): out as above, to
    // rounding, and lse(B,NH,T), each query row's log-sum-exp of its scaled scores, all
    // the backward keeps. rt as above: the unnormalised probabilities are rounded before
    // they multiply v; in the backward, the probabilities and their gradient before
    // their GEMMs. (The CUDA kernels, ops_cuda_flash.cu, are a first, correct version:
    // the tensor-core one is the GPU-speed work's next measured step.)
    void (*flash_attention_forward)(Ctx *, float *out, float *lse, const float *qkv,
                                    int B, int T, int C, int NH, DType rt);
    // dqkv += d(out)/d(qkv) given dout, from the forward's out and lse; no scratch.
    void (*flash_attention_backward)(Ctx *, float *dqkv, const float *dout, const float *qkv,
                                     const float *out, const float *lse, int B, int T, int C,
                                     int NH, DType rt);

    // GELU, tanh form: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    void (*gelu_forward)(Ctx *, float *out, const float *inp, size_t n);
    void (*gelu_backward)(Ctx *, float *dinp, const float *inp, const float *dout,
                          size_t n);

    // out = a + b (the residual stream). Backward is the identity on both sides,
    // so the model adds dout into both input gradients with `accumulate`.
    void (*residual_forward)(Ctx *, float *out, const float *a, const float *b, size_t n);
    // y += alpha * x
    void (*accumulate)(Ctx *, float *y, const float *x, float alpha, size_t n);

    // losses(N) = -log softmax(logits(N,V))[targets]. logits untouched.
    void (*crossentropy_forward)(Ctx *, float *losses, const float *logits,
                                 const int *targets, int N, int V);
    // dlogits = (softmax(logits) - onehot(targets)) * dloss, written (not
    // accumulated). dlogits may be the same buffer as logits (in place).
    void (*crossentropy_backward)(Ctx *, float *dlogits, const float *logits,
                                  const int *targets, float dloss, int N, int V);

    // ---- the vocabulary split over ranks (stage 04's tensor parallelism) ----
    // A rank holds the embedding rows, and the logits columns, of the ids
    // [vocab_lo, vocab_lo + Vl). The serial model uses the fused ops above; these
    // are the pieces a vocab-parallel embedding and cross-entropy put together
    // around their collectives (04_tensor_parallel/vocab_*.c).
    //
    // out(N,C) = wte[tokens[n] - vocab_lo] for the ids this rank holds, 0 for the others.
    void (*embedding_lookup_forward)(Ctx *, float *out, const int *tokens, const float *wte,
                                     int vocab_lo, int Vl, int N, int C);
    // dwte[tokens[n] - vocab_lo] += dout[n] for the ids this rank holds (others
    // skipped); deterministic like embedding_backward. host_tokens as there.
    void (*embedding_lookup_backward)(Ctx *, float *dwte, const float *dout, const int *tokens,
                                      const int *host_tokens, int vocab_lo, int Vl, int N, int C);
    // Rows n = 0..N-1 of out are token rows row0 + n of the (B,T) batch:
    // out[n] += wpe[(row0 + n) % T]; backward dwpe[(row0 + n) % T] += dout[n], in row order.
    void (*position_forward)(Ctx *, float *out, const float *wpe, int row0, int N, int T, int C);
    void (*position_backward)(Ctx *, float *dwpe, const float *dout, int row0, int N, int T,
                              int C);
    // logits(N,Vl) of which the first `valid` columns are real ids (the rest pad
    // the vocabulary to a multiple of the ranks). rowmax(N) = the largest valid
    // logit of each row (-inf where valid = 0).
    void (*logits_max)(Ctx *, float *rowmax, const float *logits, int N, int Vl, int valid);
    // sumexp(N) = sum over valid columns of exp(logit - m[n]); tlogit(N) = the
    // logit of targets[n] where this rank holds that id, else 0.
    void (*logits_sumexp)(Ctx *, float *sumexp, float *tlogit, const float *logits,
                          const float *m, const int *targets, int vocab_lo, int N, int Vl,
                          int valid);
    // losses(N) = log(sumexp) + m - tlogit, from the group-wide m, sumexp, tlogit.
    void (*crossentropy_loss)(Ctx *, float *losses, const float *m, const float *sumexp,
                              const float *tlogit, int N);
    // dlogits = (exp(logit - m)/sumexp - onehot(target)) * dloss on the valid
    // columns, 0 on the padding; written (in place allowed, as crossentropy_backward).
    void (*crossentropy_backward_split)(Ctx *, float *dlogits, const float *logits, const float *m,
                                        const float *sumexp, const int *targets, int vocab_lo,
                                        float dloss, int N, int Vl, int valid);

    // ---- low precision in fp32 slots (stage 06's mixed precision) ----
    // The course emulates low-precision storage: a tensor stays fp32 in memory but
    // holds only values the low-precision type can represent. The scalar routines
    // these apply are in dtype.c, and stochastic rounding's is the caller's (SRoundRule).
    //
    // x[i] = x[i] rounded to nearest even in dt and back to fp32: the same bits as
    // dtype_convert to dt and back (dt: fp32, a no-op; bf16; fp16; e4m3 and e5m2,
    // unscaled and saturating).
    void (*round_to)(Ctx *, float *x, size_t n, DType dt);
    // x[i] = x[i] rounded stochastically to bf16 by `rule` (rule->round) with the
    // random bits rule->bits(seed, offset + i): the same bits on every backend, for
    // any thread count; representable values and inf unchanged, NaN stays NaN.
    void (*round_stochastic_bf16)(Ctx *, float *x, size_t n, uint64_t seed, uint64_t offset,
                                  const SRoundRule *rule);
    // Fake quantization to fp8 with a per-tensor scale (Transformer Engine's delayed
    // scaling, 06_mixed_precision/fp8.c): *amax (host memory) = max |x[i]| of the
    // input (NaN ignored, as fmaxf does), then x[i] = fp8(x[i] * scale) / scale, the
    // cast saturating, NaN left as it is. fmt: DT_E4M3 or DT_E5M2; scale > 0 and
    // finite. Returns to the host with amax (the CUDA version waits for the GPU).
    void (*quantize_fp8)(Ctx *, float *x, size_t n, DType fmt, float scale, float *amax);
    // The fp8 recipe's GEMMs (06_mixed_precision/fp8_linear.c): matmul_forward and matmul_backward
    // on operands quantize_fp8 has left, each with its tensor's scale: sx for inp and
    // sw for w (E4M3), sdy for dout (E5M2). The CPU runs the fp32 GEMM on those values
    // (the scales are not needed: they are scaled back already). The CUDA backend
    // encodes the operands as fp8 again and multiplies them on the fp8 tensor cores
    // through cuBLASLt (ops_cuda_fp8.cu says how); with COURSE_FP8_GEMM=fp32, and where
    // cuBLASLt's fp8 rules do not hold, the matmul above.
    void (*matmul_fp8_forward)(Ctx *, float *out, const float *inp, float sx, const float *w,
                               float sw, const float *bias, int N, int C, int OC);
    void (*matmul_fp8_backward)(Ctx *, float *dinp, float *dw, float *dbias, const float *dout,
                                float sdy, const float *inp, float sx, const float *w, float sw,
                                int N, int C, int OC);

    // ---- 2-byte storage (stage 06: a layer's saved activations in the mixed recipes)
    // dst[i] = the 2-byte code of src[i] in dt (DT_BF16 or DT_F16): the bits of
    // f32_to_bf16 / f32_to_f16 (dtype.c: round to nearest even, NaN stays NaN, fp16
    // overflows to inf). Lossless for values round_to(dt) has left: what the model packs.
    void (*pack_half)(Ctx *, uint16_t *dst, const float *src, size_t n, DType dt);
    // dst[i] = src[i] decoded to fp32 (bf16_to_f32 / f16_to_f32): exact.
    void (*unpack_half)(Ctx *, float *dst, const uint16_t *src, size_t n, DType dt);

    // ---- optimizer ----
    // One AdamW step over n contiguous elements (PyTorch's AdamW, decoupled decay):
    //   p -= lr*wd*p; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2;
    //   p -= lr * (m/(1-b1^t)) / (sqrt(v/(1-b2^t)) + eps)
    // grad_scale multiplies g first (gradient clipping, loss-scale unscaling).
    void (*adamw_update)(Ctx *, float *p, const float *g, float *m, float *v,
                         size_t n, float lr, float beta1, float beta2, float eps,
                         float weight_decay, float grad_scale, int t);
    // sum of x[i]^2, accumulated in double, returned on the host.
    double (*sum_squares)(Ctx *, const float *x, size_t n);
    void (*scale)(Ctx *, float *x, float s, size_t n);
};

extern const Ops ops_cpu;
// The CUDA table: defined in ops_cuda.cu, in the backend's library when the build
// found nvcc (cuda_plugin.c loads it). Without it, NULL, and ctx_init(DEV_CUDA)
// says this build has no CUDA.
const Ops *ops_cuda_table(void);

#ifdef __cplusplus
}
#endif
