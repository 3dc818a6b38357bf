// trainer.c — the training loop every driver shares (trainer.h). Its flags are
// train_args.c's, a job's start is train_job.c's, and what later stages add comes in
// through the extensions (train_ext.h), at the points named below.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ops.h"
#include "perf.h"
#include "safetensors.h"
#include "timer.h"
#include "train_ext.h"

// Every linked extension's hook `point`, where it has one, in their order.
#define EXTENSIONS(L, point, ...)                                                          \
    for (int x_ = 0; x_ < (L)->a->n_ext; x_++)                                             \
        if ((L)->a->ext[x_]->point) (L)->a->ext[x_]->point((L), (L)->ext_state[x_], ##__VA_ARGS__)

// What the loop keeps besides the TrainLoop the extensions see.
typedef struct {
    int *inputs, *targets;  // a micro-batch's (a pipeline's: all m of them)
    double *step_ms;        // every step's time
    double peak;            // FLOP/s the MFU is quoted against (0: unknown on this rank)
    char peak_how[256];
    float first_loss;
    LinkBytes step_start, last_step;  // sent inside the node and across: the last step's
} Run;

// ---------------------------------------------------------------- set-up

// Who this rank is, the job's sum, the data, the extensions' state.
static void loop_init(TrainLoop *L, TrainJob *j, const TrainHooks *h) {
    static const TrainHooks alone = {.label = "1 process"};
    memset(L, 0, sizeof *L);
    L->a = &j->a;
    L->h = h ? h : &alone;
    L->job = j;
    L->ctx = &j->ctx;
    L->cfg = j->cfg;
    L->rank = train_job_rank(j);
    L->world = train_job_world(j);
    L->data_rank = L->h->data_world ? L->h->data_rank : L->rank;
    L->data_world = L->h->data_world ? L->h->data_world : L->world;
    L->B = L->a->batch, L->T = L->cfg.seq_len, L->accum = L->a->accum, L->steps = L->a->steps;
    const TrainStrategy *S = L->h->strategy;
    L->pipeline = S && S->run_micro_batches;
    if (S && S->sum) {  // a decision of the whole job: through the strategy's thread
        L->sum = S->sum;
        L->sum_arg = S->arg;
    } else if (L->world > 1) {
        L->p2p = (JobSumP2P){j->comm, comm_world(j->comm)};
        L->sum = job_sum_p2p;
        L->sum_arg = &L->p2p;
    }
    for (int i = 0; i < L->a->n_ext; i++) {
        L->ext_state[i] = calloc(1, L->a->ext[i]->state_size ? L->a->ext[i]->state_size : 1);
        CHECK(L->ext_state[i], "out of host memory");
    }
    EXTENSIONS(L, start);  // the world is known, nothing is built: faults are checked here
    if (strcmp(L->a->data, "synthetic") == 0)
        data_open_synthetic(&L->dl, L->cfg.vocab, (size_t)1 << 22, L->a->seed, L->B, L->T,
                            L->data_rank, L->data_world);
    else
        data_open_text(&L->dl, L->a->data, L->B, L->T, L->data_rank, L->data_world);
}

// Build in the order a framework does: weights, gradients, optimizer state, then
// activations. A model too large for --device-mem fails here, at step zero, before
// any forward pass.
static void build_model(TrainLoop *L, Run *R) {
    const TrainArgs *a = L->a;
    const TrainStrategy *S = L->h->strategy;
    GPTRecipe recipe = PREC_FP32;
    gpt_recipe_parse(a->precision, &recipe);
    AdamWConfig oc = {(float)a->lr, (float)a->beta1, (float)a->beta2, 1e-8f,
                      (float)a->weight_decay, (float)a->grad_clip, gpt_recipe_master(recipe)};
    if (S) S->build(&L->g, L->ctx, &L->cfg, a->seed, &oc, S->arg);
    else gpt_init(&L->g, L->ctx, &L->cfg, a->seed);
    snprintf(L->about, sizeof L->about, "precision %s", a->precision);
    EXTENSIONS(L, model);  // its plugins and recompute (stage 06)
    gpt_set_precision(&L->g, recipe, a->seed);
    gpt_set_acts_fp32(&L->g, a->acts_fp32);
    gpt_set_flash_attention(&L->g, strcmp(a->attention, "flash") == 0);
    if (L->g.flash_attention) train_note(L->about, sizeof L->about, " | flash attention");
    if (a->acts_fp32) train_note(L->about, sizeof L->about, " | activations in fp32 slots (--acts-fp32)");
    // Measured by rank 0 while the others wait in sync_params (ranks measuring at once
    // would measure their contention).
    if (a->peak_tflops > 0) snprintf(R->peak_how, sizeof R->peak_how, "(--peak-tflops)");
    R->peak = a->peak_tflops > 0 ? a->peak_tflops * 1e12
              : mfu_peak(L->ctx->device, L->job->comm, L->rank, L->world, a->threads,
                         R->peak_how, sizeof R->peak_how);
    if (L->h->sync_params) L->h->sync_params(&L->g, L->h->arg);
    if (!S) {
        gpt_alloc_grads(&L->g);
        adamw_init(&L->opt, &L->g, &oc, 0, L->g.n_params);
    }
    if (!L->pipeline) gpt_alloc_acts(&L->g, L->B, L->T);
    size_t ints = (size_t)L->B * L->T * (L->pipeline ? L->accum : 1);  // a pipeline takes all m
    R->inputs = malloc(sizeof(int) * ints);
    R->targets = malloc(sizeof(int) * ints);
    R->step_ms = malloc(sizeof(double) * L->steps);
    CHECK(R->inputs && R->targets && R->step_ms, "out of host memory");
    L->start = 0;
    EXTENSIONS(L, begin);  // everything exists: a resume loads its state here
}

// What the run is, on rank 0: the model, the precision, the data, the MFU formula.
static void print_banner(const TrainLoop *L, const Run *R) {
    if (L->rank != 0) return;
    const GPTConfig *c = &L->cfg;
    char pbytes[32];
    format_bytes(gpt_num_params(c) * sizeof(float), pbytes, sizeof pbytes);
    log_info("model: L=%d C=%d NH=%d T=%d V=%d | %zu params (%s fp32) | device %s, %d thread%s "
             "| %s", c->n_layer, c->n_embd, c->n_head, c->seq_len, c->vocab, gpt_num_params(c),
             pbytes, device_name(L->ctx->device), L->a->threads, L->a->threads == 1 ? "" : "s",
             L->h->label ? L->h->label : "1 process");
    log_info("%s", L->about);
    log_info("data: %s, %zu tokens | batch %d x %d x %d accum x %d rank%s | uniform-guess loss "
             "ln(V) = %.3f%s", L->dl.source, L->dl.n, L->B, L->T, L->accum, L->data_world,
             L->data_world == 1 ? "" : "s", log((double)c->vocab), L->data_world > 1 ? " | the "
             "loss printed is rank 0's, the mean over its share of each step's batch" : "");
    log_info("MFU = tokens/s x (6N + 12*L*H*Q*T) / peak, with 6N + 12LHQT = %.2f MFLOP/token "
             "and peak = %.1f GFLOP/s %s", gpt_flops_per_token(c, L->T) * 1e-6, R->peak * 1e-9,
             R->peak_how);
}

// ---------------------------------------------------------------- one step

static void step_begin(TrainLoop *L, Run *R) {
    L->loss_scale = L->g.prec.loss_scale = 1.0f;
    L->skip_asked = 0;
    L->skip_cause = NULL;
    L->note[0] = 0;
    EXTENSIONS(L, step_begin);  // faults strike, a finished async save is published
    L->ctx->ops->synchronize(L->ctx);
    L->t0 = now_seconds();
    if (L->job->comm) R->step_start = comm_link_bytes(L->job->comm);
    if (!L->h->strategy) gpt_zero_grad(&L->g);
}

// The step's micro-batches forward and backward, or the pipeline's schedule.
static void forward_backward(TrainLoop *L, Run *R) {
    const TrainStrategy *S = L->h->strategy;
    size_t BT = (size_t)L->B * L->T;
    L->loss_sum = 0;
    if (L->pipeline) {
        for (int micro = 0; micro < L->accum; micro++)
            data_next(&L->dl, R->inputs + micro * BT, R->targets + micro * BT);
        L->loss_sum = L->accum * (double)S->run_micro_batches(&L->g, R->inputs, R->targets, L->B,
                                                               L->T, L->accum, S->arg);
    }
    for (int micro = 0; micro < L->accum && !L->pipeline; micro++) {
        if (S) S->micro_begin(&L->g, micro, L->accum, S->arg);
        data_next(&L->dl, R->inputs, R->targets);
        EXTENSIONS(L, micro_batch, R->targets, BT);
        float loss = gpt_forward(&L->g, R->inputs, R->targets, L->B, L->T);
        L->loss_sum += loss;
        EXTENSIONS(L, after_loss, loss);
        gpt_backward(&L->g, 1.0f / L->accum);
    }
    EXTENSIONS(L, after_backward);
}

// After a skipped update, when an extension may skip on purpose: did a rank ask?
// The ranks agree (one small sum), so that every one of them counts the same.
static void agree_on_skip(TrainLoop *L) {
    if (!L->found_inf || !L->skip_reason) return;
    float asked = L->skip_asked ? 1.0f : 0.0f;
    if (L->sum && L->world > 1) L->sum(&asked, 1, L->sum_arg);
    if (asked > 0) L->skip_cause = L->skip_reason;
}

// Synchronise the gradients, clip, update (a sharded strategy does all three).
static void update(TrainLoop *L) {
    const TrainStrategy *S = L->h->strategy;
    if (S) {
        L->norm = S->step(&L->g, S->arg);
    } else {
        if (L->h->sync_grads) L->h->sync_grads(&L->g, L->h->arg);
        L->norm = grad_global_norm(&L->g);
        adamw_step(&L->opt, &L->g, L->norm);
    }
    L->g.prec.loss_scale = L->loss_scale;
    L->found_inf = !isfinite(L->norm);  // then every rank's optimizer skipped the step
    agree_on_skip(L);
    L->overflows += L->found_inf && !L->skip_cause;
    EXTENSIONS(L, after_update);
    L->norm /= L->loss_scale;  // the gradients' own norm, for the log
}

static void step_end(TrainLoop *L, Run *R) {
    L->ctx->ops->synchronize(L->ctx);
    double dt = now_seconds() - L->t0;
    L->loss = (float)(L->loss_sum / L->accum);  // this rank's loss (printed by rank 0)
    CHECK(isfinite(L->loss), "step %d: the loss is %f; training diverged", L->step + 1, L->loss);
    if (L->step == L->start) {
        R->first_loss = L->loss;
        if (L->rank == 0) log_event("first_step");  // the first step of this run is done
    }
    R->step_ms[L->step - L->start] = dt * 1e3;
    int last = L->step + 1 == L->steps;
    if (last && L->job->comm) R->last_step = link_bytes_since(comm_link_bytes(L->job->comm), R->step_start);
    if (L->rank == 0 && ((L->step + 1) % L->a->log_every == 0 || L->step == 0 || last)) {
        double tok_s = (double)L->B * L->T * L->accum * L->data_world / dt;
        char mem[256];
        ledger_format_peaks(&L->ctx->ledger, mem, sizeof mem);
        if (L->found_inf)
            train_note(L->note, sizeof L->note, " | %s: skipped",
                       L->skip_cause ? L->skip_cause : "overflow");
        log_info("step %4d/%d | loss %.4f | norm %.3f | %8.1f ms | %9.0f tok/s | MFU %5.1f%% | "
                 "peak %s%s", L->step + 1, L->steps, L->loss, L->norm, dt * 1e3, tok_s,
                 100.0 * tok_s * gpt_flops_per_token(&L->cfg, L->T) / R->peak, mem, L->note);
    }
    EXTENSIONS(L, step_end);  // checkpoints (stage 07)
}

// ---------------------------------------------------------------- the end

// Rank 0 writes the whole model's weights (a sharded strategy gathers them first:
// every rank takes part in that).
static void save_params(const char *path, TrainLoop *L) {
    GPT *g = &L->g;
    const TrainStrategy *S = L->h->strategy;
    size_t n = gpt_num_params(&g->cfg), bytes = n * sizeof(float);  // the whole model
    float *host = malloc(bytes);
    CHECK(host, "out of host memory");
    if (S) S->gather_params(g, host, S->arg);
    else if (L->rank == 0) g->ctx->ops->to_host(g->ctx, host, g->params, bytes);
    if (L->rank == 0) {
        StTensor t = {.name = "params", .dtype = DT_F32, .ndim = 1, .data = host, .nbytes = bytes};
        t.shape[0] = (int64_t)n;
        char err[256];
        CHECK(st_save(path, &t, 1, NULL, 0, err, sizeof err) == 0, "%s", err);
    }
    free(host);
}

// Medians over the steps after the warm-up.
static TrainResult summarize(const TrainLoop *L, Run *R) {
    int ran = L->steps - L->start, w = L->a->warmup < ran ? L->a->warmup : 0;
    double fpt = gpt_flops_per_token(&L->cfg, L->T);
    TrainResult res = {.first_loss = R->first_loss, .final_loss = L->loss};
    res.ms_per_step = ran > 0 ? median(R->step_ms + w, ran - w) : 0;
    res.tokens_per_s = ran > 0 ? (double)L->B * L->T * L->accum * L->data_world /
                                 (res.ms_per_step * 1e-3) : 0;
    res.gflops = res.tokens_per_s * fpt * 1e-9;
    res.mfu = R->peak > 0 ? res.tokens_per_s * fpt / R->peak : 0;
    return res;
}

static void print_summary(TrainLoop *L, const TrainResult *res) {
    if (L->rank != 0) return;
    if (L->start == L->steps) {  // resumed at the last step: nothing ran, nothing measured
        log_info("done: the checkpoint was at step %d of --steps %d: nothing left to train (no "
                 "loss or timing to report; the weights are the checkpoint's)", L->start, L->steps);
        ledger_print(&L->ctx->ledger, stdout);
        fflush(stdout);
        return;
    }
    log_info("done: loss %.4f -> %.4f (uniform guess %.4f) | median %.1f ms/step, %.0f tok/s, "
             "%.2f GFLOP/s, MFU %.1f%%", res->first_loss, res->final_loss,
             log((double)L->cfg.vocab), res->ms_per_step, res->tokens_per_s, res->gflops,
             100.0 * res->mfu);
    if (L->g.prec.recipe != PREC_MIXED_FP16 && L->overflows)  // (fp16's loss scaler says it)
        log_info("%ld step%s skipped: the gradients were not finite", L->overflows,
                 L->overflows == 1 ? "" : "s");
    EXTENSIONS(L, summary);
    ledger_print(&L->ctx->ledger, stdout);
    printf("RESULT train tokens_per_s=%.1f ms_per_step=%.3f gflops=%.3f mfu=%.4f "
           "first_loss=%.5f final_loss=%.5f ranks=%d\n", res->tokens_per_s, res->ms_per_step,
           res->gflops, res->mfu, res->first_loss, res->final_loss, L->world);
    fflush(stdout);
}

static void loop_free(TrainLoop *L, Run *R) {
    free(R->inputs);
    free(R->targets);
    free(R->step_ms);
    EXTENSIONS(L, finish);
    train_state_free(&L->st);
    const TrainStrategy *S = L->h->strategy;
    if (S) S->destroy(&L->g, S->arg);
    else adamw_free(&L->opt, &L->g);
    gpt_free(&L->g);
    data_close(&L->dl);
    for (int i = 0; i < L->a->n_ext; i++) free(L->ext_state[i]);
}

// ---------------------------------------------------------------- the loop

TrainResult train_run(TrainJob *j, const TrainHooks *h) {
    TrainLoop L;
    Run R = {0};
    loop_init(&L, j, h);
    build_model(&L, &R);
    print_banner(&L, &R);
    for (L.step = L.start; L.step < L.steps; L.step++) {
        step_begin(&L, &R);
        forward_backward(&L, &R);
        update(&L);
        step_end(&L, &R);
    }
    EXTENSIONS(&L, end);  // what is in flight finishes (an async checkpoint)
    TrainResult res = summarize(&L, &R);
    print_summary(&L, &res);
    Comm *c = L.job->comm;
    if (c && comm_node_size(c) < comm_size(c))  // on several nodes: what each link class carried
        printf("LINKS rank=%d node=%d inside=%llu across=%llu (bytes sent in the last step)\n",
               L.rank, comm_node(c, comm_rank(c)), (unsigned long long)R.last_step.inside,
               (unsigned long long)R.last_step.across);
    if (L.a->save_params) save_params(L.a->save_params, &L);
    // An extension found the run failed after all (the last checkpoint was not saved):
    // said after the summary and the weights, so that nothing else is lost.
    CHECK(!L.failure[0], "%s", L.failure);
    loop_free(&L, &R);
    return res;
}
