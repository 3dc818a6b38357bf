// ring_attention.c — attention over a sequence split across the cp ranks of a group
// (Liu et al. 2023, Ring Attention; Brandon et al. 2023 for the zigzag placement).
//
// Each rank keeps the queries of its own tokens. The keys and values travel: at step s
// a rank holds the block of rank r - s, computes its queries against it (cp_attention.c),
// merges the partial result into what it has (softmax_merge.c), and passes the block
// on to r + 1 while receiving the next from r - 1. After cp steps every query has met
// every key. Blocks wholly in a query run's future are skipped: with contiguous chunks
// rank 0 computes one block and rank cp-1 all cp; zigzag evens that out.
//
// Backward: the same ring, the block carrying its dK and dV with it. At step s a rank
// adds into its own dQ, and into the visiting block's dK and dV, what its queries
// contribute; after cp steps the block is one hop short of home, and one more pass
// delivers its gradients to the rank that owns those keys. The probabilities are
// recomputed from each query's final lse, so a block's backward needs nothing of the
// forward but lse and out (D = rowsum(dout * out)).
//
// The messages of a step are posted before its blocks are computed and waited for
// after: the next block moves while this one is computed, as far as the transport
// moves bytes without being called (a shared-memory channel does up to its capacity).
// A block is read from one buffer while the next arrives in the other: the step that
// computed with the buffer being overwritten would pair scores with the wrong K and V
// (tests/test_cp.c proves that such a mistake is caught).
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cp.h"
#include "timer.h"

static int mod(int a, int p) { return ((a % p) + p) % p; }

// Every (b, h), every query run of this rank against every run of block `src`.
// blk: the block's rows, (B, Tl, W) with K at column 0 and V at C of each row.
typedef struct {
    int B, T, C, NH, hs, Tl, W;
    CpRuns mine;
} RingShape;

// W: the floats of a block's row (K, V; and dK, dV backward).
static RingShape shape_of(const ContextParallel *cp, int B, int T, int C, int NH, int W) {
    RingShape s = {B, T, C, NH, C / NH, T / cp->group->size, W, {0}};
    CHECK(cp_runs(T, cp->group->size, cp->group->rank, cp->zigzag, &s.mine) == 0,
          "context parallelism: a sequence of %d tokens does not split into %d %s chunks "
          "(T must be a multiple of %d)", T, cp->group->size, cp->zigzag ? "zigzag" : "contiguous",
          cp->zigzag ? 2 * cp->group->size : cp->group->size);
    return s;
}

// Row of run k's first token among this rank's Tl rows.
static int run_row(const CpRuns *r, int k) { return k ? r->len[0] : 0; }

// Sequence b, head h: this rank's query run a against run j of the block it holds
// (theirs: the runs of the rank the block came from). *qrow: the run's first row.
static CpBlock block_at(const RingShape *s, const CpRuns *theirs, const float *qkv,
                        const float *blk, int b, int h, int a, int j, size_t *qrow) {
    *qrow = (size_t)b * s->Tl + run_row(&s->mine, a);
    const float *k = blk + ((size_t)b * s->Tl + run_row(theirs, j)) * s->W + h * s->hs;
    return (CpBlock){qkv + *qrow * 3 * s->C + h * s->hs, k, k + s->C, 3 * s->C, s->W,
                     s->mine.len[a], theirs->len[j], s->hs, s->mine.start[a], theirs->start[j]};
}

// The block buffer: this rank's K and V rows (and, backward, room for dK and dV).
static void pack_kv(const RingShape *s, float *blk, const float *qkv) {
    for (int b = 0; b < s->B; b++)
        for (int t = 0; t < s->Tl; t++) {
            const float *src = qkv + ((size_t)b * s->Tl + t) * 3 * s->C + s->C;
            float *dst = blk + ((size_t)b * s->Tl + t) * s->W;
            memcpy(dst, src, sizeof(float) * 2 * s->C);
            if (s->W > 2 * s->C) memset(dst + 2 * s->C, 0, sizeof(float) * 2 * s->C);
        }
}

// Sends `cur` on and receives the next block into `next`: posted, waited for later.
static void pass_on(ContextParallel *cp, CommRequest **q, const float *cur, float *next,
                    size_t bytes) {
    int p = cp->group->size, r = cp->group->rank;
    q[0] = comm_irecv(cp->comm, cp->group, mod(r - 1, p), next, bytes, RECV_COPY, DT_F32);
    q[1] = comm_isend(cp->comm, cp->group, mod(r + 1, p), cur, bytes);
}

void ring_attention_forward(ContextParallel *cp, float *out, float *lse, const float *qkv, int B,
                            int T, int C, int NH) {
    RingShape s = shape_of(cp, B, T, C, NH, 2 * C);
    int p = cp->group->size, r = cp->group->rank;
    size_t n = (size_t)B * s.Tl * s.W, bytes = sizeof(float) * n;
    float *buf[2] = {cp_buffer(cp, MEM_COMM, n), cp_buffer(cp, MEM_COMM, n)};
    float *po = cp_buffer(cp, MEM_WORKSPACE, (size_t)s.Tl * s.hs);
    float *pl = cp_buffer(cp, MEM_WORKSPACE, (size_t)s.Tl);
    pack_kv(&s, buf[0], qkv);
    for (size_t i = 0; i < (size_t)B * NH * s.Tl; i++) lse[i] = -INFINITY;
    memset(out, 0, sizeof(float) * (size_t)B * s.Tl * C);
    for (int step = 0; step < p; step++) {
        CommRequest *q[2];
        const float *blk = buf[step % 2];
        if (step < p - 1) pass_on(cp, q, blk, buf[(step + 1) % 2], bytes);
        CpRuns theirs;
        cp_runs(T, p, mod(r - step, p), cp->zigzag, &theirs);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int a = 0; a < s.mine.n; a++)
                    for (int j = 0; j < theirs.n; j++) {
                        size_t qrow;
                        CpBlock x = block_at(&s, &theirs, qkv, blk, b, h, a, j, &qrow);
                        if (!cp_block_sees(&x)) continue;
                        double t0 = thread_cpu_seconds();
                        cp_block_forward(&x, po, s.hs, pl);
                        softmax_merge(out + qrow * C + h * s.hs,
                                      lse + ((size_t)b * NH + h) * s.Tl + run_row(&s.mine, a), C,
                                      po, pl, s.hs, s.mine.len[a], s.hs);
                        cp->compute_s += thread_cpu_seconds() - t0;
                        cp->pairs += cp_block_pairs(&x);
                    }
        if (step < p - 1) comm_wait(cp->comm, q, 2);
    }
    cp_buffer_free(cp, MEM_COMM, buf[0], n);
    cp_buffer_free(cp, MEM_COMM, buf[1], n);
    cp_buffer_free(cp, MEM_WORKSPACE, po, (size_t)s.Tl * s.hs);
    cp_buffer_free(cp, MEM_WORKSPACE, pl, (size_t)s.Tl);
}

void ring_attention_backward(ContextParallel *cp, float *dqkv, const float *dout,
                             const float *qkv, const float *out, const float *lse, int B, int T,
                             int C, int NH) {
    RingShape s = shape_of(cp, B, T, C, NH, 4 * C);
    int p = cp->group->size, r = cp->group->rank;
    size_t n = (size_t)B * s.Tl * s.W, bytes = sizeof(float) * n, nd = (size_t)B * NH * s.Tl;
    float *buf[2] = {cp_buffer(cp, MEM_COMM, n), cp_buffer(cp, MEM_COMM, n)};
    float *D = cp_buffer(cp, MEM_WORKSPACE, nd);
    for (int b = 0; b < B; b++)  // D = rowsum(dout * out), per head
        for (int t = 0; t < s.Tl; t++)
            for (int h = 0; h < NH; h++) {
                const float *o = out + ((size_t)b * s.Tl + t) * C + h * s.hs;
                const float *d = dout + ((size_t)b * s.Tl + t) * C + h * s.hs;
                float acc = 0.0f;
                for (int e = 0; e < s.hs; e++) acc += d[e] * o[e];
                D[((size_t)b * NH + h) * s.Tl + t] = acc;
            }
    pack_kv(&s, buf[0], qkv);
    for (int step = 0; step < p; step++) {
        float *blk = buf[step % 2];
        CpRuns theirs;
        cp_runs(T, p, mod(r - step, p), cp->zigzag, &theirs);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int a = 0; a < s.mine.n; a++)
                    for (int j = 0; j < theirs.n; j++) {
                        size_t qrow;
                        CpBlock x = block_at(&s, &theirs, qkv, blk, b, h, a, j, &qrow);
                        float *kb = (float *)x.k;  // this buffer's: dK and dV ride behind K, V
                        size_t hr = ((size_t)b * NH + h) * s.Tl + run_row(&s.mine, a);
                        double t0 = thread_cpu_seconds();
                        cp_block_backward(&x, dout + qrow * C + h * s.hs, C, lse + hr, D + hr,
                                          dqkv + qrow * 3 * C + h * s.hs, 3 * C, kb + 2 * C,
                                          kb + 3 * C, s.W);
                        cp->compute_s += thread_cpu_seconds() - t0;
                    }
        // On to the next rank (and, after the last step, home): this block's gradients
        // travel with it. The computing is done, so the pass is waited for at once.
        if (p == 1) break;  // home already
        CommRequest *q[2];
        pass_on(cp, q, blk, buf[(step + 1) % 2], bytes);
        comm_wait(cp->comm, q, 2);
    }
    const float *home = buf[p > 1 ? p % 2 : 0];  // this rank's own block, back with every share
    for (int b = 0; b < B; b++)
        for (int t = 0; t < s.Tl; t++) {
            const float *g = home + ((size_t)b * s.Tl + t) * s.W + 2 * C;
            float *d = dqkv + ((size_t)b * s.Tl + t) * 3 * C + C;
            for (int e = 0; e < 2 * C; e++) d[e] += g[e];
        }
    cp_buffer_free(cp, MEM_COMM, buf[0], n);
    cp_buffer_free(cp, MEM_COMM, buf[1], n);
    cp_buffer_free(cp, MEM_WORKSPACE, D, nd);
}
