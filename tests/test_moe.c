// test_moe.c — the mixture-of-experts layer (common/moe.c) on its own.
//
// Routing: each token's k most probable experts (ties to the lower index), gates that
// sum to 1; capacity: every expert keeps at most its capacity, and exactly the first of
// its assignments in token order. The forward against a float64 reference that walks
// token by token (fp32 sgemm and fast_tanhf against float64 and tanh: 1e-5 relative).
// Dropped tokens: a token all of whose experts dropped it comes out as 0 (the residual
// carries it on) and gets no gradient through the experts. The backward against central
// differences of L = sum(out * R) + aux + z, in fp32 with eps 1e-2 (truncation ~1e-4,
// rounding ~3e-4 of a derivative: tolerance 1e-2 over the sampled coordinates, a
// coordinate whose nudge changes the routing skipped), for x and every kind of weight;
// and the two losses' gradients alone (R = 0). With --dump PATH it also writes one
// case's inputs, weights and results for tests/torch_moe.py (PyTorch's autograd).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness.h"
#include "safetensors.h"
#include "moe.h"
#include "rng.h"

static Ctx ctx;
static Rng rng;

typedef struct {
    MoEConfig m;
    int N, C;
    float *x, *w, *R;  // input, weights, the loss's weights on out
} Case;

static Case make_case(int N, int C, int E, int k, int F, float capacity) {
    Case t = {{E, k, F, capacity, 0.01f, 0.001f}, N, C, NULL, NULL, NULL};
    size_t nw = moe_num_params(&t.m, C);
    t.x = xmalloc(sizeof(float) * N * C);
    t.w = xmalloc(sizeof(float) * nw);
    t.R = xmalloc(sizeof(float) * N * C);
    rng_fill_normal(&rng, t.x, (size_t)N * C, 0.0f, 1.0f);
    rng_fill_normal(&rng, t.w, nw, 0.0f, 0.3f);
    rng_fill_normal(&rng, t.R, (size_t)N * C, 0.0f, 1.0f);
    return t;
}

static void free_case(Case *t) { free(t->x); free(t->w); free(t->R); }

// L = sum(out * R) + scale (aux + z), in double; the routing left in a.
static double loss_scale = 1.0;
static double loss(const Case *t, MoEActs *a, const float *x, const float *w) {
    float *out = xmalloc(sizeof(float) * t->N * t->C);
    double L = loss_scale * moe_forward(&ctx, &t->m, a, out, x, w);
    for (size_t i = 0; i < (size_t)t->N * t->C; i++) L += (double)out[i] * t->R[i];
    free(out);
    return L;
}

static void test_routing(TestState *ts) {
    Case t = make_case(64, 8, 8, 2, 16, 0.5f);
    for (int c = 0; c < t.C; c++) t.x[c] = 0.0f;  // token 0: every logit 0, a tie of all
    MoEActs *a = moe_acts_new(&t.m, t.N, t.C);
    loss(&t, a, t.x, t.w);
    int E = t.m.E, k = t.m.k, bad = 0, wrong_capacity = 0;
    for (int n = 0; n < t.N; n++) {
        const float *p = a->probs + (size_t)n * E;
        const int *ex = a->expert + (size_t)n * k;
        float gs = 0;
        for (int j = 0; j < k; j++) {
            gs += a->gate[(size_t)n * k + j];
            for (int e = 0; e < E; e++) {  // no unchosen expert beats (or ties lower) a chosen
                int chosen = 0;
                for (int i = 0; i < k; i++) chosen |= ex[i] == e;
                if (!chosen && (p[e] > p[ex[j]] || (p[e] == p[ex[j]] && e < ex[j]))) bad++;
            }
        }
        bad += fabsf(gs - 1.0f) > 1e-6f;
    }
    bad += a->expert[0] != 0 || a->expert[1] != 1;  // the tie: the lower indices, in order
    long cap = (long)ceil(0.5 * t.N * k / E);
    for (int e = 0; e < E; e++) {  // kept: the first min(cap, routed) in token order
        int seen = 0;
        for (int i = 0; i < t.N * k; i++)
            if (a->expert[i] == e) wrong_capacity += (a->row[i] >= 0) != (seen++ < cap);
        wrong_capacity += a->offset[e + 1] - a->offset[e] > cap;
    }
    int ok = bad == 0 && wrong_capacity == 0 && a->kept + a->dropped == t.N * k && a->dropped > 0;
    test_report(ts, ok, "moe.route.topk_and_capacity", "N %d, E %d, k %d: every token's k most "
                "probable experts (%d wrong; a tie of all %d goes to experts 0 and 1), gates summing "
                "to 1; capacity %ld an expert at factor 0.5: %d kept, %d dropped, %d kept out of token "
                "order or over capacity", t.N, E, k, bad, E, cap, a->kept, a->dropped, wrong_capacity);
    moe_acts_free(a);
    free_case(&t);
}

// Token n's output in float64: sum over its kept choices of gate * expert MLP.
static void reference(const Case *t, const MoEActs *a, int n, double *o) {
    int C = t->C, F = t->m.F, k = t->m.k;
    MoEWeights p = moe_weights(&t->m, C, t->w);
    for (int c = 0; c < C; c++) o[c] = 0;
    for (int j = 0; j < k; j++) {
        int i = n * k + j, e = a->expert[i];
        if (a->row[i] < 0) continue;
        for (int c = 0; c < C; c++) {
            double y = p.b2[(size_t)e * C + c];
            for (int f = 0; f < F; f++) {
                double h = p.b1[(size_t)e * F + f];
                for (int d = 0; d < C; d++)
                    h += (double)p.w1[((size_t)e * F + f) * C + d] * t->x[(size_t)n * C + d];
                double g = 0.5 * h * (1 + tanh(0.7978845608028654 * (h + 0.044715 * h * h * h)));
                y += (double)p.w2[((size_t)e * C + c) * F + f] * g;
            }
            o[c] += a->gate[i] * y;
        }
    }
}

// The router in float64, from x and Wr alone: the k experts (in falling probability)
// and their gates, against the layer's. Returns the number of tokens that differ.
static int routing_differs(const Case *t, const MoEActs *a) {
    int E = t->m.E, k = t->m.k, C = t->C, bad = 0;
    const float *wr = t->w;  // moe.h: Wr (E, C) first
    for (int n = 0; n < t->N; n++) {
        double p[64], mx = -INFINITY, sum = 0, chosen = 0;
        for (int e = 0; e < E; e++) {
            p[e] = 0;
            for (int c = 0; c < C; c++) p[e] += (double)wr[(size_t)e * C + c] * t->x[(size_t)n * C + c];
            mx = p[e] > mx ? p[e] : mx;
        }
        for (int e = 0; e < E; e++) sum += p[e] = exp(p[e] - mx);
        int ex[8];
        for (int j = 0; j < k; j++) {
            ex[j] = -1;
            for (int e = 0; e < E; e++) {
                int taken = 0;
                for (int i = 0; i < j; i++) taken |= ex[i] == e;
                if (!taken && (ex[j] < 0 || p[e] > p[ex[j]])) ex[j] = e;
            }
            chosen += p[ex[j]];
        }
        int differs = 0;
        for (int j = 0; j < k; j++)
            differs |= a->expert[n * k + j] != ex[j] ||
                       fabs(a->gate[n * k + j] - p[ex[j]] / chosen) > 1e-6;
        for (int e = 0; e < E; e++) differs |= fabs(a->probs[(size_t)n * E + e] - p[e] / sum) > 1e-6;
        bad += differs;
    }
    return bad;
}

static void test_forward(TestState *ts) {
    Case t = make_case(48, 12, 6, 2, 20, 0.75f);
    MoEActs *a = moe_acts_new(&t.m, t.N, t.C);
    float *out = xmalloc(sizeof(float) * t.N * t.C), *want = xmalloc(sizeof(float) * t.N * t.C);
    moe_forward(&ctx, &t.m, a, out, t.x, t.w);
    double o[64];
    int zero_rows = 0, zero_ok = 1;
    for (int n = 0; n < t.N; n++) {
        reference(&t, a, n, o);
        int all_dropped = 1;
        for (int j = 0; j < t.m.k; j++) all_dropped &= a->row[n * t.m.k + j] < 0;
        for (int c = 0; c < t.C; c++) {
            want[(size_t)n * t.C + c] = (float)o[c];
            if (all_dropped) zero_ok &= out[(size_t)n * t.C + c] == 0.0f;
        }
        zero_rows += all_dropped;
    }
    double e = rel_error(out, want, (size_t)t.N * t.C);
    int routed_wrong = routing_differs(&t, a);
    int ok = e <= 1e-5 && zero_ok && zero_rows > 0 && routed_wrong == 0;
    test_report(ts, ok, "moe.forward.reference",
                "N %d, C %d, E %d, k %d, F %d, capacity 0.75: the router's probabilities, choices "
                "and gates against float64 from x and Wr (%d tokens differ; tol 1e-6), the output "
                "rel err %.2e against float64 (tol 1e-5); %d tokens dropped by all their experts "
                "come out as %s", t.N, t.C, t.m.E, t.m.k, t.m.F, routed_wrong, e, zero_rows,
                zero_ok ? "exactly 0" : "NONZERO");
    moe_acts_free(a);
    free(out); free(want);
    free_case(&t);
}

// Central differences of L over `n` sampled coordinates of v (x or w), against g.
static double fd_error(Case *t, float *v, size_t len, const float *g, int n, int *skipped) {
    MoEActs *a = moe_acts_new(&t->m, t->N, t->C), *b = moe_acts_new(&t->m, t->N, t->C);
    size_t nk = (size_t)t->N * t->m.k;
    double num = 0, den = 0, eps = 1e-2;
    loss(t, a, t->x, t->w);
    for (int s = 0; s < n; s++) {
        size_t i = rng_below(&rng, (uint32_t)len);
        float v0 = v[i];
        v[i] = v0 + (float)eps;
        double lp = loss(t, b, t->x, t->w);
        int same = !memcmp(a->row, b->row, nk * sizeof(int)) && !memcmp(a->expert, b->expert, nk * sizeof(int));
        v[i] = v0 - (float)eps;
        double lm = loss(t, b, t->x, t->w);
        same &= !memcmp(a->row, b->row, nk * sizeof(int)) && !memcmp(a->expert, b->expert, nk * sizeof(int));
        v[i] = v0;
        if (!same) { (*skipped)++; continue; }  // a routing decision flipped: no derivative
        double fd = (lp - lm) / (2 * eps);
        num += (fd - g[i]) * (fd - g[i]);
        den += fd * fd;
    }
    moe_acts_free(a);
    moe_acts_free(b);
    return den > 0 ? sqrt(num / den) : INFINITY;
}

static void test_backward(TestState *ts, int with_out) {
    Case t = make_case(24, 8, 4, 2, 12, 1.0f);
    if (!with_out) memset(t.R, 0, sizeof(float) * t.N * t.C);  // L = aux + z alone
    t.m.aux_weight = with_out ? 0.01f : 1.0f;
    t.m.z_weight = with_out ? 0.001f : 0.1f;
    size_t nw = moe_num_params(&t.m, t.C);
    MoEActs *a = moe_acts_new(&t.m, t.N, t.C);
    float *out = xmalloc(sizeof(float) * t.N * t.C);
    float *dx = xcalloc((size_t)t.N * t.C, sizeof(float)), *dw = xcalloc(nw, sizeof(float));
    loss_scale = with_out ? 1.0 : 0.5;  // the losses' gradient scaled as a caller scales them
    moe_forward(&ctx, &t.m, a, out, t.x, t.w);
    moe_backward(&ctx, &t.m, a, dx, dw, t.R, t.x, t.w, (float)loss_scale);
    int skipped = 0;
    double ex = with_out ? fd_error(&t, t.x, (size_t)t.N * t.C, dx, 60, &skipped) : 0;
    double ewr = fd_error(&t, t.w, (size_t)t.m.E * t.C, dw, 60, &skipped);  // the router
    double eexp = with_out ? fd_error(&t, t.w + (size_t)t.m.E * t.C, nw - (size_t)t.m.E * t.C,
                                      dw + (size_t)t.m.E * t.C, 120, &skipped) : 0;
    double worst = fmax(ex, fmax(ewr, eexp));
    test_report(ts, worst <= 1e-2 && skipped < 60, with_out ? "moe.backward.finite_differences"
                : "moe.aux_loss.finite_differences", "%s: rel err of the gradient against central "
                "differences (eps 1e-2, tol 1e-2) x %.1e, router %.1e, experts %.1e; %d nudges "
                "that changed the routing skipped", with_out ? "L = sum(out R) + aux + z"
                : "L = 0.5 (aux + z), weights 1 and 0.1, loss_scale 0.5", ex, ewr, eexp, skipped);
    moe_acts_free(a);
    free(out); free(dx); free(dw);
    free_case(&t);
}

// One case (capacity 1: some drops) through forward and backward, into a safetensors
// file with its configuration as metadata.
static void dump(const char *path) {
    Case t = make_case(40, 24, 6, 2, 32, 1.0f);
    size_t nw = moe_num_params(&t.m, t.C), nc = (size_t)t.N * t.C, nk = (size_t)t.N * t.m.k;
    MoEActs *a = moe_acts_new(&t.m, t.N, t.C);
    float *out = xmalloc(sizeof(float) * nc), *dx = xcalloc(nc, sizeof(float));
    float *dw = xcalloc(nw, sizeof(float));
    float losses = moe_forward(&ctx, &t.m, a, out, t.x, t.w);
    moe_backward(&ctx, &t.m, a, dx, dw, t.R, t.x, t.w, 1.0f);
    StTensor ts[] = {
        {"x", DT_F32, 2, {t.N, t.C}, t.x, nc * 4}, {"w", DT_F32, 1, {(int64_t)nw}, t.w, nw * 4},
        {"R", DT_F32, 2, {t.N, t.C}, t.R, nc * 4}, {"out", DT_F32, 2, {t.N, t.C}, out, nc * 4},
        {"losses", DT_F32, 1, {1}, &losses, 4}, {"dx", DT_F32, 2, {t.N, t.C}, dx, nc * 4},
        {"dw", DT_F32, 1, {(int64_t)nw}, dw, nw * 4},
        {"expert", DT_I32, 2, {t.N, t.m.k}, a->expert, nk * 4},
        {"row", DT_I32, 2, {t.N, t.m.k}, a->row, nk * 4},
    };
    char v[6][32];
    snprintf(v[0], 32, "%d", t.m.E); snprintf(v[1], 32, "%d", t.m.k); snprintf(v[2], 32, "%d", t.m.F);
    snprintf(v[3], 32, "%.9g", t.m.capacity); snprintf(v[4], 32, "%.9g", t.m.aux_weight);
    snprintf(v[5], 32, "%.9g", t.m.z_weight);
    StMeta meta[] = {{"E", v[0]}, {"k", v[1]}, {"F", v[2]}, {"capacity", v[3]},
                     {"aux_weight", v[4]}, {"z_weight", v[5]}};
    char err[256];
    CHECK(st_save(path, ts, 9, meta, 6, err, sizeof err) == 0, "%s", err);
    moe_acts_free(a);
    free(out); free(dx); free(dw);
    free_case(&t);
}

int main(int argc, char **argv) {
    ctx_init(&ctx, DEV_CPU, 1, 0);
    rng_seed(&rng, 2025);
    if (argc == 3 && strcmp(argv[1], "--dump") == 0) {
        dump(argv[2]);
        ctx_destroy(&ctx);
        return 0;
    }
    CHECK(argc == 1, "usage: test_moe [--dump PATH]");
    TestState ts = {0};
    test_routing(&ts);
    test_forward(&ts);
    test_backward(&ts, 1);
    test_backward(&ts, 0);
    ctx_destroy(&ctx);
    return ts.failed ? 1 : 0;
}
