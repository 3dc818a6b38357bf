// exercises/ring_attention.c — YOUR ring: attention over a sequence split across the cp
// ranks of a group, its keys and values passed round the ranks a block at a time.
//   make grade-4 PART=ring_attention
// Stuck? make hint-4 PART=ring_attention   (tier 1 a nudge; TIER=2, 3 more)
//
// Read the lesson's §3b. Each rank keeps the queries of its own tokens (cp_runs: one
// run, or two with zigzag); the K and V rows travel. At step s a rank holds the block
// of rank r - s, computes its queries against it, merges the result into what it has,
// and passes the block on to r + 1 while the next arrives from r - 1.
//
// THE CONTRACT (cp.h)
//   ring_attention_forward(cp, out, lse, qkv, B, T, C, NH): qkv (B, Tl, 3C) holds this
//     rank's Tl = T/cp rows of the GPT's fused q, k, v; write out (B, Tl, C) and lse
//     (B, NH, Tl) exactly as the core's flash attention over the whole sequence writes
//     them, restricted to this rank's rows (to fp32's rounding: blocks merged in another
//     order than its tiles). Causal in global positions.
//   ring_attention_backward(cp, dqkv, dout, qkv, out, lse, B, T, C, NH): ADD into dqkv
//     (B, Tl, 3C) the gradient of this rank's q, k and v rows: dq from its queries
//     against every block; dk, dv from every rank's queries against this rank's block.
//   Every rank of cp->group calls both; the messages go only to the ring's neighbours;
//   per rank, forward sends cp-1 K,V blocks, backward cp-1 K,V blocks and cp dK,dV
//   blocks (B * Tl * 2C floats each). Every message posted is waited for (ring_wait)
//   before the function returns. The buffers come from cp_buffer, freed before it
//   returns, and the ledger counts them (stage 01's calculator predicts them to the
//   byte): as MEM_COMM what travels, the forward's two K,V blocks and the backward's two
//   K,V blocks and two dK,dV buffers; as MEM_WORKSPACE the rest, the forward's partial
//   output (Tl hs), its lse (Tl) and the scores' scratch (FLASH_BR Tl), the backward's
//   D (B NH Tl) and scratch (2 FLASH_BR Tl). So the backward's dK,dV for a step go in the
//   buffer sent on the step before last, once that send is waited for.
//   Bookkeeping bench_cp reads: cp->compute_s += the CPU seconds (thread_cpu_seconds) of
//   the block computations and merges, not of the messages; cp->pairs += the forward's
//   (query, key) pairs (cp_block_pairs).
//
// GIVEN (ring_steps.h; cp.h): ring_shape, ring_block (one query run against one run
// of the block you hold: a CpBlock), ring_pack_kv; cp_block_forward / cp_block_backward
// / cp_block_sees (cp_attention.c), softmax_merge (yours, §3b), cp_runs (yours);
// messages in flight: ring_pass_on (the next block in, this one out), ring_send_on and
// ring_take_in (the gradients' ring), ring_keep_moving (call it between blocks of
// compute: that is the overlap), ring_wait; ring_computed (a span on the timeline). A
// RingFlight starts zeroed (nothing in flight). Rows: ring_block gives a query run's row
// of qkv, out and dout (qrow); lse and D are (B, NH, Tl): (b NH + h) Tl + ring_run_row.
//
// What the grader checks (tests/test_cp.c and tests/stage04.sh): out, lse and dqkv on
// every rank against one process's flash attention at cp = 2, 3, 4, contiguous and
// zigzag; the bytes each rank sends; the same bits with cp->overlap off; the GPT trained
// with your ring against one process (cp.equiv.ring.*), and its memory (cp.memory.ring.*).
//
// Pitfalls: a block read while the next is being received into the same buffer; the
// last step's block passed on (nobody takes it); a rank's messages to r + 1 must be
// posted in the order r + 1 takes them in (the transport matches them in that order):
// the next K,V block before the last step's dK,dV.
#include <math.h>
#include <string.h>

#include "cp.h"
#include "flash_tiles.h"
#include "ring_steps.h"
#include "timer.h"

void ring_attention_forward(ContextParallel *cp, float *out, float *lse, const float *qkv, int B,
                            int T, int C, int NH) {
    (void)cp; (void)out; (void)lse; (void)qkv; (void)B; (void)T; (void)C; (void)NH;
    // TODO(exercise): out = 0 and lse = -inf; the own block packed; cp steps: pass the
    // block on (not at the last), compute every query run against every run of the
    // block it sees, merge, keep the bytes moving, wait.
}

void ring_attention_backward(ContextParallel *cp, float *dqkv, const float *dout,
                             const float *qkv, const float *out, const float *lse, int B, int T,
                             int C, int NH) {
    (void)cp; (void)dqkv; (void)dout; (void)qkv; (void)out; (void)lse; (void)B; (void)T;
    (void)C; (void)NH;
    // TODO(exercise): D = rowsum(dout * out); cp steps: the next K,V block and the last
    // step's dK,dV sent on, this block's dK,dV computed into a fresh buffer, the ranks
    // before's share added in; then the last sum sent home and yours taken in and added
    // into dqkv's k and v columns.
}
