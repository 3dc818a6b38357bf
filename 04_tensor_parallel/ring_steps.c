// ring_steps.c — ring attention's plumbing (ring_steps.h): the blocks and the messages.
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "ring_steps.h"
#include "timer.h"

static int mod(int a, int p) { return ((a % p) + p) % p; }

RingShape ring_shape(const ContextParallel *cp, int B, int T, int C, int NH) {
    RingShape s = {B, T, C, NH, C / NH, T / cp->group->size, 2 * C, {0}};
    CHECK(cp_runs(T, cp->group->size, cp->group->rank, cp->zigzag, &s.mine) == 0,
          "context parallelism: a sequence of %d tokens does not split into %d %s chunks "
          "(T must be a multiple of %d)", T, cp->group->size, cp->zigzag ? "zigzag" : "contiguous",
          cp->zigzag ? 2 * cp->group->size : cp->group->size);
    return s;
}

int ring_run_row(const CpRuns *r, int k) { return k ? r->len[0] : 0; }

CpBlock ring_block(const RingShape *s, const CpRuns *theirs, const float *qkv, const float *blk,
                   int b, int h, int a, int j, size_t *qrow) {
    *qrow = (size_t)b * s->Tl + ring_run_row(&s->mine, a);
    const float *k = blk + ((size_t)b * s->Tl + ring_run_row(theirs, j)) * s->W + h * s->hs;
    return (CpBlock){qkv + *qrow * 3 * s->C + h * s->hs, k, k + s->C, 3 * s->C, s->W,
                     s->mine.len[a], theirs->len[j], s->hs, s->mine.start[a], theirs->start[j]};
}

void ring_pack_kv(const RingShape *s, float *blk, const float *qkv) {
    for (size_t row = 0; row < (size_t)s->B * s->Tl; row++)
        memcpy(blk + row * s->W, qkv + row * 3 * s->C + s->C, sizeof(float) * 2 * s->C);
}

static void flight_begin(RingFlight *f, const char *what) {
    f->t0 = now_seconds();
    f->t1 = 0;
    snprintf(f->what, sizeof f->what, "%s", what);
}

void ring_pass_on(ContextParallel *cp, RingFlight *f, const float *cur, float *next,
                  size_t bytes, const char *what) {
    int p = cp->group->size, r = cp->group->rank;
    f->q[0] = comm_irecv(cp->comm, cp->group, mod(r - 1, p), next, bytes, RECV_COPY, DT_F32);
    f->q[1] = comm_isend(cp->comm, cp->group, mod(r + 1, p), cur, bytes);
    f->n = 2;
    flight_begin(f, what);
}

void ring_send_on(ContextParallel *cp, RingFlight *f, const float *buf, size_t bytes,
                  const char *what) {
    int p = cp->group->size, r = cp->group->rank;
    f->q[0] = comm_isend(cp->comm, cp->group, mod(r + 1, p), buf, bytes);
    f->n = 1;
    // Its receiver takes it only after its own compute: in the meantime this rank's
    // waits on other messages must keep it moving, or the two ranks could each wait
    // for the other's bytes.
    comm_progress_meanwhile(cp->comm, f->q, 1);
    flight_begin(f, what);
}

void ring_take_in(ContextParallel *cp, float *buf, size_t bytes, RecvOp op, const char *what) {
    int p = cp->group->size, r = cp->group->rank;
    RingFlight f = {{comm_irecv(cp->comm, cp->group, mod(r - 1, p), buf, bytes, op, DT_F32)},
                    1, 0, 0, ""};
    flight_begin(&f, what);
    ring_wait(cp, &f);
}

void ring_keep_moving(ContextParallel *cp, RingFlight *f, int n) {
    if (!cp->overlap) return;
    for (int i = 0; i < n; i++) {
        if (f[i].n == 0 || f[i].t1 > 0) continue;
        int done = 1;
        for (int k = 0; k < f[i].n; k++) done &= comm_test(cp->comm, f[i].q[k]);
        if (done) f[i].t1 = now_seconds();
    }
}

void ring_wait(ContextParallel *cp, RingFlight *f) {
    if (f->n == 0) return;
    double t = now_seconds();
    comm_wait(cp->comm, f->q, f->n);
    double t1 = now_seconds();
    if (f->t1 == 0) {  // it was not seen complete before: the rank waited for it
        f->t1 = t1;
        timeline_span(cp->tl, TL_WAIT, f->what, t, t1);
    }
    timeline_span(cp->tl, TL_COMM, f->what, f->t0, f->t1);
    f->n = 0;
}

void ring_computed(ContextParallel *cp, const char *what, int step, double t0) {
    if (!cp->tl) return;
    char name[40];
    snprintf(name, sizeof name, "%s step %d", what, step);
    timeline_span(cp->tl, TL_COMPUTE, name, t0, now_seconds());
}
