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
// Backward: the K/V blocks go round again, and behind them their gradients. At step s
// a rank adds into its own dQ what its queries contribute against the block it holds,
// and computes that block's dK, dV share into a fresh buffer; it adds the share the
// ranks before it computed (sent on by rank r - 1 at the end of its step s - 1) and
// sends the sum on to r + 1. After cp steps the sum is one hop short of the block's
// owner, and one more message delivers it. The probabilities are recomputed from each
// query's final lse, so a block's backward needs nothing of the forward but lse and out
// (D = rowsum(dout * out)).
//
// The next block is posted before this one is computed and waited for after, and
// between two blocks of compute ring_keep_moving moves the messages along (MPI's
// "test to progress"): the bytes travel while the rank computes (the overlap, measured
// by --trace's timeline). A block is read from one buffer while the next arrives in the
// other: a step that computed with the buffer being overwritten would pair scores with
// the wrong K and V (tests/test_cp.c proves that such a mistake is caught).
#include <math.h>
#include <string.h>

#include "cp.h"
#include "flash_tiles.h"
#include "ring_steps.h"
#include "timer.h"

static int mod(int a, int p) { return ((a % p) + p) % p; }

void ring_attention_forward(ContextParallel *cp, float *out, float *lse, const float *qkv, int B,
                            int T, int C, int NH) {
    RingShape s = ring_shape(cp, B, T, C, NH);
    int p = cp->group->size, r = cp->group->rank;
    size_t n = (size_t)B * s.Tl * s.W, bytes = sizeof(float) * n;
    float *buf[2] = {cp_buffer(cp, MEM_COMM, n), cp_buffer(cp, MEM_COMM, n)};
    float *po = cp_buffer(cp, MEM_WORKSPACE, (size_t)s.Tl * s.hs);
    float *pl = cp_buffer(cp, MEM_WORKSPACE, (size_t)s.Tl);
    float *S = cp_buffer(cp, MEM_WORKSPACE, (size_t)FLASH_BR * s.Tl);  // any run's scores
    ring_pack_kv(&s, buf[0], qkv);
    for (size_t i = 0; i < (size_t)B * NH * s.Tl; i++) lse[i] = -INFINITY;
    memset(out, 0, sizeof(float) * (size_t)B * s.Tl * C);
    for (int step = 0; step < p; step++) {
        RingFlight next = {0};
        const float *blk = buf[step % 2];
        if (step < p - 1) ring_pass_on(cp, &next, blk, buf[(step + 1) % 2], bytes, "K,V");
        CpRuns theirs;
        cp_runs(T, p, mod(r - step, p), cp->zigzag, &theirs);
        double t0 = now_seconds();
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int a = 0; a < s.mine.n; a++)
                    for (int j = 0; j < theirs.n; j++) {
                        size_t qrow;
                        CpBlock x = ring_block(&s, &theirs, qkv, blk, b, h, a, j, &qrow);
                        if (!cp_block_sees(&x)) continue;
                        double c0 = thread_cpu_seconds();
                        cp_block_forward(&x, po, s.hs, pl, S);
                        softmax_merge(out + qrow * C + h * s.hs,
                                      lse + ((size_t)b * NH + h) * s.Tl + ring_run_row(&s.mine, a),
                                      C, po, pl, s.hs, s.mine.len[a], s.hs);
                        cp->compute_s += thread_cpu_seconds() - c0;
                        cp->pairs += cp_block_pairs(&x);
                        ring_keep_moving(cp, &next, 1);
                    }
        ring_computed(cp, "ring forward", step, t0);
        ring_wait(cp, &next);
    }
    cp_buffer_free(cp, MEM_COMM, buf[0], n);
    cp_buffer_free(cp, MEM_COMM, buf[1], n);
    cp_buffer_free(cp, MEM_WORKSPACE, po, (size_t)s.Tl * s.hs);
    cp_buffer_free(cp, MEM_WORKSPACE, pl, (size_t)s.Tl);
    cp_buffer_free(cp, MEM_WORKSPACE, S, (size_t)FLASH_BR * s.Tl);
}

// D = rowsum(dout * out) per (sequence, head, row): (B, NH, Tl).
static void rowsum_dout_out(const RingShape *s, float *D, const float *dout, const float *out) {
    for (int b = 0; b < s->B; b++)
        for (int t = 0; t < s->Tl; t++)
            for (int h = 0; h < s->NH; h++) {
                size_t at = ((size_t)b * s->Tl + t) * s->C + h * s->hs;
                float acc = 0.0f;
                for (int e = 0; e < s->hs; e++) acc += dout[at + e] * out[at + e];
                D[((size_t)b * s->NH + h) * s->Tl + t] = acc;
            }
}

void ring_attention_backward(ContextParallel *cp, float *dqkv, const float *dout,
                             const float *qkv, const float *out, const float *lse, int B, int T,
                             int C, int NH) {
    RingShape s = ring_shape(cp, B, T, C, NH);
    int p = cp->group->size, r = cp->group->rank;
    size_t n = (size_t)B * s.Tl * s.W, bytes = sizeof(float) * n, nd = (size_t)B * NH * s.Tl;
    float *kv[2] = {cp_buffer(cp, MEM_COMM, n), cp_buffer(cp, MEM_COMM, n)};
    float *dkv[2] = {cp_buffer(cp, MEM_COMM, n), cp_buffer(cp, MEM_COMM, n)};
    float *D = cp_buffer(cp, MEM_WORKSPACE, nd);
    float *S = cp_buffer(cp, MEM_WORKSPACE, (size_t)2 * FLASH_BR * s.Tl);  // P and dP of a tile
    rowsum_dout_out(&s, D, dout, out);
    ring_pack_kv(&s, kv[0], qkv);
    RingFlight f[3];  // [0] the next K,V; [1], [2] the dK,dV sent from dkv[0], dkv[1]
    memset(f, 0, sizeof f);
    for (int step = 0; step < p; step++) {
        const float *blk = kv[step % 2];
        float *acc = dkv[step % 2];
        // Posted in the order rank r+1 takes them in: the next K,V block, then the last
        // step's dK,dV (which r+1 adds in only after computing with that block: sent
        // first, it would be matched with the receive of the K,V block).
        if (step < p - 1) ring_pass_on(cp, &f[0], blk, kv[(step + 1) % 2], bytes, "K,V");
        if (step > 0) ring_send_on(cp, &f[1 + (step - 1) % 2], dkv[(step - 1) % 2], bytes, "dK,dV");
        ring_wait(cp, &f[1 + step % 2]);  // acc's last contents delivered: it can be reused
        memset(acc, 0, bytes);
        CpRuns theirs;
        cp_runs(T, p, mod(r - step, p), cp->zigzag, &theirs);
        double t0 = now_seconds();
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int a = 0; a < s.mine.n; a++)
                    for (int j = 0; j < theirs.n; j++) {
                        size_t qrow;
                        CpBlock x = ring_block(&s, &theirs, qkv, blk, b, h, a, j, &qrow);
                        size_t hr = ((size_t)b * NH + h) * s.Tl + ring_run_row(&s.mine, a);
                        float *dk = acc + (x.k - blk);  // the block's place, in its gradient's buffer
                        double c0 = thread_cpu_seconds();
                        cp_block_backward(&x, dout + qrow * C + h * s.hs, C, lse + hr, D + hr,
                                          dqkv + qrow * 3 * C + h * s.hs, 3 * C, dk, dk + C, s.W,
                                          S);
                        cp->compute_s += thread_cpu_seconds() - c0;
                        ring_keep_moving(cp, f, 3);
                    }
        ring_computed(cp, "ring backward", step, t0);
        // The share of the ranks before this one (they computed it at their last step).
        if (step > 0) ring_take_in(cp, acc, bytes, RECV_SUM, "dK,dV in");
        ring_wait(cp, &f[0]);
    }
    float *home = dkv[0];  // this rank's own block's dK, dV, every rank's share summed
    if (p > 1) {  // the last sum one hop on, to its owner; this rank's from rank r-1
        ring_send_on(cp, &f[1 + (p - 1) % 2], dkv[(p - 1) % 2], bytes, "dK,dV");
        home = dkv[p % 2];
        ring_wait(cp, &f[1 + p % 2]);
        ring_take_in(cp, home, bytes, RECV_COPY, "dK,dV home");
    }
    for (size_t row = 0; row < (size_t)B * s.Tl; row++)
        for (int e = 0; e < 2 * C; e++) dqkv[row * 3 * C + C + e] += home[row * s.W + e];
    ring_wait(cp, &f[1]);
    ring_wait(cp, &f[2]);
    cp_buffer_free(cp, MEM_COMM, kv[0], n);
    cp_buffer_free(cp, MEM_COMM, kv[1], n);
    cp_buffer_free(cp, MEM_COMM, dkv[0], n);
    cp_buffer_free(cp, MEM_COMM, dkv[1], n);
    cp_buffer_free(cp, MEM_WORKSPACE, D, nd);
    cp_buffer_free(cp, MEM_WORKSPACE, S, (size_t)2 * FLASH_BR * s.Tl);
}
