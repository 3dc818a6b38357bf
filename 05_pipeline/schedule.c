// schedule.c — what every schedule shares: building, the virtual stages, words
// for actions, and the simplest generator, GPipe (Huang et al. 2019).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "schedule.h"

static const char *const names[SCHED_COUNT] = {"gpipe", "1f1b", "interleaved", "zb-h1"};

const char *sched_name(SchedKind k) { return k >= 0 && k < SCHED_COUNT ? names[k] : "?"; }

int sched_parse(const char *s, SchedKind *out) {
    for (int k = 0; k < SCHED_COUNT; k++)
        if (strcmp(s, names[k]) == 0) { *out = (SchedKind)k; return 0; }
    return -1;
}

int sched_chunks(SchedKind k, int given) {
    return given ? given : k == SCHED_INTERLEAVED ? 2 : 1;
}

const char *sched_source(SchedKind k) {
    static const char *const src[SCHED_COUNT] = {
        [SCHED_GPIPE] = "05_pipeline/schedule.c", [SCHED_1F1B] = "05_pipeline/sched_1f1b.c",
        [SCHED_INTERLEAVED] = "05_pipeline/sched_interleaved.c",
        // ZB-H1's order is 1F1B's, split (sched_zb.c): a mistake in it is most likely there
        [SCHED_ZB_H1] = "05_pipeline/sched_1f1b.c's 1F1B, split by 05_pipeline/sched_zb.c"};
    return k >= 0 && k < SCHED_COUNT ? src[k] : "05_pipeline/schedule.c";
}

PPSchedule *sched_build(SchedKind k, int p, int m, int v, char *err, size_t n) {
    if (p < 1 || p > PP_MAX_STAGES || m < 1 || v < 1) {
        snprintf(err, n, "a pipeline needs 1 <= --pp <= %d, m >= 1 micro-batches and --chunks >= 1 "
                 "(got %d, %d, %d)", PP_MAX_STAGES, p, m, v);
        return NULL;
    }
    if (k != SCHED_INTERLEAVED && v != 1) {
        snprintf(err, n, "--chunks %d: only the interleaved schedule holds more than one model "
                 "chunk per rank", v);
        return NULL;
    }
    if (k == SCHED_INTERLEAVED && p < 2) {
        snprintf(err, n, "--schedule interleaved needs --pp >= 2 (got %d)", p);
        return NULL;
    }
    if (k == SCHED_INTERLEAVED && v < 2) {
        snprintf(err, n, "--schedule interleaved needs --chunks >= 2 (got %d): a rank holds "
                 "several chunks of the model", v);
        return NULL;
    }
    if (k == SCHED_INTERLEAVED && m % p != 0) {
        snprintf(err, n, "--schedule interleaved needs m, the micro-batches, a multiple of --pp "
                 "%d (got %d): they go round the ranks in groups of p", p, m);
        return NULL;
    }
    PPSchedule *S = calloc(1, sizeof *S);
    CHECK(S, "out of memory");
    S->name = sched_name(k);
    S->p = p;
    S->m = m;
    S->v = v;
    if (k == SCHED_GPIPE) sched_gpipe(S);
    else if (k == SCHED_1F1B) sched_1f1b(S);
    else if (k == SCHED_ZB_H1) sched_zb_h1(S);
    else sched_interleaved(S);
    return S;
}

void sched_free(PPSchedule *S) {
    if (!S) return;
    for (int s = 0; s < S->p; s++) free(S->acts[s]);
    free(S);
}

void pp_push(PPSchedule *S, int s, PPOp op, int mb, int chunk) {
    CHECK(s >= 0 && s < S->p, "pp_push: rank %d outside the %d stages", s, S->p);
    if (S->n[s] == S->cap[s]) {
        S->cap[s] = S->cap[s] ? 2 * S->cap[s] : 16;
        S->acts[s] = realloc(S->acts[s], (size_t)S->cap[s] * sizeof *S->acts[s]);
        CHECK(S->acts[s], "out of memory");
    }
    S->acts[s][S->n[s]++] = (PPAction){op, mb, chunk};
}

int pp_vstage(const PPSchedule *S, int s, int chunk) { return chunk * S->p + s; }
int pp_is_first(const PPSchedule *S, int s, int chunk) { return pp_vstage(S, s, chunk) == 0; }
int pp_is_last(const PPSchedule *S, int s, int chunk) {
    return pp_vstage(S, s, chunk) == S->p * S->v - 1;
}
void pp_where(const PPSchedule *S, int k, int *rank, int *chunk) {
    *rank = k % S->p;
    *chunk = k / S->p;
}

void pp_forward_with(PPSchedule *S, int s, int mb, int chunk) {
    if (!pp_is_first(S, s, chunk)) pp_push(S, s, PP_RECV_ACT, mb, chunk);
    pp_push(S, s, PP_FORWARD, mb, chunk);
    if (!pp_is_last(S, s, chunk)) pp_push(S, s, PP_SEND_ACT, mb, chunk);
}

void pp_backward_with(PPSchedule *S, int s, int mb, int chunk) {
    if (!pp_is_last(S, s, chunk)) pp_push(S, s, PP_RECV_GRAD, mb, chunk);
    pp_push(S, s, PP_BACKWARD, mb, chunk);
    if (!pp_is_first(S, s, chunk)) pp_push(S, s, PP_SEND_GRAD, mb, chunk);
}

void pp_action_str(const PPSchedule *S, int s, const PPAction *a, char *buf, size_t n) {
    char ch[24] = "";
    if (S->v > 1) snprintf(ch, sizeof ch, " (chunk %d)", a->chunk);
    int k = pp_vstage(S, s, a->chunk), peer, pc;
    switch (a->op) {
    case PP_FORWARD: snprintf(buf, n, "forward of micro-batch %d%s", a->mb, ch); return;
    case PP_BACKWARD: snprintf(buf, n, "backward of micro-batch %d%s", a->mb, ch); return;
    case PP_BACKWARD_INPUT:
        snprintf(buf, n, "input-gradient pass of micro-batch %d%s", a->mb, ch);
        return;
    case PP_BACKWARD_WEIGHT:
        snprintf(buf, n, "weight-gradient pass of micro-batch %d%s", a->mb, ch);
        return;
    case PP_SEND_ACT: case PP_RECV_GRAD: pp_where(S, k + 1, &peer, &pc); break;
    default: pp_where(S, k - 1, &peer, &pc); break;
    }
    const char *what = a->op == PP_SEND_ACT || a->op == PP_RECV_ACT ? "activation" : "gradient";
    int send = a->op == PP_SEND_ACT || a->op == PP_SEND_GRAD;
    snprintf(buf, n, "%s of the %s of micro-batch %d%s %s rank %d", send ? "send" : "receive",
             what, a->mb, ch, send ? "to" : "from", peer);
}

// GPipe: every micro-batch forward, then every micro-batch backward. Simple, and
// its bubble is (p-1)/m of the ideal time like 1F1B's, but each rank holds the
// activations of all m micro-batches at the turn.
void sched_gpipe(PPSchedule *S) {
    for (int s = 0; s < S->p; s++) {
        for (int mb = 0; mb < S->m; mb++) pp_forward_with(S, s, mb, 0);
        for (int mb = 0; mb < S->m; mb++) pp_backward_with(S, s, mb, 0);
    }
}

int sched_max_in_flight(const PPSchedule *S, int s) {
    int now = 0, most = 0;
    for (int i = 0; i < S->n[s]; i++) {
        if (S->acts[s][i].op == PP_FORWARD && ++now > most) most = now;
        if (S->acts[s][i].op == PP_BACKWARD || S->acts[s][i].op == PP_BACKWARD_WEIGHT) now--;
    }
    return most;
}
