// test_flags.c — the flag table: good input parses, bad input exits 2 with a message
// naming the flag, the value and what is allowed; --help shows every flag; a sentinel
// default ("-1 = off") is shown by its meaning and named when a value is refused.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "flags.h"
#include "harness.h"

// A program's configuration, with its defaults, and its flag table.
typedef struct {
    int layers, heads, fused, kill_rank;
    double lr, shift;
    const char *device, *run_name;
    size_t device_mem;
    unsigned long long seed;
} Cfg;

enum { NFLAGS = 10 };

static void setup(Cfg *c, Flag *t) {
    *c = (Cfg){.layers = 12, .heads = 12, .fused = 0, .kill_rank = -1, .lr = 3e-4, .shift = 0.0,
               .device = "cpu", .run_name = NULL, .device_mem = 0, .seed = 1337};
    Flag table[NFLAGS] = {
        {"--layers", FLAG_INT, &c->layers, 1, 1024, NULL, "transformer blocks (L)", NULL, 0},
        {"--heads", FLAG_INT, &c->heads, 1, 1024, NULL, "attention heads (H)", NULL, 0},
        {"--lr", FLAG_DOUBLE, &c->lr, 0, 1, NULL, "peak learning rate", NULL, 0},
        {"--shift", FLAG_DOUBLE, &c->shift, 1, 0, NULL, "an unbounded number", NULL, 0},
        {"--device", FLAG_STRING, &c->device, 0, 0, "cpu|cuda", "where to compute", NULL, 0},
        {"--run-name", FLAG_STRING, &c->run_name, 0, 0, NULL, "label for results", NULL, 0},
        {"--fused", FLAG_BOOL, &c->fused, 0, 0, NULL, "use the fused kernel", NULL, 0},
        {"--device-mem", FLAG_BYTES, &c->device_mem, 0, 1e15, NULL, "simulated capacity", NULL, 0},
        {"--seed", FLAG_U64, &c->seed, 1, 0, NULL, "random seed", NULL, 0},
        // A sentinel default outside the range, as test_collectives' --kill-rank.
        F_INT_SENTINEL("--kill-rank", &c->kill_rank, 0, 63, "-1 = off", "this rank kills itself"),
    };
    memcpy(t, table, sizeof table);
}

static void parse(Cfg *c, Flag *t, char **argv) {
    int argc = 0;
    while (argv[argc]) argc++;
    setup(c, t);
    flags_parse(t, NFLAGS, argc, argv, "prog [flags]", "A test program.");
}

static void test_good(TestState *ts) {
    Cfg c;
    Flag t[NFLAGS];

    char *none[] = {"prog", NULL};
    parse(&c, t, none);
    int ok = c.layers == 12 && c.heads == 12 && c.lr == 3e-4 && strcmp(c.device, "cpu") == 0 &&
             c.run_name == NULL && c.fused == 0 && c.device_mem == 0 && c.seed == 1337 &&
             c.kill_rank == -1;
    for (int i = 0; i < NFLAGS; i++) ok = ok && !t[i].given;
    test_report(ts, ok, "flags_defaults_kept", "no arguments: defaults and given == 0");

    char *all[] = {"prog", "--layers", "24", "--heads=16", "--lr", "1e-3", "--shift", "-1.5",
                   "--device", "cuda", "--run-name=a=b", "--fused", "--device-mem", "80GB",
                   "--seed=18446744073709551615", "--kill-rank", "0", NULL};
    parse(&c, t, all);
    ok = c.layers == 24 && c.heads == 16 && c.lr == 1e-3 && c.shift == -1.5 &&
         strcmp(c.device, "cuda") == 0 && c.run_name && strcmp(c.run_name, "a=b") == 0 &&
         c.fused == 1 && c.device_mem == 80000000000ull && c.seed == 18446744073709551615ull &&
         c.kill_rank == 0;
    for (int i = 0; i < NFLAGS; i++) ok = ok && t[i].given;
    test_report(ts, ok, "flags_every_type_parses",
                "layers %d heads %d lr %g shift %g device %s run-name %s fused %d mem %zu seed %llu",
                c.layers, c.heads, c.lr, c.shift, c.device, c.run_name ? c.run_name : "(null)",
                c.fused, c.device_mem, c.seed);

    char *some[] = {"prog", "--layers", "2", "--layers=3", "--fused=0", NULL};
    parse(&c, t, some);
    ok = c.layers == 3 && c.fused == 0 && flag_given(t, NFLAGS, "--layers") &&
         flag_given(t, NFLAGS, "--fused") && !flag_given(t, NFLAGS, "--heads") && c.heads == 12;
    test_report(ts, ok, "flags_last_wins_and_flag_given",
                "layers %d (want 3), fused %d (want 0)", c.layers, c.fused);

    char *bools[] = {"prog", "--fused=true", NULL};
    parse(&c, t, bools);
    int b1 = c.fused;
    char *bools2[] = {"prog", "--fused=1", "--fused=false", NULL};
    parse(&c, t, bools2);
    test_report(ts, b1 == 1 && c.fused == 0, "flags_bool_values", "=true gives %d, =false gives %d",
                b1, c.fused);

    char *edges[] = {"prog", "--layers", "1", "--heads", "1024", "--lr", "0", "--device-mem", "0",
                     NULL};
    parse(&c, t, edges);
    test_report(ts, c.layers == 1 && c.heads == 1024 && c.lr == 0 && c.device_mem == 0,
                "flags_range_is_inclusive", "layers %d heads %d lr %g", c.layers, c.heads, c.lr);
}

typedef struct { char **argv; } Args;

static void child_parse(void *arg) {
    Cfg c;
    Flag t[NFLAGS];
    parse(&c, t, ((Args *)arg)->argv);
}

static void child_fail(void *arg) {
    (void)arg;
    flags_fail("--heads %d must divide --dim %d", 5, 768);
}

static void child_given_unknown(void *arg) {
    (void)arg;
    Cfg c;
    Flag t[NFLAGS];
    setup(&c, t);
    flag_given(t, NFLAGS, "--nonexistent");
}

static void child_duplicate_table(void *arg) {
    (void)arg;
    int a = 0, b = 0;
    Flag t[] = {
        {"--x", FLAG_INT, &a, 0, 9, NULL, "x", NULL, 0},
        {"--x", FLAG_INT, &b, 0, 9, NULL, "x again", NULL, 0},
    };
    char *argv[] = {"prog", NULL};
    flags_parse(t, FLAG_COUNT(t), 1, argv, "prog", "");
}

// A one-row table, --x in [1, 9], with this default and sentinel text.
typedef struct { int def; const char *sentinel; } TableOne;

static void child_table_one(void *arg) {
    const TableOne *o = arg;
    int x = o->def;
    Flag t[] = {F_INT_SENTINEL("--x", &x, 1, 9, o->sentinel, "x")};
    char *argv[] = {"prog", NULL};
    flags_parse(t, FLAG_COUNT(t), 1, argv, "prog", "");
}

static void test_bad(TestState *ts) {
    // Each: the arguments, and the text the message must contain.
    static const struct { const char *args[6]; const char *want; } cases[] = {
        {{"--heads", "0"}, "error: --heads 0 is out of range [1, 1024]"},
        {{"--heads=1025"}, "error: --heads 1025 is out of range [1, 1024]"},
        {{"--layers", "99999999999"}, "--layers 99999999999 is out of range"},
        {{"--device", "tpu"}, "error: --device 'tpu' is not one of cpu|cuda"},
        {{"--device="}, "error: --device '' is not one of cpu|cuda"},
        {{"--lyers", "3"}, "error: unknown flag --lyers (did you mean --layers?"},
        {{"--zzzzzz"}, "error: unknown flag --zzzzzz (see --help)"},
        {{"--layers"}, "error: --layers needs a value"},
        {{"--layers", "--heads", "4"}, "error: --layers needs a value"},
        {{"--layers", "abc"}, "error: --layers 'abc' is not an integer"},
        {{"--layers", "12x"}, "error: --layers '12x' is not an integer"},
        {{"--layers", "1.5"}, "error: --layers '1.5' is not an integer"},
        {{"--layers="}, "error: --layers '' is not an integer"},
        {{"--lr", "abc"}, "error: --lr 'abc' is not a finite number"},
        {{"--lr", "nan"}, "error: --lr 'nan' is not a finite number"},
        {{"--lr", "2"}, "error: --lr 2 is out of range [0, 1]"},
        {{"--device-mem", "80XB"}, "error: --device-mem '80XB' is not a byte count"},
        {{"--device-mem", "2000TB"}, "error: --device-mem 2000TB is out of range [0 B, 1000.00 TB]"},
        {{"--seed", "-1"}, "error: --seed '-1' is not an unsigned integer"},
        {{"--seed", "18446744073709551616"}, "error: --seed 18446744073709551616 is out of range"},
        {{"--fused=maybe"}, "error: --fused 'maybe' is not a boolean"},
        // A sentinel default is refused as a value, with the way to get it.
        {{"--kill-rank", "-1"},
         "error: --kill-rank -1 is out of range [0, 63]; leave the flag out for -1 = off"},
        {{"--kill-rank=64"},
         "error: --kill-rank 64 is out of range [0, 63]; leave the flag out for -1 = off"},
        {{"layers"}, "error: unexpected argument 'layers'"},
        {{"--layers", "3", "extra"}, "error: unexpected argument 'extra'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *argv[8] = {"prog"};
        int argc = 1;
        char joined[128] = "";
        for (int k = 0; k < 6 && cases[i].args[k]; k++) {
            argv[argc++] = (char *)cases[i].args[k];
            strcat(joined, " ");
            strcat(joined, cases[i].args[k]);
        }
        argv[argc] = NULL;
        Args a = {argv};
        char out[1024];
        int status = run_child(child_parse, &a, out, sizeof out);
        // The test's name is the command line, reduced to [a-z0-9_].
        char name[160] = "flags_rejects";
        size_t nl = strlen(name);
        for (const char *p = joined; *p && nl + 1 < sizeof name; p++) {
            char ch = *p;
            int keep = (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '_';
            if (keep || name[nl - 1] != '_') name[nl++] = keep ? ch : '_';
        }
        name[nl] = '\0';
        test_report(ts, status == 2 && strstr(out, cases[i].want) != NULL, name,
                    "prog%s -> exit %d: \"%s\"", joined, status, out);
    }

    // Without a sentinel the range error is the bare sentence, no hint.
    char out[1024];
    char *heads0[] = {"prog", "--heads", "0", NULL};
    Args h0 = {heads0};
    int status = run_child(child_parse, &h0, out, sizeof out);
    test_report(ts, status == 2 && strcmp(out, "error: --heads 0 is out of range [1, 1024]") == 0,
                "flags_range_error_without_sentinel", "exit %d: \"%s\"", status, out);

    status = run_child(child_fail, NULL, out, sizeof out);
    test_report(ts, status == 2 && strcmp(out, "error: --heads 5 must divide --dim 768") == 0,
                "flags_fail_exits_2", "exit %d: \"%s\"", status, out);

    // Mistakes in the program's own table are bugs, not usage errors: status 1.
    status = run_child(child_given_unknown, NULL, out, sizeof out);
    test_report(ts, status == 1 && strstr(out, "--nonexistent"), "flag_given_unknown_name_dies",
                "exit %d: \"%s\"", status, out);
    status = run_child(child_duplicate_table, NULL, out, sizeof out);
    test_report(ts, status == 1 && strstr(out, "--x"), "flags_duplicate_table_entry_dies",
                "exit %d: \"%s\"", status, out);
    status = run_child(child_table_one, &(TableOne){0, NULL}, out, sizeof out);
    test_report(ts, status == 1 && strstr(out, "the default of --x, 0, lies outside its range"),
                "flags_unexplained_default_out_of_range_dies", "exit %d: \"%s\"", status, out);
    status = run_child(child_table_one, &(TableOne){-1, "0 = off"}, out, sizeof out);
    test_report(ts, status == 1 && strstr(out, "\"0 = off\", must begin with its default, \"-1 = \""),
                "flags_stale_sentinel_dies", "exit %d: \"%s\"", status, out);
    // A sentinel inside the range is allowed too (it is then also a value one may type).
    status = run_child(child_table_one, &(TableOne){5, "5 = auto"}, out, sizeof out);
    test_report(ts, status == 0, "flags_sentinel_in_range_ok", "exit %d: \"%s\"", status, out);
}

// The line of --help output `out` that starts with "  <flag> ", or "" if none.
static void help_line(const char *out, const char *flag, char *line, size_t n) {
    char key[64];
    snprintf(key, sizeof key, "\n  %s ", flag);
    const char *p = strstr(out, key);
    line[0] = '\0';
    if (!p) return;
    p += 1;
    size_t len = strcspn(p, "\n");
    if (len >= n) len = n - 1;
    memcpy(line, p, len);
    line[len] = '\0';
}

static void test_help(TestState *ts) {
    char *argv[] = {"prog", "--layers", "6", "--help", NULL};
    Args a = {argv};
    char out[8192];
    int status = run_child(child_parse, &a, out, sizeof out);
    // Every flag's name, placeholder, default (the value before --help: 6 was parsed
    // already), range or choices and help text.
    const char *need[] = {
        "usage: prog [flags]", "A test program.",
        "--layers INT", "6 ", "[1, 1024]", "transformer blocks (L)",
        "--heads INT", "attention heads (H)",
        "--lr NUM", "0.0003", "[0, 1]", "peak learning rate",
        "--shift NUM", "an unbounded number",
        "--device cpu|cuda", "where to compute",
        "--run-name STR", "(none)", "label for results",
        "--fused", "off", "use the fused kernel",
        "--device-mem BYTES", "0 B", "[0 B, 1000.00 TB]", "simulated capacity",
        "--seed U64", "1337", "random seed",
        "--kill-rank INT", "-1 = off", "[0, 63]", "this rank kills itself",
        "--help",
    };
    int missing = 0;
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        if (!strstr(out, need[i])) {
            missing++;
            printf("  --help output lacks \"%s\"\n", need[i]);
        }
    }
    // An unbounded flag must not print a range such as "[1, 0]".
    int bogus_range = strstr(out, "[1, 0]") != NULL;
    test_report(ts, status == 0 && missing == 0 && !bogus_range, "flags_help",
                "exit %d, %d items missing, bogus range %d", status, missing, bogus_range);
    if (missing) printf("%s\n", out);

    // The sentinel's row: its meaning in the default column, not a bare "-1" beside a
    // range that excludes it.
    char line[256];
    help_line(out, "--kill-rank", line, sizeof line);
    test_report(ts, strstr(line, " -1 = off ") && strstr(line, "[0, 63]"),
                "flags_help_sentinel_default", "\"%s\"", line);
    // Given a value, the row shows the value, like any other flag's.
    char *given[] = {"prog", "--kill-rank", "5", "--help", NULL};
    Args g = {given};
    status = run_child(child_parse, &g, out, sizeof out);
    help_line(out, "--kill-rank", line, sizeof line);
    test_report(ts, status == 0 && strstr(line, " 5 ") && !strstr(line, "= off"),
                "flags_help_sentinel_given", "exit %d: \"%s\"", status, line);
}

int main(void) {
    TestState ts = {0};
    test_good(&ts);
    test_bad(&ts);
    test_help(&ts);
    return test_finish(&ts);
}
