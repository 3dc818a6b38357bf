// flags.c — command-line parsing driven by one table.
//
// The table is the single description of a program's knobs: parsing, validation
// and --help all read it, so the help text cannot drift from what is accepted.
//
// Validation happens here, before anything is allocated: "--heads 0" should fail in
// a millisecond with a message naming the flag and the allowed range, not after a
// 30 s model build with a division by zero. Every rejection prints one line,
// "error: ...", and exits with status 2 (the shell convention for usage errors;
// status 1 is left for failures at run time, see check.h).
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "flags.h"
#include "ledger.h"

_Noreturn void flags_fail(const char *fmt, ...) {
    fflush(stdout);
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%serror: %s\n", log_tag(), buf);
    fflush(stderr);
    exit(2);
}

// ---------------------------------------------------------------------------------
// Looking flags up

static Flag *find_flag(Flag *table, int n, const char *name, size_t len) {
    for (int i = 0; i < n; i++) {
        if (strlen(table[i].name) == len && strncmp(table[i].name, name, len) == 0)
            return &table[i];
    }
    return NULL;
}

int flag_given(const Flag *table, int n, const char *name) {
    for (int i = 0; i < n; i++) {
        if (strcmp(table[i].name, name) == 0) return table[i].given;
    }
    // Asking about a flag the table does not have is a typo in the program, and
    // answering "not given" would silently ignore what the user typed.
    DIE("flag_given: no flag named %s in the table", name);
}

int flag_on(const Flag *table, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(table[i].name, name) == 0)
            return table[i].given && (table[i].type != FLAG_BOOL || *(const int *)table[i].dst);
    return 0;
}

int flag_is(const Flag *table, int n, const char *name, const char *value) {
    for (int i = 0; i < n; i++)
        if (strcmp(table[i].name, name) == 0) {
            CHECK(table[i].type == FLAG_STRING, "flag_is: %s is not a string flag", name);
            const char *v = *(const char **)table[i].dst;
            return v && strcmp(v, value) == 0;
        }
    return 0;
}

// Edit distance between two short strings, for "did you mean". Flag names are
// short; longer strings are compared on their first 63 characters only.
static int edit_distance(const char *a, size_t la, const char *b) {
    enum { MAXLEN = 63 };
    size_t lb = strlen(b);
    if (la > MAXLEN) la = MAXLEN;
    if (lb > MAXLEN) lb = MAXLEN;
    int prev[MAXLEN + 1], cur[MAXLEN + 1];
    for (size_t j = 0; j <= lb; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int sub = prev[j - 1] + (a[i - 1] != b[j - 1]);
            int del = prev[j] + 1, ins = cur[j - 1] + 1;
            int best = sub < del ? sub : del;
            cur[j] = best < ins ? best : ins;
        }
        memcpy(prev, cur, sizeof(int) * (lb + 1));
    }
    return prev[lb];
}

static _Noreturn void fail_unknown(const Flag *table, int n, const char *name, size_t len) {
    const char *best = NULL;
    int best_d = 3;  // suggest only near misses: at most two edits
    for (int i = 0; i < n; i++) {
        int d = edit_distance(name, len, table[i].name);
        if (d < best_d) {
            best_d = d;
            best = table[i].name;
        }
    }
    if (best) flags_fail("unknown flag %.*s (did you mean %s? see --help)", (int)len, name, best);
    flags_fail("unknown flag %.*s (see --help)", (int)len, name);
}

// ---------------------------------------------------------------------------------
// Values

static int has_range(const Flag *f) { return f->min <= f->max; }

// The range as the user should read it: "[1, 1024]", or in bytes for FLAG_BYTES.
// A flag without a range of its own (min > max) is still bounded by its C type,
// and that is the range an overflowing value is out of.
static void format_range(const Flag *f, char *buf, size_t n) {
    if (f->type == FLAG_BYTES) {
        char lo[32], hi[32];
        size_t a = 0, b = SIZE_MAX;
        if (has_range(f)) {
            a = f->min <= 0 ? 0 : (size_t)f->min;
            b = f->max >= (double)SIZE_MAX ? SIZE_MAX : (size_t)f->max;
        }
        format_bytes(a, lo, sizeof lo);
        format_bytes(b, hi, sizeof hi);
        snprintf(buf, n, "[%s, %s]", lo, hi);
    } else if (f->type == FLAG_INT) {
        if (has_range(f)) snprintf(buf, n, "[%.0f, %.0f]", f->min, f->max);
        else snprintf(buf, n, "[%d, %d]", INT_MIN, INT_MAX);
    } else if (f->type == FLAG_U64) {
        if (has_range(f)) snprintf(buf, n, "[%.0f, %.0f]", f->min, f->max);
        else snprintf(buf, n, "[0, %llu]", ULLONG_MAX);
    } else {
        snprintf(buf, n, "[%g, %g]", f->min, f->max);
    }
}

static _Noreturn void fail_range(const Flag *f, const char *value) {
    char range[96];
    format_range(f, range, sizeof range);
    // "--layers 0" from someone who read "0 = preset" in --help: say how to get it.
    if (f->sentinel)
        flags_fail("%s %s is out of range %s; leave the flag out for %s", f->name, value, range,
                   f->sentinel);
    flags_fail("%s %s is out of range %s", f->name, value, range);
}

// The value *dst holds now, as --help prints it: "12", "0.0003", "80.00 GB", "on".
static void format_value(const Flag *f, char *buf, size_t n) {
    switch (f->type) {
    case FLAG_INT: snprintf(buf, n, "%d", *(const int *)f->dst); break;
    case FLAG_DOUBLE: snprintf(buf, n, "%g", *(const double *)f->dst); break;
    case FLAG_STRING: {
        const char *s = *(const char *const *)f->dst;
        snprintf(buf, n, "%s", s ? s : "(none)");
        break;
    }
    case FLAG_BOOL: snprintf(buf, n, "%s", *(const int *)f->dst ? "on" : "off"); break;
    case FLAG_BYTES: format_bytes(*(const size_t *)f->dst, buf, n); break;
    case FLAG_U64: snprintf(buf, n, "%llu", *(const unsigned long long *)f->dst); break;
    default: snprintf(buf, n, "?"); break;
    }
}

// Does *dst lie inside the flag's own range? (Flags without one always do.)
static int value_in_range(const Flag *f) {
    if (!has_range(f)) return 1;
    double x;
    switch (f->type) {
    case FLAG_INT: x = *(const int *)f->dst; break;
    case FLAG_DOUBLE: x = *(const double *)f->dst; break;
    case FLAG_BYTES: x = (double)*(const size_t *)f->dst; break;
    case FLAG_U64: x = (double)*(const unsigned long long *)f->dst; break;
    default: return 1;  // strings and switches have no range
    }
    return x >= f->min && x <= f->max;
}

// Is `value` one of the '|'-separated `choices`?
static int in_choices(const char *choices, const char *value) {
    size_t vlen = strlen(value);
    const char *p = choices;
    for (;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == vlen && strncmp(p, value, len) == 0) return 1;
        if (!bar) return 0;
        p = bar + 1;
    }
}

static void set_value(Flag *f, const char *v) {
    switch (f->type) {
    case FLAG_INT: {
        errno = 0;
        char *end;
        long x = strtol(v, &end, 10);
        // end == v: no digits at all; *end: junk after the digits ("12x", "1.5").
        if (end == v || *end != '\0') flags_fail("%s '%s' is not an integer", f->name, v);
        if (errno == ERANGE || x < INT_MIN || x > INT_MAX) fail_range(f, v);
        if (has_range(f) && ((double)x < f->min || (double)x > f->max)) fail_range(f, v);
        *(int *)f->dst = (int)x;
        break;
    }
    case FLAG_DOUBLE: {
        errno = 0;
        char *end;
        double x = strtod(v, &end);
        if (end == v || *end != '\0' || !isfinite(x))
            flags_fail("%s '%s' is not a finite number", f->name, v);
        if (has_range(f) && (x < f->min || x > f->max)) fail_range(f, v);
        *(double *)f->dst = x;
        break;
    }
    case FLAG_STRING:
        if (f->choices && !in_choices(f->choices, v))
            flags_fail("%s '%s' is not one of %s", f->name, v, f->choices);
        // argv outlives the program's use of its flags: point into it, no copy.
        *(const char **)f->dst = v;
        break;
    case FLAG_BOOL:
        if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0) *(int *)f->dst = 1;
        else if (strcmp(v, "0") == 0 || strcmp(v, "false") == 0) *(int *)f->dst = 0;
        else flags_fail("%s '%s' is not a boolean (0|1|true|false)", f->name, v);
        break;
    case FLAG_BYTES: {
        size_t x;
        if (parse_bytes(v, &x) != 0)
            flags_fail("%s '%s' is not a byte count (e.g. 80GB, 512MiB, 1e9) that fits in "
                       "64 bits", f->name, v);
        if (has_range(f) && ((double)x < f->min || (double)x > f->max)) fail_range(f, v);
        *(size_t *)f->dst = x;
        break;
    }
    case FLAG_U64: {
        // strtoull accepts "-1" and wraps it to 2^64 - 1; a seed of -1 is a mistake.
        const char *p = v;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '-' || *p == '+') flags_fail("%s '%s' is not an unsigned integer", f->name, v);
        errno = 0;
        char *end;
        unsigned long long x = strtoull(v, &end, 10);
        if (end == v || *end != '\0')
            flags_fail("%s '%s' is not an unsigned integer", f->name, v);
        if (errno == ERANGE) fail_range(f, v);
        if (has_range(f) && ((double)x < f->min || (double)x > f->max)) fail_range(f, v);
        *(unsigned long long *)f->dst = x;
        break;
    }
    default:
        DIE("flag %s has invalid type %d", f->name, (int)f->type);
    }
}

// ---------------------------------------------------------------------------------
// Parsing

void flags_parse(Flag *table, int n, int argc, char **argv, const char *usage,
                 const char *description) {
    // The table is written by hand; a malformed entry is a bug in the program, so
    // it dies (status 1) rather than blaming the user (status 2).
    for (int i = 0; i < n; i++) {
        CHECK(table[i].name && strncmp(table[i].name, "--", 2) == 0 && table[i].dst,
              "flag table entry %d: name must start with -- and dst must be set", i);
        for (int j = 0; j < i; j++)
            CHECK(strcmp(table[i].name, table[j].name) != 0, "flag table lists %s twice",
                  table[i].name);
        table[i].given = 0;
        // dst holds the default now. One outside the range must say what it means, or
        // --help would print "0  [1, 4096]" and then refuse the 0 it showed.
        char def[96];
        format_value(&table[i], def, sizeof def);
        CHECK(value_in_range(&table[i]) || table[i].sentinel, "flag table: the default of %s, "
              "%s, lies outside its range; give the row a sentinel text (\"%s = ...\")",
              table[i].name, def, def);
        // The text names the value, so a changed default cannot leave a stale meaning.
        size_t dl = strlen(def);
        CHECK(!table[i].sentinel || (strncmp(table[i].sentinel, def, dl) == 0 &&
                                     strncmp(table[i].sentinel + dl, " = ", 3) == 0),
              "flag table: the sentinel text of %s, \"%s\", must begin with its default, \"%s = \"",
              table[i].name, table[i].sentinel, def);
    }

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            flags_print_help(table, n, usage, description);
            exit(0);
        }
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0')
            flags_fail("unexpected argument '%s' (flags start with --; see --help)", arg);

        const char *eq = strchr(arg, '=');
        size_t name_len = eq ? (size_t)(eq - arg) : strlen(arg);
        Flag *f = find_flag(table, n, arg, name_len);
        if (!f) fail_unknown(table, n, arg, name_len);

        const char *value;
        if (eq) {
            value = eq + 1;
        } else if (f->type == FLAG_BOOL) {
            value = "1";  // a bare switch turns the option on and takes no value
        } else {
            // "--layers --heads 4": the next flag is not the value of this one.
            if (i + 1 >= argc || strncmp(argv[i + 1], "--", 2) == 0)
                flags_fail("%s needs a value", f->name);
            value = argv[++i];
        }
        set_value(f, value);
        f->given = 1;  // given twice: the last one wins, as in most tools
    }
}

// ---------------------------------------------------------------------------------
// --help

static const char *type_placeholder(const Flag *f) {
    switch (f->type) {
    case FLAG_INT: return "INT";
    case FLAG_DOUBLE: return "NUM";
    case FLAG_STRING: return f->choices ? f->choices : "STR";
    case FLAG_BOOL: return "";
    case FLAG_BYTES: return "BYTES";
    case FLAG_U64: return "U64";
    default: return "?";
    }
}

// The three left columns of one help line: "--layers INT", "12", "[1, 1024]".
// An untouched sentinel default prints as its meaning, "0 = preset"; once the flag was
// given (--layers 6 --help) the column shows the value, as for any other flag.
static void help_columns(const Flag *f, char *name, char *def, char *range, size_t n) {
    const char *ph = type_placeholder(f);
    snprintf(name, n, "%s%s%s", f->name, ph[0] ? " " : "", ph);
    if (f->sentinel && !f->given) snprintf(def, n, "%s", f->sentinel);
    else format_value(f, def, n);
    range[0] = '\0';
    if (f->type != FLAG_STRING && f->type != FLAG_BOOL && has_range(f))
        format_range(f, range, n);
}

void flags_print_help(const Flag *table, int n, const char *usage, const char *description) {
    enum { W = 96 };
    char name[W], def[W], range[W];
    int wn = (int)strlen("--help"), wd = 0, wr = 0;
    for (int i = 0; i < n; i++) {
        help_columns(&table[i], name, def, range, W);
        if ((int)strlen(name) > wn) wn = (int)strlen(name);
        if ((int)strlen(def) > wd) wd = (int)strlen(def);
        if ((int)strlen(range) > wr) wr = (int)strlen(range);
    }
    printf("usage: %s\n", usage ? usage : "");
    if (description && description[0]) printf("%s\n", description);
    printf("\nflags (default, allowed range, meaning):\n");
    for (int i = 0; i < n; i++) {
        help_columns(&table[i], name, def, range, W);
        printf("  %-*s  %-*s  %-*s  %s\n", wn, name, wd, def, wr, range,
               table[i].help ? table[i].help : "");
    }
    printf("  %-*s  %-*s  %-*s  %s\n", wn, "--help", wd, "", wr, "", "print this and exit");
    printf("\nFlags take \"--name value\" or \"--name=value\"; switches take no value "
           "(or =0/=1). Byte counts accept 80GB, 512MiB, 1e9.\n");
    fflush(stdout);
}

int flags_append(Flag *rows, int n, int cap, const Flag *more, int k) {
    CHECK(n + k <= cap, "a flag table of %d rows cannot take %d + %d (raise its size)", cap, n, k);
    for (int i = 0; i < k; i++) rows[n + i] = more[i];
    return n + k;
}

void flags_check_output(const char *flag, const char *path) {
    struct stat st;
    if (!path[0]) flags_fail("%s: the file name is empty", flag);
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        flags_fail("%s %s: it exists and is not a regular file (a folder or a device): what the "
                   "run writes there at its end would be lost", flag, path);
    char dir[4096];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");  // "/x": the root
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(dir, W_OK | X_OK) != 0)
        flags_fail("%s %s: the folder %s does not exist or is not writable", flag, path, dir);
}
