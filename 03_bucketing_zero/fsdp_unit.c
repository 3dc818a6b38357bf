// fsdp_unit.c — stage 3's weights: gathered just before use, freed just after,
// the next unit prefetched.
//
// The model announces every use of a layer group's weights (its use hook), in an
// order fixed by the architecture:
//
//   forward   0, 1, ..., L, L+1, 0        (the LM head reuses wte: group 0)
//   backward  L+1, 0, L, ..., 1, then 0 for its gradients only
//
// (sharded.c records it in use_seq, and in use_op which calls form one op: the
// head asks for two groups before it computes), so at every use we know which
// units will be needed again, and when. A unit
// no longer needed is freed; the one needed now is gathered (or, if its
// all-gather was started ahead of time, waited for); and with prefetch the next
// unit's all-gather starts now, so that it travels while this unit computes.
//
// How far ahead counts as "needed again": with resharding (FSDP's default,
// reshard_after_forward), a unit used in forward is freed when forward no longer
// needs it, and gathered again for its backward: the weights of only a unit or
// two are ever whole, at the price of a second all-gather per unit. Without it,
// units stay whole from their forward to their backward (ZeRO-2's memory for the
// weights, one all-gather per unit). Either way the head's units stay whole
// across the turn from forward to backward, which reuses them at once: the head's
// two uses are the last of forward, so no forward use frees them, and backward's
// horizon is its end.
#include "check.h"
#include "sharded.h"

// Does the model use unit v's weights in uses [from, to)?
static int used_between(const Sharded *s, int v, int from, int to) {
    for (int j = from; j < to && j < s->n_use; j++)
        if (s->use_seq[j] == v) return 1;
    return 0;
}

void fsdp_on_use(Sharded *s, int group, int need, int at) {
    const ShardPlan *P = &s->plan;
    int u = need & GPT_NEED_PARAMS ? P->unit_of[group] : -1;
    CHECK(at < s->n_use && s->use_seq[at] == u, "use %d of the micro-batch is group %d (unit %d), "
          "not what the model's order predicts", at, group, u);
    int horizon = s->cfg.reshard && at < s->fwd_uses ? s->fwd_uses : s->n_use;
    // 1. Free what will not be used again soon (before gathering: memory first),
    // counting from the start of this op (the head announces two groups, then computes).
    for (int v = 0; v < P->n_units; v++)
        if (v != u && s->unit_state[v] != UNIT_FREE && !used_between(s, v, s->use_op[at], horizon))
            unit_free(s, v);
    if (u < 0) return;  // gradients only (the embedding's backward)
    // 2. This unit, whole, now.
    if (s->unit_state[u] == UNIT_FREE) unit_gather_start(s, u);
    if (s->unit_state[u] == UNIT_GATHERING) unit_gather_wait(s, u);
    // 3. Prefetch: the next unit the model will ask for starts travelling now.
    if (s->cfg.prefetch)
        for (int j = at + 1; j < s->n_use; j++) {
            int w = s->use_seq[j];
            if (w < 0 || w == u) continue;
            if (s->unit_state[w] == UNIT_FREE) unit_gather_start(s, w);
            break;
        }
}
