// test_cp.c — context parallelism's pieces in one process (04_tensor_parallel/cp.h):
// the placement of the sequence on the ranks, the merge of partial softmaxes, and
// attention computed one (query run, key block) pair at a time, against the whole.
//
// The merge against the full softmax in float64, 1e-6 relative (a merge of two
// fp32 partials rounds a few times per element), on rows that stress it: scores of
// +-1e4 (exp overflows unless the maximum is subtracted), a part that saw no key, a
// row that saw none in either part. The blocked attention against the core's flash
// attention (one process, the whole sequence): every key block of every rank, in the
// ring's order, merged into each rank's queries, then the backward block by block:
// out, lse and dqkv within 1e-5 (fp32; the sums split by block instead of by tile).
// And the check's power: a backward that pairs one block's scores with the previous
// ring step's K/V, the bug a ring that overwrites its buffer too early makes, must
// come out far beyond that tolerance.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cp.h"
#include "flags.h"
#include "flash_tiles.h"
#include "harness.h"
#include "ops.h"
#include "rng.h"

static Ctx ctx;
static Rng rng;

static void test_runs(TestState *ts) {
    int bad = 0, refused = 0;
    for (int T = 1; T <= 48; T++)
        for (int cp = 1; cp <= 6; cp++)
            for (int z = 0; z < 2; z++) {
                int *seen = xcalloc((size_t)T, sizeof(int)), ok = 1;
                for (int r = 0; r < cp; r++) {
                    CpRuns runs;
                    int rc = cp_runs(T, cp, r, z, &runs);
                    if (rc != 0) {  // refused: -1, as the contract says
                        bad += rc != -1;
                        ok = 0;
                        break;
                    }
                    if (runs.n != (z ? 2 : 1)) bad++;
                    for (int k = 1; k < runs.n; k++)  // ascending, as the contract says
                        if (runs.start[k] < runs.start[k - 1] + runs.len[k - 1]) bad++;
                    for (int k = 0; k < runs.n; k++)
                        for (int i = runs.start[k]; i < runs.start[k] + runs.len[k]; i++)
                            if (i >= 0 && i < T) seen[i]++;
                            else bad++;
                }
                int divides = T % (z ? 2 * cp : cp) == 0;
                if (ok != divides) bad++;  // refused exactly when cp does not divide
                if (!ok) refused++;
                for (int i = 0; ok && i < T; i++) bad += seen[i] != 1;
                free(seen);
            }
    test_report(ts, bad == 0, "cp.runs.cover_once", "T = 1..48, cp = 1..6, contiguous and zigzag: "
                "every token on exactly one rank, in 1 run (contiguous) or 2 ascending ones "
                "(zigzag); %d layouts refused, -1 (cp or 2cp does not divide T); %d errors", refused,
                bad);
    for (int cp = 2; cp <= 4; cp++) {
        int T = 2 * cp * 512;
        long long zmin = -1, zmax = 0, cmin = -1, cmax = 0;
        for (int r = 0; r < cp; r++) {
            long long z = cp_causal_pairs(T, cp, r, 1), c = cp_causal_pairs(T, cp, r, 0);
            zmin = zmin < 0 || z < zmin ? z : zmin, zmax = z > zmax ? z : zmax;
            cmin = cmin < 0 || c < cmin ? c : cmin, cmax = c > cmax ? c : cmax;
        }
        char name[64];
        snprintf(name, sizeof name, "cp.zigzag.balanced.cp%d", cp);
        double zi = (double)zmax / zmin - 1, ci = (double)cmax / cmin;
        test_report(ts, zi <= 0.05 && ci > 1.5, name, "causal pairs per rank at T = %d: zigzag "
                    "max/min - 1 = %.2f %% (target <= 5 %%); contiguous: the last rank %.2f x the "
                    "first's (2cp-1 = %d in the limit)", T, 100 * zi, ci, 2 * cp - 1);
    }
}

// The softmax of row `s` (n scores) over the keys with mask[j] set, in float64: the
// weighted sum of v's rows (hs) into o, and its log-sum-exp (-inf if no key).
static double softmax_ref(const double *s, const unsigned char *mask, const float *v, int n,
                          int hs, double *o) {
    double m = -INFINITY, l = 0;
    for (int j = 0; j < n; j++) if (mask[j] && s[j] > m) m = s[j];
    for (int d = 0; d < hs; d++) o[d] = 0;
    if (m == -INFINITY) return -INFINITY;
    for (int j = 0; j < n; j++) {
        if (!mask[j]) continue;
        double w = exp(s[j] - m);
        l += w;
        for (int d = 0; d < hs; d++) o[d] += w * v[(size_t)j * hs + d];
    }
    for (int d = 0; d < hs; d++) o[d] /= l;
    return m + log(l);
}

static void test_merge(TestState *ts) {
    enum { ROWS = 9, N = 40, HS = 8 };
    float *v = xmalloc(sizeof(float) * N * HS);
    rng_fill_normal(&rng, v, N * HS, 0.0f, 1.0f);
    float oa[ROWS * HS], ob[ROWS * HS], la[ROWS], lb[ROWS];
    double want[ROWS * HS], lwant[ROWS], tmp[HS];
    for (int r = 0; r < ROWS; r++) {
        double s[N];
        unsigned char in_a[N], in_b[N], both[N];
        for (int j = 0; j < N; j++) {
            s[j] = 3.0 * rng_normal(&rng);
            if (r == 1) s[j] += 1e4;              // huge: exp overflows without the max
            if (r == 2) s[j] -= 1e4;              // tiny: exp underflows to 0 without it
            if (r == 3) s[j] += j < N / 2 ? 60.0 : -60.0;  // parts of very different weight
            in_a[j] = (unsigned char)(r == 4 ? 0 : r == 5 ? 1 : j % 3 != 0);  // 4: A saw nothing
            in_b[j] = (unsigned char)(r == 5 ? 0 : !in_a[j]);                 // 5: B saw nothing
            if (r == 6) in_a[j] = in_b[j] = 0;                                  // 6: neither
            both[j] = in_a[j] | in_b[j];
        }
        la[r] = (float)softmax_ref(s, in_a, v, N, HS, tmp);
        for (int d = 0; d < HS; d++) oa[r * HS + d] = (float)tmp[d];
        lb[r] = (float)softmax_ref(s, in_b, v, N, HS, tmp);
        for (int d = 0; d < HS; d++) ob[r * HS + d] = (float)tmp[d];
        lwant[r] = softmax_ref(s, both, v, N, HS, &want[r * HS]);
    }
    softmax_merge(oa, la, HS, ob, lb, HS, ROWS, HS);
    // Per row: 1e-6, plus what fp32 lse's themselves carry: each is within half an ulp,
    // 2^-24 |lse|, and a weight exp(lse_a - lse) inherits both errors, 2^-23 |lse|
    // relative (1.2e-3 at |lse| = 1e4; attention's scores are O(10) in practice).
    double worst = 0, lworst = 0;  // error / tolerance
    int empty_ok = 1;
    for (int r = 0; r < ROWS; r++) {
        if (lwant[r] == -INFINITY) {
            empty_ok &= la[r] == -INFINITY;
            for (int d = 0; d < HS; d++) empty_ok &= oa[r * HS + d] == 0.0f;
            continue;
        }
        double num = 0, den = 0;
        for (int d = 0; d < HS; d++) {
            double e = oa[r * HS + d] - want[r * HS + d];
            num += e * e, den += want[r * HS + d] * want[r * HS + d];
        }
        double tol = 1e-6 + ldexp(fabs(lwant[r]), -22);
        worst = max_err(worst, sqrt(num / den) / tol);
        lworst = max_err(lworst, fabs(la[r] - lwant[r]) / fmax(1.0, fabs(lwant[r])) / 1e-6);
    }
    test_report(ts, worst <= 1 && lworst <= 1 && empty_ok, "cp.merge.equals_full_softmax",
                "%d rows (scores +1e4, -1e4, parts 120 apart, A empty, B empty, neither): out "
                "error %.2f of its tolerance (1e-6 + 2^-22 |lse|), lse %.2f of 1e-6 relative; "
                "the row no part saw %s", ROWS, worst, lworst,
                empty_ok ? "stays zeros and -inf" : "CHANGED (NaN?)");
    free(v);
}

// Every rank's runs, in rank order: the key blocks of a ring.
typedef struct { int n, start[16], len[16], owner[16]; } Layout;

static Layout layout_of(int T, int cp, int zigzag) {
    Layout L = {0};
    for (int r = 0; r < cp; r++) {
        CpRuns runs;
        CHECK(cp_runs(T, cp, r, zigzag, &runs) == 0, "T %d cp %d", T, cp);
        for (int k = 0; k < runs.n; k++)
            L.start[L.n] = runs.start[k], L.len[L.n] = runs.len[k], L.owner[L.n++] = r;
    }
    return L;
}

// Blocked attention of one head over layout L, ring order: rank r's runs see the key
// blocks of ranks r, r-1, r-2, ... (what a ring passes it). stale: in the backward, the
// last rank's second ring step uses the K/V of its first (the previous block). Returns the rel
// errors of out, lse and dqkv against the core's flash attention.
static void blocked(const float *qkv, const float *dout, int T, int C, int NH, int cp, int zigzag,
                    int stale, double err[3]) {
    int hs = C / NH, ld = 3 * C;
    Layout L = layout_of(T, cp, zigzag);
    float *out = xcalloc((size_t)T * C, 4), *lse = xcalloc((size_t)NH * T, 4);
    float *po = xmalloc(sizeof(float) * T * hs), *pl = xmalloc(sizeof(float) * T);
    float *dqkv = xcalloc((size_t)T * ld, 4), *D = xmalloc(sizeof(float) * T);
    float *S = xmalloc(sizeof(float) * 2 * FLASH_BR * T);  // any block's scores
    for (int h = 0; h < NH; h++) {
        const float *q = qkv + h * hs, *k = q + C, *v = q + 2 * C;
        float *o = out + h * hs, *l = lse + (size_t)h * T;
        for (int i = 0; i < T; i++) l[i] = -INFINITY;
        for (int a = 0; a < L.n; a++)        // the query runs, each rank's own
            for (int step = 0; step < cp; step++)
                for (int b = 0; b < L.n; b++) {
                    if (L.owner[b] != (L.owner[a] - step + cp) % cp) continue;
                    CpBlock blk = {q + (size_t)L.start[a] * ld, k + (size_t)L.start[b] * ld,
                                   v + (size_t)L.start[b] * ld, ld, ld, L.len[a], L.len[b], hs,
                                   L.start[a], L.start[b]};
                    if (!cp_block_sees(&blk)) continue;  // entirely in the future: skipped
                    cp_block_forward(&blk, po, hs, pl, S);
                    softmax_merge(o + (size_t)L.start[a] * C, l + L.start[a], C, po, pl, hs,
                                  L.len[a], hs);
                }
        for (int i = 0; i < T; i++) {  // D = rowsum(dout * out)
            double s = 0;
            for (int d = 0; d < hs; d++) s += dout[(size_t)i * C + h * hs + d] * o[(size_t)i * C + d];
            D[i] = (float)s;
        }
        float *dq = dqkv + h * hs, *dk = dq + C, *dv = dq + 2 * C;
        for (int a = 0; a < L.n; a++)
            for (int step = 0; step < cp; step++)
                for (int b = 0; b < L.n; b++) {
                    if (L.owner[b] != (L.owner[a] - step + cp) % cp) continue;
                    // The block whose K/V the scores are paired with: on the last rank's
                    // second step, stale, the first step's (its own, one rank on).
                    int kv = stale && L.owner[a] == cp - 1 && step == 1 ? b + L.n / cp : b;
                    CpBlock blk = {q + (size_t)L.start[a] * ld, k + (size_t)L.start[kv] * ld,
                                   v + (size_t)L.start[kv] * ld, ld, ld, L.len[a], L.len[b], hs,
                                   L.start[a], L.start[b]};
                    cp_block_backward(&blk, dout + (size_t)L.start[a] * C + h * hs, C,
                                      l + L.start[a], D + L.start[a], dq + (size_t)L.start[a] * ld,
                                      ld, dk + (size_t)L.start[b] * ld,
                                      dv + (size_t)L.start[b] * ld, ld, S);
                }
    }
    float *fo = xcalloc((size_t)T * C, 4), *fl = xcalloc((size_t)NH * T, 4);
    float *fd = xcalloc((size_t)T * ld, 4);
    ctx.ops->flash_attention_forward(&ctx, fo, fl, qkv, 1, T, C, NH, DT_F32);
    ctx.ops->flash_attention_backward(&ctx, fd, dout, qkv, fo, fl, 1, T, C, NH, DT_F32);
    err[0] = rel_error(out, fo, (size_t)T * C);
    err[1] = rel_error(lse, fl, (size_t)NH * T);
    err[2] = rel_error(dqkv, fd, (size_t)T * ld);
    free(out); free(lse); free(po); free(pl); free(dqkv); free(D); free(S); free(fo); free(fl);
    free(fd);
}

static void test_blocked(TestState *ts) {
    int C = 48, NH = 4;
    for (int cp = 2; cp <= 4; cp++)
        for (int z = 0; z < 2; z++) {
            int T = 2 * cp * 37;  // runs of 37 or 74 rows: tiles of 64 and a short one
            float *qkv = xmalloc(sizeof(float) * T * 3 * C), *dout = xmalloc(sizeof(float) * T * C);
            rng_fill_normal(&rng, qkv, (size_t)T * 3 * C, 0.0f, 1.0f);
            rng_fill_normal(&rng, dout, (size_t)T * C, 0.0f, 1.0f);
            double e[3], s[3];
            blocked(qkv, dout, T, C, NH, cp, z, 0, e);
            blocked(qkv, dout, T, C, NH, cp, z, 1, s);
            char name[64];
            snprintf(name, sizeof name, "cp.blocked.%s.cp%d", z ? "zigzag" : "contiguous", cp);
            test_report(ts, e[0] <= 1e-5 && e[1] <= 1e-5 && e[2] <= 1e-5 && s[2] > 1e-3, name,
                        "T = %d, %d heads of %d, every key block in ring order, merged: out %.2e, "
                        "lse %.2e, dqkv %.2e against the core's flash attention (tol 1e-5); a "
                        "backward with the previous step's K/V on the last rank: dqkv %.2e (must "
                        "exceed "
                        "1e-3)", T, NH, C / NH, e[0], e[1], e[2], s[2]);
            free(qkv);
            free(dout);
        }
}

// This rank's rows of x (B, T, width): its runs, one after the other.
static void local_rows(float *dst, const float *x, int B, int T, int width, const CpRuns *r) {
    int Tl = r->len[0] + (r->n > 1 ? r->len[1] : 0);
    for (int b = 0; b < B; b++) {
        int row = 0;
        for (int k = 0; k < r->n; k++)
            for (int t = r->start[k]; t < r->start[k] + r->len[k]; t++, row++)
                memcpy(dst + ((size_t)b * Tl + row) * width, x + ((size_t)b * T + t) * width,
                       sizeof(float) * width);
    }
}

// Ring attention (ulysses 0) or Ulysses (1) on the group's ranks against the core's
// flash attention over the whole sequence (every rank computes it, from the same seed):
// out, lse and dqkv of this rank's rows (Ulysses: lse of its heads); and the bytes. The
// ring: (cp-1) blocks of K, V forward; backward (cp-1) of K, V and cp of dK, dV (the
// last takes the gradients home). Ulysses: (cp-1)/cp of q, k, v and of the output forward
// (4C a token), of q, k, v, out, dout and dqkv backward (8C).
static void test_layout(TestState *ts, Comm *c, int ulysses, int zigzag) {
    Group *g = comm_world(c);
    int p = g->size, r = g->rank, B = 2, C = 96, NH = 12, T = 2 * p * 37, Tl = T / p;
    float *qkv = xmalloc(sizeof(float) * B * T * 3 * C), *dout = xmalloc(sizeof(float) * B * T * C);
    rng_seed(&rng, 777);
    rng_fill_normal(&rng, qkv, (size_t)B * T * 3 * C, 0.0f, 1.0f);
    rng_fill_normal(&rng, dout, (size_t)B * T * C, 0.0f, 1.0f);
    float *fo = xcalloc((size_t)B * T * C, 4), *fl = xcalloc((size_t)B * NH * T, 4);
    float *fd = xcalloc((size_t)B * T * 3 * C, 4);
    ctx.ops->flash_attention_forward(&ctx, fo, fl, qkv, B, T, C, NH, DT_F32);
    ctx.ops->flash_attention_backward(&ctx, fd, dout, qkv, fo, fl, B, T, C, NH, DT_F32);
    CpRuns runs;
    CHECK(cp_runs(T, p, r, zigzag, &runs) == 0, "T %d", T);
    float *lq = xmalloc(sizeof(float) * B * Tl * 3 * C), *ld = xmalloc(sizeof(float) * B * Tl * C);
    float *want_o = xmalloc(sizeof(float) * B * Tl * C), *want_d = xmalloc(sizeof(float) * B * Tl * 3 * C);
    local_rows(lq, qkv, B, T, 3 * C, &runs);
    local_rows(ld, dout, B, T, C, &runs);
    local_rows(want_o, fo, B, T, C, &runs);
    local_rows(want_d, fd, B, T, 3 * C, &runs);
    float *want_l = xmalloc(sizeof(float) * B * NH * Tl);
    if (ulysses)  // (B, NH, T) -> this rank's heads, every position
        for (int b = 0; b < B; b++)
            memcpy(want_l + (size_t)b * (NH / p) * T, fl + ((size_t)b * NH + r * (NH / p)) * T,
                   sizeof(float) * (NH / p) * T);
    else  // (B, NH, T) -> every head, this rank's positions
        local_rows(want_l, fl, B * NH, T, 1, &runs);
    ContextParallel cp = {.comm = c, .group = g, .zigzag = zigzag, .algo = ALGO_PAIRWISE, .ctx = &ctx,
                          .overlap = 1};
    float *out = xmalloc(sizeof(float) * B * Tl * C), *lse = xmalloc(sizeof(float) * B * NH * Tl);
    float *dqkv = xcalloc((size_t)B * Tl * 3 * C, 4);
    CollKind kind = ulysses ? COLL_ALLTOALL : COLL_P2P;
    uint64_t s0 = comm_counters(c)[kind].bytes_sent;
    if (ulysses) ulysses_attention_forward(&cp, out, lse, lq, B, T, C, NH);
    else ring_attention_forward(&cp, out, lse, lq, B, T, C, NH);
    uint64_t s1 = comm_counters(c)[kind].bytes_sent;
    if (ulysses) ulysses_attention_backward(&cp, dqkv, ld, lq, out, lse, B, T, C, NH);
    else ring_attention_backward(&cp, dqkv, ld, lq, out, lse, B, T, C, NH);
    uint64_t s2 = comm_counters(c)[kind].bytes_sent;
    double fwd = ulysses ? 4.0 * 4 * (p - 1) * B * Tl * C / p : 4.0 * (p - 1) * B * Tl * 2 * C;
    double bwd = ulysses ? 4.0 * 8 * (p - 1) * B * Tl * C / p : 4.0 * (2 * p - 1) * B * Tl * 2 * C;
    double mine[7] = {rel_error(out, want_o, (size_t)B * Tl * C),
                      rel_error(lse, want_l, (size_t)B * NH * Tl),
                      rel_error(dqkv, want_d, (size_t)B * Tl * 3 * C),
                      (double)(s1 - s0) == fwd && (double)(s2 - s1) == bwd, 1,
                      (double)(s1 - s0), (double)(s2 - s1)};
    if (!ulysses) {  // the ring moving its bytes only in its waits: the same sums, bitwise
        cp.overlap = 0;
        float *o2 = xmalloc(sizeof(float) * B * Tl * C), *l2 = xmalloc(sizeof(float) * B * NH * Tl);
        float *d2 = xcalloc((size_t)B * Tl * 3 * C, 4);
        ring_attention_forward(&cp, o2, l2, lq, B, T, C, NH);
        ring_attention_backward(&cp, d2, ld, lq, o2, l2, B, T, C, NH);
        mine[4] = !memcmp(o2, out, sizeof(float) * B * Tl * C) &&
                  !memcmp(l2, lse, sizeof(float) * B * NH * Tl) &&
                  !memcmp(d2, dqkv, sizeof(float) * B * Tl * 3 * C);
        free(o2); free(l2); free(d2);
    }
    if (r == 0) {
        double worst[7], other[7];
        memcpy(worst, mine, sizeof worst);
        for (int q = 1; q < p; q++) {
            comm_recv(c, g, q, other, sizeof other);
            for (int i = 0; i < 3; i++) worst[i] = max_err(worst[i], other[i]);
            if (worst[3] && !other[3]) worst[5] = other[5], worst[6] = other[6];  // a wrong rank's
            worst[3] = worst[3] && other[3];
            worst[4] = worst[4] && other[4];
        }
        char sent[160] = "";
        if (!worst[3])
            snprintf(sent, sizeof sent, " (a rank sent %.0f bytes forward, %.0f backward; want "
                     "%.0f and %.0f)", worst[5], worst[6], fwd, bwd);
        char name[64];
        snprintf(name, sizeof name, "cp.%s.%s.np%d", ulysses ? "ulysses" : "ring",
                 zigzag ? "zigzag" : "contiguous", p);
        // Ulysses runs each head's very computation, on the same numbers: bitwise. The
        // ring sums each row over blocks instead of tiles: fp32's reordering, 1e-5.
        double tol = ulysses ? 0 : 1e-5;
        test_report(ts, worst[0] <= tol && worst[1] <= tol && worst[2] <= tol && worst[3] &&
                    worst[4], name,
                    "B %d, T %d over %d ranks, %d heads of %d: worst rank's out %.2e, lse %.2e, "
                    "dqkv %.2e against one process's flash attention (tol %s); bytes per rank %s "
                    "%s%s%s", B, T, p, NH, C / NH, worst[0], worst[1], worst[2],
                    ulysses ? "0: bitwise" : "1e-5",
                    worst[3] ? "=" : "!=", ulysses ? "(cp-1)/cp of 4C a token forward, 8C backward"
                    : "(cp-1) K,V blocks forward, (cp-1) K,V and cp dK,dV blocks backward", sent,
                    ulysses ? "" : worst[4] ? "; without overlap bitwise the same"
                                            : "; without overlap NOT the same bits");
    } else {
        comm_send(c, g, 0, mine, sizeof mine);
    }
    free(qkv); free(dout); free(fo); free(fl); free(fd); free(lq); free(ld); free(want_o);
    free(want_d); free(want_l); free(out); free(lse); free(dqkv);
}

int main(int argc, char **argv) {
    int np = 1, refuse_heads = 0;
    double timeout = 30;
    Flag flags[] = {
        F_INT_SENTINEL("--ulysses-heads", &refuse_heads, 1, 1024, "0 = off", "call Ulysses with "
                       "this many heads and nothing else (cp must divide them, or it refuses)"),
        F_INT("--np", &np, 1, COMM_MAX_RANKS, "ranks: 1 runs the pieces' checks, more the ring's "
              "and Ulysses'"),
        F_DOUBLE("--timeout", &timeout, 0.1, 3600, "seconds any wait may take"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "test_cp [flags]",
                "Context parallelism's pieces (one process) and ring attention (--np > 1).");
    ctx_init(&ctx, DEV_CPU, 1, 0);
    rng_seed(&rng, 4242);
    TestState ts = {0};
    if (np == 1) {
        test_runs(&ts);
        test_merge(&ts);
        test_blocked(&ts);
    } else {
        CommConfig cc = {.np = np, .timeout_s = timeout};
        Comm *c = comm_launch(&cc);
        if (refuse_heads) {
            int T = 2 * np, C = 8 * refuse_heads;
            float *x = xcalloc((size_t)3 * C * T, 4), *o = xcalloc((size_t)C * T, 4);
            ContextParallel cp = {.comm = c, .group = comm_world(c), .algo = ALGO_PAIRWISE,
                                  .ctx = &ctx};
            ulysses_attention_forward(&cp, o, o, x, 1, T, C, refuse_heads);
            printf("Ulysses ran %d heads on %d ranks\n", refuse_heads, np);
            comm_finalize(c);
            return 0;
        }
        // Announced first (tests/run.sh): a check that never reports, because a rank hung
        // or crashed, is then traced to this run.
        for (int u = 0; u < 2 && comm_rank(c) == 0; u++)
            for (int z = 0; z < 2; z++)
                printf("PLAN cp.%s.%s.np%d\n", u ? "ulysses" : "ring", z ? "zigzag" : "contiguous", np);
        fflush(stdout);
        for (int u = 0; u < 2; u++)
            for (int z = 0; z < 2; z++) test_layout(&ts, c, u, z);
        int rank = comm_rank(c);
        comm_finalize(c);
        if (rank != 0) { ctx_destroy(&ctx); return 0; }  // rank 0 reports
    }
    ctx_destroy(&ctx);
    return test_finish(&ts);
}
