// straggler.c — naming the rank that slows everyone (checkpoint.h). In a
// synchronous job every collective waits for the last rank to arrive, so one slow
// GPU (thermal throttling, a failing link, a noisy neighbour) sets the pace of
// thousands. Nothing fails, so nothing restarts: it has to be measured. Each
// step every rank's forward-and-backward time goes to every rank (one small sum);
// a rank above factor x the median for STRAGGLER_STEPS steps in a row is named.
// The (lower) median, not the mean: the straggler itself must not raise the bar.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "checkpoint.h"

void straggler_init(StragglerDetector *d, double factor, int world) {
    memset(d, 0, sizeof *d);
    d->factor = factor;
    d->world = world;
    d->run = calloc((size_t)world, sizeof *d->run);
    d->named = calloc((size_t)world, sizeof *d->named);
    CHECK(d->run && d->named, "out of host memory");
}

void straggler_free(StragglerDetector *d) {
    free(d->run);
    free(d->named);
    memset(d, 0, sizeof *d);
}

static int by_value(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

int straggler_step(StragglerDetector *d, const CkptConfig *cc, double ms, char *msg, size_t n) {
    int W = d->world, newly = 0;
    msg[0] = 0;
    if (d->factor <= 0 || W < 2 || !cc->sum) return 0;
    float *t = calloc((size_t)W * 2, sizeof *t), *sorted = t + W;
    CHECK(t, "out of host memory");
    t[cc->rank] = (float)ms;
    cc->sum(t, W, cc->sum_arg);
    memcpy(sorted, t, (size_t)W * sizeof *t);
    qsort(sorted, (size_t)W, sizeof *sorted, by_value);
    // The lower median: of 2 ranks, the faster one's time (the straggler's own
    // time must not raise the bar it is measured against).
    double median = sorted[(W - 1) / 2];
    for (int r = 0; r < W; r++) {
        if (!(t[r] > d->factor * median)) {
            d->run[r] = d->named[r] = 0;  // the episode ends
            continue;
        }
        if (++d->run[r] >= STRAGGLER_STEPS && !d->named[r]) {
            size_t len = strlen(msg);
            snprintf(msg + len, n - len, "%srank %d took %.1f ms for its forward and backward, %.1fx "
                     "the median %.1f ms of the %d ranks, %d steps in a row", newly ? "; " : "", r,
                     t[r], t[r] / median, median, W, d->run[r]);
            d->named[r] = 1;
            d->episodes++;
            newly++;
        }
    }
    free(t);
    return newly;
}

// ---------------------------------------------------------------- slow links

int link_watch_step(LinkWatch *w, Comm *c, char *msg, size_t n) {
    PeerFlow f[COMM_MAX_RANKS];
    int newly = 0, me = comm_rank(c);
    msg[0] = 0;
    if (w->factor <= 0) return 0;
    comm_take_flows(c, f);
    for (int p = 0; p < comm_size(c); p++) {
        if (p == me || f[p].bytes < COMM_FLOW_MIN || f[p].seconds <= 0) continue;
        double rate = (double)f[p].bytes / f[p].seconds;
        if (w->samples[p] < LINK_BASE_STEPS) {  // the baseline: the first steps' mean
            w->base[p] += rate / LINK_BASE_STEPS;
            w->samples[p]++;
            continue;
        }
        if (!(rate * w->factor < w->base[p])) {
            w->run[p] = w->named[p] = 0;  // the episode ends
            continue;
        }
        if (++w->run[p] < STRAGGLER_STEPS || w->named[p]) continue;
        int here = comm_node(c, me), there = comm_node(c, p);
        size_t len = strlen(msg);
        snprintf(msg + len, n - len, "%sthe messages from rank %d%s arrive at %.2f MB/s, %.1fx "
                 "below the %.2f MB/s of its first steps, %d steps in a row%s", newly ? "; " : "",
                 p, there != here ? " (across the link between the nodes)" : "", rate / 1e6,
                 w->base[p] / rate, w->base[p] / 1e6, w->run[p],
                 there != here ? "" : " (inside this node)");
        if (there != here) {
            len = strlen(msg);
            snprintf(msg + len, n - len, ": the link between node %d and node %d is slow", here, there);
        }
        w->named[p] = 1;
        newly++;
    }
    return newly;
}
