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

// ---------------------------------------------------------------- serialized groups
//
// sched_check_serialized (schedule.h): the engine's walk again, under NCCL's rules.
// A rank's sends and receives join its open group as it reaches them; at a wait
// (a compute that needs a message, a backward that releases its micro-batch's
// sent activation, the end of the step) the open group goes out. Groups run one at
// a time per rank, oldest first. A message is done when its send and its receive
// are both in the oldest unfinished group of their rank; a group is done when all
// its messages are, and a wait sees a message complete only with its whole group
// (one event follows the group). Posting receives earlier does not help: a group
// holding a receive whose sender is not there yet holds up everything behind it.

// The next action from i on where rank s will wait (schedule.h's rules), or n.
static int next_wait(const PPSchedule *S, int s, int i) {
    for (; i < S->n[s]; i++) {
        const PPAction *a = &S->acts[s][i];
        int first = pp_is_first(S, s, a->chunk), last = pp_is_last(S, s, a->chunk);
        if (a->op == PP_FORWARD && !first) return i;
        if ((a->op == PP_BACKWARD || a->op == PP_BACKWARD_INPUT) && !last) return i;
        if ((a->op == PP_BACKWARD || a->op == PP_BACKWARD_WEIGHT) && !last) return i;
    }
    return S->n[s];
}

int sched_check_serialized(const PPSchedule *S, char *err, size_t n) {
    if (sched_check(S, err, n)) return -1;
    int p = S->p, v = S->v, rc = -1;
    size_t total = first_action(S, p), cells = (size_t)S->m * v;
    int *partner = malloc((total + 1) * sizeof *partner), *gidx = malloc((total + 1) * sizeof *gidx);
    int *done = calloc(total + 1, sizeof *done), *send_of = malloc((total + 1) * sizeof *send_of);
    // Per rank: its posted messages in order (mem, global indices), group g being
    // mem[gs[g] .. gs[g + 1]); nq groups closed, the open one is number nq.
    int *mem = malloc((total + 1) * sizeof *mem), *gs = malloc((total + 2 * (size_t)p + 1) * sizeof *gs);
    int *nmem = calloc((size_t)p + 1, sizeof *nmem), *nq = calloc((size_t)p + 1, sizeof *nq);
    int *head = calloc((size_t)p + 1, sizeof *head), *pc = calloc((size_t)p + 1, sizeof *pc);
    int *where = malloc(((size_t)p * 3 * cells + 1) * sizeof *where);  // a cell's RA, RG, SA
    CHECK(partner && gidx && done && send_of && mem && gs && nmem && nq && head && pc && where,
          "out of memory");
    for (size_t i = 0; i < (size_t)p * 3 * cells; i++) where[i] = -1;
    for (int s = 0; s < p; s++) gs[first_action(S, s) + 2 * s] = 0;
    for (int s = 0; s < p; s++)
        for (int i = 0; i < S->n[s]; i++) {
            const PPAction *a = &S->acts[s][i];
            size_t k = first_action(S, s) + i, cell = (size_t)a->mb * v + a->chunk;
            partner[k] = gidx[k] = -1;
            if (a->op == PP_RECV_ACT) where[((size_t)s * 3 + 0) * cells + cell] = (int)k;
            if (a->op == PP_RECV_GRAD) where[((size_t)s * 3 + 1) * cells + cell] = (int)k;
            if (a->op == PP_SEND_ACT) where[((size_t)s * 3 + 2) * cells + cell] = (int)k;
        }
    // sched_check proved each channel's sends and receives in the same order: pair
    // the j-th send from a to b with the j-th receive of b from a.
    for (int a = 0; a < p; a++)
        for (int b = 0; b < p; b++) {
            int ns = 0, nr = 0, r, c;
            for (int i = 0; i < S->n[a]; i++)
                if (is_send(S->acts[a][i].op) && (other_end(S, a, &S->acts[a][i], &r, &c), r == b))
                    send_of[ns++] = (int)(first_action(S, a) + i);
            for (int j = 0; j < S->n[b]; j++)
                if (is_recv(S->acts[b][j].op) && (other_end(S, b, &S->acts[b][j], &r, &c), r == a)) {
                    int k = (int)(first_action(S, b) + j);
                    partner[k] = send_of[nr];
                    partner[send_of[nr++]] = k;
                }
        }
#define GS(s, g) gs[first_action(S, s) + 2 * (size_t)(s) + (size_t)(g)]
    char what[160], other[160];
    for (;;) {
        int moved = 0, left = 0;
        for (int s = 0; s < p; s++) {
            size_t base = first_action(S, s);
            while (pc[s] <= S->n[s]) {
                int i = pc[s];
                if (i < S->n[s] && (is_send(S->acts[s][i].op) || is_recv(S->acts[s][i].op))) {
                    gidx[base + i] = nq[s];  // joins the open group
                    mem[base + nmem[s]++] = (int)base + i;
                    pc[s]++;
                    moved = 1;
                    continue;
                }
                int wait = i == S->n[s] || next_wait(S, s, i) == i;
                if (wait && nmem[s] > GS(s, nq[s])) {  // the open group goes out
                    GS(s, ++nq[s]) = nmem[s];
                    moved = 1;
                }
                if (i == S->n[s]) break;  // the end: waits below for the queue to empty
                if (wait) {
                    const PPAction *a = &S->acts[s][i];
                    size_t cell = (size_t)a->mb * v + a->chunk;
                    int last = pp_is_last(S, s, a->chunk), need = -1, after = -1;
                    if (a->op == PP_FORWARD) need = where[((size_t)s * 3 + 0) * cells + cell];
                    if ((a->op == PP_BACKWARD || a->op == PP_BACKWARD_INPUT) && !last)
                        need = where[((size_t)s * 3 + 1) * cells + cell];
                    if ((a->op == PP_BACKWARD || a->op == PP_BACKWARD_WEIGHT) && !last)
                        after = where[((size_t)s * 3 + 2) * cells + cell];
                    // A message is seen complete with its whole group.
                    if (need >= 0 && !(gidx[need] >= 0 && gidx[need] < head[s])) break;
                    if (after >= 0 && !(gidx[after] >= 0 && gidx[after] < head[s])) break;
                }
                pc[s]++;
                moved = 1;
            }
            // The oldest group: a message whose two ends are both in their rank's
            // oldest group is done; the group, once all of its are.
            while (head[s] < nq[s]) {
                int all = 1;
                for (int j = GS(s, head[s]); j < GS(s, head[s] + 1); j++) {
                    int k = mem[base + j], o = partner[k], r = 0;
                    if (done[k]) continue;
                    while (r + 1 < p && (size_t)o >= first_action(S, r + 1)) r++;
                    if (gidx[o] >= 0 && gidx[o] == head[r] && head[r] < nq[r]) {
                        done[k] = done[o] = 1;
                        moved = 1;
                    } else {
                        all = 0;
                    }
                }
                if (!all) break;
                head[s]++;
                moved = 1;
            }
            left += pc[s] < S->n[s] || head[s] < nq[s];
        }
        if (!left) break;
        if (moved) continue;
        // Stuck: the first rank whose oldest group waits, and where its peer is.
        for (int s = 0; s < p; s++) {
            if (head[s] == nq[s]) continue;
            for (int j = GS(s, head[s]); j < GS(s, head[s] + 1); j++) {
                int k = mem[first_action(S, s) + j], o = partner[k], r = 0;
                if (done[k]) continue;
                while (r + 1 < p && (size_t)o >= first_action(S, r + 1)) r++;
                int i = k - (int)first_action(S, s), oi = o - (int)first_action(S, r);
                pp_action_str(S, s, &S->acts[s][i], what, sizeof what);
                pp_action_str(S, r, &S->acts[r][oi], other, sizeof other);
                if (gidx[o] >= 0)
                    FAIL("deadlock when each rank's messages run in posting order (NCCL): rank "
                         "%d's oldest group of messages holds action %d (%s), which waits for "
                         "rank %d's action %d (%s), in a later group of rank %d's", s, i, what, r,
                         oi, other, r);
                FAIL("deadlock when each rank's messages run in posting order (NCCL): rank %d's "
                     "oldest group of messages holds action %d (%s), which waits for rank %d's "
                     "action %d (%s), not yet posted: rank %d waits at its action %d", s, i, what,
                     r, oi, other, r, pc[r]);
            }
        }
        FAIL("deadlock when each rank's messages run in posting order (NCCL)");
    }
    rc = 0;
#undef GS
out:
    free(partner); free(gidx); free(done); free(send_of); free(mem); free(gs); free(nmem);
    free(nq); free(head); free(pc); free(where);
    return rc;
}
