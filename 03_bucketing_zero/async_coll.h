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
//
// On a GPU (async_comm_use_gpu) a collective on device memory goes to the group's
// GpuComm (NCCL, or the CUDA IPC ring) on a communication stream of its own: at
// *_start the compute thread records an event on the compute stream (the data
// are ready when the kernels queued so far have run), and the communication
// stream waits for that event, not for the host; the compute stream runs on.
#pragma once
#include "collectives_v.h"
#include "comm_cuda.h"
#include "timeline.h"

typedef struct AsyncComm AsyncComm;
typedef struct CollTask CollTask;

AsyncComm *async_comm_new(Comm *c, Timeline *tl, int threaded);
// Waits for everything started, stops the thread and gives the Comm back.
void async_comm_free(AsyncComm *a);
int async_comm_threaded(const AsyncComm *a);
// Collectives on g over device memory use gc (created by the caller, on ctx's
// GPU, before this AsyncComm's thread took the Comm; freed after async_comm_free).
void async_comm_use_gpu(AsyncComm *a, const Group *g, GpuComm *gc, Ctx *ctx);

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
// thread nothing runs before its wait, so this is 0 until then; nor does anything
// report done before its wait under COURSE_LATE_COMPLETION=1 (a checking mode: code
// may never rely on a collective being done before it waits). Under
// COURSE_EAGER_COLLECTIVES=1 the data move inside the start call: the buffer must be
// final when the collective starts, and nothing may touch it until the wait.
int coll_test(AsyncComm *a, CollTask *t);
// Blocking conveniences: start and wait.
void async_allreduce(AsyncComm *a, Group *g, void *buf, size_t count, DType dt, Algo algo,
                     const char *label);
void async_barrier(AsyncComm *a, Group *g);
