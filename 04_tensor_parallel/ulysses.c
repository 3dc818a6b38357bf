// ulysses.c — context parallelism by trading splits (Jacobs et al. 2023, DeepSpeed-Ulysses).
//
// Outside attention every op works token by token, so a rank may hold any tokens; inside
// it, each head works alone, so a rank may hold any heads. Ulysses switches between the
// two with one all-to-all (stage 02's): before attention each rank sends rank j the q,
// k and v of its Tl tokens for j's NH/cp heads, and receives every rank's tokens for its
// own heads: the whole sequence, NH/cp heads. It runs the core's flash attention on them
// (no change to attention at all), and an all-to-all sends each rank its tokens' output
// back. The backward does the same with dout and dqkv.
//
// Against the ring: each rank sends (cp-1)/cp of its q, k, v and output, 4 (cp-1)/cp Tl C
// floats forward, whatever the sequence's length or the causal mask, where the ring sends
// (cp-1) blocks of K and V, 2 (cp-1) Tl C; the all-to-all's messages go to every rank at
// once and cannot overlap with attention, the ring's to one neighbour while it computes.
// And the heads must split: NH/cp whole heads a rank (GQA's few key-value heads limit
// it more), where the ring splits any sequence.
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cp.h"
#include "ops.h"

typedef struct {
    int B, T, C, NH, p, r, Tl, Hr, Cr;  // Hr heads a rank, Cr = Hr * hs their width
    CpRuns runs[COMM_MAX_RANKS];        // every rank's tokens
} HeadSplit;

static HeadSplit split_of(const ContextParallel *cp, int B, int T, int C, int NH) {
    HeadSplit s = {B, T, C, NH, cp->group->size, cp->group->rank, T / cp->group->size, 0, 0, {{0}}};
    CHECK(NH % s.p == 0, "Ulysses: %d heads do not split over %d context-parallel ranks (cp must "
          "divide the heads; the ring attention splits any)", NH, s.p);
    s.Hr = NH / s.p;
    s.Cr = C / s.p;
    for (int q = 0; q < s.p; q++)
        CHECK(cp_runs(T, s.p, q, cp->zigzag, &s.runs[q]) == 0, "Ulysses: a sequence of %d tokens "
              "does not split into %d %s chunks", T, s.p, cp->zigzag ? "zigzag" : "contiguous");
    return s;
}

// Global position of row `row` of rank q's tokens.
static int position(const HeadSplit *s, int q, int row) {
    const CpRuns *r = &s->runs[q];
    return row < r->len[0] ? r->start[0] + row : r->start[1] + row - r->len[0];
}

// Sequence split -> head split. x: this rank's (B, Tl, parts*C); send: block j holds
// (B, Tl, parts*Cr), j's heads of each part; after the all-to-all, block i of recv holds
// rank i's tokens for this rank's heads, put at their positions in y (B, T, parts*Cr).
static void to_heads(ContextParallel *cp, const HeadSplit *s, float *y, const float *x, int parts,
                     float *send, float *recv) {
    size_t blk = (size_t)s->B * s->Tl * parts * s->Cr;
    for (int j = 0; j < s->p; j++)
        for (size_t bt = 0; bt < (size_t)s->B * s->Tl; bt++)
            for (int k = 0; k < parts; k++)
                memcpy(send + j * blk + (bt * parts + k) * s->Cr,
                       x + bt * parts * s->C + (size_t)k * s->C + (size_t)j * s->Cr,
                       sizeof(float) * s->Cr);
    all_to_all(cp->comm, cp->group, send, recv, blk, DT_F32, cp->algo);
    for (int i = 0; i < s->p; i++)
        for (int b = 0; b < s->B; b++)
            for (int t = 0; t < s->Tl; t++)
                memcpy(y + ((size_t)b * s->T + position(s, i, t)) * parts * s->Cr,
                       recv + i * blk + ((size_t)b * s->Tl + t) * parts * s->Cr,
                       sizeof(float) * parts * s->Cr);
}

// Head split -> sequence split: y (B, T, parts*Cr) of this rank's heads; x (B, Tl,
// parts*C) receives, for its tokens, every rank's heads (added when accumulate: dqkv).
static void to_tokens(ContextParallel *cp, const HeadSplit *s, float *x, const float *y, int parts,
                      int accumulate, float *send, float *recv) {
    size_t blk = (size_t)s->B * s->Tl * parts * s->Cr;
    for (int i = 0; i < s->p; i++)
        for (int b = 0; b < s->B; b++)
            for (int t = 0; t < s->Tl; t++)
                memcpy(send + i * blk + ((size_t)b * s->Tl + t) * parts * s->Cr,
                       y + ((size_t)b * s->T + position(s, i, t)) * parts * s->Cr,
                       sizeof(float) * parts * s->Cr);
    all_to_all(cp->comm, cp->group, send, recv, blk, DT_F32, cp->algo);
    for (int j = 0; j < s->p; j++)
        for (size_t bt = 0; bt < (size_t)s->B * s->Tl; bt++)
            for (int k = 0; k < parts; k++) {
                const float *src = recv + j * blk + (bt * parts + k) * s->Cr;
                float *dst = x + bt * parts * s->C + (size_t)k * s->C + (size_t)j * s->Cr;
                if (!accumulate) memcpy(dst, src, sizeof(float) * s->Cr);
                else for (int e = 0; e < s->Cr; e++) dst[e] += src[e];
            }
}

void ulysses_attention_forward(ContextParallel *cp, float *out, float *lse, const float *qkv,
                               int B, int T, int C, int NH) {
    HeadSplit s = split_of(cp, B, T, C, NH);
    size_t n3 = (size_t)B * s.Tl * 3 * C, n1 = n3 / 3;  // = B T 3 Cr: either split of q, k, v
    float *send = cp_buffer(cp, MEM_COMM, n3), *recv = cp_buffer(cp, MEM_COMM, n3);
    float *qkv_h = cp_buffer(cp, MEM_WORKSPACE, n3), *out_h = cp_buffer(cp, MEM_WORKSPACE, n1);
    to_heads(cp, &s, qkv_h, qkv, 3, send, recv);
    cp->ctx->ops->flash_attention_forward(cp->ctx, out_h, lse, qkv_h, B, T, s.Cr, s.Hr, DT_F32);
    to_tokens(cp, &s, out, out_h, 1, 0, send, recv);
    cp_buffer_free(cp, MEM_COMM, send, n3);
    cp_buffer_free(cp, MEM_COMM, recv, n3);
    cp_buffer_free(cp, MEM_WORKSPACE, qkv_h, n3);
    cp_buffer_free(cp, MEM_WORKSPACE, out_h, n1);
}

void ulysses_attention_backward(ContextParallel *cp, float *dqkv, const float *dout,
                                const float *qkv, const float *out, const float *lse, int B,
                                int T, int C, int NH) {
    HeadSplit s = split_of(cp, B, T, C, NH);
    size_t n3 = (size_t)B * s.Tl * 3 * C, n1 = n3 / 3;
    float *send = cp_buffer(cp, MEM_COMM, n3), *recv = cp_buffer(cp, MEM_COMM, n3);
    float *qkv_h = cp_buffer(cp, MEM_WORKSPACE, n3), *dqkv_h = cp_buffer(cp, MEM_WORKSPACE, n3);
    float *out_h = cp_buffer(cp, MEM_WORKSPACE, n1), *dout_h = cp_buffer(cp, MEM_WORKSPACE, n1);
    memset(dqkv_h, 0, sizeof(float) * n3);  // the flash backward adds into it
    to_heads(cp, &s, qkv_h, qkv, 3, send, recv);  // the forward's, again: not kept
    to_heads(cp, &s, out_h, out, 1, send, recv);
    to_heads(cp, &s, dout_h, dout, 1, send, recv);
    cp->ctx->ops->flash_attention_backward(cp->ctx, dqkv_h, dout_h, qkv_h, out_h, lse, B, T, s.Cr,
                                           s.Hr, DT_F32);
    to_tokens(cp, &s, dqkv, dqkv_h, 3, 1, send, recv);
    cp_buffer_free(cp, MEM_COMM, send, n3);
    cp_buffer_free(cp, MEM_COMM, recv, n3);
    cp_buffer_free(cp, MEM_WORKSPACE, qkv_h, n3);
    cp_buffer_free(cp, MEM_WORKSPACE, dqkv_h, n3);
    cp_buffer_free(cp, MEM_WORKSPACE, out_h, n1);
    cp_buffer_free(cp, MEM_WORKSPACE, dout_h, n1);
}
