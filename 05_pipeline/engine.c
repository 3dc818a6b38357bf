// engine.c — runs this rank's list of actions (schedule.h), for one step.
//
// The engine knows nothing of GPipe or 1F1B: it walks the list and does each
// action (engine_step.c). Receives and sends are posted and left in flight; a
// forward waits for its input, a backward for its gradient, and while a rank
// waits for one message every other message of the step keeps moving
// (comm_wait_first): a send to a neighbour that is itself waiting must not stall.
// What each (micro-batch, chunk) holds between its actions is its slot: its
// activations (from its receive or forward until its backward) and its gradient
// message (from its receive or backward until its send has left).
//
// On GPUs (P->gpu set) the same schedule moves device buffers: every message is
// comm_cuda.h's gpu_isend / gpu_irecv instead of a host message, and the waits are
// gpu_wait_first's. The host only queues the compute, so a traced step times the
// actions with CUDA events on the compute stream (P->clock), read after the step.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops.h"
#include "pipe.h"
#include "timer.h"

PPSlot *pipe_slot(Pipe *P, int mb, int chunk) { return &P->slots[(size_t)mb * P->v + chunk]; }

int pipe_peer(const Pipe *P, int chunk, int next) {
    int k = pp_vstage(P->S, P->pp->rank, chunk) + (next ? 1 : -1), rank, c;
    pp_where(P->S, k, &rank, &c);
    return rank;
}

// The residual stream between stages: N rows of C, or this rank's N/t with SP.
size_t pipe_stream_bytes(const Pipe *P) {
    const GPT *g = P->model[0];
    size_t rows = (size_t)P->B * P->T / (g->tp.sp ? g->tp.size : 1);
    return rows * g->cfg.n_embd * sizeof(float);
}

// A message in flight (pipe_isend / pipe_irecv), until its wait frees it.
struct PipeMsg {
    int is_send;
    const void *buf;    // a send's buffer (pipe_acts_put checks it is not pooled)
    CommRequest *host;  // on the CPU
    GpuRequest *gpu;    // on GPUs
};

void pipe_acts_get(Pipe *P, int c, GPTActs *out) {
    if (P->pooled[c] > 0) {
        *out = P->pool[c][--P->pooled[c]];
        return;
    }
    gpt_acts_alloc(P->model[c], out, P->B, P->T);
}

void pipe_acts_put(Pipe *P, int c, GPTActs *a) {
    // Back to the pool only once the send of the chunk's output from them has been
    // waited for: on a GPU the next micro-batch would overwrite what is still being
    // sent. The CPU's transports copy a message as it is posted, which hides the race;
    // this check does not depend on that.
    for (size_t i = 0; P->slots && i < (size_t)P->m * P->v; i++) {
        const PipeMsg *s = P->slots[i].send_act;
        const char *lo = (const char *)a->buffer, *hi = lo + a->floats * sizeof(float);
        CHECK(!s || (const char *)s->buf < lo || (const char *)s->buf >= hi, "micro-batch %zu "
              "(chunk %d): its activations went back to the pool while the send of its output "
              "(PP_SEND_ACT) was still in flight, not waited for: on a GPU the next micro-batch "
              "would overwrite what is being sent", i / P->v, c);
    }
    if (!P->pool[c]) {
        P->pool[c] = calloc((size_t)P->m + 1, sizeof *P->pool[c]);
        CHECK(P->pool[c], "out of memory");
    }
    CHECK(P->pooled[c] < P->m + 1, "more activation sets returned than micro-batches");
    P->pool[c][P->pooled[c]++] = *a;
    memset(a, 0, sizeof *a);
}

// ---------------------------------------------------------------- messages


static PipeMsg *message(int is_send) {
    PipeMsg *m = calloc(1, sizeof *m);
    CHECK(m, "out of memory");
    m->is_send = is_send;
    return m;
}

PipeMsg *pipe_isend(Pipe *P, int peer, const void *buf, size_t bytes) {
    PipeMsg *m = message(1);
    m->buf = buf;
    if (P->gpu) m->gpu = gpu_isend(P->gpu, peer, buf, bytes);
    else m->host = comm_isend(P->comm, P->pp, peer, buf, bytes);
    return m;
}

PipeMsg *pipe_irecv(Pipe *P, int peer, void *buf, size_t bytes) {
    PipeMsg *m = message(0);
    if (P->gpu) m->gpu = gpu_irecv(P->gpu, peer, buf, bytes);
    else m->host = comm_irecv(P->comm, P->pp, peer, buf, bytes, RECV_COPY, DT_F32);
    return m;
}

static int msg_test(Pipe *P, PipeMsg *m) {
    return m->gpu ? gpu_test(P->gpu, m->gpu) : comm_test(P->comm, m->host);
}

// Waits for the messages *where[0..n), all of them or (first) only the first while
// moving the others along; frees and clears what it waited for.
static void msg_wait(Pipe *P, PipeMsg ***where, int n, int first) {
    if (P->gpu) {
        GpuRequest **reqs = malloc((size_t)n * sizeof *reqs + 1);
        CHECK(reqs, "out of memory");
        for (int i = 0; i < n; i++) reqs[i] = (*where[i])->gpu;
        if (first) gpu_wait_first(P->gpu, reqs, n);
        else gpu_wait(P->gpu, reqs, n);
        free(reqs);
    } else {
        CommRequest **reqs = malloc((size_t)n * sizeof *reqs + 1);
        CHECK(reqs, "out of memory");
        for (int i = 0; i < n; i++) reqs[i] = (*where[i])->host;
        if (first) comm_wait_first(P->comm, reqs, n);
        else comm_wait(P->comm, reqs, n);
        free(reqs);
    }
    for (int i = 0; i < (first && n > 0 ? 1 : n); i++) {
        free(*where[i]);
        *where[i] = NULL;
    }
}

// Where every message of the step still in flight is kept (the slots' fields),
// `first` first; *n of them.
static PipeMsg ***in_flight(Pipe *P, PipeMsg **first, int *n) {
    size_t cells = (size_t)P->m * P->v;
    PipeMsg ***all = malloc((4 * cells + 1) * sizeof *all);
    CHECK(all, "out of memory");
    *n = 0;
    if (first) all[(*n)++] = first;
    for (size_t i = 0; i < cells; i++) {
        PPSlot *x = &P->slots[i];
        PipeMsg **r[4] = {&x->recv_act, &x->send_act, &x->recv_grad, &x->send_grad};
        for (int k = 0; k < 4; k++)
            if (*r[k] && r[k] != first) all[(*n)++] = r[k];
    }
    return all;
}

// Moves every message in flight along, without waiting. Our transports move bytes
// only when asked: a send posted before a long compute would otherwise sit in the
// sender until its next wait, and the neighbour would wait for it all that time.
static void nudge(Pipe *P) {
    for (size_t i = 0; i < (size_t)P->m * P->v; i++) {
        PPSlot *x = &P->slots[i];
        PipeMsg *r[4] = {x->send_act, x->send_grad, x->recv_act, x->recv_grad};
        for (int k = 0; k < 4; k++)
            if (r[k]) msg_test(P, r[k]);
    }
}

// A gradient whose send has left frees its buffer.
static void reap_sends(Pipe *P) {
    for (size_t i = 0; i < (size_t)P->m * P->v; i++) {
        PPSlot *x = &P->slots[i];
        if (!x->send_grad || !msg_test(P, x->send_grad)) continue;
        PipeMsg **done = &x->send_grad;
        msg_wait(P, &done, 1, 0);
        GPT *g = P->model[i % P->v];
        mem_free(g->ctx, MEM_COMM, x->grad, pipe_stream_bytes(P));
        x->grad = NULL;
    }
}

// On a GPU an action's span is its compute: the engine waits for a receive
// before the compute that needs it, and for a send after the compute that made
// it (engine_step.c), so a receive's wait starts the span again and a send's wait
// ends it where the compute was queued (the stream is idle while the host waits).
void pipe_wait(Pipe *P, PipeMsg **r) {
    double t0 = now_seconds();
    int n, is_send = (*r)->is_send;
    if (P->clock && is_send) P->mark1 = gpu_clock_mark(P->clock);
    PipeMsg ***where = in_flight(P, r, &n);
    msg_wait(P, where, n, 1);  // frees *r only; the others stay in flight
    free(where);
    reap_sends(P);
    if (P->clock && !is_send) P->mark0 = gpu_clock_mark(P->clock);
    if (P->tl) timeline_span(P->tl, TL_WAIT, "wait", t0, now_seconds());
}

// The compute actions of a step timed on the GPU, turned into spans after it.
typedef struct {
    char name[32];
    int mark0, mark1;
} GpuSpan;

static void gpu_spans(Pipe *P, const GpuSpan *sp, int n) {
    gpu_clock_read(P->clock, comm_timeout(P->comm));
    for (int i = 0; i < n; i++)
        timeline_span(P->tl, TL_COMPUTE, sp[i].name, gpu_clock_time(P->clock, sp[i].mark0),
                      gpu_clock_time(P->clock, sp[i].mark1));
}

float pipe_run(Pipe *P, const int *tokens, const int *targets) {
    const PPSchedule *S = P->S;
    int s = P->pp->rank;
    Ctx *ctx = P->model[0]->ctx;
    CHECK(ctx->device == DEV_CPU || P->pp->size == 1 || P->gpu, "a pipeline on %s needs a "
          "GpuComm for its group (Pipe.gpu): host messages cannot carry device buffers",
          device_name(ctx->device));
    P->slots = calloc((size_t)P->m * P->v, sizeof *P->slots);
    CHECK(P->slots, "out of memory");
    P->loss_sum = 0;
    if (P->tl) timeline_clear(P->tl);  // the trace holds the last step
    GpuSpan *spans = NULL;
    int nspans = 0;
    if (P->tl && P->tl->enabled && ctx->device == DEV_CUDA) {  // GPU time, not queueing time
        if (!P->clock) P->clock = gpu_clock_new(ctx);
        gpu_clock_start(P->clock, comm_timeout(P->comm));
        spans = malloc((size_t)S->n[s] * sizeof *spans + 1);
        CHECK(spans, "out of memory");
    }
    for (int c = 0; c < P->v; c++) gpt_zero_grad(P->model[c]);
    for (int i = 0; i < S->n[s]; i++) {
        const PPAction *a = &S->acts[s][i];
        if (i == P->kill_at) {  // fault test: a rank dies mid-pipeline
            fprintf(stderr, "warning: rank %d: injected death at action %d of its schedule "
                    "(--kill-rank/--kill-at)\n", comm_rank(P->comm), i);
            fflush(stderr);
            raise(SIGKILL);
        }
        int compute = a->op == PP_FORWARD || a->op == PP_BACKWARD ||
                      a->op == PP_BACKWARD_INPUT || a->op == PP_BACKWARD_WEIGHT;
        double t0 = now_seconds();
        P->mark0 = spans && compute ? gpu_clock_mark(P->clock) : -1;
        P->mark1 = -1;
        pipe_step(P, a, tokens, targets);
        if (spans && compute && P->mark1 < 0) P->mark1 = gpu_clock_mark(P->clock);
        nudge(P);  // what this action posted starts moving now, not at the next wait
        if (P->tl && compute) {
            char name[32];  // "F3", "B3", "W3"; with chunks "F3.1"
            char letter = a->op == PP_FORWARD ? 'F' : a->op == PP_BACKWARD_WEIGHT ? 'W' : 'B';
            int k = snprintf(name, sizeof name, "%c%d", letter, a->mb);
            if (P->v > 1) snprintf(name + k, sizeof name - k, ".%d", a->chunk);
            if (spans) {
                GpuSpan *sp = &spans[nspans++];
                snprintf(sp->name, sizeof sp->name, "%s", name);
                sp->mark0 = P->mark0;
                sp->mark1 = P->mark1;
            } else {
                timeline_span(P->tl, TL_COMPUTE, name, t0, now_seconds());
            }
        }
    }
    // The sends still in flight, then nothing may be left.
    int n;
    PipeMsg ***where = in_flight(P, NULL, &n);
    msg_wait(P, where, n, 0);
    free(where);
    if (spans) gpu_spans(P, spans, nspans);
    free(spans);
    for (size_t i = 0; i < (size_t)P->m * P->v; i++) {
        PPSlot *x = &P->slots[i];
        GPT *g = P->model[i % P->v];
        CHECK(!x->acts.buffer, "micro-batch %zu (chunk %zu) still holds activations after the "
              "step: its backward never ran", i / P->v, i % P->v);
        if (x->grad) mem_free(g->ctx, MEM_COMM, x->grad, pipe_stream_bytes(P));
    }
    free(P->slots);
    P->slots = NULL;
    P->kill_at = -1;  // the first step only
    // The loss lives on the last stage; every rank reports it.
    double loss = P->loss_sum / P->m;
    int last_rank, last_chunk;
    pp_where(S, S->p * S->v - 1, &last_rank, &last_chunk);
    if (s != last_rank) loss = 0;
    if (P->pp->size > 1) allreduce(P->comm, P->pp, &loss, 1, DT_F64, ALGO_RING);
    return (float)loss;
}
