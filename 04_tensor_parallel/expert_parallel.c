// expert_parallel.c — a mixture-of-experts layer with its experts split over ranks
// (ep.h): route, counts, dispatch, experts, combine, and the way back.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ep.h"

EPActs *ep_acts_new(const ExpertParallel *ep, const MoEConfig *m, int N, int C) {
    int p = ep->group->size;
    CHECK(m->E % p == 0, "expert parallelism over %d ranks: the %d experts do not split evenly "
          "(E must be a multiple of the ranks)", p, m->E);
    EPActs *s = xcalloc(1, sizeof *s);
    s->a = moe_route_acts_new(m, N, C);
    s->ep = p, s->El = m->E / p;
    s->counts = xmalloc(sizeof(int) * p * m->E);
    s->kept = xmalloc(sizeof(int) * p * m->E);
    s->pos = xmalloc(sizeof(int) * N * m->k);
    s->send_rows = xmalloc(sizeof(size_t) * p);
    s->recv_rows = xmalloc(sizeof(size_t) * p);
    return s;
}

static void free_rows(EPActs *s) {
    free(s->send); free(s->recv); free(s->xg); free(s->h); free(s->act); free(s->y); free(s->order);
    s->send = s->recv = s->xg = s->h = s->act = s->y = NULL;
    s->order = NULL;
}

void ep_acts_free(EPActs *s) {
    if (!s) return;
    free_rows(s);
    moe_acts_free(s->a);
    free(s->counts); free(s->kept); free(s->pos); free(s->send_rows); free(s->recv_rows);
    free(s);
}

// Every rank's counts, and the capacity rule applied to the step's tokens in rank order:
// kept[q][e] = what is left of e's capacity after ranks 0..q-1, at most counts[q][e].
// The whole step's routed counts into a->routed, its tokens into s->tokens.
static void capacity(const ExpertParallel *ep, const MoEConfig *m, EPActs *s) {
    int p = s->ep, E = m->E, r = ep->group->rank, N = s->a->N, k = m->k;
    int *mine = s->counts + (size_t)r * E;
    memset(mine, 0, sizeof(int) * E);
    for (int i = 0; i < N * k; i++) mine[s->a->expert[i]]++;
    all_gather(ep->comm, ep->group, s->counts, (size_t)p * E, DT_I32, reduction_algo(ep->algo));
    long total = 0;
    for (int e = 0; e < E; e++) {
        s->a->routed[e] = 0;
        for (int q = 0; q < p; q++) s->a->routed[e] += s->counts[(size_t)q * E + e];
        total += s->a->routed[e];
    }
    s->tokens = total / k;
    long cap = m->capacity > 0 ? (long)ceil((double)m->capacity * total / E) : total;
    for (int e = 0; e < E; e++) {
        long before = 0;
        for (int q = 0; q < p; q++) {
            long left = cap - before > 0 ? cap - before : 0, c = s->counts[(size_t)q * E + e];
            s->kept[(size_t)q * E + e] = (int)(c < left ? c : left);
            before += c;
        }
    }
}

// The send buffer's layout: to each rank its experts' kept rows, by expert, in token
// order; pos[i] the row of assignment i (-1: dropped). Then the receive counts.
static void layout(const MoEConfig *m, EPActs *s, int r) {
    int E = m->E, k = m->k, N = s->a->N, *next = xcalloc((size_t)E + 1, sizeof(int));
    int *left = xmalloc(sizeof(int) * E);
    for (int e = 0, row = 0; e < E; e++) {  // expert e's first row in the send buffer
        next[e] = row;
        left[e] = s->kept[(size_t)r * E + e];
        row += left[e];
    }
    s->a->dropped = 0;
    for (int i = 0; i < N * k; i++) {
        int e = s->a->expert[i];
        s->pos[i] = left[e]-- > 0 ? next[e]++ : -1;
        s->a->dropped += s->pos[i] < 0;
    }
    s->n_send = s->n_recv = 0;
    for (int d = 0; d < s->ep; d++) {
        size_t out = 0, in = 0;
        for (int e = d * s->El; e < (d + 1) * s->El; e++) out += s->kept[(size_t)r * E + e];
        for (int e = r * s->El; e < (r + 1) * s->El; e++) in += s->kept[(size_t)d * E + e];
        s->send_rows[d] = out, s->recv_rows[d] = in;
        s->n_send += out, s->n_recv += in;
    }
    free(next);
    free(left);
}

// The rows expert e runs on: every rank's kept assignments to it.
static int expert_rows(const MoEConfig *m, const EPActs *s, int e) {
    int rows = 0;
    for (int q = 0; q < s->ep; q++) rows += s->kept[(size_t)q * m->E + e];
    return rows;
}

// The received rows (by source, then expert) reordered by expert, then source: xg's
// row t came from recv row order[t].
static void by_expert(const MoEConfig *m, EPActs *s, int r) {
    size_t t = 0;
    for (int e = r * s->El; e < (r + 1) * s->El; e++) {
        size_t base = 0;
        for (int q = 0; q < s->ep; q++) {
            size_t at = base;  // e's rows within source q's block
            for (int f = r * s->El; f < e; f++) at += s->kept[(size_t)q * m->E + f];
            for (int i = 0; i < s->kept[(size_t)q * m->E + e]; i++) s->order[t++] = (int)(at + i);
            base += s->recv_rows[q];
        }
    }
}

// all_to_all_v of rows: `rows_out` to each rank from `send`, `rows_in` from each into recv.
static void exchange(const ExpertParallel *ep, const float *send, const size_t *rows_out,
                     float *recv, const size_t *rows_in, int C) {
    size_t out[COMM_MAX_RANKS], in[COMM_MAX_RANKS];
    for (int q = 0; q < ep->group->size; q++) out[q] = rows_out[q] * C, in[q] = rows_in[q] * C;
    all_to_all_v(ep->comm, ep->group, send, out, recv, in, DT_F32, ep->algo);
}

// The whole step's load-balancing and z losses: the routed counts all-gathered already,
// the probabilities' sums and the z-loss's summed over the group.
static void losses(const ExpertParallel *ep, const MoEConfig *m, EPActs *s) {
    int E = m->E, N = s->a->N;
    double *sum = xcalloc((size_t)E + 1, sizeof(double));  // P's sums, then the z-loss's
    for (int n = 0; n < N; n++) {
        for (int e = 0; e < E; e++) sum[e] += s->a->probs[(size_t)n * E + e];
        sum[E] += (double)s->a->lse[n] * s->a->lse[n];
    }
    allreduce(ep->comm, ep->group, sum, (size_t)E + 1, DT_F64, reduction_algo(ep->algo));
    double total = (double)s->tokens, aux = 0;
    for (int e = 0; e < E; e++) aux += s->a->routed[e] / (total * m->k) * (sum[e] / total);
    s->aux = (float)(m->aux_weight * E * aux);
    s->z = (float)(m->z_weight * sum[E] / total);
    free(sum);
}

float ep_moe_forward(Ctx *ctx, const ExpertParallel *ep, const MoEConfig *m, EPActs *s,
                     float *out, const float *x, const float *w) {
    MoEActs *a = s->a;
    int N = a->N, C = a->C, F = m->F, k = m->k, r = ep->group->rank;
    moe_route(ctx, m, a, x, w);
    capacity(ep, m, s);
    layout(m, s, r);
    free_rows(s);
    s->send = xmalloc(sizeof(float) * (s->n_send + 1) * C);
    s->recv = xmalloc(sizeof(float) * (s->n_recv + 1) * C);
    s->xg = xmalloc(sizeof(float) * (s->n_recv + 1) * C);
    s->y = xmalloc(sizeof(float) * (s->n_recv + 1) * C);
    s->h = xmalloc(sizeof(float) * (s->n_recv + 1) * F);
    s->act = xmalloc(sizeof(float) * (s->n_recv + 1) * F);
    s->order = xmalloc(sizeof(int) * (s->n_recv + 1));
    for (int i = 0; i < N * k; i++)  // dispatch: each kept assignment's token row
        if (s->pos[i] >= 0) memcpy(s->send + (size_t)s->pos[i] * C, x + (size_t)(i / k) * C, sizeof(float) * C);
    exchange(ep, s->send, s->send_rows, s->recv, s->recv_rows, C);
    by_expert(m, s, r);
    for (size_t t = 0; t < s->n_recv; t++)
        memcpy(s->xg + t * C, s->recv + (size_t)s->order[t] * C, sizeof(float) * C);
    for (int e = r * s->El, t0 = 0; e < (r + 1) * s->El; e++) {
        int rows = expert_rows(m, s, e);
        moe_expert_forward(ctx, m, C, w, e, rows, s->xg + (size_t)t0 * C, s->h + (size_t)t0 * F,
                           s->act + (size_t)t0 * F, s->y + (size_t)t0 * C);
        t0 += rows;
    }
    for (size_t t = 0; t < s->n_recv; t++)  // combine: the outputs back where the rows came from
        memcpy(s->recv + (size_t)s->order[t] * C, s->y + t * C, sizeof(float) * C);
    exchange(ep, s->recv, s->recv_rows, s->send, s->send_rows, C);
    moe_combine(m, a, s->pos, s->send, out);  // as moe_forward's, the rows where they came back
    losses(ep, m, s);
    return s->aux + s->z;
}

void ep_moe_backward(Ctx *ctx, const ExpertParallel *ep, const MoEConfig *m, EPActs *s,
                     float *dx, float *dw, const float *dout, const float *x, const float *w,
                     float loss_scale) {
    MoEActs *a = s->a;
    int N = a->N, C = a->C, F = m->F, k = m->k, E = m->E, r = ep->group->rank;
    float *dgate = xcalloc((size_t)N * k, sizeof(float));
    moe_combine_backward(m, a, s->pos, dout, s->send, s->send, dgate);  // send: outputs, then dy
    exchange(ep, s->send, s->send_rows, s->recv, s->recv_rows, C);
    float *dyg = xmalloc(sizeof(float) * (s->n_recv + 1) * C);
    float *dxg = xmalloc(sizeof(float) * (s->n_recv + 1) * C);
    for (size_t t = 0; t < s->n_recv; t++)
        memcpy(dyg + t * C, s->recv + (size_t)s->order[t] * C, sizeof(float) * C);
    for (int e = r * s->El, t0 = 0; e < (r + 1) * s->El; e++) {
        int rows = expert_rows(m, s, e);
        size_t hc = (size_t)t0 * C, hf = (size_t)t0 * F;
        moe_expert_backward(ctx, m, C, w, dw, e, rows, dyg + hc, s->xg + hc, s->h + hf,
                            s->act + hf, dxg + hc);
        t0 += rows;
    }
    for (size_t t = 0; t < s->n_recv; t++)
        memcpy(s->recv + (size_t)s->order[t] * C, dxg + t * C, sizeof(float) * C);
    exchange(ep, s->recv, s->recv_rows, s->send, s->send_rows, C);
    moe_scatter_add(m, a, s->pos, s->send, dx);
    // The router: this rank's tokens' share of its gradient, summed over the group.
    float *dlogits = xmalloc(sizeof(float) * N * E), *dwr = xcalloc((size_t)E * C, sizeof(float));
    moe_router_backward(m, a, dlogits, dgate, a->routed, (int)s->tokens, loss_scale);
    ctx->ops->matmul_backward(ctx, dx, dwr, NULL, dlogits, x, w, N, C, E);
    allreduce(ep->comm, ep->group, dwr, (size_t)E * C, DT_F32, reduction_algo(ep->algo));
    for (size_t i = 0; i < (size_t)E * C; i++) dw[i] += dwr[i];
    free(dgate); free(dyg); free(dxg); free(dlogits); free(dwr);
}
