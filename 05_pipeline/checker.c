// checker.c — proves a schedule sound before a rank runs it.
//
// A wrong schedule does not crash: it hangs (a rank waits for a message nobody
// sends) or, worse, computes on the wrong data (two ranks disagree on the order
// of the messages between them, and equal-sized activations arrive in each
// other's place). So before the engine runs, every rank checks the whole
// schedule — every rank's list, since the fault may lie in a neighbour's — in
// three passes:
//
//   1. each rank's own list: every (micro-batch, chunk) forwarded and backwarded
//      once, after what each needs on this rank (its input's receive posted, its
//      forward done, its gradient's receive posted), and sent after it exists;
//   2. each channel (rank a to rank b): a's sends and b's receives name the same
//      messages in the same order, since messages on a channel arrive in order;
//   3. a simulation of the engine: posting never blocks, a compute waits until the
//      message it needs has been sent. If no rank can move and some have actions
//      left, they wait on each other: the first stuck rank, what it waits for and
//      where the rank that would send it is stuck, are named.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "schedule.h"

// Offsets of rank s's entries in the per-action arrays.
static size_t first_action(const PPSchedule *S, int s) {
    size_t off = 0;
    for (int r = 0; r < s; r++) off += (size_t)S->n[r];
    return off;
}

static int is_send(PPOp op) { return op == PP_SEND_ACT || op == PP_SEND_GRAD; }
static int is_recv(PPOp op) { return op == PP_RECV_ACT || op == PP_RECV_GRAD; }

// The rank at the other end of a transfer, and the chunk it concerns there.
static void other_end(const PPSchedule *S, int s, const PPAction *a, int *rank, int *chunk) {
    int k = pp_vstage(S, s, a->chunk);
    int next = a->op == PP_SEND_ACT || a->op == PP_RECV_GRAD;
    pp_where(S, next ? k + 1 : k - 1, rank, chunk);
}

#define FAIL(...) do { snprintf(err, n, __VA_ARGS__); goto out; } while (0)

int sched_check(const PPSchedule *S, char *err, size_t n) {
    int p = S->p, m = S->m, v = S->v, rc = -1;
    size_t total = first_action(S, p), cells = (size_t)m * v;
    int *seq = calloc(total + 1, sizeof *seq), *peer = calloc(total + 1, sizeof *peer);
    int *recv_at = malloc(((size_t)p * 2 * cells + 1) * sizeof *recv_at);
    int *fwd = malloc((cells + 1) * sizeof *fwd), *bwd = malloc((cells + 1) * sizeof *bwd);
    int *wgt = malloc((cells + 1) * sizeof *wgt);  // the weight pass (a whole backward counts)
    int *sent_count = calloc((size_t)p * p + 1, sizeof *sent_count);
    int *recv_count = calloc((size_t)p * p + 1, sizeof *recv_count);
    int *pc = calloc((size_t)p + 1, sizeof *pc);
    CHECK(seq && peer && recv_at && fwd && bwd && wgt && sent_count && recv_count && pc,
          "out of memory");
    for (size_t i = 0; i < (size_t)p * 2 * cells; i++) recv_at[i] = -1;
    char what[160], other[160];

    // 1. Each rank's own list.
    for (int s = 0; s < p; s++) {
        for (size_t c = 0; c < cells; c++) fwd[c] = bwd[c] = wgt[c] = -1;
        for (int i = 0; i < S->n[s]; i++) {
            const PPAction *a = &S->acts[s][i];
            if (a->op < 0 || a->op >= PP_OPS || a->mb < 0 || a->mb >= m || a->chunk < 0 ||
                a->chunk >= v)
                FAIL("rank %d, action %d: op %d, micro-batch %d, chunk %d is not an action of a "
                     "schedule of %d micro-batches and %d chunks", s, i, a->op, a->mb, a->chunk, m, v);
            pp_action_str(S, s, a, what, sizeof what);
            size_t cell = (size_t)a->mb * v + a->chunk;
            int first = pp_is_first(S, s, a->chunk), last = pp_is_last(S, s, a->chunk);
            int *ra = &recv_at[((size_t)s * 2 + 0) * cells + cell];  // activation received
            int *rg = &recv_at[((size_t)s * 2 + 1) * cells + cell];  // gradient received
            switch (a->op) {
            case PP_RECV_ACT: case PP_RECV_GRAD: {
                int act = a->op == PP_RECV_ACT;
                if (act ? first : last)
                    FAIL("rank %d, action %d (%s): virtual stage %d has no %s to receive", s, i,
                         what, pp_vstage(S, s, a->chunk), act ? "previous stage" : "next stage");
                if (*(act ? ra : rg) >= 0) FAIL("rank %d, action %d: a second %s", s, i, what);
                *(act ? ra : rg) = i;
                break;
            }
            case PP_FORWARD:
                if (fwd[cell] >= 0) FAIL("rank %d, action %d: a second %s", s, i, what);
                if (!first && *ra < 0)
                    FAIL("rank %d, action %d: %s before any receive of its input", s, i, what);
                fwd[cell] = i;
                break;
            case PP_BACKWARD: case PP_BACKWARD_INPUT:
                if (bwd[cell] >= 0) FAIL("rank %d, action %d: a second %s", s, i, what);
                if (fwd[cell] < 0) FAIL("rank %d, action %d: %s before its forward", s, i, what);
                if (!last && *rg < 0)
                    FAIL("rank %d, action %d: %s before any receive of its gradient", s, i, what);
                bwd[cell] = i;
                if (a->op == PP_BACKWARD) wgt[cell] = i;
                break;
            case PP_BACKWARD_WEIGHT:
                if (wgt[cell] >= 0) FAIL("rank %d, action %d: a second %s", s, i, what);
                if (bwd[cell] < 0)
                    FAIL("rank %d, action %d: %s before its input-gradient pass", s, i, what);
                wgt[cell] = i;
                break;
            case PP_SEND_ACT: case PP_SEND_GRAD: {
                int act = a->op == PP_SEND_ACT;
                if (act ? last : first)
                    FAIL("rank %d, action %d (%s): virtual stage %d has no %s stage", s, i, what,
                         pp_vstage(S, s, a->chunk), act ? "next" : "previous");
                if ((act ? fwd : bwd)[cell] < 0)
                    FAIL("rank %d, action %d: %s before the %s that computes it", s, i, what,
                         act ? "forward" : "backward");
                break;
            }
            default: break;
            }
        }
        for (size_t cell = 0; cell < cells; cell++) {
            int mb = (int)(cell / v), c = (int)(cell % v);
            char ch[24] = "";
            if (v > 1) snprintf(ch, sizeof ch, " (chunk %d)", c);
            if (fwd[cell] < 0) FAIL("rank %d never runs the forward of micro-batch %d%s", s, mb, ch);
            if (bwd[cell] < 0) FAIL("rank %d never runs the backward of micro-batch %d%s", s, mb, ch);
            if (wgt[cell] < 0)
                FAIL("rank %d never runs the weight-gradient pass of micro-batch %d%s", s, mb, ch);
        }
    }

    // 2. Every channel: the same messages in the same order on both ends.
    for (int s = 0; s < p; s++)
        for (int i = 0; i < S->n[s]; i++) {
            const PPAction *a = &S->acts[s][i];
            if (!is_send(a->op) && !is_recv(a->op)) continue;
            int r, c;
            other_end(S, s, a, &r, &c);
            size_t k = first_action(S, s) + i;
            peer[k] = r;
            seq[k] = is_send(a->op) ? sent_count[s * p + r]++ : recv_count[r * p + s]++;
        }
    for (int a = 0; a < p; a++)
        for (int b = 0; b < p; b++) {
            // Walk a's sends to b beside b's receives from a.
            int i = 0, j = 0;
            for (;;) {
                while (i < S->n[a] && !(is_send(S->acts[a][i].op) && peer[first_action(S, a) + i] == b)) i++;
                while (j < S->n[b] && !(is_recv(S->acts[b][j].op) && peer[first_action(S, b) + j] == a)) j++;
                if (i == S->n[a] && j == S->n[b]) break;
                if (i == S->n[a]) {
                    pp_action_str(S, b, &S->acts[b][j], what, sizeof what);
                    FAIL("rank %d, action %d (%s): rank %d never sends it (unmatched receive)", b,
                         j, what, a);
                }
                if (j == S->n[b]) {
                    pp_action_str(S, a, &S->acts[a][i], what, sizeof what);
                    FAIL("rank %d, action %d (%s): rank %d never receives it (unmatched send)", a,
                         i, what, b);
                }
                const PPAction *x = &S->acts[a][i], *y = &S->acts[b][j];
                int r, c;
                other_end(S, a, x, &r, &c);
                int same = (x->op == PP_SEND_ACT) == (y->op == PP_RECV_ACT) && x->mb == y->mb &&
                           c == y->chunk;
                if (!same) {
                    pp_action_str(S, a, x, what, sizeof what);
                    pp_action_str(S, b, y, other, sizeof other);
                    FAIL("message %d from rank %d to rank %d: rank %d's action %d is the %s, but "
                         "rank %d's action %d is the %s (messages on a channel arrive in the "
                         "order they were sent)", seq[first_action(S, a) + i], a, b, a, i, what, b,
                         j, other);
                }
                i++;
                j++;
            }
        }

    // 3. The simulation: post freely, compute once the needed message was sent.
    memset(sent_count, 0, (size_t)p * p * sizeof *sent_count);
    for (;;) {
        int moved = 0, left = 0;
        for (int s = 0; s < p; s++) {
            while (pc[s] < S->n[s]) {
                const PPAction *a = &S->acts[s][pc[s]];
                if (a->op == PP_FORWARD || a->op == PP_BACKWARD || a->op == PP_BACKWARD_INPUT) {
                    int act = a->op == PP_FORWARD;
                    int need = act ? !pp_is_first(S, s, a->chunk) : !pp_is_last(S, s, a->chunk);
                    if (need) {
                        size_t cell = (size_t)a->mb * v + a->chunk;
                        int ri = recv_at[((size_t)s * 2 + (act ? 0 : 1)) * cells + cell];
                        size_t k = first_action(S, s) + ri;
                        if (sent_count[peer[k] * p + s] <= seq[k]) break;  // not sent yet
                    }
                } else if (is_send(a->op)) {
                    sent_count[s * p + peer[first_action(S, s) + pc[s]]]++;
                }
                pc[s]++;
                moved = 1;
            }
            left += pc[s] < S->n[s];
        }
        if (!left) break;
        if (moved) continue;
        // Stuck: name the first rank's wait and the sender's.
        for (int s = 0; s < p; s++) {
            if (pc[s] == S->n[s]) continue;
            const PPAction *a = &S->acts[s][pc[s]];
            int act = a->op == PP_FORWARD;
            size_t cell = (size_t)a->mb * v + a->chunk;
            int ri = recv_at[((size_t)s * 2 + (act ? 0 : 1)) * cells + cell];
            int src = peer[first_action(S, s) + ri], want = seq[first_action(S, s) + ri], si = -1;
            for (int i = 0, k = 0; i < S->n[src]; i++)
                if (is_send(S->acts[src][i].op) && peer[first_action(S, src) + i] == s && k++ == want) si = i;
            pp_action_str(S, s, a, what, sizeof what);
            if (si < 0 || pc[src] == S->n[src]) FAIL("deadlock: rank %d waits at action %d (%s)",
                                                      s, pc[s], what);
            pp_action_str(S, src, &S->acts[src][pc[src]], other, sizeof other);
            FAIL("deadlock: rank %d waits at action %d (%s) for what rank %d sends at its action "
                 "%d, but rank %d waits at its action %d (%s)", s, pc[s], what, src, si, src,
                 pc[src], other);
        }
    }
    rc = 0;
out:
    free(seq); free(peer); free(recv_at); free(fwd); free(bwd); free(wgt);
    free(sent_count); free(recv_count); free(pc);
    return rc;
}
