// harness.h — the tiny test harness every C test uses.
//
// A test program runs many checks; each prints one line
//   PASS <name>  <detail>        or        FAIL <name>  <detail>
// and main() returns the number of failures (capped at 255... well, at 1).
// tests/run.sh counts the lines of every program into "N passed, N failed".
#pragma once
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stddef.h>

typedef struct { int passed, failed; } TestState;

static inline void test_report(TestState *ts, int ok, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static inline void test_report(TestState *ts, int ok, const char *name, const char *fmt, ...) {
    printf("%s %s  ", ok ? "PASS" : "FAIL", name);
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    fflush(stdout);
    if (ok) ts->passed++; else ts->failed++;
}

// ||a - b|| / ||b|| in double; 0 when both are zero; inf if b is zero but a is not.
static inline double rel_error(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)b[i];
        num += d * d;
        den += (double)b[i] * (double)b[i];
    }
    if (num != num) return INFINITY;  // NaN anywhere fails
    if (den == 0) return num == 0 ? 0 : INFINITY;
    return sqrt(num / den);
}

// PASS when rel_error <= tol.
static inline int check_rel(TestState *ts, const char *name, const float *got, const float *want,
                            size_t n, double tol) {
    double e = rel_error(got, want, n);
    test_report(ts, e <= tol, name, "rel_err %.3e (tol %.1e, n %zu)", e, tol, n);
    return e <= tol;
}

static inline int test_finish(const TestState *ts) {
    printf("# %d passed, %d failed\n", ts->passed, ts->failed);
    return ts->failed ? 1 : 0;
}
