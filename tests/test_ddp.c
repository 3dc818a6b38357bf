// test_ddp.c — DDP's two collectives (02_ddp_allreduce/ddp.c, the exercise), each
// checked directly, with the first wrong element named.
//
//   test_ddp --np 3
//
// ddp.broadcast_params.npN  Every rank builds the model from its own seed (1 + rank),
//     so the replicas start different. After ddp_broadcast_params every rank must
//     hold rank 0's weights, bit for bit: a broadcast copies, it does not add.
// ddp.mean_gradient.npN     Every rank computes the gradient of its own B rows of a
//     global batch of N*B rows. After ddp_sync_grads every rank must hold the
//     gradient ONE process computes on all N*B rows: the mean of the ranks'
//     gradients (each rank's loss is already a mean over its own rows), not their
//     sum. Tolerance 1e-5, relative (||got - want|| / ||want||): both sides add the
//     same per-row terms in fp32 but in a different order (N partial sums of B rows,
//     then the all-reduce, against one sum over N*B rows), which moves elements by a
//     few ulps (measured 2e-7 to 5e-7 at N = 2-4). A forgotten 1/N is an error of N - 1 >= 1.
//
// ...npN.strided  The same over two subgroups (the even and the odd world ranks, each
//     in descending order), as DDP runs over the data-parallel group of a mesh:
//     "rank 0" and N are the group's, not the world's.
//
// AdamW hides a scale error (its update is nearly invariant to the gradient's
// scale), which is why the gradient itself is compared here, not only the weights
// after training (tests/stage02.sh does that too, through build/ddp_train).
// The all-reduce and broadcast used are the naive and tree ones of collectives.c:
// these checks grade ddp.c alone; the ring has checks of its own.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "data.h"
#include "ddp.h"
#include "flags.h"
#include "gpu_comm_host.h"
#include "strided.h"

#define SEED 1

// One rank's verdict, sent to rank 0 as bytes.
typedef struct {
    double err;          // relative error against the reference
    double scale;        // least-squares factor s in got ~ s * want
    int64_t index;       // the element with the largest |got - want|
    float got, want;
    int32_t whose;       // broadcast: the group member whose initial weights got equals (-1: none)
    int32_t unchanged;   // got equals what this rank held before the call
    int32_t group;       // the size of the group DDP ran over (the world's, or --strided's)
    int32_t member;      // this rank's place in that group
} Verdict;

static float *host_params(Ctx *ctx, const GPTConfig *cfg, uint64_t seed) {
    GPT g;
    gpt_init(&g, ctx, cfg, seed);
    float *p = xmalloc(g.n_params * sizeof(float));
    memcpy(p, g.params, g.n_params * sizeof(float));
    gpt_free(&g);
    return p;
}

static const char *slice_of(const GPT *g, size_t i) {
    const ParamSlice *s = gpt_slice_at(g, i);
    return s ? s->name : "?";
}

// Compares got with want: relative error, least-squares scale, worst element.
static void compare(const float *got, const float *want, size_t n, Verdict *v) {
    double num = 0, den = 0, dot = 0, worst = -1;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - want[i];
        num += d * d;
        den += (double)want[i] * want[i];
        dot += (double)got[i] * want[i];
        if (!isnan(worst) && !(fabs(d) <= worst)) { worst = fabs(d); v->index = (int64_t)i; }
    }
    v->err = den > 0 ? sqrt(num / den) : (num > 0 ? INFINITY : 0);
    if (!isfinite(num)) v->err = INFINITY;
    v->scale = den > 0 ? dot / den : 0;
    v->got = got[v->index];
    v->want = want[v->index];
}

// Which of DDP's three paths a check takes: the host collectives on the CPU's own
// buffers; through the host copy a GPU run without a GpuComm takes (--staged); through
// a GpuComm, as a GPU run with NCCL or CUDA IPC (--gpu-comm-on-host: the stand-in of
// tests/gpu_comm_host.h, its collectives on the host).
typedef enum { PATH_HOST, PATH_STAGED, PATH_GPU_COMM } Path;

static void ddp_take(DDP *d, Comm *c, Group *grp, Path path) {
    ddp_init(d, c, grp, ALGO_NAIVE);
    d->gpu = path == PATH_GPU_COMM ? gpu_comm_on_host(c, grp) : NULL;
    d->gpu_on_host = path == PATH_GPU_COMM;
    d->stage_on_host = path == PATH_STAGED;
}
static void ddp_drop(DDP *d, GPT *g) {
    gpu_comm_on_host_free(d->gpu);  // ddp_free leaves the GpuComm to its owner
    ddp_free(d, g);
}

static int same(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) == 0; }

static Verdict check_broadcast(Comm *c, Group *grp, Ctx *ctx, const GPTConfig *cfg, Path path) {
    int r = grp->rank, p = grp->size;
    GPT g;
    gpt_init(&g, ctx, cfg, SEED + r);  // replicas start different
    DDP d;
    ddp_take(&d, c, grp, path);
    float *mine = host_params(ctx, cfg, SEED + r), *want = host_params(ctx, cfg, SEED);
    ddp_broadcast_params(&d, &g);
    Verdict v = {.whose = -1, .group = p, .member = r};
    compare(g.params, want, g.n_params, &v);
    if (!same(g.params, want, g.n_params)) {
        v.err = v.err > 0 ? v.err : 1e-30;  // bitwise: any difference fails
        v.unchanged = same(g.params, mine, g.n_params);
        for (int q = 0; q < p && v.whose < 0; q++) {
            float *theirs = host_params(ctx, cfg, SEED + q);
            if (same(g.params, theirs, g.n_params)) v.whose = q;
            free(theirs);
        }
    } else {
        v.err = 0;
    }
    free(mine);
    free(want);
    ddp_drop(&d, &g);
    gpt_free(&g);
    return v;
}

static void forward_backward(GPT *g, int rank, int world, int B, int T) {
    DataLoader dl;
    data_open_synthetic(&dl, g->cfg.vocab, (size_t)1 << 16, SEED, B, T, rank, world);
    int *in = xmalloc(sizeof(int) * B * T), *tg = xmalloc(sizeof(int) * B * T);
    data_next(&dl, in, tg);
    gpt_zero_grad(g);
    gpt_forward(g, in, tg, B, T);
    gpt_backward(g, 1.0f);
    free(in);
    free(tg);
    data_close(&dl);
}

static Verdict check_mean_gradient(Comm *c, Group *grp, Ctx *ctx, const GPTConfig *cfg, int B,
                                   Path path) {
    int r = grp->rank, p = grp->size, T = cfg->seq_len;
    GPT g, one;
    gpt_init(&g, ctx, cfg, SEED);
    gpt_alloc_grads(&g);
    gpt_alloc_acts(&g, B, T);
    forward_backward(&g, r, p, B, T);  // this rank's B rows
    size_t n = g.n_params;
    float *local = xmalloc(n * sizeof(float));
    memcpy(local, g.grads, n * sizeof(float));
    DDP d;
    ddp_take(&d, c, grp, path);
    ddp_sync_grads(&d, &g);

    gpt_init(&one, ctx, cfg, SEED);  // the single process with all N*B rows
    gpt_alloc_grads(&one);
    gpt_alloc_acts(&one, p * B, T);
    forward_backward(&one, 0, 1, p * B, T);
    Verdict v = {.whose = -1, .group = p, .member = r};
    compare(g.grads, one.grads, n, &v);
    v.unchanged = p > 1 && same(g.grads, local, n);
    free(local);
    ddp_drop(&d, &g);
    gpt_free(&one);
    gpt_free(&g);
    return v;
}

// Rank 0 prints the line for one check from every rank's verdict.
static void report(const char *name, const GPT *shape, int p, const Verdict *all, double tol,
                   const char *what, Path path) {
    int worst = 0, bad = 0;
    for (int q = 0; q < p; q++) {
        if (!(all[q].err <= tol)) bad++;
        if (!(all[q].err <= all[worst].err)) worst = q;
    }
    const Verdict *v = &all[worst];
    printf("%s %s  %s: max rel_err %.3e (tol %.0e)", bad ? "FAIL" : "PASS", name, what, v->err,
           tol);
    if (bad) {
        printf(" on %d of %d ranks. Worst: world rank %d (member %d of DDP's group of %d), "
               "element %lld (%s): got %.6g, want %.6g; overall got = %.4g x want", bad, p, worst,
               v->member, v->group, (long long)v->index, slice_of(shape, (size_t)v->index),
               v->got, v->want, v->scale);
        if (v->whose >= 0 && v->whose != v->member)
            printf(" -- these are member %d's initial weights: broadcast over d->group, DDP's "
                   "group, from its member 0", v->whose);
        else if (v->unchanged && path == PATH_STAGED)
            printf(" -- unchanged by the call: through the host copy (as on a GPU), did the copy "
                   "go to the host first (ddp_host_view(..., 1)) and the result back "
                   "(ddp_back_to_device)?");
        else if (v->unchanged && path == PATH_GPU_COMM)
            printf(" -- unchanged by the call: with a GpuComm (d->gpu, as on a GPU with NCCL), "
                   "did its collective run (comm_cuda.h's gpu_allreduce / gpu_broadcast)?");
        else if (v->unchanged) printf(" -- unchanged by the call: did it communicate at all?");
        else if (v->group > 1 && fabs(v->scale - v->group) < 0.05 * v->group)
            printf(" -- that is the sum over the %d ranks, not the mean: scale by 1/N%s", v->group,
                   v->group < p ? " (or the all-reduce ran over all the job's ranks, not DDP's "
                                  "group d->group)" : "");
        else if (v->group > 1 && v->group < p && fabs(v->scale * p - v->group) < 0.05 * v->group)
            printf(" -- divided by the %d ranks of the job, not the %d of DDP's group", p,
                   v->group);
        else if (v->group > 1 && fabs(v->scale - 1.0 / v->group) < 0.05 / v->group)
            printf(" -- 1/N of the answer: divided twice?");
    }
    printf("\n");
    fflush(stdout);
}

int main(int argc, char **argv) {
    int np = 2, B = 2, strided = 0, staged = 0, gpu_comm = 0;
    double timeout = 30;
    Flag flags[] = {
        F_INT("--np", &np, 1, COMM_MAX_RANKS, "ranks to launch (built-in launcher)"),
        F_INT("--batch", &B, 1, 64, "rows per rank"),
        F_DOUBLE("--timeout", &timeout, 0.1, 3600, "seconds any wait may take"),
        F_BOOL("--strided", &strided, "DDP over two subgroups, not the world: the even world "
               "ranks and the odd ones, each in descending order (needs --np >= 4), as DDP "
               "runs over the data-parallel group of a mesh"),
        F_BOOL("--staged", &staged, "through the host copy a GPU run takes (ddp_host_view, the "
               "collective, ddp_back_to_device), here on the CPU"),
        F_BOOL("--gpu-comm-on-host", &gpu_comm, "through the GpuComm a GPU run takes (NCCL, "
               "CUDA IPC), its collectives run on the host (tests/gpu_comm_host.h)"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "test_ddp [flags]",
                "Checks DDP's weight broadcast and gradient mean against one process.");
    if (staged && gpu_comm) flags_fail("--staged and --gpu-comm-on-host are two paths: pick one");
    Path path = staged ? PATH_STAGED : gpu_comm ? PATH_GPU_COMM : PATH_HOST;
    CommConfig cc = {.np = np, .timeout_s = timeout};
    Comm *c = comm_launch(&cc);
    Group *world = comm_world(c);
    int p = comm_size(c), r = comm_rank(c);
    Group sub, *grp = strided ? strided_group(c, &sub) : world;  // what DDP runs over
    Ctx ctx;
    ctx_init(&ctx, DEV_CPU, 1, 0);
    GPTConfig cfg;
    CHECK(gpt_preset("tiny", &cfg) == 0, "no tiny preset");
    GPT shape;  // for naming elements in the report
    gpt_init(&shape, &ctx, &cfg, SEED);

    char names[2][64];
    char variant[24];
    snprintf(variant, sizeof variant, "%s%s", strided ? ".strided" : "",
             path == PATH_STAGED ? ".staged" : path == PATH_GPU_COMM ? ".gpucomm" : "");
    snprintf(names[0], sizeof names[0], "ddp.broadcast_params.np%d%s", p, variant);
    snprintf(names[1], sizeof names[1], "ddp.mean_gradient.np%d%s", p, variant);
    if (r == 0) {
        for (int k = 0; k < 2; k++) printf("PLAN %s\n", names[k]);
        fflush(stdout);
    }
    for (int k = 0; k < 2; k++) {
        Verdict mine = k == 0 ? check_broadcast(c, grp, &ctx, &cfg, path)
                              : check_mean_gradient(c, grp, &ctx, &cfg, B, path);
        if (r == 0) {
            Verdict all[COMM_MAX_RANKS];
            all[0] = mine;
            for (int q = 1; q < p; q++) comm_recv(c, world, q, &all[q], sizeof all[q]);
            if (k == 0)
                report(names[0], &shape, p, all, 0, "every rank holds rank 0's weights, bitwise",
                       path);
            else
                report(names[1], &shape, p, all, 1e-5,
                       "every rank's gradient = one process's on all N*B rows", path);
        } else {
            comm_send(c, world, 0, &mine, sizeof mine);
        }
    }
    gpt_free(&shape);
    ctx_destroy(&ctx);
    comm_finalize(c);
    return 0;
}
