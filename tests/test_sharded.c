// test_sharded.c — stage 03's pieces, below the training loop.
//
//   test_sharded --np 3
//
// plan.*          the two partitions: ZeRO's blocks of a range tile it, give member
//                 i exactly [i*S, (i+1)*S) of the whole buffer, and this rank's offset
//                 in its shard; FSDP's split each unit evenly, padded per unit
//                 (Σu ceil(|u|/N) elements), for units of 1, 2 and all groups.
// buckets.*       the bucket assignment (the exercise): in backward order (group L+1
//                 in bucket 0), every group in exactly one bucket, a bucket's groups
//                 consecutive, no bucket over the cap unless it is a single group, one
//                 group per bucket with cap 0, one bucket with a huge cap, units as
//                 buckets for FSDP.
// coll_v.*        reduce_scatter_v and all_gather_v, ring and naive, against a serial
//                 sum, with empty blocks, uneven blocks and one block holding all; also
//                 a message larger than the shm channel (a ring that waits for its send
//                 first deadlocks there). Exact: the data are small integers.
// async.*         the non-blocking collectives, threaded and not: several started
//                 before any is waited for, waited in another order, all correct; a
//                 blocking collective from the compute thread while the progress
//                 thread owns the Comm is refused with a message.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "flags.h"
#include "harness.h"
#include "sharded.h"

static GPTConfig odd_config(void) {
    GPTConfig c = {2, 49, 7, 12, 97};  // Ψ = 64,337: no world size from 2 to 5 divides it
    return c;
}

// ---------------------------------------------------------------- plan (every rank alike)

static void test_plan(TestState *ts, int p) {
    Ctx ctx;
    ctx_init(&ctx, DEV_CPU, 1, 0);
    GPTConfig cfg = odd_config();
    GPT g;
    gpt_init_layout(&g, &ctx, &cfg);
    size_t psi = g.n_params, S = (psi + p - 1) / p;
    char name[80];
    // ZeRO: any range's blocks are the intersections with [i*S, (i+1)*S).
    ShardConfig zc = {.kind = SH_ZERO3, .unit_layers = 1};
    int bad = 0;
    for (int r = 0; r < p; r++) {
        ShardPlan P;
        plan_build(&P, &g, &zc, p, r);
        bad += P.S != S || P.shard_elems != S;
        size_t mid = S + S / 3 < psi ? S + S / 3 : psi;  // across a shard boundary when p > 1
        size_t ranges[][2] = {{0, psi}, {0, 1}, {psi - 1, psi}, {S / 2, mid},
                              {g.group_offset[1], g.group_offset[2]}};
        for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++) {
            size_t lo = ranges[k][0], hi = ranges[k][1], mine;
            Blocks b;
            plan_blocks(&P, lo, hi, &b, &mine);
            for (int i = 0; i < p; i++) {
                size_t a = (size_t)i * S, z = a + S < psi ? a + S : psi;
                size_t want_lo = a > lo ? (a < hi ? a : hi) : lo, want_hi = z < hi ? (z > lo ? z : lo) : hi;
                bad += b.lo[i] != want_lo - lo || b.hi[i] != want_hi - lo;
                bad += i > 0 && b.lo[i] != b.hi[i - 1];
            }
            bad += b.lo[0] != 0 || b.hi[p - 1] != hi - lo || b.count != hi - lo;
            if (b.hi[r] > b.lo[r]) bad += mine != lo + b.lo[r] - (size_t)r * S;
        }
        plan_free(&P);
    }
    snprintf(name, sizeof name, "plan.zero_blocks.np%d", p);
    test_report(ts, bad == 0, name, "Ψ %zu, S = ceil(Ψ/%d) = %zu: %d wrong blocks", psi, p, S, bad);
    // FSDP: each unit split evenly; shard = Σu ceil(|u|/N).
    int ks[] = {1, 2, cfg.n_layer + 2};
    bad = 0;
    for (int ki = 0; ki < 3; ki++) {
        ShardConfig fc = {.kind = SH_FSDP, .unit_layers = ks[ki]};
        ShardPlan P;
        plan_build(&P, &g, &fc, p, p - 1);
        size_t want = 0;
        int G = cfg.n_layer + 2, units = (G + ks[ki] - 1) / ks[ki];
        bad += P.n_units != units;
        for (int u = 0; u < units; u++) {
            int last = (u + 1) * ks[ki] < G ? (u + 1) * ks[ki] : G;
            size_t n = g.group_offset[last] - g.group_offset[u * ks[ki]];
            bad += P.unit_lo[u] != g.group_offset[u * ks[ki]] || P.unit_hi[u] != g.group_offset[last];
            bad += P.unit_base[u] != want;
            want += (n + p - 1) / p;
        }
        bad += P.shard_elems != want;
        plan_free(&P);
    }
    snprintf(name, sizeof name, "plan.fsdp_units.np%d", p);
    test_report(ts, bad == 0, name, "units of 1, 2 and %d groups: %d wrong", cfg.n_layer + 2, bad);
    gpt_free(&g);
    ctx_destroy(&ctx);
}

// ---------------------------------------------------------------- bucket assignment

#define HUGE_CAP ((size_t)1 << 40)

// What is wrong with the assignment in s->buckets (into why), or nothing.
static void judge_buckets(const Sharded *s, const GPT *g, int fsdp, size_t cap, char *why,
                          size_t n) {
    const Buckets *B = &s->buckets;
    int G = s->plan.groups;
    why[0] = 0;
#define WHY(...) do { if (!why[0]) snprintf(why, n, __VA_ARGS__); } while (0)
    if (B->n < 1 || B->n > G) WHY("%d buckets", B->n);
    if (B->of_group[G - 1] != 0) WHY("group L+1 is in bucket %d, not 0 (backward order)",
                                     B->of_group[G - 1]);
    for (int grp = 0; grp < G && !why[0]; grp++) {
        int b = B->of_group[grp];
        if (b < 0 || b >= B->n) WHY("group %d in bucket %d", grp, b);
        else if (g->group_offset[grp] < B->lo[b] || g->group_offset[grp + 1] > B->hi[b])
            WHY("group %d outside bucket %d's range", grp, b);
        else if (grp + 1 < G && B->of_group[grp + 1] != b && B->of_group[grp + 1] != b - 1)
            WHY("bucket %d's groups are not consecutive in backward order", b);
    }
    size_t total = 0;
    for (int b = 0; b < B->n && !why[0]; b++) {
        size_t bytes = (B->hi[b] - B->lo[b]) * sizeof(float);
        total += B->hi[b] - B->lo[b];
        int held = 0;
        for (int grp = 0; grp < G; grp++) held += B->of_group[grp] == b;
        if (held != B->groups[b]) WHY("bucket %d counts %d groups, holds %d", b, B->groups[b], held);
        if (!fsdp && cap == 0 && held != 1) WHY("cap 0: bucket %d holds %d groups", b, held);
        if (!fsdp && cap && held > 1 && bytes > cap) WHY("bucket %d: %zu bytes, over the cap", b, bytes);
    }
    if (total != g->n_params) WHY("the buckets cover %zu of %zu elements", total, g->n_params);
    // Greedy: a bucket closes only when the next group (in backward order) would take it
    // over the cap. Fewer, larger buckets are the point of the cap: more of them pay more
    // latencies than --bucket-mb asks for, and no check of the weights would notice.
    for (int b = 0; b + 1 < B->n && !fsdp && cap && !why[0]; b++) {
        int next = -1;  // bucket b+1's first group in backward order: its highest
        for (int grp = 0; grp < G; grp++)
            if (B->of_group[grp] == b + 1) next = grp;
        size_t with = (B->hi[b] - B->lo[b] + g->group_offset[next + 1] - g->group_offset[next]) *
                      sizeof(float);
        if (next >= 0 && with <= cap)
            WHY("bucket %d (%zu bytes) could have taken group %d: %zu bytes together, within the "
                "cap %zu (a bucket closes only when the next group does not fit)",
                b, (B->hi[b] - B->lo[b]) * sizeof(float), next, with, cap);
    }
    if (!fsdp && cap == HUGE_CAP && B->n != 1) WHY("a huge cap gave %d buckets", B->n);
    if (fsdp && B->n != s->plan.n_units) WHY("fsdp: %d buckets for %d units", B->n, s->plan.n_units);
    for (int grp = 0; grp < G && fsdp; grp++)
        if (B->lo[B->of_group[grp]] != s->plan.unit_lo[s->plan.unit_of[grp]])
            WHY("fsdp: group %d's bucket is not its unit", grp);
#undef WHY
}

static void test_buckets(TestState *ts) {
    Ctx ctx;
    ctx_init(&ctx, DEV_CPU, 1, 0);
    // 7 groups: the embeddings 10,240 bytes, 5 blocks of 50,816, ln_f 256. The caps: one
    // group each, every group over the cap, ln_f joining a block exactly at the cap
    // (256 + 50,816 = 51,072: <= joins), ln_f joining a block, blocks in pairs, all.
    GPTConfig cfg = {5, 32, 4, 16, 64};
    GPT g;
    gpt_init_layout(&g, &ctx, &cfg);
    size_t caps[] = {0, 4096, 51072, 60000, 110000, HUGE_CAP};
    for (size_t k = 0; k < sizeof caps / sizeof caps[0] + 1; k++) {
        int fsdp = k == sizeof caps / sizeof caps[0];  // last: FSDP, units of 2 groups
        size_t cap = fsdp ? 0 : caps[k];
        Sharded s = {.cfg = {.kind = fsdp ? SH_FSDP : SH_ZERO2, .bucket_bytes = cap,
                             .unit_layers = fsdp ? 2 : 1}, .g = &g};
        plan_build(&s.plan, &g, &s.cfg, 2, 0);
        int of_group[16] = {0}, groups[16] = {0};
        size_t lo[16] = {0}, hi[16] = {0};
        s.buckets = (Buckets){.of_group = of_group, .lo = lo, .hi = hi, .groups = groups};
        buckets_assign(&s);
        char why[256], name[64];
        judge_buckets(&s, &g, fsdp, cap, why, sizeof why);
        if (fsdp) snprintf(name, sizeof name, "buckets.assign.fsdp_units");
        else if (cap == HUGE_CAP) snprintf(name, sizeof name, "buckets.assign.cap_huge");
        else snprintf(name, sizeof name, "buckets.assign.cap_%zu", cap);
        test_report(ts, !why[0], name, "%d buckets for %d groups%s%s", s.buckets.n,
                    s.plan.groups, why[0] ? ": " : "", why);
        plan_free(&s.plan);
    }
    gpt_free(&g);
    ctx_destroy(&ctx);
}

// ---------------------------------------------------------------- the collectives over blocks

static float value(int rank, size_t i) { return (float)((int)((i * 5 + rank * 11) % 13) - 6); }

// Blocks for pattern k over count elements and p members.
static void pattern(Blocks *b, int k, size_t count, int p) {
    b->count = count;
    size_t at = 0;
    for (int i = 0; i < p; i++) {
        size_t n;
        if (k == 0) n = count / p + (i < (int)(count % p));   // even-ish
        else if (k == 1) n = i == p - 1 ? count : 0;          // the last holds all
        else if (k == 2) n = i % 2 ? 0 : count / ((p + 1) / 2);  // every other empty
        else n = (size_t)(i + 1) * count / (p * (p + 1) / 2);    // growing
        b->lo[i] = at;
        at = i == p - 1 ? count : (at + n < count ? at + n : count);
        b->hi[i] = at;
    }
}

static long check_v(Comm *c, Group *g, int rs, const Blocks *b, Algo a, AsyncComm *ac) {
    int p = g->size, r = g->rank;
    float *buf = xmalloc(b->count * sizeof(float) + 4);
    for (size_t i = 0; i < b->count; i++) buf[i] = value(r, i);
    if (ac) {  // through the progress thread, two at once
        float *twin = xmalloc(b->count * sizeof(float) + 4);
        memcpy(twin, buf, b->count * sizeof(float));
        CollTask *t1 = rs ? reduce_scatter_start(ac, g, buf, b, DT_F32, a, "rs")
                          : all_gather_start(ac, g, buf, b, DT_F32, a, "ag");
        CollTask *t2 = rs ? reduce_scatter_start(ac, g, twin, b, DT_F32, a, "rs2")
                          : all_gather_start(ac, g, twin, b, DT_F32, a, "ag2");
        coll_wait(ac, t2);  // waited in the other order
        coll_wait(ac, t1);
        long diff = memcmp(buf + b->lo[r], twin + b->lo[r], (b->hi[r] - b->lo[r]) * sizeof(float)) != 0;
        free(twin);
        if (diff) { free(buf); return 1; }
    } else if (rs) {
        reduce_scatter_v(c, g, buf, b, DT_F32, a);
    } else {
        all_gather_v(c, g, buf, b, DT_F32, a);
    }
    long wrong = 0;
    for (size_t i = 0; i < b->count; i++) {
        float want = 0;
        if (rs) {
            if (i < b->lo[r] || i >= b->hi[r]) continue;
            for (int q = 0; q < p; q++) want += value(q, i);
        } else {
            for (int q = 0; q < p; q++)
                if (i >= b->lo[q] && i < b->hi[q]) want = value(q, i);
        }
        wrong += buf[i] != want;
    }
    free(buf);
    return wrong;
}

static void report_all(Comm *c, Group *g, TestState *ts, const char *name, long mine, const char *what) {
    long total = mine;
    if (g->rank == 0) {
        for (int q = 1; q < g->size; q++) {
            long w;
            comm_recv(c, g, q, &w, sizeof w);
            total += w;
        }
        test_report(ts, total == 0, name, "%s: %ld wrong elements", what, total);
    } else {
        comm_send(c, g, 0, &mine, sizeof mine);
    }
}

static void test_coll_v(Comm *c, Group *g, TestState *ts) {
    int p = g->size;
    size_t counts[] = {0, 1, 7, 1000, 4099};
    Algo algos[] = {ALGO_RING, ALGO_NAIVE};
    for (int rs = 1; rs >= 0; rs--)
        for (int ai = 0; ai < 2; ai++) {
            long wrong = 0;
            for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++)
                for (int pat = 0; pat < 4; pat++) {
                    Blocks b;
                    pattern(&b, pat, counts[k], p);
                    wrong += check_v(c, g, rs, &b, algos[ai], NULL);
                }
            char name[80];
            snprintf(name, sizeof name, "coll_v.%s.%s.np%d", rs ? "reduce_scatter" : "all_gather",
                     algo_name(algos[ai]), p);
            report_all(c, g, ts, name, wrong, "5 counts x 4 block patterns (even, one holds all, "
                       "every other empty, growing)");
        }
    // Larger than the channel: every block exceeds it.
    size_t chan = comm_channel_bytes(c), count = (chan ? chan / 4 + chan / 8 : 300000) * p + 3;
    for (int rs = 1; rs >= 0; rs--) {
        Blocks b;
        blocks_even(&b, count, p);
        char name[80];
        snprintf(name, sizeof name, "coll_v.%s.ring.large.np%d", rs ? "reduce_scatter" : "all_gather", p);
        report_all(c, g, ts, name, check_v(c, g, rs, &b, ALGO_RING, NULL), "blocks beyond the channel");
    }
}

static void test_async(Comm *c, Group *g, TestState *ts) {
    int p = g->size;
    for (int threaded = 0; threaded < 2; threaded++) {
        AsyncComm *ac = async_comm_new(c, NULL, threaded);
        long wrong = 0;
        for (int pat = 0; pat < 4; pat++)
            for (int rs = 0; rs < 2; rs++) {
                Blocks b;
                pattern(&b, pat, 3001, p);
                wrong += check_v(c, g, rs, &b, ALGO_RING, ac);
            }
        float x[3] = {1.0f + g->rank, 2, 3};
        async_allreduce(ac, g, x, 3, DT_F32, ALGO_RING, "allreduce");
        wrong += x[0] != p + p * (p - 1) / 2.0f || x[1] != 2.0f * p;
        async_comm_free(ac);
        char name[64];
        snprintf(name, sizeof name, "async.%s.np%d", threaded ? "threaded" : "unthreaded", p);
        report_all(c, g, ts, name, wrong, "two collectives in flight, waited in reverse order");
    }
}

// A blocking collective while the progress thread owns the Comm must be refused.
static void misuse(void *arg) {
    Comm *c = arg;
    AsyncComm *ac = async_comm_new(c, NULL, 1);
    async_barrier(ac, comm_world(c));  // the thread now surely owns the Comm
    float x = 1;
    allreduce(c, comm_world(c), &x, 1, DT_F32, ALGO_RING);  // from the wrong thread
}

int main(int argc, char **argv) {
    int np = 1;
    double timeout = 20;
    Flag flags[] = {
        F_INT("--np", &np, 1, COMM_MAX_RANKS, "ranks to launch"),
        F_DOUBLE("--timeout", &timeout, 0.1, 3600, "seconds any wait may take"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "test_sharded [flags]",
                "Stage 03's partitions, bucket assignment, collectives over blocks and "
                "non-blocking collectives.");
    CommConfig cc = {.np = np, .timeout_s = timeout};
    Comm *c = comm_launch(&cc);
    Group *world = comm_world(c);
    TestState ts = {0};
    if (world->rank == 0) {
        test_plan(&ts, world->size);
        if (world->size == 1) test_buckets(&ts);
    }
    test_coll_v(c, world, &ts);
    test_async(c, world, &ts);
    if (world->size == 1 && world->rank == 0) {
        char out[2048];
        int rc = run_child(misuse, c, out, sizeof out);
        test_report(&ts, rc == 1 && strstr(out, "does not own this rank's Comm"),
                    "async.refuses_a_second_thread", "exit %d: %.200s", rc, out);
    }
    int rank = world->rank;
    comm_finalize(c);  // world lives inside c
    return rank == 0 ? test_finish(&ts) : 0;
}
