// sdc.c — errors that do not crash: silent data corruption and loss spikes
// (checkpoint.h). Llama 3's 54-day run counted 6 interruptions to silent data
// corruption; what is worse is the corruption nobody notices. Data parallelism
// gives a free detector: replicas hold the same weights bit for bit (the same
// all-reduced gradients, the same deterministic update), so a hash of the
// weights that differs between replicas is a fault on the rank in the minority.
// A loss spike (a bad batch, an overflow that got through) is caught by its
// size against the recent losses, and the update skipped, as large runs do.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "checkpoint.h"
#include "ops.h"

// This rank's (key, hash): the key says which pieces it holds (ranks holding the
// same pieces must agree), the hash what they hold.
static void key_and_hash(const TrainState *st, uint32_t *key, uint32_t *hash, int *any) {
    *key = *hash = 0;
    *any = 0;
    for (int v = 0; v < st->n_views; v++) {
        const StateView *V = &st->views[v];
        if (V->kind != ST_PARAMS || V->replicas < 2) continue;  // no replica: nothing to compare
        uint64_t where[4] = {V->lo, V->hi, (uint64_t)V->g->tp.rank, (uint64_t)V->g->l0};
        *key = crc32c(*key, where, sizeof where);
        size_t n = V->hi - V->lo;
        float *host = malloc(n * sizeof(float));
        CHECK(host, "out of host memory");
        V->g->ctx->ops->to_host(V->g->ctx, host, V->data, n * sizeof(float));
        *hash = crc32c(*hash, host, n * sizeof(float));
        free(host);
        *any = 1;
    }
}

int sdc_check(const CkptConfig *cc, const TrainState *st, int *compared, char *msg, size_t n) {
    int W = cc->world;
    uint32_t key, hash;
    int any;
    key_and_hash(st, &key, &hash, &any);
    // Every rank's (any, key, hash) to every rank: 16-bit halves in floats, summed
    // into the rank's own slots (exact).
    float *v = calloc((size_t)W * 5, sizeof(float));
    CHECK(v, "out of host memory");
    float *me = v + (size_t)cc->rank * 5;
    me[0] = (float)any;
    me[1] = (float)(key >> 16), me[2] = (float)(key & 0xFFFF);
    me[3] = (float)(hash >> 16), me[4] = (float)(hash & 0xFFFF);
    if (cc->sum && W > 1) cc->sum(v, W * 5, cc->sum_arg);
    int bad = 0;
    *compared = 0;
    msg[0] = 0;
    for (int r = 0; r < W; r++) {
        const float *x = v + (size_t)r * 5;
        if (x[0] == 0) continue;
        // r's replicas: the ranks with its key. The majority's hash is the truth.
        int same = 0, agree = 0, majority_votes = 0;
        uint32_t majority = 0;
        for (int q = 0; q < W; q++) {
            const float *y = v + (size_t)q * 5;
            if (y[0] == 0 || y[1] != x[1] || y[2] != x[2]) continue;
            same++;
            int votes = 0;
            for (int z = 0; z < W; z++) {
                const float *w = v + (size_t)z * 5;
                votes += w[0] && w[1] == x[1] && w[2] == x[2] && w[3] == y[3] && w[4] == y[4];
            }
            if (votes > majority_votes) majority_votes = votes, majority = ((uint32_t)y[3] << 16) | (uint32_t)y[4];
            agree += y[3] == x[3] && y[4] == x[4];
        }
        if (same < 2) continue;
        (*compared)++;
        uint32_t mine = ((uint32_t)x[3] << 16) | (uint32_t)x[4];
        size_t len = strlen(msg);
        if (2 * majority_votes <= same) {
            // No hash has more than half the votes (two replicas that differ, or a tie):
            // a fault, but which replica holds it cannot be told. Said once, by the
            // group's first rank.
            int first = r;
            for (int q = 0; q < r; q++) {
                const float *y = v + (size_t)q * 5;
                if (y[0] != 0 && y[1] == x[1] && y[2] == x[2]) { first = q; break; }
            }
            if (first == r)
                snprintf(msg + len, n - len, "%sthe %d replicas of rank %d's weights disagree and no "
                         "hash has a majority: the faulty one cannot be named (that takes 3 or "
                         "more replicas)", bad ? "; " : "", same, r);
            bad += first == r;
        } else if (mine != majority) {
            snprintf(msg + len, n - len, "%srank %d's weights hash to %08x, where %d of its %d "
                     "replicas hash to %08x", bad ? "; " : "", r, mine, majority_votes, same - 1,
                     majority);
            bad++;
        }
    }
    free(v);
    return bad;
}

int spike_check(const SpikeDetector *d, double loss, double *median) {
    *median = 0;
    if (d->factor <= 0 || d->n < SPIKE_WINDOW / 2) return 0;
    double s[SPIKE_WINDOW];
    memcpy(s, d->loss, (size_t)d->n * sizeof *s);
    for (int i = 1; i < d->n; i++)  // insertion sort: 16 values
        for (int j = i; j > 0 && s[j] < s[j - 1]; j--) {
            double t = s[j];
            s[j] = s[j - 1];
            s[j - 1] = t;
        }
    *median = d->n % 2 ? s[d->n / 2] : 0.5 * (s[d->n / 2 - 1] + s[d->n / 2]);
    return !(loss <= d->factor * *median);  // NaN is a spike too
}

void spike_accept(SpikeDetector *d, double loss) {
    d->loss[d->next] = loss;
    d->next = (d->next + 1) % SPIKE_WINDOW;
    if (d->n < SPIKE_WINDOW) d->n++;
}
