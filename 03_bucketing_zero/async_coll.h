// async_coll.h — non-blocking collectives: start one now, wait for it later.
//
// DDP's all-reduce waits for the whole backward pass; the point of buckets is to
// start reducing the last layers' gradients while the first layers' are still
// being computed. That needs collectives that make progress while the rank
// computes. Our transports only move bytes inside comm_wait, so something must
// keep calling it: here, a progress thread per rank, the role NCCL's proxy thread
// plays. *_start hands the collective to it and returns a handle; coll_wait
// blocks (sleeping, so the core is free for the progress thread) until it is done.
//
// The progress thread runs the collectives one at a time, in the order they were
// started. Every rank starts the same collectives in the same order (the same
// program), so they still meet in the same order everywhere. While the thread
// owns the Comm (comm_bind_thread), the rank's other threads must not post
// messages; the comm layer ends the run if one does.
//
// threaded = 0 gives the same interface with no thread: a collective runs when
// it is waited for (and every one started before it first). That is what
// --no-overlap measures against.
//
// Each collective is recorded on the timeline (lane COMM, by the progress
// thread) and each wait that blocked (lane WAIT, by the caller).
#pragma once
#include "collectives_v.h"
#include "timeline.h"

typedef struct AsyncComm AsyncComm;
typedef struct CollTask CollTask;

AsyncComm *async_comm_new(Comm *c, Timeline *tl, int threaded);
// Waits for everything started, stops the thread and gives the Comm back.
void async_comm_free(AsyncComm *a);
int async_comm_threaded(const AsyncComm *a);

// `label` names the span on the timeline ("bucket 3"). The buffer must stay
// untouched until the wait returns; the Blocks are copied.
CollTask *allreduce_start(AsyncComm *a, Group *g, void *buf, size_t count, DType dt, Algo algo,
                          const char *label);
CollTask *reduce_scatter_start(AsyncComm *a, Group *g, void *buf, const Blocks *b, DType dt,
                               Algo algo, const char *label);
CollTask *all_gather_start(AsyncComm *a, Group *g, void *buf, const Blocks *b, DType dt, Algo algo,
                           const char *label);
// Blocks until the collective is done; frees the handle. Every collective started
// must be waited for (before async_comm_free).
void coll_wait(AsyncComm *a, CollTask *t);
// 1 if it is done (coll_wait then returns at once), without blocking. Without a
// thread nothing runs before its wait, so this is 0 until then.
int coll_test(AsyncComm *a, CollTask *t);
// Blocking conveniences: start and wait.
void async_allreduce(AsyncComm *a, Group *g, void *buf, size_t count, DType dt, Algo algo,
                     const char *label);
void async_barrier(AsyncComm *a, Group *g);
