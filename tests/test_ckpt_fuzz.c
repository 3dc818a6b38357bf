// test_ckpt_fuzz.c — the two readers a resume trusts, the manifest's
// (manifest_parse) and the shards' (st_load), against damaged input.
//
// What it proves: a checkpoint read back after a crash, a bad disk or a bad copy
// may hold any bytes, and the reader is the last line before the training state.
// So, for thousands of mutants of real files (flipped bits, insertions,
// deletions, truncations, duplicated spans, absurd numbers, wrong names and
// dtypes, header lengths beyond the file), each reader either accepts -- and
// then everything it hands out is consistent: every piece inside its tensor,
// every tensor's bytes inside the file image -- or rejects with a message that
// names the file. Never a crash, and never a read outside the input: every
// manifest is parsed from a malloc'd buffer of exactly its length, with no NUL
// after it, so under AddressSanitizer (make sanitize) one byte too far is an
// error. The mutants come from a fixed seed: a failure reproduces.
//
// First, though, the manifest is written by the real writer from a real model's
// boxes and read back field by field, and hand-made faults are each rejected
// with the words that tell a user what is wrong.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "checkpoint.h"
#include "harness.h"
#include "mutate.h"
#include "rng.h"
#include "safetensors.h"

#define WHAT "ckpt/manifest.json"
#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))
enum { MANIFEST_CASES = 5000, ST_CASES_PER_KIND = 500 };

// ---------------------------------------------------------------- the manifest, written and read back

typedef struct {
    Ctx ctx;
    GPT g;
    TrainProgress p;
    char *text;
    size_t len;
    int n_pieces;
    CkptPiece *want;     // the pieces, in file order, as written
    int64_t params_area; // the elements of "params" pieces
} Scene;

static const char *FILES[2] = {"rank-00000.safetensors", "rank-00001.safetensors"};
static const uint64_t BYTES[2] = {81920, 65536};
static const uint32_t CRCS[2] = {0x8f3a01c2u, 0x0000beefu};  // leading zeros must survive

// A ZeRO-like split of L=2 C=16 NH=2 T=8 V=32 between two ranks, cut inside a
// row: rank 0 saves params and both moments of [0, mid), rank 1 params and
// the fp32 masters of [mid, n).
static void scene_build(Scene *s) {
    memset(s, 0, sizeof *s);
    ctx_init(&s->ctx, DEV_CPU, 1, 0);
    GPTConfig cfg = {.n_layer = 2, .n_embd = 16, .n_head = 2, .seq_len = 8, .vocab = 32};
    gpt_init_layout(&s->g, &s->ctx, &cfg);
    size_t mid = s->g.n_params / 2 + 5, lo[2] = {0, mid}, hi[2] = {mid, s->g.n_params};
    static const StateKind kinds[2][3] = {{ST_PARAMS, ST_EXP_AVG, ST_EXP_AVG_SQ}, {ST_PARAMS, ST_MASTER}};
    static const int nk[2] = {3, 2};
    JsonBuf files = {0}, man = {0};
    s->want = xcalloc(4096, sizeof *s->want);
    for (int r = 0; r < 2; r++) {
        CkptBox *bx;
        int nb = ckpt_boxes(&s->g, lo[r], hi[r], &bx), n = nb * nk[r];
        CkptBox *all = xmalloc(sizeof *all * (size_t)n);
        StateKind *k = xmalloc(sizeof *k * (size_t)n);
        if (!s->want || !all || !k || s->n_pieces + n > 4096) exit(1);
        for (int i = 0; i < n; i++) {
            all[i] = bx[i % nb];
            k[i] = kinds[r][i / nb];
            s->want[s->n_pieces++] =
                (CkptPiece){k[i], all[i].slice, all[i].r0, all[i].nr, all[i].c0, all[i].nc, r};
            if (k[i] == ST_PARAMS) s->params_area += all[i].nr * all[i].nc;
        }
        if (r) jb_printf(&files, ",\n  ");
        manifest_file_entry(&files, FILES[r], r, BYTES[r], CRCS[r], &s->g, k, all, n);
        free(all);
        free(k);
        free(bx);
    }
    TrainProgress *p = &s->p;
    *p = (TrainProgress){.step = 120, .data_step = 480, .data_step_rows = 8,
                         .seed = 0xFEDCBA9876543210ull, .recipe = "mixed-fp16",
                         .data = "tiny \"shakespeare\".txt, 1115394 bytes",
                         .opt_t = 118, .master_filled = 1, .opt_skipped = 2, .overflows = 2};
    p->scaler = (LossScaler){.scale = 8192.0f, .growth_factor = 2.0f, .backoff_factor = 0.5f,
                             .min_scale = 1e-4f, .max_scale = 16777216.0f, .growth_interval = 50,
                             .good_steps = 17, .steps = 120, .skipped = 2, .growths = 3, .backoffs = 2};
    manifest_write(&man, 120, 2, "dp=2 tp=1 pp=1 zero=1", &s->g, p, files.s);
    s->text = man.s;
    s->len = man.len;
    jb_free(&files);
}

// manifest_parse of exactly len bytes, from their own allocation (no NUL after).
static int parse_exact(const void *text, size_t len, CkptManifest *m, char *err, size_t errn) {
    char *buf = xmalloc(len ? len : 1);
    if (!buf) exit(1);
    memcpy(buf, text, len);
    int rc = manifest_parse(buf, len, WHAT, m, err, errn);
    free(buf);  // the manifest must not point into the text
    return rc;
}

static void test_roundtrip(TestState *ts, const Scene *s) {
    CkptManifest m;
    char err[512] = "";
    int rc = parse_exact(s->text, s->len, &m, err, sizeof err);
    const char *diff = NULL;
    const TrainProgress *a = &m.progress, *b = &s->p;
    const LossScaler *x = &a->scaler, *y = &b->scaler;
    if (rc) diff = err;
    else if (m.step != 120 || m.world != 2 || strcmp(m.layout, "dp=2 tp=1 pp=1 zero=1"))
        diff = "step, world or layout";
    else if (memcmp(&m.cfg, &s->g.cfg, sizeof m.cfg)) diff = "the model's configuration";
    else if (a->step != b->step || a->data_step != b->data_step ||
             a->data_step_rows != b->data_step_rows || a->seed != b->seed ||
             strcmp(a->recipe, b->recipe) || strcmp(a->data, b->data) || a->opt_t != b->opt_t || a->master_filled != b->master_filled ||
             a->opt_skipped != b->opt_skipped || a->overflows != b->overflows)
        diff = "the progress";
    else if (float_bits(x->scale) != float_bits(y->scale) ||
             float_bits(x->growth_factor) != float_bits(y->growth_factor) ||
             float_bits(x->backoff_factor) != float_bits(y->backoff_factor) ||
             float_bits(x->min_scale) != float_bits(y->min_scale) ||
             float_bits(x->max_scale) != float_bits(y->max_scale) || x->growth_interval != y->growth_interval ||
             x->good_steps != y->good_steps || x->steps != y->steps || x->skipped != y->skipped ||
             x->growths != y->growths || x->backoffs != y->backoffs)
        diff = "the loss scaler (its floats bit for bit)";
    else if (m.n_tensors != s->g.n_slices) diff = "the number of tensors";
    else if (m.n_files != 2 || m.n_pieces != s->n_pieces) diff = "the number of files or pieces";
    for (int i = 0; !diff && i < m.n_tensors; i++)
        if (strcmp(m.tensor[i], s->g.slices[i].name) || m.shape[i][0] != s->g.slices[i].grows ||
            m.shape[i][1] != s->g.slices[i].gcols)
            diff = "a tensor's name or shape";
    for (int i = 0; !diff && i < 2; i++)
        if (strcmp(m.files[i].name, FILES[i]) || m.files[i].rank != i || m.files[i].bytes != BYTES[i] ||
            m.files[i].crc != CRCS[i])
            diff = "a file's name, rank, size or CRC-32C";
    for (int i = 0; !diff && i < m.n_pieces; i++) {
        const CkptPiece *p = &m.pieces[i], *q = &s->want[i];
        if (p->kind != q->kind || p->tensor != q->tensor || p->r0 != q->r0 || p->nr != q->nr ||
            p->c0 != q->c0 || p->nc != q->nc || p->file != q->file)
            diff = "a piece";
    }
    test_report(ts, !diff, "manifest.roundtrip", "%zu bytes, %d tensors, 2 files, %d pieces: %s%s", s->len,
                s->g.n_slices, s->n_pieces, diff ? "differs in " : "every field read back exactly",
                diff ? diff : "");
    if (!rc) manifest_free(&m);
    // The two ranks' boxes tile the model: each weight is saved exactly once.
    test_report(ts, s->params_area == (int64_t)s->g.n_params, "manifest.pieces_tile_the_model",
                "the \"params\" pieces hold %lld elements; the model has %zu", (long long)s->params_area,
                s->g.n_params);
}

// The base manifest with the first `from` replaced by `to` must be refused,
// with a message naming the file and saying `want`.
static void expect_refused(TestState *ts, const Scene *s, const char *name, const char *from,
                           const char *to, const char *want) {
    const char *at = strstr(s->text, from);
    char label[96], err[512] = "";
    snprintf(label, sizeof label, "manifest.refuses_%s", name);
    if (!at) {
        test_report(ts, 0, label, "test setup: '%s' is not in the manifest", from);
        return;
    }
    Bytes b = {0};
    b_set(&b, s->text, s->len);
    b_erase(&b, (size_t)(at - s->text), strlen(from));
    b_insert(&b, (size_t)(at - s->text), to, strlen(to));
    CkptManifest m;
    int rc = parse_exact(b.p, b.n, &m, err, sizeof err);
    int ok = rc == -1 && strncmp(err, WHAT ": ", strlen(WHAT) + 2) == 0 && strstr(err, want) &&
             !m.tensor && !m.shape && !m.files && !m.pieces;  // and nothing left allocated
    if (rc == 0) manifest_free(&m);
    test_report(ts, ok, label, "%s -> %s: %s \"%s\"%s", from, to, rc ? "refused" : "ACCEPTED", err,
                ok ? "" : rc ? " (wrong words)" : "");
    free(b.p);
}

// The tiny model's first piece is the whole of wte (32 x 16), in rank 0's file.
#define P0 "[\"params\", \"wte\", 0, 32, 0, 16]"
static void test_refusals(TestState *ts, const Scene *s) {
    const char *out = "a piece of wte lies outside the tensor",
               *bad_coord = "a piece of wte has a bad coordinate",
               *range = "\"progress\" holds a value out of range", *plain = "is not a plain file name",
               *hex = "is not 8 hex digits";
    const struct { const char *name, *from, *to, *want; } c[] = {
        {"piece_outside_rows", P0, "[\"params\", \"wte\", 1, 32, 0, 16]", out},
        {"piece_outside_cols", P0, "[\"params\", \"wte\", 0, 32, 16, 16]", out},
        {"empty_piece", P0, "[\"params\", \"wte\", 0, 0, 0, 16]", out},
        {"negative_coordinate", P0, "[\"params\", \"wte\", -1, 32, 0, 16]", bad_coord},
        {"coordinate_beyond_int32", P0, "[\"params\", \"wte\", 2147483648, 32, 0, 16]", bad_coord},
        {"fractional_coordinate", P0, "[\"params\", \"wte\", 0.5, 32, 0, 16]", bad_coord},
        {"piece_of_five", P0, "[\"params\", \"wte\", 0, 32, 0]",
         "a piece is not [kind, tensor, r0, nr, c0, nc]"},
        {"unknown_tensor", P0, "[\"params\", \"wtf\", 0, 32, 0, 16]", "a piece of unknown tensor \"wtf\""},
        {"unknown_kind", P0, "[\"momentum\", \"wte\", 0, 32, 0, 16]", "unknown state kind \"momentum\""},
        {"file_name_with_dotdot_slash", "\"name\": \"rank-00001", "\"name\": \"../rank-00001", plain},
        {"file_name_with_slash", "\"name\": \"rank-00001", "\"name\": \"sub/rank-00001", plain},
        {"file_name_dotdot", "\"name\": \"rank-00001.safetensors\"", "\"name\": \"..\"", plain},
        {"file_name_empty", "\"name\": \"rank-00001.safetensors\"", "\"name\": \"\"", plain},
        {"crc_of_7_digits", "\"0000beef\"", "\"000beef\"", hex},
        {"crc_of_9_digits", "\"0000beef\"", "\"00000beef\"", hex},
        {"crc_not_hex", "\"0000beef\"", "\"0000beeg\"", hex},
        // strtoul alone would take each of these as a number (it skips spaces,
        // takes a sign and a "0x"): 8 characters are not 8 hex digits.
        {"crc_with_0x", "\"0000beef\"", "\"0x00beef\"", hex},
        {"crc_with_sign", "\"0000beef\"", "\"+000beef\"", hex},
        {"crc_with_minus", "\"0000beef\"", "\"-000beef\"", hex},
        {"crc_with_space", "\"0000beef\"", "\" 000beef\"", hex},
        {"progress_of_another_step", "\"progress\": {\"step\": 120,", "\"progress\": {\"step\": 121,",
         "\"progress\" is of another step than the manifest"},
        {"wrong_format", "course-ckpt-1", "course-ckpt-2", "format \"course-ckpt-2\" is not course-ckpt-1"},
        {"world_out_of_range", "\"world\": 2,", "\"world\": 1048577,", "\"world\" is out of range"},
        {"width_out_of_range", "\"n_embd\": 16,", "\"n_embd\": 16777217,", "\"n_embd\" is out of range"},
        {"rank_out_of_range", "\"rank\": 1,", "\"rank\": 1048577,", "\"rank\" is out of range"},
        {"step_beyond_uint64", "\"step\": 120, \"world\"", "\"step\": 18446744073709551616, \"world\"",
         "\"step\" is not a non-negative integer"},
        {"negative_bytes", "\"bytes\": 65536", "\"bytes\": -1", "\"bytes\" is not a non-negative integer"},
        {"opt_t_beyond_int32", "\"opt_t\": 118", "\"opt_t\": 2147483648", range},
        {"master_filled_2", "\"master_filled\": 1", "\"master_filled\": 2", range},
        {"recipe_too_long", "\"mixed-fp16\"", "\"mixed-fp16-and-more\"", range},
        {"scale_as_string", "\"scale\": 8192,", "\"scale\": \"8192\",",
         "\"scale\" is a string, not a number"},
        {"tensor_listed_twice", "{\"name\": \"wpe\", \"shape\"", "{\"name\": \"wte\", \"shape\"",
         "tensor \"wte\" is listed twice"},
        {"tensor_shape_of_one", "\"shape\": [32, 16]}", "\"shape\": [32]}",
         "tensor \"wte\": bad name or shape"},
        {"missing_layout", "\"layout\":", "\"layouts\":", "\"layout\" is missing"},
        {"duplicate_key", "\"world\": 2,", "\"world\": 2, \"world\": 3,", "duplicate key \"world\""},
        // Valid in every field, but not what was written: the checksum (its last field).
        {"opt_t_changed", "\"opt_t\": 118", "\"opt_t\": 119", "checksum is"},
        {"data_step_changed", "\"data_step\": ", "\"data_step\": 1", "checksum is"},
        {"checksum_renamed", "\"manifest_crc32c\"", "\"manifest_crc32d\"", "no checksum"},
        {"checksum_of_9_digits", "\"manifest_crc32c\": \"", "\"manifest_crc32c\": \"0", "no checksum"},
    };
    for (int i = 0; i < COUNT(c); i++) expect_refused(ts, s, c[i].name, c[i].from, c[i].to, c[i].want);
    // Not an object; cut short after a comma.
    CkptManifest m;
    char err[512] = "";
    int rc = parse_exact("[1, 2]", 6, &m, err, sizeof err);
    if (rc == 0) manifest_free(&m);
    test_report(ts, rc == -1 && strstr(err, WHAT ": the manifest is not a JSON object"),
                "manifest.refuses_an_array", "\"%s\"", err);
    size_t cut = (size_t)(strstr(s->text, "\"tensors\"") - s->text);
    if ((rc = parse_exact(s->text, cut, &m, err, sizeof err)) == 0) manifest_free(&m);
    test_report(ts, rc == -1 && !strncmp(err, WHAT ": byte ", strlen(WHAT) + 7) && strstr(err, "truncated?"),
                "manifest.refuses_a_cut_manifest", "the first %zu of %zu bytes: \"%s\"", cut, s->len, err);
}

// ---------------------------------------------------------------- fuzzing the manifest

// One kind of mutation's outcomes.
typedef struct {
    int cases, accepted, refused, syntax, bad, example_syntax;
    char example[200], bad_what[300];
} Tally;

// A refusal must say "<file>: <what is wrong>". One of each kind is kept for the
// report (printable, short; past the syntax if any is). 0, or -1 for a bad message.
static int tally_refusal(Tally *x, const char *err, size_t errn, const char *file, int syntax) {
    size_t n = strlen(file);
    if (!memchr(err, 0, errn) || strncmp(err, file, n) || strncmp(err + n, ": ", 2) || !err[n + 2]) return -1;
    x->refused++;
    x->syntax += syntax;
    if (!x->example[0] || (x->example_syntax && !syntax)) {
        x->example_syntax = syntax;
        snprintf(x->example, sizeof x->example, " (e.g. \"%.150s\")", err + n + 2);
        for (char *c = x->example; *c; c++)
            if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x7f) *c = '?';
    }
    return 0;
}

static void tally_report(TestState *ts, const char *prefix, const char *kind, const Tally *t,
                         const char *accepted) {
    char name[64];
    snprintf(name, sizeof name, "%s.%s", prefix, kind);
    test_report(ts, t->bad == 0, name, "%d mutants: %d accepted (%s), %d refused naming the file, %d of them "
                "for their syntax%s%s%s", t->cases, t->accepted, accepted, t->refused, t->syntax, t->example,
                t->bad ? "; BROKEN: " : "", t->bad_what);
}

// An accepted manifest is consistent: what a loader indexes with is in range.
static const char *manifest_insane(const CkptManifest *m) {
    if (m->n_tensors < 0 || m->n_files < 0 || m->n_pieces < 0 || m->world > (1 << 20)) return "counts";
    if (m->progress.step != m->step || m->progress.master_filled > 1 || !memchr(m->progress.recipe, 0, 16))
        return "the progress";
    for (int i = 0; i < m->n_tensors; i++)
        if (!m->tensor[i][0] || !memchr(m->tensor[i], 0, 48) || m->shape[i][0] < 0 || m->shape[i][1] < 0)
            return "a tensor";
    for (int i = 0; i < m->n_files; i++) {
        const char *n = m->files[i].name;
        if (!n[0] || !memchr(n, 0, 64) || strchr(n, '/') || !strcmp(n, ".") || !strcmp(n, ".."))
            return "a file name";
    }
    for (int i = 0; i < m->n_pieces; i++) {
        const CkptPiece *p = &m->pieces[i];
        if (p->kind < 0 || p->kind >= ST_KINDS || p->tensor < 0 || p->tensor >= m->n_tensors ||
            p->file < 0 || p->file >= m->n_files || p->r0 < 0 || p->c0 < 0 || p->nr < 1 || p->nc < 1 ||
            p->r0 + p->nr > m->shape[p->tensor][0] || p->c0 + p->nc > m->shape[p->tensor][1])
            return "a piece";
        char key[160];
        ckpt_piece_key(m, p, key, sizeof key);
    }
    return NULL;
}

static void test_manifest_fuzz(TestState *ts, const Scene *s) {
    Tally t[M_KINDS] = {{0}}, all = {0};
    Rng r;
    rng_seed(&r, 20260707);
    Bytes b = {0};
    for (int c = 0; c < MANIFEST_CASES; c++) {
        Mut first = (Mut)(c % M_KINDS);  // every kind equally often, then 0-2 more at random
        b_set(&b, s->text, s->len);
        mutate(&r, &b, first, 0, b.n, NULL, 0);
        for (int k = (int)rng_below(&r, 3); k > 0; k--)
            mutate(&r, &b, (Mut)rng_below(&r, M_KINDS), 0, b.n, NULL, 0);
        CkptManifest m;
        char err[512];
        memset(err, 'x', sizeof err);
        int rc = parse_exact(b.p, b.n, &m, err, sizeof err);
        Tally *x = &t[first];
        x->cases++;
        const char *why = NULL;
        if (rc == 0) {
            x->accepted++;
            why = manifest_insane(&m);
            manifest_free(&m);
        } else if (tally_refusal(x, err, sizeof err, WHAT, !strncmp(err, WHAT ": byte ", strlen(WHAT) + 7))) {
            why = "a rejection without a message naming the file";
        } else if (m.tensor || m.files || m.pieces || m.shape) {
            why = "a rejection that left memory allocated";
        }
        if (why && x->bad++ == 0) snprintf(x->bad_what, sizeof x->bad_what, "case %d: %s", c, why);
    }
    free(b.p);
    for (int k = 0; k < M_KINDS; k++) {
        tally_report(ts, "manifest_fuzz", MUT_NAME[k], &t[k], "every piece inside its tensor");
        all.cases += t[k].cases, all.refused += t[k].refused - t[k].syntax;
    }
    // A fuzz that only ever broke the syntax would test the JSON reader alone.
    test_report(ts, all.refused > all.cases / 10, "manifest_fuzz.reaches_the_checks", "%d of %d mutants were "
                "valid JSON refused by the manifest's own checks (want > 10%%)", all.refused, all.cases);
}

// ---------------------------------------------------------------- fuzzing st_load

static char g_dir[64];

typedef enum {
    S_LENGTH, S_HEADER_BYTES, S_HEADER_EDITS, S_NUMBERS, S_STRINGS, S_DATA, S_TRUNCATE, S_APPEND, S_KINDS
} StMut;
static const char *ST_NAME[S_KINDS] = {"header_length", "header_bytes", "header_edits", "header_numbers",
                                       "dtypes_names_keys", "data_bytes", "truncations", "appended_bytes"};

// An accepted file: every tensor's bytes inside the data section, sized by its
// dtype and shape, disjoint; touched, so that ASan would see a bad pointer.
static const char *st_insane(const StFile *f, const Bytes *b) {
    if (f->image_bytes != b->n || memcmp(f->image, b->p, b->n)) return "the image is not the file";
    uintptr_t lo = (uintptr_t)f->image + 8 + (uintptr_t)le64(b->p), hi = (uintptr_t)f->image + f->image_bytes;
    volatile unsigned sink = 0;
    for (int i = 0; i < f->n; i++) {
        const StTensor *t = &f->tensors[i];
        uint64_t numel = 1;
        if (!memchr(t->name, 0, sizeof t->name) || (unsigned)t->dtype >= DT_COUNT || t->ndim < 0 ||
            t->ndim > 4)
            return "a tensor's name, dtype or rank";
        for (int d = 0; d < t->ndim; d++) {
            if (t->shape[d] < 0 || (t->shape[d] && numel > UINT64_MAX / (uint64_t)t->shape[d]))
                return "a shape";
            numel *= (uint64_t)t->shape[d];
        }
        if (numel > UINT64_MAX / dtype_size(t->dtype) || numel * dtype_size(t->dtype) != t->nbytes)
            return "a size that is not its shape's";
        uintptr_t a = (uintptr_t)t->data;
        if (t->nbytes && (a < lo || a > hi || t->nbytes > hi - a))
            return "a tensor's bytes outside the data section";
        for (size_t k = 0; k < t->nbytes; k++) sink += ((const unsigned char *)t->data)[k];
        for (int j = 0; j < i; j++) {
            const StTensor *u = &f->tensors[j];
            uintptr_t ua = (uintptr_t)u->data;
            if (t->nbytes && u->nbytes && a < ua + u->nbytes && ua < a + t->nbytes)
                return "two tensors sharing bytes";
        }
    }
    for (int i = 0; i < f->n_meta; i++)
        if (!f->meta[i].key || !f->meta[i].value) return "metadata";
    (void)sink;
    return NULL;
}

static void test_st_fuzz(TestState *ts) {
    char orig[128], path[128], err[512];
    snprintf(orig, sizeof orig, "%s/orig.safetensors", g_dir);
    snprintf(path, sizeof path, "%s/mutant.safetensors", g_dir);
    float w[4 * 16 + 3 * 16 + 16 + 5];
    for (int i = 0; i < COUNT(w); i++) w[i] = 0.01f * (float)i - 0.3f;
    // Pieces as a checkpoint's shard holds them: a block of rows, a partial
    // row (a ZeRO cut), another tensor's block, a vector.
    StTensor in[4] = {
        {"params/h.0.attn.c_attn.weight@0,0", DT_F32, 2, {3, 16}, w, 192},
        {"params/h.0.attn.c_attn.weight@3,0", DT_F32, 2, {1, 5}, w + 48, 20},
        {"exp_avg/wte@0,0", DT_F32, 2, {4, 16}, w + 53, 256},
        {"params/ln_f.bias@0,0", DT_F32, 2, {1, 16}, w + 117, 64},
    };
    StMeta meta = {"step", "120"};
    if (st_save(orig, in, 4, &meta, 1, err, sizeof err)) {
        test_report(ts, 0, "st_fuzz.setup", "st_save: %s", err);
        return;
    }
    Bytes base = {0}, b = {0};
    FILE *fp = fopen(orig, "rb");
    b_reserve(&base, 4096);
    base.n = fp ? fread(base.p, 1, base.cap, fp) : 0;
    if (fp) fclose(fp);
    size_t hlen = (size_t)le64(base.p), data = base.n - 8 - hlen;
    uint32_t crc0 = crc32c(0, base.p, base.n);
    // Numbers that land on every boundary of this file's data section.
    char nb[8][24];
    const char *nums[MUTATE_N_NUMBERS + 8];
    long long d = (long long)data, edges[8] = {d, d + 1, d - 1, d - 4, 4, 188, 192, 196};
    for (int i = 0; i < MUTATE_N_NUMBERS; i++) nums[i] = MUTATE_NUMBERS[i];
    for (int i = 0; i < 8; i++)
        snprintf(nb[i], sizeof nb[i], "%lld", edges[i]), nums[MUTATE_N_NUMBERS + i] = nb[i];
    Rng r;
    rng_seed(&r, 7070707);
    Tally t[S_KINDS] = {{0}};
    int deep = 0;
    for (int c = 0; c < S_KINDS * ST_CASES_PER_KIND; c++) {
        StMut kind = (StMut)(c % S_KINDS);
        b_set(&b, base.p, base.n);
        size_t hi = 8 + hlen;
        int fix_length = 1;
        switch (kind) {
        case S_LENGTH: {
            static const uint64_t absurd[] = {0, 1, 7, UINT64_MAX, 1ull << 63, 1ull << 32, 100000001,
                                              100000000};
            uint64_t v = le64(b.p), pickv = rng_below(&r, 4);
            if (pickv == 0) v ^= 1ull << rng_below(&r, 64);
            else if (pickv == 1) v = absurd[rng_below(&r, COUNT(absurd))];
            else if (pickv == 2) v = b.n - 8 - rng_below(&r, 2);  // the whole file, or one byte less
            else v = v + rng_below(&r, 17) - 8;
            put_le64(b.p, v);
            fix_length = 0;
            break;
        }
        case S_HEADER_BYTES:  // the same length: the length field stays right
            mutate(&r, &b, rng_below(&r, 2) ? M_FLIP : M_BYTE, 8, hi, NULL, 0);
            break;
        case S_HEADER_EDITS: {
            static const Mut edits[] = {M_INSERT, M_DELETE, M_CUT, M_DUPLICATE};
            hi = mutate(&r, &b, edits[rng_below(&r, 4)], 8, hi, NULL, 0);
            fix_length = rng_below(&r, 4) != 0;  // sometimes the length is left stale
            break;
        }
        case S_NUMBERS: hi = mutate(&r, &b, M_NUMBER, 8, hi, nums, COUNT(nums)); break;
        case S_STRINGS: hi = mutate(&r, &b, M_STRING, 8, hi, NULL, 0); break;
        case S_DATA: mutate(&r, &b, M_FLIP, hi, b.n, NULL, 0); break;
        case S_TRUNCATE: b.n = mutate_pick(&r, 0, base.n, 0); fix_length = 0; break;
        case S_APPEND: {
            unsigned char junk[64];
            size_t k = 1 + rng_below(&r, 64);
            for (size_t i = 0; i < k; i++) junk[i] = (unsigned char)rng_below(&r, 256);
            b_insert(&b, b.n, junk, k);
            break;
        }
        default: break;
        }
        if (fix_length) put_le64(b.p, hi - 8);
        fp = fopen(path, "wb");
        if (!fp || fwrite(b.p, 1, b.n, fp) != b.n || fclose(fp)) {
            test_report(ts, 0, "st_fuzz.setup", "cannot write %s", path);
            break;
        }
        StFile f;
        memset(err, 'x', sizeof err);
        int rc = st_load(path, &f, err, sizeof err);
        Tally *x = &t[kind];
        x->cases++;
        const char *why = NULL;
        if (rc == 0) {
            x->accepted++;
            why = st_insane(&f, &b);
            // Data damage passes st_load (it has no checksum): the manifest's
            // CRC-32C is what catches it (unless the flips cancelled out).
            if (!why && kind == S_DATA && crc32c(0, f.image, f.image_bytes) == crc0 && memcmp(b.p, base.p, b.n))
                why = "damaged data that the CRC-32C does not see";
            st_close(&f);
        } else if (tally_refusal(x, err, sizeof err, path, strstr(err, ": bad header JSON at byte ") != NULL)) {
            why = "a rejection without a message naming the file";
        } else if (f.image || f.tensors || f.meta || f.strings) {
            why = "a rejection that left memory allocated";
        } else {  // refused by st_load's checks of the offsets against the shapes and the data
            deep += strstr(err, "data_offsets") || strstr(err, "overlap") || strstr(err, "shape has");
        }
        if (!why && kind == S_TRUNCATE && rc == 0) why = "a truncated file accepted";
        if (!why && kind == S_DATA && rc != 0) why = "a file refused for its data bytes";
        if (why && x->bad++ == 0) snprintf(x->bad_what, sizeof x->bad_what, "case %d: %s", c, why);
    }
    for (int k = 0; k < S_KINDS; k++)
        tally_report(ts, "st_fuzz", ST_NAME[k], &t[k], "every tensor inside the data section");
    test_report(ts, deep >= 100, "st_fuzz.reaches_the_checks", "%d mutants were well-formed enough to be "
                "refused for their offsets, shapes or overlaps (want >= 100)", deep);
    free(base.p);
    free(b.p);
    unlink(orig);
    unlink(path);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/test_ckpt_fuzz_XXXXXX");
    if (!mkdtemp(g_dir)) return perror("mkdtemp"), 1;
    TestState ts = {0};
    Scene s;
    scene_build(&s);
    test_roundtrip(&ts, &s);
    test_refusals(&ts, &s);
    test_manifest_fuzz(&ts, &s);
    free(s.text);
    free(s.want);
    gpt_free(&s.g);
    ctx_destroy(&s.ctx);
    test_st_fuzz(&ts);
    rmdir(g_dir);
    return test_finish(&ts);
}
