// opaque_device.c — a CPU device whose memory the host cannot read (opaque_device.h).
#include "opaque_device.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"

static OpaqueDevice *od_of(Ctx *ctx) { return (OpaqueDevice *)(uintptr_t)ctx->ops; }

// ---------------------------------------------------------------- the code

static int is_ids(const OpaqueDevice *od, const void *p, size_t bytes) {
    const char *a = p, *lo = (const char *)od->ids, *hi = lo + od->n_ids * sizeof(int);
    if (a + bytes <= lo || a >= hi) return 0;
    CHECK(a >= lo && a + bytes <= hi && (a - lo) % sizeof(int) == 0,
          "opaque device: a move of %zu bytes straddles the ids buffer", bytes);
    return 1;
}
static int id_shift(const OpaqueDevice *od) { return od->vocab / 2 + 1; }

static void encode(const OpaqueDevice *od, void *dst, const void *src, size_t bytes) {
    size_t n = bytes / 4;
    CHECK(bytes % 4 == 0, "opaque device: %zu bytes is not a whole number of floats or ids", bytes);
    if (is_ids(od, dst, bytes)) {
        const int *s = src;
        int *d = dst, V = od->vocab;
        for (size_t i = 0; i < n; i++) d[i] = s[i] < 0 ? s[i] : (s[i] + id_shift(od)) % V;
        return;
    }
    const float *s = src;
    float *d = dst;
    for (size_t i = 0; i < n; i++) d[i] = s[i] * OPAQUE_SCALE;
}
static void decode(const OpaqueDevice *od, void *dst, const void *src, size_t bytes) {
    size_t n = bytes / 4;
    CHECK(bytes % 4 == 0, "opaque device: %zu bytes is not a whole number of floats or ids", bytes);
    if (is_ids(od, src, bytes)) {
        const int *s = src;
        int *d = dst, V = od->vocab;
        for (size_t i = 0; i < n; i++) d[i] = s[i] < 0 ? s[i] : (s[i] - id_shift(od) + V) % V;
        return;
    }
    const float *s = src;
    float *d = dst;
    for (size_t i = 0; i < n; i++) d[i] = s[i] / OPAQUE_SCALE;
}
// A host copy of n stored floats (or ids), decoded: the backend's view of them.
static void *plain_copy(const OpaqueDevice *od, const void *dev, size_t n) {
    void *h = xmalloc(n * 4);
    decode(od, h, dev, n * 4);
    return h;
}
static void store(const OpaqueDevice *od, void *dev, void *host, size_t n) {
    encode(od, dev, host, n * 4);
    free(host);
}

// ---------------------------------------------------------------- the ops

static void od_to_device(Ctx *ctx, void *dst, const void *src, size_t bytes) {
    encode(od_of(ctx), dst, src, bytes);
}
static void od_to_host(Ctx *ctx, void *dst, const void *src, size_t bytes) {
    decode(od_of(ctx), dst, src, bytes);
}

static void od_logits_max(Ctx *ctx, float *rowmax, const float *logits, int N, int Vl, int valid) {
    OpaqueDevice *od = od_of(ctx);
    float *l = plain_copy(od, logits, (size_t)N * Vl), *m = xmalloc(sizeof(float) * N);
    od->plain->logits_max(ctx, m, l, N, Vl, valid);
    store(od, rowmax, m, N);
    free(l);
}

static void od_logits_sumexp(Ctx *ctx, float *sumexp, float *tlogit, const float *logits,
                             const float *m, const int *targets, int vocab_lo, int N, int Vl,
                             int valid) {
    OpaqueDevice *od = od_of(ctx);
    float *l = plain_copy(od, logits, (size_t)N * Vl), *pm = plain_copy(od, m, N);
    int *t = plain_copy(od, targets, N);
    float *s = xmalloc(sizeof(float) * N), *tl = xmalloc(sizeof(float) * N);
    od->plain->logits_sumexp(ctx, s, tl, l, pm, t, vocab_lo, N, Vl, valid);
    store(od, sumexp, s, N);
    store(od, tlogit, tl, N);
    free(l); free(pm); free(t);
}

static void od_crossentropy_loss(Ctx *ctx, float *losses, const float *m, const float *sumexp,
                                 const float *tlogit, int N) {
    OpaqueDevice *od = od_of(ctx);
    float *pm = plain_copy(od, m, N), *s = plain_copy(od, sumexp, N);
    float *tl = plain_copy(od, tlogit, N), *out = xmalloc(sizeof(float) * N);
    od->plain->crossentropy_loss(ctx, out, pm, s, tl, N);
    store(od, losses, out, N);
    free(pm); free(s); free(tl);
}

static void od_crossentropy_backward_split(Ctx *ctx, float *dlogits, const float *logits,
                                           const float *m, const float *sumexp,
                                           const int *targets, int vocab_lo, float dloss,
                                           int N, int Vl, int valid) {
    OpaqueDevice *od = od_of(ctx);
    size_t n = (size_t)N * Vl;
    float *l = plain_copy(od, logits, n), *pm = plain_copy(od, m, N);
    float *s = plain_copy(od, sumexp, N), *d = xmalloc(sizeof(float) * n);
    int *t = plain_copy(od, targets, N);
    od->plain->crossentropy_backward_split(ctx, d, l, pm, s, t, vocab_lo, dloss, N, Vl, valid);
    store(od, dlogits, d, n);  // written, not accumulated: in place (dlogits == logits) is fine
    free(l); free(pm); free(s); free(t);
}

void opaque_begin(OpaqueDevice *od, Ctx *ctx, int *ids, size_t n_ids, int vocab) {
    CHECK(ctx->device == DEV_CPU, "the opaque device wraps the CPU backend");
    memset(od, 0, sizeof *od);
    od->plain = ctx->ops;
    od->ops = *ctx->ops;
    od->ops.name = "cpu-opaque";
    od->ops.to_device = od_to_device;
    od->ops.to_host = od_to_host;
    od->ops.logits_max = od_logits_max;
    od->ops.logits_sumexp = od_logits_sumexp;
    od->ops.crossentropy_loss = od_crossentropy_loss;
    od->ops.crossentropy_backward_split = od_crossentropy_backward_split;
    od->ids = ids;
    od->n_ids = n_ids;
    od->vocab = vocab;
    ctx->ops = &od->ops;
}

void opaque_end(OpaqueDevice *od, Ctx *ctx) {
    CHECK(ctx->ops == &od->ops, "opaque_end: the context is not on this opaque device");
    ctx->ops = od->plain;
}
