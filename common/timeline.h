// timeline.h — what each rank did, and when: spans of compute, communication and
// waiting, gathered on rank 0 and written as Chrome trace JSON (opens in
// https://ui.perfetto.dev or chrome://tracing) and as a table for gnuplot.
//
// "Communication overlaps the backward pass" is a claim about time; this is how
// the course proves it. A rank records a span per piece of work: its compute
// thread the forward and backward of each layer group (lane COMPUTE) and the
// time it sat blocked waiting for a collective (lane WAIT); its communication
// thread each collective it ran (lane COMM). Overlap is then measured, not
// asserted: the share of COMM time during which the same rank was computing.
//
// Each lane is written by one thread only, so recording needs no lock: the
// compute thread owns COMPUTE and WAIT, the communication thread COMM. Times are
// CLOCK_MONOTONIC seconds, which all processes on one machine share; across
// machines the clocks are not aligned (the trace says so).
#pragma once
#include <stddef.h>

#include "comm.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TL_COMPUTE = 0, TL_COMM, TL_WAIT, TL_LANES } TimelineLane;

typedef struct {
    char name[40];       // "backward h.3", "all-reduce bucket 2 (1.6 MB)"
    double t0, t1;       // seconds (now_seconds)
} Span;

typedef struct { Span *spans; size_t n, cap; } SpanList;

typedef struct {
    int enabled;         // 0: every call below is a no-op
    SpanList lane[TL_LANES];
} Timeline;

void timeline_init(Timeline *t, int enabled);
void timeline_free(Timeline *t);
// Records one span (nothing when disabled). Only the thread that owns the lane.
void timeline_span(Timeline *t, TimelineLane lane, const char *name, double t0, double t1);
// Forgets every span (keeps the buffers): to record one step alone.
void timeline_clear(Timeline *t);

// Per rank: total COMM time, and the part of it during which the rank was in a
// COMPUTE span (both in seconds). hidden / comm is the overlap.
void timeline_overlap(const Timeline *t, double *comm, double *hidden);

// Gathers every member's spans on member 0 of g over point-to-point messages (a
// collective: every member calls it) and writes there, when the paths are not
// NULL, the Chrome trace (`json`: one process per rank, one thread per lane) and
// the gnuplot table (`dat`: rank lane t0_ms t1_ms name, times from the earliest
// span). Returns 0, or -1 if a file could not be written (member 0 says why).
int timeline_write(const Timeline *t, Comm *c, const Group *g, const char *json, const char *dat);
// timeline_write to PREFIX.json and PREFIX.dat (a driver's --trace PREFIX), member 0
// saying where they are.
int timeline_write_prefix(const Timeline *t, Comm *c, const Group *g, const char *prefix);
// Before the run, for --trace PREFIX: its folder made, as the writer would make it,
// and PREFIX.json a file that can be written there; else flags_fail names the path
// (a bad --trace fails now, not after the run).
void timeline_check_output(const char *prefix);

#ifdef __cplusplus
}
#endif
