// ledger.c — the memory ledger, and bytes as humans write them.
//
// The ledger is pure bookkeeping: mem_alloc (ctx.c) charges it before allocating
// and mem_free releases it after freeing. Keeping the numbers here, apart from the
// allocator, is what lets stage 01 compare a measured run with the calculator's
// prediction category by category, and lets a laptop play an 80 GB GPU: with a
// capacity set, the charge that would not fit on the real device dies here, with
// the message a practitioner needs to see where the memory went.
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "check.h"
#include "ledger.h"

static const char *const g_category_names[MEM_NCAT] = {
    "params", "grads", "optimizer", "activations", "comm", "workspace",
};

const char *mem_category_name(MemCategory c) {
    if ((int)c < 0 || c >= MEM_NCAT) return "invalid";
    return g_category_names[c];
}

void ledger_init(Ledger *l, size_t capacity, const char *device_name) {
    memset(l, 0, sizeof *l);
    pthread_mutex_init(&l->lock, NULL);
    l->capacity = capacity;
    l->device_name = device_name ? device_name : "cpu";
}

// "held 79.10 GB: params 26.00 GB, grads 26.00 GB, optimizer 27.10 GB" — only the
// categories that hold something, so the culprit stands out.
static void format_held(const Ledger *l, char *buf, size_t n) {
    char tmp[32];
    format_bytes(l->total_current, tmp, sizeof tmp);
    size_t pos = (size_t)snprintf(buf, n, "held %s", tmp);
    const char *sep = ": ";
    for (int c = 0; c < MEM_NCAT && pos < n; c++) {
        if (l->current[c] == 0) continue;
        format_bytes(l->current[c], tmp, sizeof tmp);
        pos += (size_t)snprintf(buf + pos, n - pos, "%s%s %s", sep, g_category_names[c], tmp);
        sep = ", ";
    }
}

// Reading the counts from const functions still takes the lock.
static void lock(const Ledger *l) { pthread_mutex_lock((pthread_mutex_t *)&l->lock); }
static void unlock(const Ledger *l) { pthread_mutex_unlock((pthread_mutex_t *)&l->lock); }

void ledger_charge(Ledger *l, MemCategory c, size_t bytes) {
    CHECK((int)c >= 0 && c < MEM_NCAT, "ledger_charge: invalid category %d", (int)c);
    lock(l);  // held through the checks: a failing one ends the process
    CHECK(bytes <= SIZE_MAX - l->total_current,
          "ledger_charge: %zu + %zu bytes overflows the ledger", l->total_current, bytes);
    size_t limit = l->capacity ? l->capacity : l->host_limit;
    if (limit && l->total_current + bytes > limit) {
        char asked[32], allowed[32], held[512];
        format_bytes(bytes, asked, sizeof asked);
        format_bytes(limit, allowed, sizeof allowed);
        format_held(l, held, sizeof held);
        DIE("out of memory on %s: cannot allocate %s for %s (%s%s%s%s)", l->device_name, asked,
            g_category_names[c], held, l->capacity ? "; allowed " : "): more than this machine's ",
            allowed, l->capacity ? "" : " of memory, where the run would page instead of train "
            "(--device-mem sets another limit");
    }
    l->current[c] += bytes;
    l->total_current += bytes;
    if (l->current[c] > l->peak[c]) l->peak[c] = l->current[c];
    if (l->total_current > l->total_peak) l->total_peak = l->total_current;
    unlock(l);
}

void ledger_release(Ledger *l, MemCategory c, size_t bytes) {
    CHECK((int)c >= 0 && c < MEM_NCAT, "ledger_release: invalid category %d", (int)c);
    lock(l);
    // Releasing more than was charged means an alloc/free pair disagrees on the
    // size or the category; the numbers after that would be fiction.
    CHECK(bytes <= l->current[c], "ledger_release: releasing %zu bytes of %s, which holds %zu",
          bytes, g_category_names[c], l->current[c]);
    l->current[c] -= bytes;
    l->total_current -= bytes;
    unlock(l);
}

void ledger_reset_peaks(Ledger *l) {
    lock(l);
    for (int c = 0; c < MEM_NCAT; c++) l->peak[c] = l->current[c];
    l->total_peak = l->total_current;
    unlock(l);
}

// The numbers at one moment (another thread may be charging).
static Ledger snapshot(const Ledger *l) {
    Ledger s;
    lock(l);
    memcpy(&s, l, sizeof s);
    unlock(l);
    return s;
}

void ledger_print(const Ledger *ledger, FILE *f) {
    Ledger snap = snapshot(ledger);
    const Ledger *l = &snap;
    char cur[32], peak[32], cap[32];
    if (l->capacity) {
        format_bytes(l->capacity, cap, sizeof cap);
        fprintf(f, "%smemory on %s (capacity %s)\n", log_tag(), l->device_name, cap);
    } else {
        fprintf(f, "%smemory on %s (no capacity set)\n", log_tag(), l->device_name);
    }
    fprintf(f, "%s  %-12s %12s %12s\n", log_tag(), "category", "current", "peak");
    for (int c = 0; c < MEM_NCAT; c++) {
        format_bytes(l->current[c], cur, sizeof cur);
        format_bytes(l->peak[c], peak, sizeof peak);
        fprintf(f, "%s  %-12s %12s %12s\n", log_tag(), g_category_names[c], cur, peak);
    }
    // The total's peak is not the sum of the category peaks: categories peak at
    // different moments (activations during forward, grads during backward).
    format_bytes(l->total_current, cur, sizeof cur);
    format_bytes(l->total_peak, peak, sizeof peak);
    fprintf(f, "%s  %-12s %12s %12s\n", log_tag(), "total", cur, peak);
}

// format_bytes without the space ("12.60MB"), so the one-liner reads as
// name/value pairs separated by single spaces.
static void format_bytes_compact(size_t bytes, char *buf, size_t n) {
    char tmp[32];
    format_bytes(bytes, tmp, sizeof tmp);
    char *space = strchr(tmp, ' ');
    if (space) memmove(space, space + 1, strlen(space + 1) + 1);
    snprintf(buf, n, "%s", tmp);
}

void ledger_print_mem_line(const Ledger *ledger, FILE *f, int rank, const char *extra) {
    Ledger snap = snapshot(ledger);
    fprintf(f, "MEM rank=%d%s%s", rank, extra && *extra ? " " : "", extra ? extra : "");
    for (int c = 0; c < MEM_NCAT; c++) fprintf(f, " %s=%zu", g_category_names[c], snap.peak[c]);
    fprintf(f, "\n");
    fflush(f);
}

void ledger_format_peaks(const Ledger *ledger, char *buf, size_t n) {
    if (n == 0) return;
    Ledger snap = snapshot(ledger);
    const Ledger *l = &snap;
    buf[0] = '\0';
    char tmp[32];
    size_t pos = 0;
    for (int c = 0; c < MEM_NCAT && pos < n; c++) {
        format_bytes_compact(l->peak[c], tmp, sizeof tmp);
        pos += (size_t)snprintf(buf + pos, n - pos, "%s %s ", g_category_names[c], tmp);
    }
    if (pos < n) {
        format_bytes_compact(l->total_peak, tmp, sizeof tmp);
        snprintf(buf + pos, n - pos, "total %s", tmp);
    }
}

// ---------------------------------------------------------------------------------
// Bytes for humans. Decimal units (1 GB = 10^9 bytes), as the papers and GPU
// datasheets use: "80 GB" on an H100 and "1.5 TB of optimizer state" in ZeRO.

void format_bytes(size_t bytes, char *buf, size_t n) {
    if (bytes < 1000) {
        snprintf(buf, n, "%zu B", bytes);
        return;
    }
    format_bytes_f((double)bytes, buf, n);
}

void format_bytes_f(double bytes, char *buf, size_t n) {
    static const char *const units[] = {"B", "kB", "MB", "GB", "TB"};
    if (!(bytes >= 1000)) {  // (a negative or NaN estimate: 0 B)
        snprintf(buf, n, "%.0f B", bytes > 0 ? bytes : 0.0);
        return;
    }
    double v = bytes / 1000.0;
    int u = 1;
    // 999.995 would print as "1000.00": move to the next unit before that happens.
    while (v >= 999.995 && u < 4) {
        v /= 1000.0;
        u++;
    }
    snprintf(buf, n, "%.2f %s", v, units[u]);
}

// Accepts a plain decimal number (integer, fraction or exponent: "123", "1.5",
// "1e9"), optionally followed by spaces and a unit: k/M/G/T (powers of 1000) or
// Ki/Mi/Gi/Ti (powers of 1024), each with an optional trailing B, or B alone; the
// unit in any case. "80.00 GB", what format_bytes prints, parses back. Fractions
// of a byte are rounded to nearest. Rejects signs, hex, inf/nan, empty strings,
// trailing junk and values that do not fit in size_t.
int parse_bytes(const char *s, size_t *out) {
    if (!s) return -1;
    // Scan the number ourselves: strtod would also take "-1", "0x10", "inf" and
    // leading spaces, none of which is a byte count.
    const char *p = s;
    int int_digits = 0, frac_digits = 0, has_point = 0, has_exp = 0;
    while (isdigit((unsigned char)*p)) { p++; int_digits++; }
    if (*p == '.') {
        has_point = 1;
        p++;
        while (isdigit((unsigned char)*p)) { p++; frac_digits++; }
    }
    if (int_digits + frac_digits == 0) return -1;
    if (*p == 'e' || *p == 'E') {
        const char *q = p + 1;
        if (*q == '+' || *q == '-') q++;
        if (!isdigit((unsigned char)*q)) return -1;
        while (isdigit((unsigned char)*q)) q++;
        p = q;
        has_exp = 1;
    }
    const char *num_end = p;
    while (*p == ' ') p++;

    static const struct { const char *suffix; size_t mult; } units[] = {
        {"", 1},
        {"k", 1000ull}, {"m", 1000000ull}, {"g", 1000000000ull}, {"t", 1000000000000ull},
        {"ki", 1ull << 10}, {"mi", 1ull << 20}, {"gi", 1ull << 30}, {"ti", 1ull << 40},
    };
    // Strip one trailing 'B' (any case) and look up what remains.
    size_t len = strlen(p);
    if (len > 0 && (p[len - 1] == 'b' || p[len - 1] == 'B')) len--;
    size_t mult = 0;
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strlen(units[i].suffix) == len && strncasecmp(p, units[i].suffix, len) == 0) {
            mult = units[i].mult;
            break;
        }
    }
    if (mult == 0) return -1;
    // "80 " (spaces and then nothing) is junk, not a unit.
    if (p != num_end && strlen(p) == 0) return -1;

    if (!has_point && !has_exp) {
        // A whole number: exact integer arithmetic, so "18446744073709551615" is not
        // rounded through a double.
        errno = 0;
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (errno == ERANGE || end != num_end) return -1;
        if (v > SIZE_MAX / mult) return -1;
        *out = (size_t)v * mult;
        return 0;
    }
    char num[128];
    size_t nlen = (size_t)(num_end - s);
    if (nlen >= sizeof num) return -1;
    memcpy(num, s, nlen);
    num[nlen] = '\0';
    double v = strtod(num, NULL) * (double)mult;
    // (double)SIZE_MAX rounds up to 2^64; anything below it fits once rounded.
    if (!isfinite(v) || !(v < (double)SIZE_MAX)) return -1;
    *out = (size_t)(v + 0.5);
    return 0;
}
