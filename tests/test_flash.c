// test_flash.c — attention without the T x T matrix (ops.h's flash_attention_*, the
// CPU's in ops_cpu_flash.c) against attention_forward/backward, which keep it.
//
// fp32: the same function, summed in another order (tiles of 64 keys, a running
// maximum that rescales what was summed): within 1e-5 relative, as test_ops.c's
// forward tolerance for reductions of this length. The log-sum-exp it keeps against
// a float64 one: 1e-5 absolute (an fp32 log of a sum near 1..T).
// bf16 (rt = DT_BF16, bf16-valued qkv): the two round different numbers (the
// materialised op its normalised probabilities, this one the unnormalised ones and
// the backward's recomputed ones), each to 2^-9 relative; over a row's sums the
// outputs and gradients agree to 1e-2 relative.
// Also: every (query, key <= query) pair visited exactly once by the tile loops
// (flash_tiles.h), backward accumulating (+=) into dqkv, bitwise reruns, and the
// first query row's output exactly v_0 (one key: probability 1).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "flash_tiles.h"
#include "harness.h"
#include "ops.h"
#include "rng.h"

typedef struct { int B, T, C, NH; } Shape;

static Ctx ctx;
static Rng rng;

static float *randn(size_t n) {
    float *x = xmalloc(n * sizeof(float));
    rng_fill_normal(&rng, x, n, 0.0f, 1.0f);
    return x;
}

// The tile loops of ops_cpu_flash.c, counting the pairs they visit: each (i, j <= i)
// once in the forward's and once in the backward's, and no j > i as a seen key.
static void test_tiles(TestState *ts) {
    int bad = 0, worst_T = 0;
    for (int T = 1; T <= 200 && !bad; T++) {
        int *fwd = xcalloc((size_t)T * T, sizeof(int)), *bwd = xcalloc((size_t)T * T, sizeof(int));
        for (int i0 = 0; i0 < T; i0 += FLASH_BR)
            for (int j0 = 0; j0 < flash_key_end(i0, T); j0 += FLASH_BC)
                for (int r = 0; r < flash_tile_rows(i0, T); r++)
                    for (int c = 0; c < flash_keys_seen(i0 + r, j0, flash_tile_cols(j0, T)); c++)
                        fwd[(size_t)(i0 + r) * T + j0 + c]++;
        for (int j0 = 0; j0 < T; j0 += FLASH_BC)
            for (int i0 = flash_query_start(j0); i0 < T; i0 += FLASH_BR)
                for (int r = 0; r < flash_tile_rows(i0, T); r++)
                    for (int c = 0; c < flash_keys_seen(i0 + r, j0, flash_tile_cols(j0, T)); c++)
                        bwd[(size_t)(i0 + r) * T + j0 + c]++;
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                int want = j <= i;
                if (fwd[(size_t)i * T + j] != want || bwd[(size_t)i * T + j] != want) bad++;
            }
        if (bad) worst_T = T;
        free(fwd); free(bwd);
    }
    if (bad)
        test_report(ts, 0, "flash.tiles", "T = %d: %d (query, key) pairs visited not exactly once "
                    "(or a key after its query)", worst_T, bad);
    else
        test_report(ts, 1, "flash.tiles", "T = 1..200: every key <= query visited once by the "
                    "forward's tiles and once by the backward's, no other");
}

// Both ops on the same inputs; errors of flash against the materialised op.
typedef struct { double out, dqkv; int bitwise_rerun, first_row_exact; } Compare;

static Compare compare(const Shape *s, const float *qkv, const float *dout, DType rt) {
    const Ops *o = ctx.ops;
    size_t nqkv = (size_t)s->B * s->T * 3 * s->C, ny = (size_t)s->B * s->T * s->C;
    size_t natt = (size_t)s->B * s->NH * s->T * s->T, nlse = (size_t)s->B * s->NH * s->T;
    float *y = xcalloc(ny, 4), *att = xcalloc(natt, 4), *scratch = xcalloc(natt, 4);
    float *fy = xcalloc(ny, 4), *fy2 = xcalloc(ny, 4), *lse = xcalloc(nlse, 4);
    float *d = randn(nqkv), *fd = xmalloc(nqkv * 4), *fd2 = xmalloc(nqkv * 4);
    memcpy(fd, d, nqkv * 4);  // both backwards accumulate into the same starting values
    memcpy(fd2, d, nqkv * 4);
    o->attention_forward(&ctx, y, att, qkv, s->B, s->T, s->C, s->NH, rt);
    o->attention_backward(&ctx, d, scratch, dout, qkv, att, s->B, s->T, s->C, s->NH, rt);
    o->flash_attention_forward(&ctx, fy, lse, qkv, s->B, s->T, s->C, s->NH, rt);
    o->flash_attention_backward(&ctx, fd, dout, qkv, fy, lse, s->B, s->T, s->C, s->NH, rt);
    o->flash_attention_forward(&ctx, fy2, lse, qkv, s->B, s->T, s->C, s->NH, rt);
    o->flash_attention_backward(&ctx, fd2, dout, qkv, fy2, lse, s->B, s->T, s->C, s->NH, rt);
    Compare c = {rel_error(fy, y, ny), rel_error(fd, d, nqkv),
                 !memcmp(fy, fy2, ny * 4) && !memcmp(fd, fd2, nqkv * 4), 1};
    for (int b = 0; b < s->B; b++)  // row 0 of every head: v_0 itself
        for (int e = 0; e < s->C; e++)
            c.first_row_exact &= fy[(size_t)b * s->T * s->C + e] ==
                                 qkv[(size_t)b * s->T * 3 * s->C + 2 * s->C + e];
    free(y); free(att); free(scratch); free(fy); free(fy2); free(lse); free(d); free(fd); free(fd2);
    return c;
}

// lse against a float64 log-sum-exp of the scaled scores.
static double lse_error(const Shape *s, const float *qkv) {
    int hs = s->C / s->NH, C3 = 3 * s->C;
    size_t ny = (size_t)s->B * s->T * s->C, nlse = (size_t)s->B * s->NH * s->T;
    float *y = xcalloc(ny, 4), *lse = xcalloc(nlse, 4);
    ctx.ops->flash_attention_forward(&ctx, y, lse, qkv, s->B, s->T, s->C, s->NH, DT_F32);
    double worst = 0;
    for (int b = 0; b < s->B; b++)
        for (int h = 0; h < s->NH; h++)
            for (int i = 0; i < s->T; i++) {
                const float *q = qkv + ((size_t)b * s->T + i) * C3 + h * hs;
                double mx = -INFINITY, sum = 0, sc[256];
                for (int j = 0; j <= i; j++) {
                    const float *k = qkv + ((size_t)b * s->T + j) * C3 + s->C + h * hs;
                    double dot = 0;
                    for (int e = 0; e < hs; e++) dot += (double)q[e] * k[e];
                    sc[j] = dot / sqrt((double)hs);
                    mx = sc[j] > mx ? sc[j] : mx;
                }
                for (int j = 0; j <= i; j++) sum += exp(sc[j] - mx);
                worst = max_err(worst, fabs(lse[((size_t)b * s->NH + h) * s->T + i] - (mx + log(sum))));
            }
    free(y); free(lse);
    return worst;
}

static void test_shape(TestState *ts, Shape s) {
    char tag[64], name[96];
    snprintf(tag, sizeof tag, "B%d.T%d.C%d.NH%d", s.B, s.T, s.C, s.NH);
    size_t nqkv = (size_t)s.B * s.T * 3 * s.C, ny = (size_t)s.B * s.T * s.C;
    float *qkv = randn(nqkv), *dout = randn(ny);
    Compare c = compare(&s, qkv, dout, DT_F32);
    snprintf(name, sizeof name, "flash.fp32.%s", tag);
    test_report(ts, c.out <= 1e-5 && c.dqkv <= 1e-5 && c.bitwise_rerun && c.first_row_exact, name,
                "against the materialised attention: out rel_err %.2e, dqkv (+=) %.2e (tol 1e-5); "
                "rerun %s; row 0 %s", c.out, c.dqkv, c.bitwise_rerun ? "bitwise" : "DIFFERS",
                c.first_row_exact ? "= v_0 exactly" : "NOT v_0");
    double le = lse_error(&s, qkv);
    snprintf(name, sizeof name, "flash.lse.%s", tag);
    test_report(ts, le <= 1e-5, name, "log-sum-exp of every row against float64: max abs err "
                "%.2e (tol 1e-5)", le);
    // bf16: the inputs bf16 values, the recipe's roundings inside both ops.
    ctx.ops->round_to(&ctx, qkv, nqkv, DT_BF16);
    ctx.ops->round_to(&ctx, dout, ny, DT_BF16);
    Compare b = compare(&s, qkv, dout, DT_BF16);
    snprintf(name, sizeof name, "flash.bf16.%s", tag);
    test_report(ts, b.out <= 1e-2 && b.dqkv <= 1e-2 && b.bitwise_rerun, name,
                "rt = bf16, against the materialised op in bf16: out rel_err %.2e, dqkv %.2e "
                "(tol 1e-2: each rounds other numbers to 2^-9); rerun %s", b.out, b.dqkv,
                b.bitwise_rerun ? "bitwise" : "DIFFERS");
    free(qkv); free(dout);
}

int main(void) {
    ctx_init(&ctx, DEV_CPU, 1, 0);
    rng_seed(&rng, 1234);
    TestState ts = {0};
    test_tiles(&ts);
    // One tile and less; exactly one; one and a bit; several with a short last one;
    // GPT-2's head size.
    Shape shapes[] = {{2, 7, 12, 3}, {2, 64, 24, 3}, {1, 65, 16, 2}, {2, 130, 48, 4},
                      {1, 200, 128, 2}};
    for (size_t i = 0; i < sizeof shapes / sizeof *shapes; i++) test_shape(&ts, shapes[i]);
    ctx_destroy(&ctx);
    return test_finish(&ts);
}
