// ops_timed.h — where a run's time goes, op by op (COURSE_OP_TIMING=1).
//
// ctx_init wraps the backend's table (ops.h) in one that times every op: it waits
// for the device before the call (so earlier queued work is not charged to it) and
// after it (so the op's own work is), on any backend. ctx_destroy prints the table,
// on rank 0: each op's calls, total time and share, the time per call, and the time
// spent outside the ops (the host's code, communication, waits), then one machine-
// readable line per op: "OPTIME op=matmul_backward calls=96 ms=812.345".
//
// The waits serialise what a GPU would overlap (launches, the next kernel behind
// this one), so the total is longer than an untimed run's: read the shares, and take
// tokens/s from a run without it. The values computed are the same, bit for bit.
#pragma once
#include "ctx.h"

// ctx->ops becomes a timed table over the one it held (ctx_init calls this when
// COURSE_OP_TIMING=1). ctx->ops->destroy then prints the table, frees it and puts
// the backend's table back before destroying the backend.
void ops_timing_wrap(Ctx *ctx);
