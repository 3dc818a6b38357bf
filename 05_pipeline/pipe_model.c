// pipe_model.c — a pipeline stage's models, the tied embedding, the optimizer
// step and the whole model gathered back.
//
// Rank s holds chunks c = 0..v-1, virtual stages k = c·p + s of K = p·v; each
// chunk is a GPT of its own (common/model.h's GPTPart: its layers, the embedding
// on virtual stage 0, the head on K-1), with its own gradients and AdamW state,
// and its weights are the single-process model's (gpt_initial_params).
//
// On GPUs the buffers are the device's: the tied embedding's gradients cross the
// pipeline as GPU messages (P->gpu), DDP's all-reduce and ZeRO-1's all-gather are
// the GPU collectives of P->gpu_dp; the loss and the norm stay host numbers.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "train_state.h"
#include "ops.h"
#include "pipe.h"

void pp_layers(int L, int K, int k, int *l0, int *l1) {
    int base = L / K, extra = L % K;
    *l0 = k * base + (k < extra ? k : extra);
    *l1 = *l0 + base + (k < extra);
}

const char *pp_error(const GPTConfig *c, int pp, int chunks, char *buf, size_t n) {
    if (pp < 1 || chunks < 1 || chunks > PP_MAX_CHUNKS)
        snprintf(buf, n, "--pp must be at least 1 and --chunks 1..%d (got %d, %d)", PP_MAX_CHUNKS,
                 pp, chunks);
    else if (c->n_layer < pp * chunks)
        snprintf(buf, n, "--pp %d x --chunks %d = %d stages need at least as many --layers (got %d)",
                 pp, chunks, pp * chunks, c->n_layer);
    else return NULL;
    return buf;
}

// The first virtual stage's wte and the last's copy: the first stage counts it in
// the norm and the gathered model, the copy does not.
static int is_wte_copy(const Pipe *P, int c, int slice) {
    int s = P->pp->rank;
    return slice == 0 && P->S->p * P->v > 1 && pp_is_last(P->S, s, c) && !pp_is_first(P->S, s, c);
}

// ---------------------------------------------------------------- the strategy

static void pipe_build(GPT *g, Ctx *ctx, const GPTConfig *cfg, uint64_t seed, const AdamWConfig *oc,
                       void *arg) {
    Pipe *P = arg;
    int s = P->pp->rank, K = P->S->p * P->v;
    for (int c = 0; c < P->v; c++) {
        int k = pp_vstage(P->S, s, c), l0, l1;
        pp_layers(cfg->n_layer, K, k, &l0, &l1);
        int t = P->tp ? P->tp->group->size : 1, r = P->tp ? P->tp->group->rank : 0;
        GPTPart part = {t, r, l0, l1, k == 0, k == K - 1};
        GPT *m = P->model[c] = c == 0 ? g : &P->extra[c];
        gpt_init_part(m, ctx, cfg, seed, &part);
        if (P->tp) tp_install(m, P->tp);
        gpt_alloc_grads(m);
        if (P->zero1) {  // the moments of this replica's shard only (stage 03's ZeRO-1)
            size_t lo, hi, d = (size_t)P->dp->size;
            shard_range(m->n_params, P->dp->size, P->dp->rank, &lo, &hi);
            adamw_init_padded(&P->opt[c], m, oc, lo, hi, (m->n_params + d - 1) / d);
        } else {
            adamw_init(&P->opt[c], m, oc, 0, m->n_params);
        }
        ddp_init(&P->ddp[c], P->comm, P->dp, P->algo);
        P->ddp[c].gpu = P->gpu_dp;  // NULL on the CPU
    }
}

static float pipe_micro_batches(GPT *g, const int *tokens, const int *targets, int B, int T, int m,
                                void *arg) {
    Pipe *P = arg;
    CHECK(m == P->S->m, "the schedule is for %d micro-batches, the step has %d (--grad-accum)",
          P->S->m, m);
    if (!P->model[0]->work_buffer) {  // the first step: the workspace, for this micro-batch size
        P->B = B;
        P->T = T;
        // The trainer set the precision, and its extensions the plugins and the
        // recompute, on the chunk it knows (g, chunk 0); the others take them from it.
        for (int c = 1; c < P->v; c++) {
            P->model[c]->plugins = g->plugins;
            gpt_set_recompute(P->model[c], g->recompute, g->recompute_every);
            gpt_set_precision(P->model[c], g->prec.recipe, g->prec.seed);
            gpt_set_acts_fp32(P->model[c], g->acts_fp32);
            gpt_set_flash_attention(P->model[c], g->flash_attention);
        }
        // One rank computes one chunk at a time: one workspace, one shared layer.
        gpt_alloc_workspace_shared(P->model, P->v, B, T);
    }
    for (int c = 1; c < P->v; c++) P->model[c]->prec.loss_scale = g->prec.loss_scale;
    CHECK(B == P->B && T == P->T, "micro-batches of %dx%d, the pipeline was set up for %dx%d", B,
          T, P->B, P->T);
    return pipe_run(P, tokens, targets);
}

void pipe_reduce_grads(Pipe *P) {
    pipe_sync_embedding(P);
    for (int c = 0; c < P->v; c++) tp_reduce_norm_grads(P->model[c]);  // SP only
    for (int c = 0; c < P->v; c++)
        if (P->dp->size > 1) ddp_sync_grads(&P->ddp[c], P->model[c]);
}

static double pipe_optimizer_step(GPT *g, void *arg) {
    (void)g;
    Pipe *P = arg;
    pipe_reduce_grads(P);
    double norm = pipe_grad_norm(P);
    pipe_update(P, norm);
    return norm;
}

void pipe_update(Pipe *P, double norm) {
    for (int c = 0; c < P->v; c++) {
        GPT *m = P->model[c];
        adamw_step(&P->opt[c], m, norm);  // with ZeRO-1: this replica's shard
        if (!P->zero1 || P->dp->size == 1) continue;
        if (m->ctx->device == DEV_CPU) {
            all_gather(P->comm, P->dp, m->params, m->n_params, DT_F32, P->algo);
        } else {  // the same shards (shard_range's split) moved between GPUs
            CHECK(P->gpu_dp, "ZeRO-1 on %s needs a GpuComm for the data-parallel group "
                  "(Pipe.gpu_dp)", device_name(m->ctx->device));
            gpu_all_gather(P->gpu_dp, m->params, m->n_params, DT_F32);
        }
    }
}

static void pipe_gather_params(GPT *g, float *out, void *arg) {
    (void)g;
    pipe_gather(arg, 0, out);
}

static void pipe_destroy(GPT *g, void *arg) {
    (void)g;
    Pipe *P = arg;
    for (int c = P->v - 1; c >= 0; c--) {
        while (P->pooled[c] > 0) gpt_acts_free(P->model[c], &P->pool[c][--P->pooled[c]]);
        free(P->pool[c]);
        adamw_free(&P->opt[c], P->model[c]);
        ddp_free(&P->ddp[c], P->model[c]);
        if (c > 0) gpt_free(P->model[c]);  // chunk 0 is the trainer's to free
    }
    gpu_clock_free(P->clock);
    P->clock = NULL;
}

// Elements [lo, hi) of a chunk's state as views: params (data: element lo), or the
// optimizer's moments. `rep` replicas hold them (the data-parallel ones), this is
// number r; the tied embedding [w0, w1) is held by twice as many, the first
// virtual stage's and the last's copy, which save half each (copy: the second half).
static void pipe_views(TrainState *st, GPT *m, const AdamW *opt, size_t w0, size_t w1, int copy,
                       int rep, int r) {
    size_t cut[4] = {0, w0, w1, m->n_params};
    for (int i = 0; i < 3; i++) {
        size_t lo = cut[i], hi = cut[i + 1];
        int reps = i == 1 ? 2 * rep : rep, at = i == 1 ? r + copy * rep : r;
        if (hi <= lo) continue;
        if (opt) train_state_opt_views(st, opt, m, lo, hi, reps, at);
        else train_state_add(st, ST_PARAMS, m, lo, hi, m->params + lo, reps, at);
    }
}

// For a checkpoint (stage 07): every chunk's weights and AdamW state, in the
// single-process tensors' coordinates (each chunk's slice table places its
// layers in the whole model); the replicas over dp share the saving, the
// tied embedding's two holders too. (What tensor parallelism replicates is
// saved by its rank 0 alone: checkpoint.c.)
static void pipe_state(GPT *g, TrainState *st, void *arg) {
    (void)g;
    Pipe *P = arg;
    int dp = P->dp->size, r = P->dp->rank, K = P->S->p * P->v;
    for (int c = 0; c < P->v; c++) {
        GPT *m = P->model[c];
        const ParamSlice *wte = &m->slices[0];
        size_t w0 = 0, w1 = 0;
        if (K > 1 && wte->numel) w0 = wte->offset, w1 = wte->offset + wte->numel;
        int copy = is_wte_copy(P, c, 0);
        pipe_views(st, m, NULL, w0, w1, copy, dp, r);
        // With ZeRO-1 each replica's moments are its own shard: no replicas.
        train_state_track_opt(st, &P->opt[c]);
        pipe_views(st, m, &P->opt[c], w0, w1, copy, P->zero1 ? 1 : dp, P->zero1 ? 0 : r);
    }
}

void pipe_init(Pipe *P, Comm *c, Group *pp, Group *dp, TensorParallel *tp, Algo algo,
               const PPSchedule *S, Timeline *tl) {
    memset(P, 0, sizeof *P);
    P->comm = c;
    P->pp = pp;
    P->dp = dp;
    P->tp = tp;
    P->kill_at = -1;
    P->algo = algo;
    P->S = S;
    P->v = S->v;
    P->m = S->m;
    P->tl = tl;
    CHECK(pp->size == S->p, "a schedule for %d stages on a pipeline group of %d", S->p, pp->size);
    P->strategy = (TrainStrategy){.build = pipe_build, .run_micro_batches = pipe_micro_batches,
                                  .step = pipe_optimizer_step,
                                  .gather_params = pipe_gather_params, .state = pipe_state,
                                  .destroy = pipe_destroy, .arg = P};
}

// ---------------------------------------------------------------- the tied embedding

// Mixed precision: each stage left its part of wte's gradient unrounded (model_backward.c's
// fire_hook); the sum is rounded once, as one process rounds its own.
static void round_wte_grad(GPT *g) {
    const ParamSlice *wte = &g->slices[0];
    if (g->prec.dtype != DT_F32 && wte->numel)
        g->ctx->ops->round_to(g->ctx, g->grads + wte->offset, wte->numel, g->prec.dtype);
}

void pipe_sync_embedding(Pipe *P) {
    const PPSchedule *S = P->S;
    int s = P->pp->rank, K = S->p * S->v, first_rank, first_chunk, last_rank, last_chunk;
    if (K == 1) return;  // one model holds wte once
    pp_where(S, 0, &first_rank, &first_chunk);
    pp_where(S, K - 1, &last_rank, &last_chunk);
    if (s != first_rank && s != last_rank) return;
    GPT *g = P->model[s == first_rank ? first_chunk : last_chunk];
    Ctx *ctx = g->ctx;
    const ParamSlice *wte = &g->slices[0];
    size_t bytes = wte->numel * sizeof(float);
    int other = s == first_rank ? last_rank : first_rank;
    // Each side sends its own gradient and adds the other's: a + b on one side,
    // b + a on the other, the same bits (float addition commutes).
    if (ctx->device != DEV_CPU) {  // device to device; y += 1 * x is y + x, rounded once
        CHECK(P->gpu, "the tied embedding on %s needs a GpuComm for the pipeline group "
              "(Pipe.gpu)", device_name(ctx->device));
        float *theirs = mem_alloc(ctx, MEM_COMM, bytes);
        GpuRequest *r[2] = {gpu_isend(P->gpu, other, g->grads + wte->offset, bytes),
                            gpu_irecv(P->gpu, other, theirs, bytes)};
        gpu_wait(P->gpu, r, 2);
        ctx->ops->accumulate(ctx, g->grads + wte->offset, theirs, 1.0f, wte->numel);
        mem_free(ctx, MEM_COMM, theirs, bytes);
        round_wte_grad(g);
        return;
    }
    float *mine = malloc(bytes), *sum = malloc(bytes);
    CHECK(mine && sum, "out of host memory for the embedding's gradient");
    ctx->ops->to_host(ctx, mine, g->grads + wte->offset, bytes);
    memcpy(sum, mine, bytes);
    CommRequest *r[2] = {comm_isend(P->comm, P->pp, other, mine, bytes),
                         comm_irecv(P->comm, P->pp, other, sum, bytes, RECV_SUM, DT_F32)};
    comm_wait(P->comm, r, 2);
    ctx->ops->to_device(ctx, g->grads + wte->offset, sum, bytes);
    free(mine);
    free(sum);
    round_wte_grad(g);
}

double pipe_grad_norm(Pipe *P) {
    double sq = 0;
    for (int c = 0; c < P->v; c++) {
        GPT *g = P->model[c];
        for (int i = 0; i < g->n_slices; i++) {
            const ParamSlice *sl = &g->slices[i];
            // Once each: not the wte copy, and a tensor replicated over the
            // tensor-parallel ranks on their member 0 only.
            if (!sl->numel || is_wte_copy(P, c, i) || (sl->split == SPLIT_NONE && g->tp.rank))
                continue;
            sq += g->ctx->ops->sum_squares(g->ctx, g->grads + sl->offset, sl->numel);
        }
    }
    if (P->tp && P->tp->group->size > 1) allreduce(P->comm, P->tp->group, &sq, 1, DT_F64, ALGO_RING);
    if (P->pp->size > 1) allreduce(P->comm, P->pp, &sq, 1, DT_F64, ALGO_RING);
    return sqrt(sq);
}

void pipe_gather(Pipe *P, int grads, float *out) {
    GPT *g0 = P->model[0];
    size_t n = gpt_num_params(&g0->cfg);
    memset(out, 0, n * sizeof(float));
    // Every tensor is held by one chunk of one rank (the wte copy aside): each
    // writes its own, and a sum over the pipeline (adding zeros: exact) assembles them.
    for (int c = 0; c < P->v; c++) {
        GPT *g = P->model[c];
        const float *src = grads ? g->grads : g->params;
        if (P->tp) {
            tp_gather(g, grads, out);  // the tensors this chunk holds, whole
        } else {
            for (int i = 0; i < g->n_slices; i++) {
                const ParamSlice *sl = &g->slices[i];
                g->ctx->ops->to_host(g->ctx, out + sl->goffset, src + sl->offset,
                                     sl->numel * sizeof(float));
            }
        }
        if (is_wte_copy(P, c, 0))
            memset(out, 0, (size_t)g->slices[0].grows * g->slices[0].gcols * sizeof(float));
    }
    if (P->pp->size > 1) allreduce(P->comm, P->pp, out, n, DT_F32, ALGO_RING);
}
