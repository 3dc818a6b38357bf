// test_straggler.c — stage 07's straggler detector (07_fault_tolerance/straggler.c) on
// made-up step times, so that its rule is checked exactly, free of any clock: a rank
// is named at the STRAGGLER_STEPS-th step in a row above factor x the lower median,
// once per episode, and a step at or under the bar ends the episode. (The end-to-end
// check in tests/stage07_silent.sh slows a real rank, where a noisy machine can move
// the naming by a step; this is where the step is pinned.)
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "checkpoint.h"
#include "harness.h"

// The "all-reduce" of one simulated job: every rank's time of this step, as the
// collective would leave it, whatever this rank put in its own slot.
typedef struct { const float *times; } Job;
static void job_sum(float *buf, int n, void *arg) {
    const Job *j = arg;
    for (int r = 0; r < n; r++) buf[r] = j->times[r];
}

// Runs steps of a W-rank job (times[s][r]), as rank 0 sees them; names[s] gets the
// ranks newly named at step s (a bit each), msg the last message.
static void run(double factor, int W, int steps, const float times[][4], int *names, char *msg,
                size_t n) {
    StragglerDetector d;
    straggler_init(&d, factor, W);
    for (int s = 0; s < steps; s++) {
        Job j = {times[s]};
        CkptConfig cc = {.sum = job_sum, .sum_arg = &j, .rank = 0, .world = W};
        char m[512];
        int k = straggler_step(&d, &cc, times[s][0], m, sizeof m);
        names[s] = 0;
        for (int r = 0; r < W; r++) {
            char tag[32];
            snprintf(tag, sizeof tag, "rank %d took", r);
            if (strstr(m, tag)) names[s] |= 1 << r;
        }
        CHECK(__builtin_popcount((unsigned)names[s]) == k, "step %d: %d named, the message says %s",
              s, k, m);
        if (k) snprintf(msg, n, "%s", m);
    }
    straggler_free(&d);
}

// "step 4: 0x2, ..." for the steps that named someone ("" for none).
static void mask_string(char *out, size_t n, const int *names, int steps) {
    size_t len = 0;
    out[0] = 0;
    for (int s = 0; s < steps && len < n; s++)
        if (names[s]) len += (size_t)snprintf(out + len, n - len, "%sstep %d: 0x%x", len ? ", " : "", s,
                                              names[s]);
}

int main(void) {
    printf("PLAN straggler.named_at_third_step\nPLAN straggler.once_per_episode\n"
           "PLAN straggler.episode_ends\nPLAN straggler.bar_is_strict\n"
           "PLAN straggler.lower_median\nPLAN straggler.two_at_once\n");
    fflush(stdout);
    TestState ts = {0};
    char msg[512] = "", got[256];
    int names[8];

    // Two ranks, rank 1 slow (8x) from step 2 on: named at step 4 (2, 3, 4 in a row),
    // and never again while the episode lasts.
    static const float slow[8][4] = {{10, 10}, {10, 12}, {10, 80}, {10, 80},
                                     {10, 80}, {10, 80}, {10, 80}, {10, 80}};
    run(2, 2, 8, slow, names, msg, sizeof msg);
    mask_string(got, sizeof got, names, 8);
    test_report(&ts, names[4] == 2 && names[2] == 0 && names[3] == 0, "straggler.named_at_third_step",
                "slow from step 2, %d steps in a row: named %s (want step 4: 0x2); \"%s\"",
                STRAGGLER_STEPS, got, msg);
    int later = 0;
    for (int s = 5; s < 8; s++) later += names[s] != 0;
    test_report(&ts, later == 0 && names[0] == 0 && names[1] == 0, "straggler.once_per_episode",
                "named %s: once, though slow through step 7", got);

    // A normal step ends the episode: the count starts again, and the next episode is
    // named again (slow at 1-3, normal at 4, slow at 5-7: named at 3 and at 7).
    static const float gap[8][4] = {{10, 10}, {10, 50}, {10, 50}, {10, 50},
                                    {10, 10}, {10, 50}, {10, 50}, {10, 50}};
    run(2, 2, 8, gap, names, msg, sizeof msg);
    mask_string(got, sizeof got, names, 8);
    int want = 1;
    for (int s = 0; s < 8; s++) want = want && names[s] == (s == 3 || s == 7 ? 2 : 0);
    test_report(&ts, want, "straggler.episode_ends",
                "slow at 1-3 and 5-7, normal at 4: named %s (want step 3: 0x2, step 7: 0x2)", got);

    // Exactly factor x the median is not slow: 20 ms against 10 at factor 2, forever.
    static const float edge[6][4] = {{10, 20}, {10, 20}, {10, 20}, {10, 20}, {10, 20}, {10, 20}};
    run(2, 2, 6, edge, names, msg, sizeof msg);
    mask_string(got, sizeof got, names, 6);
    test_report(&ts, got[0] == 0, "straggler.bar_is_strict",
                "20 ms against a median of 10 at factor 2: named %s (want none)", got[0] ? got : "none");

    // The lower median: with 4 ranks, two of them slow, the bar is set by the fast
    // pair (the upper median, a slow rank's own time, would hide both), and both are
    // named in one message.
    static const float pair[4][4] = {{10, 10, 10, 10}, {10, 30, 10, 30}, {10, 30, 10, 30},
                                     {10, 30, 10, 30}};
    run(2, 4, 4, pair, names, msg, sizeof msg);
    mask_string(got, sizeof got, names, 4);
    test_report(&ts, names[3] == 0xa, "straggler.lower_median",
                "ranks 1 and 3 at 3x of 4 ranks: named %s (want step 3: 0xa)", got);
    test_report(&ts, names[3] == 0xa && strstr(msg, "; rank 3"), "straggler.two_at_once",
                "one message names both: \"%s\"", msg);
    return test_finish(&ts);
}
