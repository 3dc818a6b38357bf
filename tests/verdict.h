// verdict.h — one check's outcome on every rank of a multi-rank test, reported
// once: each rank fills a Verdict, rank 0 collects them and prints the worst.
#pragma once
#include "comm.h"
#include "harness.h"

typedef struct {
    double err;       // the worst error this rank saw (what it measures: the check's)
    int bad;          // mismatches counted by this rank
    char detail[200]; // what this rank saw worst, in words
} Verdict;

// Every rank calls it; rank 0 prints one PASS/FAIL line: PASS when no rank counted a
// mismatch and every rank's err is within tol (NaN never is).
static inline void report(TestState *ts, Comm *c, const char *name, Verdict mine, double tol,
                          const char *what) {
    const Group *w = comm_world(c);
    if (w->rank != 0) {
        comm_send(c, w, 0, &mine, sizeof mine);
        return;
    }
    Verdict worst = mine;
    int at = 0;
    for (int q = 1; q < w->size; q++) {
        Verdict v;
        comm_recv(c, w, q, &v, sizeof v);
        if (v.bad > worst.bad || (v.bad == worst.bad && worse(v.err, worst.err))) worst = v, at = q;
    }
    test_report(ts, worst.bad == 0 && worst.err <= tol, name, "%s; worst on rank %d: %s", what, at,
                worst.detail);
}
