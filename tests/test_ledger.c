// test_ledger.c — memory accounting, the simulated OOM, and byte counts as text.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "ledger.h"

static void test_names(TestState *ts) {
    const char *want[MEM_NCAT] = {"params", "grads", "optimizer", "activations", "comm",
                                  "workspace"};
    int bad = 0;
    for (int c = 0; c < MEM_NCAT; c++) bad += strcmp(mem_category_name((MemCategory)c), want[c]) != 0;
    test_report(ts, bad == 0, "ledger_category_names", "%d wrong", bad);
}

static void test_accounting(TestState *ts) {
    Ledger l;
    ledger_init(&l, 0, "cpu");
    ledger_charge(&l, MEM_PARAMS, 100);
    ledger_charge(&l, MEM_GRADS, 50);
    ledger_charge(&l, MEM_ACTIVATIONS, 30);   // forward: activations pile up
    ledger_release(&l, MEM_ACTIVATIONS, 30);  // backward frees them
    ledger_charge(&l, MEM_ACTIVATIONS, 20);
    int ok = l.current[MEM_PARAMS] == 100 && l.current[MEM_GRADS] == 50 &&
             l.current[MEM_ACTIVATIONS] == 20 && l.peak[MEM_ACTIVATIONS] == 30 &&
             l.total_current == 170 && l.total_peak == 180 && l.current[MEM_COMM] == 0;
    test_report(ts, ok, "ledger_current_and_peak",
                "current total %zu (want 170), peak total %zu (want 180), activations peak %zu "
                "(want 30)",
                l.total_current, l.total_peak, l.peak[MEM_ACTIVATIONS]);

    ledger_reset_peaks(&l);
    ok = l.peak[MEM_ACTIVATIONS] == 20 && l.total_peak == 170 && l.peak[MEM_PARAMS] == 100;
    ledger_charge(&l, MEM_WORKSPACE, 5);
    ledger_release(&l, MEM_WORKSPACE, 5);
    ok = ok && l.peak[MEM_WORKSPACE] == 5 && l.total_peak == 175 && l.current[MEM_WORKSPACE] == 0;
    test_report(ts, ok, "ledger_reset_peaks", "after reset and a 5-byte workspace: total peak %zu "
                "(want 175)", l.total_peak);

    // No capacity: anything goes (a 2 PB model is a calculation, not an allocation).
    Ledger u;
    ledger_init(&u, 0, "cpu");
    ledger_charge(&u, MEM_OPTIMIZER, (size_t)2e15);
    test_report(ts, u.total_current == (size_t)2e15, "ledger_unlimited_capacity", "charged 2 PB");

    // Exactly filling the capacity is allowed; one byte more is not (tested below).
    Ledger e;
    ledger_init(&e, 1000, "cpu");
    ledger_charge(&e, MEM_PARAMS, 600);
    ledger_charge(&e, MEM_GRADS, 400);
    test_report(ts, e.total_current == 1000, "ledger_fill_to_capacity", "held %zu of 1000",
                e.total_current);
}

static void charge_over(void *arg) {
    (void)arg;
    Ledger l;
    ledger_init(&l, 80000000000ull, "cpu");  // --device-mem 80GB
    ledger_charge(&l, MEM_PARAMS, 26000000000ull);
    ledger_charge(&l, MEM_GRADS, 26000000000ull);
    ledger_charge(&l, MEM_OPTIMIZER, 27100000000ull);
    ledger_charge(&l, MEM_OPTIMIZER, 1200000000ull);  // 80.3 GB > 80 GB
}

static void charge_one_byte_over(void *arg) {
    (void)arg;
    Ledger l;
    ledger_init(&l, 1000, "cuda:0");
    ledger_charge(&l, MEM_PARAMS, 1000);
    ledger_charge(&l, MEM_ACTIVATIONS, 1);
}

static void release_too_much(void *arg) {
    (void)arg;
    Ledger l;
    ledger_init(&l, 0, "cpu");
    ledger_charge(&l, MEM_GRADS, 10);
    ledger_release(&l, MEM_GRADS, 11);
}

static void test_oom(TestState *ts) {
    char out[4096];
    int status = run_child(charge_over, NULL, out, sizeof out);
    const char *need[] = {"out of memory on cpu", "cannot allocate 1.20 GB for optimizer",
                          "held 79.10 GB", "params 26.00 GB", "grads 26.00 GB",
                          "optimizer 27.10 GB", "allowed 80.00 GB"};
    int missing = 0;
    for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
        if (!strstr(out, need[i])) {
            missing++;
            printf("  message lacks \"%s\"\n", need[i]);
        }
    }
    test_report(ts, status != 0 && missing == 0, "ledger_oom_message",
                "exit %d, %d parts missing; message: %s", status, missing, out);

    status = run_child(charge_one_byte_over, NULL, out, sizeof out);
    test_report(ts, status != 0 && strstr(out, "cuda:0") && strstr(out, "activations"),
                "ledger_oom_one_byte_over", "exit %d: %s", status, out);

    status = run_child(release_too_much, NULL, out, sizeof out);
    test_report(ts, status != 0 && strstr(out, "grads"), "ledger_release_more_than_held_dies",
                "exit %d: %s", status, out);
}

static void test_format(TestState *ts) {
    static const struct { size_t b; const char *s; } cases[] = {
        {0, "0 B"},
        {999, "999 B"},
        {1000, "1.00 kB"},
        {1536, "1.54 kB"},
        {999999, "1.00 MB"},  // not "1000.00 kB"
        {1500000, "1.50 MB"},
        {80000000000ull, "80.00 GB"},
        {79100000000ull, "79.10 GB"},
        {1500000000000ull, "1.50 TB"},
        {2000000000000000ull, "2000.00 TB"},
    };
    int bad = 0;
    char buf[32];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        format_bytes(cases[i].b, buf, sizeof buf);
        if (strcmp(buf, cases[i].s) != 0) {
            bad++;
            printf("  format_bytes(%zu) = \"%s\", want \"%s\"\n", cases[i].b, buf, cases[i].s);
        }
    }
    test_report(ts, bad == 0, "format_bytes", "%d of %zu wrong", bad, sizeof cases / sizeof cases[0]);
}

static void test_parse(TestState *ts) {
    static const struct { const char *s; size_t v; } good[] = {
        {"0", 0},
        {"123", 123},
        {"100B", 100},
        {"64kB", 64000},
        {"64k", 64000},
        {"80GB", 80000000000ull},
        {"80G", 80000000000ull},
        {"80gb", 80000000000ull},
        {"80 GB", 80000000000ull},
        {"80.00 GB", 80000000000ull},  // what format_bytes prints parses back
        {"512MiB", 512ull << 20},
        {"512mib", 512ull << 20},
        {"1KiB", 1024},
        {"1Ki", 1024},
        {"1.5GiB", 1610612736ull},
        {"2TiB", 2ull << 40},
        {"1.5TB", 1500000000000ull},
        {"1.5e9", 1500000000ull},
        {"1e9", 1000000000ull},
        {"1E3kB", 1000000ull},
        {".5k", 500},
        {"18446744073709551615", SIZE_MAX},
    };
    int bad = 0;
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        size_t v = 12345;
        int rc = parse_bytes(good[i].s, &v);
        if (rc != 0 || v != good[i].v) {
            bad++;
            printf("  parse_bytes(\"%s\"): rc %d, value %zu, want %zu\n", good[i].s, rc, v,
                   good[i].v);
        }
    }
    test_report(ts, bad == 0, "parse_bytes_accepts", "%d of %zu wrong", bad,
                sizeof good / sizeof good[0]);

    static const char *bad_inputs[] = {
        "", "-1", "-1GB", "+5", " 80GB", "80 ", "abc", "GB", "80XB", "80GBx", "80 GB junk",
        "80bb", "1.2.3", "1e", "1e999", "inf", "nan", "0x10", "18446744073709551616",
        "20000000TB", "17179869184GiB", "1e20",
    };
    bad = 0;
    for (size_t i = 0; i < sizeof bad_inputs / sizeof bad_inputs[0]; i++) {
        size_t v = 777;
        if (parse_bytes(bad_inputs[i], &v) == 0) {
            bad++;
            printf("  parse_bytes(\"%s\") accepted it as %zu\n", bad_inputs[i], v);
        }
    }
    test_report(ts, bad == 0, "parse_bytes_rejects", "%d of %zu accepted", bad,
                sizeof bad_inputs / sizeof bad_inputs[0]);
}

static void test_print(TestState *ts) {
    Ledger l;
    ledger_init(&l, 80000000000ull, "cpu");
    ledger_charge(&l, MEM_PARAMS, 12600000);
    ledger_charge(&l, MEM_GRADS, 12600000);
    ledger_charge(&l, MEM_OPTIMIZER, 25200000);
    ledger_charge(&l, MEM_WORKSPACE, 1000);
    ledger_release(&l, MEM_WORKSPACE, 1000);

    char line[256];
    ledger_format_peaks(&l, line, sizeof line);
    const char *want = "params 12.60MB grads 12.60MB optimizer 25.20MB activations 0B comm 0B "
                       "workspace 1.00kB total 50.40MB";
    test_report(ts, strcmp(line, want) == 0, "ledger_format_peaks", "\"%s\"", line);

    // A short buffer truncates, terminated, without writing past its end (ASan).
    char small[12];
    ledger_format_peaks(&l, small, sizeof small);
    test_report(ts, strlen(small) == sizeof small - 1 && strncmp(small, "params 12.6", 11) == 0,
                "ledger_format_peaks_truncates", "\"%s\"", small);

    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    ledger_print(&l, f);
    fclose(f);
    int ok = strstr(text, "capacity 80.00 GB") && strstr(text, "optimizer") &&
             strstr(text, "25.20 MB") && strstr(text, "total") && strstr(text, "50.40 MB") &&
             strstr(text, "peak") && strstr(text, "workspace");
    // The workspace line shows current 0 B and peak 1.00 kB.
    char *ws = strstr(text, "workspace");
    ok = ok && ws && strstr(ws, "0 B") && strstr(ws, "1.00 kB");
    test_report(ts, ok, "ledger_print_table", "%zu bytes of table", len);
    free(text);
}

int main(void) {
    TestState ts = {0};
    test_names(&ts);
    test_accounting(&ts);
    test_oom(&ts);
    test_format(&ts);
    test_parse(&ts);
    test_print(&ts);
    return test_finish(&ts);
}
