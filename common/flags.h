// flags.h — one table drives parsing, --help and validation.
//
// Each program declares its flags once, as data:
//
//   Flag flags[] = {
//     F_INT("--layers", &cfg.n_layer, 1, 1024, "transformer blocks (L)"),
//     F_CHOICE("--device", &dev, "cpu|cuda", "where to compute"),
//   };
//   flags_parse(flags, FLAG_COUNT(flags), argc, argv, "train [flags]", "Trains a GPT.");
//
// A bad value is rejected before anything is allocated, with a message naming the
// flag, the value and what is allowed; the process exits with status 2.
// --help prints every flag with its default, range and help, and exits 0.
//
// A default may be a sentinel outside the range ("0 = preset": the size comes from
// the preset unless the flag is given). Such a row says what the sentinel means,
//
//     F_INT_SENTINEL("--layers", &a.layers, 1, 4096, "0 = preset", "transformer blocks"),
//
// and --help prints "0 = preset" where a bare "0" would contradict "[1, 4096]"; a value
// out of range is refused with a hint to leave the flag out. The text must begin with
// the default as --help would print it, then " = ": flags_parse checks that, and that
// every default outside its range has such a text.
#pragma once
#include <stddef.h>

#include "check.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    FLAG_INT,     // int*;      range [min, max]
    FLAG_DOUBLE,  // double*;   range [min, max]
    FLAG_STRING,  // const char**; one of `choices` ("a|b|c") when choices != NULL
    FLAG_BOOL,    // int*;      "--x" sets 1; "--x=0/1" also accepted
    FLAG_BYTES,   // size_t*;   "80GB", "512MiB", "1e9", "0"; range [min, max] bytes
    FLAG_U64,     // unsigned long long*; range [min, max]
} FlagType;

typedef struct {
    const char *name;     // with the dashes: "--layers"
    FlagType type;
    void *dst;            // where the value goes; holds the default before parsing
    double min, max;      // inclusive range for numeric types (ignored when min > max)
    const char *choices;  // FLAG_STRING: allowed values separated by '|', or NULL
    const char *help;
    const char *sentinel; // what the default means, "0 = preset", or NULL (see above)
    int given;            // set to 1 by flags_parse when the flag appeared on the command line
} Flag;

// Appends k rows to a table of n rows with room for cap; returns the new count.
// Dies naming the table's size when they do not fit (a driver's table declared
// too small is a bug: writing past it would corrupt the stack).
int flags_append(Flag *rows, int n, int cap, const Flag *more, int k);
#define FLAG_COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

// The built-in launcher's nodes: the same two flags in every program that launches
// ranks, for CommConfig's nodes and cluster (comm.h).
#define F_NODES(nodes, cluster)                                                                   \
    F_INT("--nodes", nodes, 1, 64, "split the ranks into this many nodes of consecutive ranks: " \
          "shared memory inside each, TCP between them (built-in launcher)"),                    \
    F_STRING("--cluster", cluster, "run node i's ranks inside the network namespace "            \
             "CLUSTER-node<i> made by scripts/cluster.sh (root): between nodes, its links")

// Table rows, one per type: F_INT("--layers", &cfg.n_layer, 1, 1024, "help").
#define F_INT(nm, p, lo, hi, h) {.name = nm, .type = FLAG_INT, .dst = p, .min = lo, .max = hi, .help = h}
#define F_DOUBLE(nm, p, lo, hi, h) {.name = nm, .type = FLAG_DOUBLE, .dst = p, .min = lo, .max = hi, .help = h}
#define F_U64(nm, p, lo, hi, h) {.name = nm, .type = FLAG_U64, .dst = p, .min = lo, .max = hi, .help = h}
#define F_BYTES(nm, p, lo, hi, h) {.name = nm, .type = FLAG_BYTES, .dst = p, .min = lo, .max = hi, .help = h}
#define F_STRING(nm, p, h) {.name = nm, .type = FLAG_STRING, .dst = p, .min = 1, .max = 0, .help = h}
#define F_CHOICE(nm, p, ch, h) {.name = nm, .type = FLAG_STRING, .dst = p, .min = 1, .max = 0, .choices = ch, .help = h}
#define F_BOOL(nm, p, h) {.name = nm, .type = FLAG_BOOL, .dst = p, .min = 1, .max = 0, .help = h}
// The same with a sentinel default: F_INT_SENTINEL("--kill-rank", &k, 0, 63, "-1 = none", "help").
#define F_INT_SENTINEL(nm, p, lo, hi, s, h) {.name = nm, .type = FLAG_INT, .dst = p, .min = lo, .max = hi, .sentinel = s, .help = h}
#define F_DOUBLE_SENTINEL(nm, p, lo, hi, s, h) {.name = nm, .type = FLAG_DOUBLE, .dst = p, .min = lo, .max = hi, .sentinel = s, .help = h}
#define F_U64_SENTINEL(nm, p, lo, hi, s, h) {.name = nm, .type = FLAG_U64, .dst = p, .min = lo, .max = hi, .sentinel = s, .help = h}
#define F_BYTES_SENTINEL(nm, p, lo, hi, s, h) {.name = nm, .type = FLAG_BYTES, .dst = p, .min = lo, .max = hi, .sentinel = s, .help = h}

// Accepts "--name value" and "--name=value". Positional arguments are rejected.
void flags_parse(Flag *table, int n, int argc, char **argv, const char *usage,
                 const char *description);
void flags_print_help(const Flag *table, int n, const char *usage, const char *description);
// Did the user give this flag? (for presets: explicit flags override the preset)
int flag_given(const Flag *table, int n, const char *name);
// The same for a flag that may not be in the table: a flag a later stage adds
// (trainer.h's extensions), which a program linked without that stage does not
// have. flag_on: given (a boolean one, given true: --elastic, not --elastic=0);
// flag_is: a string flag whose value is `value`. Both 0 for a flag the table does
// not have.
int flag_on(const Flag *table, int n, const char *name);
int flag_is(const Flag *table, int n, const char *name, const char *value);
// For cross-flag checks after parsing: prints "error: <message>" and exits 2.
CHECK_NORETURN void flags_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// A file a run writes at its end (--save-params, --trace's files): a name, not an
// existing folder or device, in a folder that exists and is writable. Checked
// before the run, so that its work is not lost at the end; flags_fail otherwise.
void flags_check_output(const char *flag, const char *path);

#ifdef __cplusplus
}
#endif
