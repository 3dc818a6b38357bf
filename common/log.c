// log.c — rank-tagged logging and the one way to die.
//
// With N ranks writing to the same terminal, a line without its rank is useless:
// "error: NaN in loss" from which of eight processes? Every line therefore starts
// with the tag "[rank r/w] " once the rank is known (before that, the tag is empty:
// flag parsing and single-process tools print plain lines).
//
// Each line is formatted into one buffer and written with one call, so that lines
// from different processes sharing a pipe interleave whole, not mid-word.
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

// The one piece of process-wide mutable state in the code base (see check.h).
// "[rank 2147483647/2147483647] " is 29 bytes; 48 leaves room.
static char g_tag[48] = "";

void log_set_rank(int rank, int world) {
    snprintf(g_tag, sizeof g_tag, "[rank %d/%d] ", rank, world);
}

const char *log_tag(void) { return g_tag; }

// Writes "<tag><prefix><message><suffix>\n" to f as a single write when it fits
// in a stack buffer. Callers may end their format with '\n' or not: exactly one
// line is printed either way. No malloc: this runs inside a dying allocator too.
static void log_line(FILE *f, const char *prefix, const char *suffix, const char *fmt,
                     va_list ap) {
    char buf[2048];
    size_t pos = (size_t)snprintf(buf, sizeof buf, "%s%s", g_tag, prefix);
    va_list ap2;
    va_copy(ap2, ap);
    int len = vsnprintf(buf + pos, sizeof buf - pos, fmt, ap2);
    va_end(ap2);
    if (len < 0) len = 0;
    if (pos + (size_t)len + strlen(suffix) + 2 <= sizeof buf) {
        pos += (size_t)len;
        if (pos > 0 && buf[pos - 1] == '\n') pos--;
        pos += (size_t)snprintf(buf + pos, sizeof buf - pos, "%s\n", suffix);
        fwrite(buf, 1, pos, f);
    } else {
        // Too long for the buffer: print in pieces rather than truncate the message.
        fputs(g_tag, f);
        fputs(prefix, f);
        vfprintf(f, fmt, ap);
        fprintf(f, "%s\n", suffix);
    }
    fflush(f);
}

void log_info(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    log_line(stdout, "", "", fmt, ap);
    va_end(ap);
}

void log_event(const char *name) {
    const char *on = getenv("COURSE_EVENTS");
    if (!on || strcmp(on, "1") != 0) return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    fprintf(stderr, "EVENT %s t=%.6f\n", name, (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec);
    fflush(stderr);
}

void log_warn(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    log_line(stderr, "warning: ", "", fmt, ap);
    va_end(ap);
}

_Noreturn void die_at(const char *file, int line, const char *fmt, ...) {
    // Whatever the program printed to stdout so far goes out first, so the error is
    // the last thing on the terminal, not buried above buffered output.
    fflush(stdout);
    char where[512];
    snprintf(where, sizeof where, " (%s:%d)", file, line);
    va_list ap;
    va_start(ap, fmt);
    log_line(stderr, "error: ", where, fmt, ap);
    va_end(ap);
    exit(1);
}

// write(2) only, in the handler: async-signal-safe.
static void say_crash(int sig) {
    static const struct { int sig; const char *text; } names[] = {
        {SIGSEGV, "11 (Segmentation fault)\n"}, {SIGBUS, "7 (Bus error)\n"},
        {SIGFPE, "8 (Floating point exception)\n"}, {SIGILL, "4 (Illegal instruction)\n"},
        {SIGABRT, "6 (Aborted)\n"}};
    static const char head[] = "error: this process (the only rank) was killed by signal ";
    ssize_t w = write(STDERR_FILENO, g_tag, strlen(g_tag));
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i].sig == sig) {
            w += write(STDERR_FILENO, head, sizeof head - 1);
            w += write(STDERR_FILENO, names[i].text, strlen(names[i].text));
        }
    (void)w;
    raise(sig);  // SA_RESETHAND: now the default action (a core dump where enabled)
}

void log_report_crashes(void) {
    const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(sigs[i], NULL, &old) != 0 || (old.sa_flags & SA_SIGINFO) ||
            old.sa_handler != SIG_DFL)
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = say_crash;
        sa.sa_flags = SA_RESETHAND | SA_NODEFER;
        sigaction(sigs[i], &sa, NULL);
    }
}

void *xmalloc(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    CHECK(p, "out of host memory (%zu bytes)", bytes);
    return p;
}

void *xcalloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    CHECK(p, "out of host memory (%zu x %zu bytes)", n, size);
    return p;
}
