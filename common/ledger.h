// ledger.h — the memory ledger: every allocation carries a category.
//
// Stage 01's question is "where does the memory of a training run go?". The
// ledger answers it by bookkeeping: each allocation is charged to one category,
// and the ledger keeps current and peak bytes per category and in total. With a
// capacity set (--device-mem 80GB) one process behaves like a GPU of that size:
// an allocation that would exceed it fails like cudaMalloc does, naming the
// category, the bytes asked, held and allowed.
#pragma once
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    MEM_PARAMS = 0,   // model weights
    MEM_GRADS,        // parameter gradients
    MEM_OPTIMIZER,    // AdamW moments (and, in stage 06, fp32 master weights)
    MEM_ACTIVATIONS,  // tensors saved by the forward pass for the backward pass
    MEM_COMM,         // communication buffers (stage 02 onwards)
    MEM_WORKSPACE,    // scratch that lives for one op or one layer
    MEM_NCAT
} MemCategory;

// A rank's progress thread (stage 03) may charge communication buffers while its
// compute thread charges the rest, so the counts are kept under a lock.
typedef struct {
    pthread_mutex_t lock;
    size_t current[MEM_NCAT];
    size_t peak[MEM_NCAT];
    size_t total_current;
    size_t total_peak;
    size_t capacity;          // 0 = unlimited
    size_t host_limit;        // the CPU without a capacity: the machine's memory (0: none).
                              // A run larger than it would page for hours, not fail:
                              // refused at step zero like a device's OOM
    const char *device_name;  // "cpu" or "cuda:0", for messages
} Ledger;

const char *mem_category_name(MemCategory c);  // "params", "grads", ...

void ledger_init(Ledger *l, size_t capacity, const char *device_name);
// Charge bytes to a category; on exceeding the capacity, dies with the OOM
// message (this is what a real device does: the allocation throws, the run ends).
void ledger_charge(Ledger *l, MemCategory c, size_t bytes);
void ledger_release(Ledger *l, MemCategory c, size_t bytes);
// Resets the peaks to the current values (to measure one phase alone).
void ledger_reset_peaks(Ledger *l);
// One table: category, current, peak.
void ledger_print(const Ledger *l, FILE *f);
// "params 12.6MB grads 12.6MB ... total 80.1MB" on one line, peaks.
void ledger_format_peaks(const Ledger *l, char *buf, size_t n);
// The drivers' machine-readable line, exact peaks in bytes, flushed:
// "MEM rank=R <extra> params=... grads=... ... workspace=..." (extra may be "").
void ledger_print_mem_line(const Ledger *l, FILE *f, int rank, const char *extra);

// Human-readable bytes ("1.50 GB", decimal units as the papers use) and the
// inverse for flags ("80GB", "512MiB", "1e9").
void format_bytes(size_t bytes, char *buf, size_t n);
// The same for an estimate (a calculator's double: no size_t to saturate at 2^64).
void format_bytes_f(double bytes, char *buf, size_t n);
int parse_bytes(const char *s, size_t *out);  // 0 on success

#ifdef __cplusplus
}
#endif
