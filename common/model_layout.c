// model_layout.c — the GPT's parameters as one flat buffer: presets, the slice
// table, the initial weights, and how a tensor-parallel rank's slices map onto
// the whole tensors (stage 04).
//
// model.c computes with the buffer; this file only says where everything lives.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "model.h"
#include "rng.h"

// ---------------------------------------------------------------- config

int gpt_preset(const char *name, GPTConfig *out) {
    static const struct { const char *name; GPTConfig cfg; } presets[] = {
        {"tiny", {2, 64, 4, 32, 256}},          // tests: runs in milliseconds
        {"small", {4, 256, 4, 128, 256}},       // demos and bench-core: byte-level, 3.3M params
        {"gpt2-124m", {12, 768, 12, 1024, 50257}},
    };
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(name, presets[i].name) == 0) { *out = presets[i].cfg; return 0; }
    return -1;
}

const char *gpt_preset_names(void) { return "tiny|small|gpt2-124m"; }

const char *gpt_config_error(const GPTConfig *c, char *buf, size_t n) {
    if (c->n_layer < 1) snprintf(buf, n, "--layers must be at least 1 (got %d)", c->n_layer);
    else if (c->n_embd < 1) snprintf(buf, n, "--width must be at least 1 (got %d)", c->n_embd);
    else if (c->n_head < 1) snprintf(buf, n, "--heads must be at least 1 (got %d)", c->n_head);
    else if (c->seq_len < 1) snprintf(buf, n, "--seq must be at least 1 (got %d)", c->seq_len);
    else if (c->vocab < 2) snprintf(buf, n, "--vocab must be at least 2 (got %d)", c->vocab);
    else if (c->n_embd % c->n_head != 0)
        snprintf(buf, n, "--heads %d does not divide --width %d (head size must be whole)",
                 c->n_head, c->n_embd);
    else return NULL;
    return buf;
}

const char *gpt_tp_error(const GPTConfig *c, int tp, int sp, int B, int T, char *buf, size_t n) {
    if (tp < 1) snprintf(buf, n, "--tp must be at least 1 (got %d)", tp);
    else if (c->n_head % tp != 0)
        snprintf(buf, n, "--tp %d does not divide --heads %d (each rank computes whole heads)", tp,
                 c->n_head);
    else if (sp && tp < 2)
        snprintf(buf, n, "--sp needs --tp of 2 or more (sequence parallelism splits the tokens "
                 "over the tensor-parallel ranks)");
    else if (sp && ((long)B * T) % tp != 0)
        snprintf(buf, n, "--sp: --tp %d does not divide the %d x %d = %ld tokens of a micro-batch "
                 "(--batch x --seq)", tp, B, T, (long)B * T);
    else return NULL;
    return buf;
}

int gpt_vocab_block(const GPTConfig *c, int tp) { return (c->vocab + tp - 1) / tp; }

// ---------------------------------------------------------------- layout

// The tensors of one block, in order: name suffix, rows, cols (in units of C),
// decay, and how tensor parallelism splits it (Megatron-LM: c_attn and c_fc are
// column-parallel, the two c_proj row-parallel; the bias after a row-parallel
// layer is added once, after the reduction, so every rank holds all of it).
typedef struct { const char *name; int rows_c, cols_c, decay, split; } BlockTensor;
static const BlockTensor block_tensors[GPT_BLOCK_TENSORS] = {
    {"ln_1.weight", 0, 1, 0, SPLIT_NONE},        {"ln_1.bias", 0, 1, 0, SPLIT_NONE},
    {"attn.c_attn.weight", 3, 1, 1, SPLIT_QKV},  {"attn.c_attn.bias", 0, 3, 0, SPLIT_QKV},
    {"attn.c_proj.weight", 1, 1, 1, SPLIT_COLS}, {"attn.c_proj.bias", 0, 1, 0, SPLIT_NONE},
    {"ln_2.weight", 0, 1, 0, SPLIT_NONE},        {"ln_2.bias", 0, 1, 0, SPLIT_NONE},
    {"mlp.c_fc.weight", 4, 1, 1, SPLIT_ROWS},    {"mlp.c_fc.bias", 0, 4, 0, SPLIT_ROWS},
    {"mlp.c_proj.weight", 1, 4, 1, SPLIT_COLS},  {"mlp.c_proj.bias", 0, 1, 0, SPLIT_NONE},
};

int gpt_num_slices(const GPTConfig *c) { return 2 + GPT_BLOCK_TENSORS * c->n_layer + 2; }

// A split tensor's local shape on one of tp ranks. A vector (one row) splits its
// elements; the vocabulary rounds up (the last blocks are padded).
static void local_shape(int split, int grows, int gcols, int tp, int *rows, int *cols) {
    *rows = grows;
    *cols = gcols;
    switch (split) {
    case SPLIT_ROWS: case SPLIT_QKV:
        if (grows > 1) *rows = grows / tp;
        else *cols = gcols / tp;
        break;
    case SPLIT_COLS: *cols = gcols / tp; break;
    case SPLIT_VOCAB: *rows = (grows + tp - 1) / tp; break;
    default: break;
    }
}

GPTPart gpt_whole(const GPTConfig *c) { return (GPTPart){1, 0, 0, c->n_layer, 1, 1}; }

void gpt_fill_slices_part(const GPTConfig *c, const GPTPart *part, ParamSlice *s) {
    size_t off = 0, goff = 0;
    int i = 0, C = c->n_embd, L = c->n_layer, tp = part->tp;
    // A tensor the part does not hold keeps its name, group and whole shape, with
    // no elements (rows = cols = 0) here.
#define ADD(nm, r, cl, grp, dec, spl, held)                                                 \
    do {                                                                                  \
        snprintf(s[i].name, sizeof s[i].name, "%s", nm);                                  \
        s[i].grows = (r); s[i].gcols = (cl); s[i].split = (spl);                          \
        local_shape(spl, r, cl, tp, &s[i].rows, &s[i].cols);                              \
        if (!(held)) s[i].rows = s[i].cols = 0;                                           \
        s[i].offset = off; s[i].goffset = goff;                                           \
        s[i].numel = (size_t)s[i].rows * (size_t)s[i].cols; s[i].group = (grp);           \
        s[i].decay = (dec);                                                               \
        off += s[i].numel; goff += (size_t)(r) * (size_t)(cl); i++;                       \
    } while (0)
    // The token embedding is also the LM head (tied): the first pipeline stage and
    // the last both hold it (Megatron's embedding group keeps the two equal).
    ADD("wte", c->vocab, C, 0, 1, SPLIT_VOCAB, part->embed || part->head);
    ADD("wpe", c->seq_len, C, 0, 1, SPLIT_NONE, part->embed);
    for (int l = 0; l < L; l++)
        for (int k = 0; k < GPT_BLOCK_TENSORS; k++) {
            const BlockTensor *bt = &block_tensors[k];
            char nm[48];
            snprintf(nm, sizeof nm, "h.%d.%s", l, bt->name);
            int rows = bt->rows_c ? bt->rows_c * C : 1;
            ADD(nm, rows, bt->cols_c * C, 1 + l, bt->decay, bt->split, l >= part->l0 && l < part->l1);
        }
    ADD("ln_f.weight", 1, C, L + 1, 0, SPLIT_NONE, part->head);
    ADD("ln_f.bias", 1, C, L + 1, 0, SPLIT_NONE, part->head);
#undef ADD
}

void gpt_fill_slices_tp(const GPTConfig *c, int tp, ParamSlice *s) {
    GPTPart part = gpt_whole(c);
    part.tp = tp;
    gpt_fill_slices_part(c, &part, s);
}

void gpt_fill_slices(const GPTConfig *c, ParamSlice *s) { gpt_fill_slices_tp(c, 1, s); }

// Copies between a whole tensor (grows x gcols, `whole`) and rank `rank`'s piece
// of it (rows x cols, `piece`), in the direction `to_piece` says. Rows of the
// padded vocabulary block beyond the real vocabulary are zero in the piece and
// are not copied back.
size_t gpt_slice_run(const ParamSlice *s, int rank, size_t e, size_t *global) {
    if (s->split == SPLIT_NONE) {
        *global = e;
        return s->numel - e;
    }
    if (s->split == SPLIT_COLS) {  // columns [rank*cols, (rank+1)*cols) of every row
        size_t r = e / (size_t)s->cols, c = e % (size_t)s->cols;
        *global = r * (size_t)s->gcols + (size_t)rank * s->cols + c;
        return (size_t)s->cols - c;
    }
    // Rows of a matrix, or elements of a vector, split along the tensor's first axis:
    // in one block (ROWS, VOCAB) or within each of q, k and v (QKV).
    int vec = s->grows == 1;
    size_t unit = vec ? 1 : (size_t)s->gcols;  // floats per row
    int whole_len = vec ? s->gcols : s->grows, piece_len = vec ? s->cols : s->rows;
    int blocks = s->split == SPLIT_QKV ? 3 : 1;
    size_t wb = (size_t)(whole_len / blocks), pb = (size_t)(piece_len / blocks);
    size_t row = e / unit, off = e % unit, k = row / pb, j = row % pb, wi = (size_t)rank * pb + j;
    *global = (k * wb + wi) * unit + off;
    // A run ends with the block, or where the vocabulary's padding rows begin (which
    // map past the tensor's end).
    size_t to_end = (pb - j) * unit - off;
    return wi < wb && wb - wi < pb - j ? (wb - wi) * unit - off : to_end;
}

void gpt_slice_copy(const ParamSlice *s, int rank, float *whole, float *piece,
                    int to_piece) {
    size_t n = (size_t)s->grows * (size_t)s->gcols, g, run;  // the whole tensor's elements
    for (size_t e = 0; e < s->numel; e += run) {  // run by run (gpt_slice_run)
        run = gpt_slice_run(s, rank, e, &g);
        if (g >= n) {  // padding (the vocabulary only)
            if (to_piece) memset(piece + e, 0, run * sizeof(float));
        } else if (to_piece) {
            memcpy(piece + e, whole + g, run * sizeof(float));
        } else {
            memcpy(whole + g, piece + e, run * sizeof(float));
        }
    }
}

size_t gpt_num_params(const GPTConfig *c) {
    size_t C = c->n_embd;
    // per block: 2 layernorms (4C) + qkv (3C^2 + 3C) + proj (C^2 + C) + fc (4C^2 + 4C)
    // + fc proj (4C^2 + C) = 12C^2 + 13C
    return (size_t)c->vocab * C + (size_t)c->seq_len * C + c->n_layer * (12 * C * C + 13 * C) +
           2 * C;
}

double gpt_flops_per_token(const GPTConfig *c, int T) {
    // 6N for the weights (2 forward + 4 backward per parameter per token) plus
    // attention: 12 L H Q T (Q = head size), the PaLM / nanoGPT formula. N excludes
    // wpe, whose "multiply" is a lookup.
    double N = (double)gpt_num_params(c) - (double)c->seq_len * c->n_embd;
    double Q = (double)c->n_embd / c->n_head;
    return 6.0 * N + 12.0 * c->n_layer * c->n_head * Q * T;
}

void gpt_group_range(const GPT *g, int group, size_t *begin, size_t *end) {
    *begin = g->group_offset[group];
    *end = g->group_offset[group + 1];
}

const ParamSlice *gpt_find_slice(const GPT *g, const char *name) {
    for (int i = 0; i < g->n_slices; i++)
        if (strcmp(g->slices[i].name, name) == 0) return &g->slices[i];
    return NULL;
}

const ParamSlice *gpt_slice_at(const GPT *g, size_t element) {
    for (int i = 0; i < g->n_slices; i++)
        if (element >= g->slices[i].offset && element < g->slices[i].offset + g->slices[i].numel)
            return &g->slices[i];
    return NULL;
}

// ---------------------------------------------------------------- set-up

void gpt_init_layout_part(GPT *g, Ctx *ctx, const GPTConfig *cfg, const GPTPart *part) {
    char err[200];
    int tp = part->tp, tp_rank = part->tp_rank;
    CHECK(gpt_config_error(cfg, err, sizeof err) == NULL, "%s", err);
    CHECK(gpt_tp_error(cfg, tp, 0, 1, 1, err, sizeof err) == NULL, "%s", err);
    CHECK(tp_rank >= 0 && tp_rank < tp, "tensor-parallel rank %d outside [0, %d)", tp_rank, tp);
    CHECK(0 <= part->l0 && part->l0 <= part->l1 && part->l1 <= cfg->n_layer &&
          (part->l0 == 0 || !part->embed) && (part->l1 == cfg->n_layer || !part->head),
          "layers [%d, %d) of %d%s%s: not a pipeline stage", part->l0, part->l1, cfg->n_layer,
          part->embed ? " with the embedding" : "", part->head ? " with the head" : "");
    memset(g, 0, sizeof *g);
    g->cfg = *cfg;
    g->ctx = ctx;
    g->prec = (GPTPrecision){.recipe = PREC_FP32, .dtype = DT_F32, .loss_scale = 1.0f};
    g->recompute_every = 1;
    g->tp.size = tp;
    g->tp.rank = tp_rank;
    g->l0 = part->l0;
    g->l1 = part->l1;
    g->has_embed = part->embed;
    g->has_head = part->head;
    g->n_slices = gpt_num_slices(cfg);
    g->slices = calloc((size_t)g->n_slices, sizeof *g->slices);
    g->group_offset = calloc((size_t)cfg->n_layer + 3, sizeof *g->group_offset);
    g->gparams = calloc((size_t)cfg->n_layer + 2, sizeof *g->gparams);
    g->ggrads = calloc((size_t)cfg->n_layer + 2, sizeof *g->ggrads);
    CHECK(g->slices && g->group_offset && g->gparams && g->ggrads,
          "out of host memory for the slice table");
    gpt_fill_slices_part(cfg, part, g->slices);
    const ParamSlice *last = &g->slices[g->n_slices - 1];
    g->n_params = last->offset + last->numel;
    CHECK(last->goffset + last->grows * (size_t)last->gcols == gpt_num_params(cfg),
          "slice table disagrees with gpt_num_params");
    for (int i = g->n_slices - 1; i >= 0; i--) g->group_offset[g->slices[i].group] = g->slices[i].offset;
    g->group_offset[cfg->n_layer + 2] = g->n_params;
}

void gpt_init_layout_tp(GPT *g, Ctx *ctx, const GPTConfig *cfg, int tp, int tp_rank) {
    GPTPart part = gpt_whole(cfg);
    part.tp = tp;
    part.tp_rank = tp_rank;
    gpt_init_layout_part(g, ctx, cfg, &part);
}

void gpt_init_layout(GPT *g, Ctx *ctx, const GPTConfig *cfg) { gpt_init_layout_tp(g, ctx, cfg, 1, 0); }

int gpt_group_held(const GPT *g, int group) {
    return g->group_offset[group + 1] > g->group_offset[group];
}

void gpt_initial_params(const GPT *g, uint64_t seed, size_t lo, size_t hi, float *out) {
    CHECK(lo <= hi && hi <= g->n_params, "initial weights [%zu, %zu) outside the %zu params", lo,
          hi, g->n_params);
    // GPT-2 initialisation, drawn in slice order from one stream, so that every
    // device, every sharding and every tensor-parallel rank starts from the same
    // numbers. Each matrix is drawn whole (the stream moves on by the whole
    // tensor, kept or not); a tensor-parallel rank then keeps its slice of it.
    // The matrices are the tensors with weight decay (a matrix of one row, wpe at
    // --seq 1 or c_proj at --width 1, is still a matrix: not "grows > 1").
    size_t biggest = 0, biggest_piece = 0;
    for (int i = 0; i < g->n_slices; i++) {
        const ParamSlice *s = &g->slices[i];
        size_t whole = (size_t)s->grows * s->gcols;
        if (s->decay && whole > biggest) biggest = whole;
        if (s->decay && s->numel > biggest_piece) biggest_piece = s->numel;
    }
    float *tmp = malloc(biggest * sizeof(float) + 1), *piece = malloc(biggest_piece * sizeof(float) + 1);
    CHECK(tmp && piece, "out of host memory initialising the weights");
    Rng rng;
    rng_seed(&rng, seed);
    float resid_std = 0.02f / sqrtf(2.0f * g->cfg.n_layer);
    for (int i = 0; i < g->n_slices && g->slices[i].offset < hi; i++) {
        const ParamSlice *s = &g->slices[i];
        size_t end = s->offset + s->numel;
        size_t a = s->offset > lo ? s->offset : lo, b = end < hi ? end : hi;  // kept: [a, b)
        if (s->decay) {  // a matrix: the stream moves on whether or not we keep it
            int resid = strstr(s->name, "c_proj.weight") != NULL;
            rng_fill_normal(&rng, tmp, (size_t)s->grows * s->gcols, 0.0f, resid ? resid_std : 0.02f);
            if (a >= b) continue;
            const float *mine = tmp;
            if (s->split != SPLIT_NONE) {
                gpt_slice_copy(s, g->tp.rank, tmp, piece, 1);
                mine = piece;
            }
            memcpy(out + (a - lo), mine + (a - s->offset), (b - a) * sizeof(float));
        } else {  // a vector: layernorm weights 1, every bias 0
            float v = strstr(s->name, "ln_") && strstr(s->name, ".weight") ? 1.0f : 0.0f;
            for (size_t j = a; j < b; j++) out[j - lo] = v;
        }
    }
    free(tmp);
    free(piece);
}
