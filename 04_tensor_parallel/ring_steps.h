// ring_steps.h — the plumbing of ring attention (ring_steps.c), so that
// ring_attention.c holds the ring itself: which block a rank holds at each step, what it
// computes against it, and when each message is posted and waited for.
//
// A block is the K and V rows of one rank's tokens, (B, Tl, W) floats: row t holds K at
// column 0 and V at column C (W = 2C); its gradients dK, dV travel in buffers of the
// same shape.
#pragma once
#include "cp.h"

typedef struct {
    int B, T, C, NH, hs, Tl, W;
    CpRuns mine;  // this rank's runs of the sequence (zigzag.c)
} RingShape;

// The shape for this rank of cp (refuses a T that does not split, naming it).
RingShape ring_shape(const ContextParallel *cp, int B, int T, int C, int NH);
// Row of run k's first token among this rank's Tl rows.
int ring_run_row(const CpRuns *r, int k);
// Sequence b, head h: this rank's query run a against run j of the block blk (theirs:
// the runs of the rank the block came from); qkv this rank's (B, Tl, 3C) rows. *qrow:
// the query run's first row of qkv, out and dout; its lse (B, NH, Tl) is at
// (b NH + h) Tl + ring_run_row(&s->mine, a).
CpBlock ring_block(const RingShape *s, const CpRuns *theirs, const float *qkv, const float *blk,
                   int b, int h, int a, int j, size_t *qrow);
// The block buffer of this rank's own K and V rows, copied out of qkv.
void ring_pack_kv(const RingShape *s, float *blk, const float *qkv);

// Messages in flight: posted, moved along while the rank computes (ring_keep_moving,
// when cp->overlap), waited for. Each is one span on cp->tl's COMM lane, from its post
// to when it was seen complete; a wait that blocked is a span on the WAIT lane. A flight
// starts zeroed ({0}: nothing in flight, which ring_wait and ring_keep_moving skip).
typedef struct {
    CommRequest *q[2];
    int n;
    double t0, t1;     // posted, seen complete (0: not yet)
    char what[40];
} RingFlight;
// Receive the next block into `next` from rank r-1 while `cur` goes to r+1.
void ring_pass_on(ContextParallel *cp, RingFlight *f, const float *cur, float *next,
                  size_t bytes, const char *what);
// The gradients' ring: send buf to rank r+1, kept moving by every wait
// meanwhile (comm_progress_meanwhile); and take in what rank r-1 sent, adding it into
// buf (RECV_SUM) or copying it (RECV_COPY), waited for at once.
void ring_send_on(ContextParallel *cp, RingFlight *f, const float *buf, size_t bytes,
                  const char *what);
void ring_take_in(ContextParallel *cp, float *buf, size_t bytes, RecvOp op, const char *what);
// One call between two blocks of compute: the flights' bytes move (overlap), and the
// time each completes is noted. A no-op without cp->overlap: then the bytes move only
// as far as the transport moves them uncalled, and the rest in the wait.
void ring_keep_moving(ContextParallel *cp, RingFlight *f, int n);
// Waits for a flight (nothing if none is pending) and records its spans.
void ring_wait(ContextParallel *cp, RingFlight *f);
// A COMPUTE span on cp->tl from t0 to now.
void ring_computed(ContextParallel *cp, const char *what, int step, double t0);
