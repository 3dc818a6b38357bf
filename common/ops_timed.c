// ops_timed.c — the op-by-op timer (ops_timed.h).
#include "ops_timed.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops.h"
#include "timer.h"

// One slot per entry of the Ops table, found by the entry's offset in it.
#define SLOTS (sizeof(Ops) / sizeof(void (*)(void)))
#define SLOT(op) (offsetof(Ops, op) / sizeof(void (*)(void)))

typedef struct {
    Ops table;             // first: ctx->ops points here, and the wrappers find the rest
    const Ops *inner;      // the backend's table
    double since;          // when timing began
    double seconds[SLOTS];
    long calls[SLOTS];
    const char *names[SLOTS];
} OpTimes;

static OpTimes *times_of(Ctx *ctx) { return (OpTimes *)(uintptr_t)ctx->ops; }

static double op_begin(Ctx *ctx, OpTimes *t) {
    t->inner->synchronize(ctx);  // the work queued before this op is not its own
    return now_seconds();
}
static void op_end(Ctx *ctx, OpTimes *t, size_t slot, const char *name, double t0) {
    t->inner->synchronize(ctx);
    t->seconds[slot] += now_seconds() - t0;
    t->calls[slot]++;
    t->names[slot] = name;
}

// timed_OP: OP of the backend, timed. PARAMS as in ops.h, ARGS the same names.
#define TIMED(op, params, args)                         \
    static void timed_##op params {                     \
        OpTimes *self = times_of(ctx);                  \
        double t0 = op_begin(ctx, self);                \
        self->inner->op args;                           \
        op_end(ctx, self, SLOT(op), #op, t0);           \
    }

TIMED(memset0, (Ctx *ctx, void *p, size_t bytes), (ctx, p, bytes))
TIMED(to_device, (Ctx *ctx, void *dst, const void *src, size_t bytes), (ctx, dst, src, bytes))
TIMED(to_host, (Ctx *ctx, void *dst, const void *src, size_t bytes), (ctx, dst, src, bytes))
TIMED(copy, (Ctx *ctx, void *dst, const void *src, size_t bytes), (ctx, dst, src, bytes))
TIMED(matmul_forward,
      (Ctx *ctx, float *out, const float *inp, const float *w, const float *bias, int N, int C,
       int OC), (ctx, out, inp, w, bias, N, C, OC))
TIMED(matmul_backward,
      (Ctx *ctx, float *dinp, float *dw, float *dbias, const float *dout, const float *inp,
       const float *w, int N, int C, int OC), (ctx, dinp, dw, dbias, dout, inp, w, N, C, OC))
TIMED(embedding_forward,
      (Ctx *ctx, float *out, const int *tokens, const float *wte, const float *wpe, int B, int T,
       int C), (ctx, out, tokens, wte, wpe, B, T, C))
TIMED(embedding_backward,
      (Ctx *ctx, float *dwte, float *dwpe, const float *dout, const int *tokens,
       const int *host_tokens, int B, int T, int C),
      (ctx, dwte, dwpe, dout, tokens, host_tokens, B, T, C))
TIMED(layernorm_forward,
      (Ctx *ctx, float *out, float *mean, float *rstd, const float *inp, const float *w,
       const float *b, int N, int C), (ctx, out, mean, rstd, inp, w, b, N, C))
TIMED(layernorm_backward,
      (Ctx *ctx, float *dinp, float *dw, float *db, const float *dout, const float *inp,
       const float *w, const float *mean, const float *rstd, int N, int C),
      (ctx, dinp, dw, db, dout, inp, w, mean, rstd, N, C))
TIMED(attention_forward,
      (Ctx *ctx, float *out, float *att, const float *qkv, int B, int T, int C, int NH, DType rt),
      (ctx, out, att, qkv, B, T, C, NH, rt))
TIMED(attention_backward,
      (Ctx *ctx, float *dqkv, float *scratch, const float *dout, const float *qkv,
       const float *att, int B, int T, int C, int NH, DType rt),
      (ctx, dqkv, scratch, dout, qkv, att, B, T, C, NH, rt))
TIMED(flash_attention_forward,
      (Ctx *ctx, float *out, float *lse, const float *qkv, int B, int T, int C, int NH, DType rt),
      (ctx, out, lse, qkv, B, T, C, NH, rt))
TIMED(flash_attention_backward,
      (Ctx *ctx, float *dqkv, const float *dout, const float *qkv, const float *out,
       const float *lse, int B, int T, int C, int NH, DType rt),
      (ctx, dqkv, dout, qkv, out, lse, B, T, C, NH, rt))
TIMED(gelu_forward, (Ctx *ctx, float *out, const float *inp, size_t n), (ctx, out, inp, n))
TIMED(gelu_backward, (Ctx *ctx, float *dinp, const float *inp, const float *dout, size_t n),
      (ctx, dinp, inp, dout, n))
TIMED(residual_forward, (Ctx *ctx, float *out, const float *a, const float *b, size_t n),
      (ctx, out, a, b, n))
TIMED(accumulate, (Ctx *ctx, float *y, const float *x, float alpha, size_t n),
      (ctx, y, x, alpha, n))
TIMED(crossentropy_forward,
      (Ctx *ctx, float *losses, const float *logits, const int *targets, int N, int V),
      (ctx, losses, logits, targets, N, V))
TIMED(crossentropy_backward,
      (Ctx *ctx, float *dlogits, const float *logits, const int *targets, float dloss, int N,
       int V), (ctx, dlogits, logits, targets, dloss, N, V))
TIMED(embedding_lookup_forward,
      (Ctx *ctx, float *out, const int *tokens, const float *wte, int vocab_lo, int Vl, int N,
       int C), (ctx, out, tokens, wte, vocab_lo, Vl, N, C))
TIMED(embedding_lookup_backward,
      (Ctx *ctx, float *dwte, const float *dout, const int *tokens, const int *host_tokens,
       int vocab_lo, int Vl, int N, int C),
      (ctx, dwte, dout, tokens, host_tokens, vocab_lo, Vl, N, C))
TIMED(position_forward, (Ctx *ctx, float *out, const float *wpe, int row0, int N, int T, int C),
      (ctx, out, wpe, row0, N, T, C))
TIMED(position_backward,
      (Ctx *ctx, float *dwpe, const float *dout, int row0, int N, int T, int C),
      (ctx, dwpe, dout, row0, N, T, C))
TIMED(logits_max, (Ctx *ctx, float *rowmax, const float *logits, int N, int Vl, int valid),
      (ctx, rowmax, logits, N, Vl, valid))
TIMED(logits_sumexp,
      (Ctx *ctx, float *sumexp, float *tlogit, const float *logits, const float *m,
       const int *targets, int vocab_lo, int N, int Vl, int valid),
      (ctx, sumexp, tlogit, logits, m, targets, vocab_lo, N, Vl, valid))
TIMED(crossentropy_loss,
      (Ctx *ctx, float *losses, const float *m, const float *sumexp, const float *tlogit, int N),
      (ctx, losses, m, sumexp, tlogit, N))
TIMED(crossentropy_backward_split,
      (Ctx *ctx, float *dlogits, const float *logits, const float *m, const float *sumexp,
       const int *targets, int vocab_lo, float dloss, int N, int Vl, int valid),
      (ctx, dlogits, logits, m, sumexp, targets, vocab_lo, dloss, N, Vl, valid))
TIMED(round_to, (Ctx *ctx, float *x, size_t n, DType dt), (ctx, x, n, dt))
TIMED(round_stochastic_bf16,
      (Ctx *ctx, float *x, size_t n, uint64_t seed, uint64_t offset, const SRoundRule *rule),
      (ctx, x, n, seed, offset, rule))
TIMED(quantize_fp8, (Ctx *ctx, float *x, size_t n, DType fmt, float scale, float *amax),
      (ctx, x, n, fmt, scale, amax))
TIMED(matmul_fp8_forward,
      (Ctx *ctx, float *out, const float *inp, float sx, const float *w, float sw,
       const float *bias, int N, int C, int OC), (ctx, out, inp, sx, w, sw, bias, N, C, OC))
TIMED(matmul_fp8_backward,
      (Ctx *ctx, float *dinp, float *dw, float *dbias, const float *dout, float sdy,
       const float *inp, float sx, const float *w, float sw, int N, int C, int OC),
      (ctx, dinp, dw, dbias, dout, sdy, inp, sx, w, sw, N, C, OC))
TIMED(pack_half, (Ctx *ctx, uint16_t *dst, const float *src, size_t n, DType dt),
      (ctx, dst, src, n, dt))
TIMED(unpack_half, (Ctx *ctx, float *dst, const uint16_t *src, size_t n, DType dt),
      (ctx, dst, src, n, dt))
TIMED(adamw_update,
      (Ctx *ctx, float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1,
       float beta2, float eps, float weight_decay, float grad_scale, int t),
      (ctx, p, g, m, v, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t))
TIMED(scale, (Ctx *ctx, float *x, float s, size_t n), (ctx, x, s, n))

static double timed_sum_squares(Ctx *ctx, const float *x, size_t n) {
    OpTimes *t = times_of(ctx);
    double t0 = op_begin(ctx, t);
    double s = t->inner->sum_squares(ctx, x, n);
    op_end(ctx, t, SLOT(sum_squares), "sum_squares", t0);
    return s;
}

// ---------------------------------------------------------------- the table

static void report(const OpTimes *t, int rank) {
    double total = 0, wall = now_seconds() - t->since;
    long calls = 0;
    int used = 0, order[SLOTS];
    for (size_t i = 0; i < SLOTS; i++)
        if (t->calls[i]) total += t->seconds[i], calls += t->calls[i], order[used++] = (int)i;
    for (int a = 1; a < used; a++)  // by time, largest first (insertion sort: ~40 slots)
        for (int b = a; b > 0 && t->seconds[order[b]] > t->seconds[order[b - 1]]; b--) {
            int x = order[b]; order[b] = order[b - 1]; order[b - 1] = x;
        }
    log_info("op timing, rank %d (COURSE_OP_TIMING=1; the device waited for before and after "
             "every op): %.3f s in %ld calls of %d ops, %.3f s outside them", rank, total, calls,
             used, wall - total);
    for (int k = 0; k < used; k++) {
        int i = order[k];
        log_info("  %-28s %8ld calls %11.3f ms %5.1f %% %10.1f us/call", t->names[i], t->calls[i],
                 1e3 * t->seconds[i], total > 0 ? 100 * t->seconds[i] / total : 0,
                 1e6 * t->seconds[i] / (double)t->calls[i]);
    }
    for (int k = 0; k < used; k++)
        printf("OPTIME op=%s calls=%ld ms=%.3f\n", t->names[order[k]], t->calls[order[k]],
               1e3 * t->seconds[order[k]]);
    fflush(stdout);
}

static void timed_destroy(Ctx *ctx) {
    OpTimes *t = times_of(ctx);
    if (ctx->rank == 0) report(t, ctx->rank);
    ctx->ops = t->inner;
    free(t);
    if (ctx->ops->destroy) ctx->ops->destroy(ctx);
}

void ops_timing_wrap(Ctx *ctx) {
    OpTimes *t = xcalloc(1, sizeof *t);
    t->inner = ctx->ops;
    t->table = *ctx->ops;  // alloc, free, host memory, synchronize: untimed
    t->table.destroy = timed_destroy;
#define USE(op) if (t->inner->op) t->table.op = timed_##op  // (a NULL op stays NULL)
    USE(memset0); USE(to_device); USE(to_host); USE(copy);
    USE(matmul_forward); USE(matmul_backward); USE(embedding_forward); USE(embedding_backward);
    USE(layernorm_forward); USE(layernorm_backward); USE(attention_forward);
    USE(attention_backward); USE(flash_attention_forward); USE(flash_attention_backward);
    USE(gelu_forward); USE(gelu_backward); USE(residual_forward);
    USE(accumulate); USE(crossentropy_forward); USE(crossentropy_backward);
    USE(embedding_lookup_forward); USE(embedding_lookup_backward); USE(position_forward);
    USE(position_backward); USE(logits_max); USE(logits_sumexp); USE(crossentropy_loss);
    USE(crossentropy_backward_split); USE(round_to); USE(round_stochastic_bf16);
    USE(quantize_fp8); USE(matmul_fp8_forward); USE(matmul_fp8_backward); USE(pack_half);
    USE(unpack_half); USE(adamw_update); USE(sum_squares); USE(scale);
#undef USE
    // An op added to ops.h is timed here too: only the seven entries above (name, init,
    // alloc, free, host_alloc, host_free, synchronize) may be the backend's own, besides
    // the ops the backend lacks (NULL: nothing to call, nothing to time).
    static const char null_entry[sizeof(void (*)(void))];
    int own = 0;
    for (size_t i = 0; i < SLOTS; i++) {
        const char *mine = (const char *)&t->table + i * sizeof null_entry;
        const char *theirs = (const char *)t->inner + i * sizeof null_entry;
        own += memcmp(mine, theirs, sizeof null_entry) == 0 &&
               memcmp(theirs, null_entry, sizeof null_entry) != 0;
    }
    CHECK(own <= 7, "ops_timed.c times %zu of the %zu entries of ops.h's table: time the new op "
          "there too", SLOTS - own, SLOTS);
    t->since = now_seconds();
    ctx->ops = &t->table;
}
