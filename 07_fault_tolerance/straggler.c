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
