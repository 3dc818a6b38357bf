// test_ep.c — expert parallelism (04_tensor_parallel/expert_parallel.c) against one
// process's mixture-of-experts layer (common/moe.c).
//
//   test_ep --np P     every rank builds the same step of P x N tokens and the same
//                      weights; one process's layer runs on all of them (the reference),
//                      the EP layer on this rank's N, its experts E/P of the E
//
// Per rank: its tokens' output and input gradient, its experts' weight gradients, the
// router's (summed over the ranks), the losses, and the rows each expert received (the
// same rows in the same order, exactly), with capacity 1.0 (some assignments dropped)
// and without. The experts' rows being the single process's in its order, every number
// is computed as it is there but for the sgemm's blocking over another count of rows
// and the router gradient's sum over ranks: 1e-6 relative (bitwise on this machine but
// the router's).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ep.h"
#include "flags.h"
#include "harness.h"
#include "rng.h"

static Ctx ctx;

typedef struct { double out, dx, dw_experts, dw_router, losses; int rows_bad, dropped, bytes_bad; } Errs;

// Rank q holds N + uneven q tokens (uneven 0: N each); the step is theirs in rank order.
static Errs run(Comm *c, const MoEConfig *m, int N0, int uneven, int C) {
    Group *g = comm_world(c);
    int p = g->size, r = g->rank, Nt = 0, first = 0, N = N0 + uneven * r;
    for (int q = 0; q < p; q++) Nt += N0 + uneven * q, first += q < r ? N0 + uneven * q : 0;
    size_t nw = moe_num_params(m, C), nc = (size_t)Nt * C;
    Rng rng;
    rng_seed(&rng, 31337);
    float *x = xmalloc(sizeof(float) * nc), *R = xmalloc(sizeof(float) * nc);
    float *w = xmalloc(sizeof(float) * nw);
    rng_fill_normal(&rng, x, nc, 0.0f, 1.0f);
    rng_fill_normal(&rng, w, nw, 0.0f, 0.3f);
    rng_fill_normal(&rng, R, nc, 0.0f, 1.0f);
    // The reference: one process, every token.
    MoEActs *a = moe_acts_new(m, Nt, C);
    float *out_ref = xmalloc(sizeof(float) * nc), *dx_ref = xcalloc(nc, sizeof(float));
    float *dw_ref = xcalloc(nw, sizeof(float));
    float l_ref = moe_forward(&ctx, m, a, out_ref, x, w);
    moe_backward(&ctx, m, a, dx_ref, dw_ref, R, x, w, 1.0f);
    // Expert parallelism: this rank's N tokens.
    ExpertParallel ep = {c, g, ALGO_PAIRWISE};
    EPActs *s = ep_acts_new(&ep, m, N, C);
    size_t off = (size_t)first * C;
    float *out = xmalloc(sizeof(float) * N * C), *dx = xcalloc((size_t)N * C, sizeof(float));
    float *dw = xcalloc(nw, sizeof(float));
    uint64_t b0 = comm_counters(c)[COLL_ALLTOALL].bytes_sent;
    float l = ep_moe_forward(&ctx, &ep, m, s, out, x + off, w);
    uint64_t b1 = comm_counters(c)[COLL_ALLTOALL].bytes_sent;
    ep_moe_backward(&ctx, &ep, m, s, dx, dw, R + off, x + off, w, 1.0f);
    uint64_t b2 = comm_counters(c)[COLL_ALLTOALL].bytes_sent;
    // Each way, the kept rows to other ranks and their outputs (or gradients) back: a
    // rank's own rows stay (n_send + n_recv - 2 x its own, of C floats).
    uint64_t want = (uint64_t)(s->n_send + s->n_recv - 2 * s->send_rows[r]) * C * sizeof(float);
    Errs e = {rel_error(out, out_ref + off, (size_t)N * C), rel_error(dx, dx_ref + off, (size_t)N * C),
              0, rel_error(dw, dw_ref, (size_t)m->E * C), fabs((double)l - l_ref) / fabs(l_ref), 0,
              a->dropped, (b1 - b0 != want) + (b2 - b1 != want)};
    MoEWeights mine = moe_weights(m, C, dw), ref = moe_weights(m, C, dw_ref);
    size_t F = (size_t)m->F;
    for (int xe = r * s->El, t = 0; xe < (r + 1) * s->El; xe++) {
        size_t ex = (size_t)xe;
        double w1 = rel_error(mine.w1 + ex * F * C, ref.w1 + ex * F * C, F * C);
        double b1 = rel_error(mine.b1 + ex * F, ref.b1 + ex * F, F);
        double w2 = rel_error(mine.w2 + ex * C * F, ref.w2 + ex * C * F, (size_t)C * F);
        double b2 = rel_error(mine.b2 + ex * C, ref.b2 + ex * C, (size_t)C);
        e.dw_experts = max_err(e.dw_experts, max_err(max_err(w1, b1), max_err(w2, b2)));
        // The rows expert xe ran on, against the single process's: the same, in its order.
        int rows = 0;
        for (int q = 0; q < p; q++) rows += s->kept[(size_t)q * m->E + xe];
        e.rows_bad += rows != a->offset[xe + 1] - a->offset[xe] ||
                      memcmp(s->xg + (size_t)t * C, a->xg + (size_t)a->offset[xe] * C,
                             sizeof(float) * rows * C) != 0;
        t += rows;
    }
    ep_acts_free(s);
    moe_acts_free(a);
    free(x); free(R); free(w); free(out_ref); free(dx_ref); free(dw_ref); free(out); free(dx); free(dw);
    return e;
}

int main(int argc, char **argv) {
    int np = 2;
    Flag flags[] = {F_INT("--np", &np, 1, COMM_MAX_RANKS, "ranks: the experts split over them")};
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "test_ep [flags]",
                "Expert parallelism against one process's mixture-of-experts layer.");
    ctx_init(&ctx, DEV_CPU, 1, 0);
    CommConfig cc = {.np = np, .timeout_s = 30};
    Comm *c = comm_launch(&cc);
    TestState ts = {0};
    int p = comm_size(c);
    if (comm_rank(c) == 0)
        for (int cap = 0; cap < 3; cap++)
            printf("PLAN ep.equiv.np%d%s\n", p, cap == 2 ? ".uneven" : cap ? ".capacity" : "");
    fflush(stdout);
    // No capacity; capacity 1.0 (drops); and ranks holding 20, 23, 26, ... tokens, with drops.
    for (int cap = 0; cap < 3; cap++) {
        MoEConfig m = {12, 2, 24, cap ? 1.0f : 0.0f, 0.01f, 0.001f};
        int uneven = cap == 2 ? 3 : 0, tokens = 20 * p + uneven * p * (p - 1) / 2;
        Errs mine = run(c, &m, 20, uneven, 16);
        if (comm_rank(c) != 0) {
            comm_send(c, comm_world(c), 0, &mine, sizeof mine);
            continue;
        }
        Errs w = mine, o;
        for (int q = 1; q < p; q++) {
            comm_recv(c, comm_world(c), q, &o, sizeof o);
            w.out = max_err(w.out, o.out), w.dx = max_err(w.dx, o.dx);
            w.dw_experts = max_err(w.dw_experts, o.dw_experts);
            w.dw_router = max_err(w.dw_router, o.dw_router), w.losses = max_err(w.losses, o.losses);
            w.rows_bad += o.rows_bad, w.bytes_bad += o.bytes_bad;
        }
        double worst = max_err(max_err(w.out, w.dx),
                               max_err(max_err(w.dw_experts, w.dw_router), w.losses));
        char name[48];
        snprintf(name, sizeof name, "ep.equiv.np%d%s", p,
                 cap == 2 ? ".uneven" : cap ? ".capacity" : "");
        int ok = worst <= 1e-6 && w.rows_bad == 0 && w.bytes_bad == 0 && (!cap || w.dropped > 0);
        test_report(&ts, ok, name, "E 12 over %d ranks, k 2, %s: worst "
                    "rank's out %.1e, dx %.1e, its experts' dW %.1e, router dW (summed) %.1e, losses "
                    "%.1e against one process on all %d tokens (tol 1e-6); %d experts ran on other "
                    "rows (or in another order) than there; the all-to-alls' bytes %s the kept rows to "
                    "others and back", p,
                    cap == 2 ? "capacity 1.0, 20 + 3q tokens on rank q" : cap ? "capacity 1.0" : "no capacity",
                    w.out, w.dx,
                    w.dw_experts, w.dw_router, w.losses, tokens, w.rows_bad,
                    w.bytes_bad ? "!=" : "=");
        if (cap) printf("  (%d of the %d assignments dropped, as one process drops them)\n",
                        w.dropped, 2 * tokens);
    }
    int rank = comm_rank(c);
    comm_finalize(c);
    ctx_destroy(&ctx);
    return rank == 0 && ts.failed ? 1 : 0;
}
