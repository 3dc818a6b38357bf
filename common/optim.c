// optim.c — AdamW with decoupled weight decay and global-norm clipping.
#include <math.h>

#include "check.h"
#include "ops.h"
#include "optim.h"

AdamWConfig adamw_default_config(void) {
    AdamWConfig c = {.lr = 3e-4f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f,
                     .weight_decay = 0.1f, .grad_clip = 1.0f};
    return c;
}

void adamw_init(AdamW *opt, GPT *g, const AdamWConfig *cfg, size_t begin, size_t end) {
    adamw_init_padded(opt, g, cfg, begin, end, end >= begin ? end - begin : 0);
}

void adamw_init_padded(AdamW *opt, GPT *g, const AdamWConfig *cfg, size_t begin, size_t end,
                       size_t capacity) {
    CHECK(begin <= end && end <= g->n_params, "optimizer range [%zu, %zu) outside the %zu params",
          begin, end, g->n_params);
    CHECK(capacity >= end - begin, "optimizer capacity %zu below its %zu elements", capacity,
          end - begin);
    opt->cfg = *cfg;
    opt->begin = begin;
    opt->end = end;
    opt->capacity = capacity;
    opt->t = 0;
    opt->skipped = 0;
    opt->master = NULL;
    opt->master_filled = 0;
    size_t bytes = capacity * sizeof(float);
    // The moments are where a 70B model's memory goes (8 of its 16 bytes/param):
    // with --device-mem set, this is the allocation that fails first.
    opt->m = mem_alloc(g->ctx, MEM_OPTIMIZER, bytes);
    opt->v = mem_alloc(g->ctx, MEM_OPTIMIZER, bytes);
    if (cfg->master) opt->master = mem_alloc(g->ctx, MEM_OPTIMIZER, bytes);
}

void adamw_free(AdamW *opt, GPT *g) {
    size_t bytes = opt->capacity * sizeof(float);
    mem_free(g->ctx, MEM_OPTIMIZER, opt->m, bytes);
    mem_free(g->ctx, MEM_OPTIMIZER, opt->v, bytes);
    if (opt->master) mem_free(g->ctx, MEM_OPTIMIZER, opt->master, bytes);
    opt->m = opt->v = opt->master = NULL;
}

double grad_global_norm(GPT *g) {
    return sqrt(g->ctx->ops->sum_squares(g->ctx, g->grads, g->n_params));
}

int adamw_step(AdamW *opt, GPT *g, double grad_norm) {
    return adamw_step_at(opt, g, g->params + opt->begin, g->grads + opt->begin, grad_norm);
}

uint64_t adamw_sround_seed(uint64_t seed, uint64_t t) {
    uint64_t z = seed ^ (0xd1b54a32d192ed03ull * (t + 1));
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Pure bf16 with stochastic rounding: the weights of the owned range rounded with a
// fresh stream per step, each element's draw fixed by its place in the single-process
// model (the rule's bits(seed, index); g->plugins, stage 06): a tensor-parallel piece, a pipeline stage or a
// shard draws what one process draws for the same weight. Run by run of each slice
// that is contiguous in the whole tensor (gpt_slice_run).
static void round_stochastic(const AdamW *opt, const GPT *g, float *p) {
    Ctx *ctx = g->ctx;
    CHECK(g->plugins, "bf16-sr without its rounding rule (g->plugins)");
    uint64_t seed = adamw_sround_seed(g->prec.seed, (uint64_t)opt->t);
    for (int i = 0; i < g->n_slices; i++) {
        const ParamSlice *s = &g->slices[i];
        size_t lo = s->offset > opt->begin ? s->offset : opt->begin;
        size_t hi = s->offset + s->numel < opt->end ? s->offset + s->numel : opt->end;
        for (size_t at = lo; at < hi;) {
            size_t global, run = gpt_slice_run(s, g->tp.rank, at - s->offset, &global);
            if (run > hi - at) run = hi - at;
            ctx->ops->round_stochastic_bf16(ctx, p + (at - opt->begin), run, seed,
                                            s->goffset + global, &g->plugins->sround);
            at += run;
        }
    }
}

int adamw_step_at(AdamW *opt, const GPT *g, float *p, const float *grad, double grad_norm) {
    const AdamWConfig *c = &opt->cfg;
    const GPTPrecision *pr = &g->prec;
    Ctx *ctx = g->ctx;
    const Ops *o = ctx->ops;
    if (!isfinite(grad_norm)) {  // an overflow: skip the step (dynamic loss scaling backs off)
        opt->skipped++;
        return 0;
    }
    size_t n = opt->end - opt->begin;
    CHECK(!pr->master || opt->master || n == 0, "the %s recipe keeps fp32 master weights: "
          "build the optimizer with AdamWConfig.master set", gpt_recipe_name(pr->recipe));
    // The first step: the masters from the model's weights (as Megatron-LM makes them
    // from its bf16 model).
    if (opt->master && !opt->master_filled) {
        if (n > 0) o->copy(ctx, opt->master, p, n * sizeof(float));
        opt->master_filled = 1;
    }
    opt->t++;
    // The gradients carry the loss scale: unscale the norm, then the gradients with it.
    float ls = pr->loss_scale > 0 ? pr->loss_scale : 1.0f;
    grad_norm /= ls;
    // torch.nn.utils.clip_grad_norm_: multiply by min(1, clip / (norm + 1e-6)).
    float grad_scale = 1.0f / ls;
    if (c->grad_clip > 0) {
        double coef = c->grad_clip / (grad_norm + 1e-6);
        if (coef < 1.0) grad_scale = (float)(coef / ls);
    }
    float *w = opt->master ? opt->master : p;  // what AdamW updates: the masters, or the weights
    // Walk the slices that intersect the owned range; decay only the matrices.
    for (int i = 0; i < g->n_slices; i++) {
        const ParamSlice *s = &g->slices[i];
        size_t lo = s->offset > opt->begin ? s->offset : opt->begin;
        size_t hi = s->offset + s->numel < opt->end ? s->offset + s->numel : opt->end;
        if (lo >= hi) continue;
        size_t at = lo - opt->begin;
        o->adamw_update(ctx, w + at, grad + at, opt->m + at, opt->v + at, hi - lo, c->lr, c->beta1,
                        c->beta2, c->eps, s->decay ? c->weight_decay : 0.0f, grad_scale, opt->t);
    }
    if (pr->dtype == DT_F32 || n == 0) return 1;
    if (opt->master) {  // the model computes with the masters rounded to its dtype
        o->copy(ctx, p, opt->master, n * sizeof(float));
        o->round_to(ctx, p, n, pr->dtype);
    } else {            // pure low precision: the weights and the moments are the state
        if (pr->stochastic) round_stochastic(opt, g, p);
        else o->round_to(ctx, p, n, pr->dtype);
        o->round_to(ctx, opt->m, n, pr->dtype);
        o->round_to(ctx, opt->v, n, pr->dtype);
    }
    return 1;
}
