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
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct { int passed, failed; } TestState;

// Worst errors, with NaN the worst of all and for good: fmax(worst, NaN) is worst (a
// NaN dropped), and `if (!(d <= worst)) worst = d` forgets a NaN at the next finite d.
static inline double max_err(double a, double b) {
    return isnan(a) || isnan(b) ? (double)NAN : a > b ? a : b;
}
// 1 if d is worse than worst (then take d, and its index): never once worst is NaN.
static inline int worse(double d, double worst) { return !isnan(worst) && !(d <= worst); }

// A float's bit pattern, and back (the dtype tests compare bits, NaNs included).
static inline uint32_t float_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
static inline float float_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

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

// |got - want| <= tol (absolute), and want > 0 (so a stub returning zeros never passes).
static inline int near(double got, double want, double tol) {
    return want > 0 && fabs(got - want) <= tol;
}

// For checks that a failure exits cleanly: // Runs fn(arg) in a child process whose stdout and stderr go into a pipe. Returns
// the child's exit status (-1 if it was killed by a signal) and what it printed,
// NUL-terminated and without its final newline, in out.
static inline int run_child(void (*fn)(void *), void *arg, char *out, size_t n) {
    int fds[2];
    if (pipe(fds) != 0) return -2;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -2;
    if (pid == 0) {
        close(fds[0]);
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[1]);
        fn(arg);
        fflush(stdout);
        _exit(0);
    }
    close(fds[1]);
    size_t len = 0;
    for (;;) {
        char tmp[512];
        ssize_t k = read(fds[0], tmp, sizeof tmp);
        if (k <= 0) break;
        size_t room = n - 1 - len;
        size_t take = (size_t)k < room ? (size_t)k : room;
        memcpy(out + len, tmp, take);
        len += take;
    }
    while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == ' ')) len--;
    out[len] = '\0';
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static inline int test_finish(const TestState *ts) {
    printf("# %d passed, %d failed\n", ts->passed, ts->failed);
    return ts->failed ? 1 : 0;
}
