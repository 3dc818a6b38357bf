// manifest.c — a checkpoint's table of contents (checkpoint.h): written by rank 0
// from every rank's entry, read by every rank of the job that resumes from it,
// and refused, with the reason, when it is damaged. It is the one file a load
// trusts, so every number in it is checked before use.
//
//   {"format": "course-ckpt-1", "step": 120, "world": 4, "layout": "dp=2 tp=2 pp=1 zero=1",
//    "model": {"n_layer": 2, "n_embd": 64, "n_head": 4, "seq_len": 32, "vocab": 256},
//    "progress": {...resume state...},
//    "tensors": [{"name": "wte", "shape": [256, 64]}, ...],
//    "files": [{"name": "rank-00000.safetensors", "rank": 0, "bytes": 81920,
//               "crc32c": "8f3a01c2", "pieces": [["params", "wte", 0, 128, 0, 64], ...]}, ...]}
//
// A piece is [kind, tensor, r0, nr, c0, nc]: the rectangle rows [r0, r0+nr) x
// cols [c0, c0+nc) of the tensor, stored in that file as an nr x nc F32 tensor
// named by ckpt_key.
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "checkpoint.h"

#define FORMAT "course-ckpt-1"
#define CRC_FIELD ",\n \"manifest_crc32c\": "

void ckpt_key(StateKind kind, const char *tensor, int64_t r0, int64_t c0, char *out, size_t n) {
    snprintf(out, n, "%s/%s@%" PRId64 ",%" PRId64, state_kind_name(kind), tensor, r0, c0);
}

void ckpt_piece_key(const CkptManifest *m, const CkptPiece *p, char *out, size_t n) {
    ckpt_key((StateKind)p->kind, m->tensor[p->tensor], p->r0, p->c0, out, n);
}

void manifest_file_entry(JsonBuf *b, const char *file, int rank, uint64_t bytes, uint32_t crc,
                         const GPT *g, const StateKind *kinds, const CkptBox *boxes, int n) {
    jb_printf(b, "{\"name\": ");
    jb_string(b, file);
    jb_printf(b, ", \"rank\": %d, \"bytes\": %" PRIu64 ", \"crc32c\": \"%08" PRIx32 "\", \"pieces\": [",
              rank, bytes, crc);
    for (int i = 0; i < n; i++) {
        const CkptBox *x = &boxes[i];
        jb_printf(b, "%s\n    [\"%s\", ", i ? "," : "", state_kind_name(kinds[i]));
        jb_string(b, g->slices[x->slice].name);
        jb_printf(b, ", %" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "]", x->r0, x->nr, x->c0,
                  x->nc);
    }
    jb_printf(b, "]}");
}

// Floats with 9 significant digits and doubles with 17: strtod gives back the
// identical bits.
static void progress_json(JsonBuf *b, const TrainProgress *p) {
    const LossScaler *s = &p->scaler;
    jb_printf(b, "{\"step\": %" PRIu64 ", \"data_step\": %" PRIu64 ", \"data_step_rows\": %" PRIu64
              ", \"seed\": %" PRIu64 ", \"recipe\": ", p->step, p->data_step, p->data_step_rows,
              p->seed);
    jb_string(b, p->recipe);
    jb_printf(b, ", \"data\": ");
    jb_string(b, p->data);
    jb_printf(b, ", \"opt_t\": %d, \"master_filled\": %d, \"opt_skipped\": %ld, \"overflows\": %ld,"
              "\n    \"scaler\": {\"scale\": %.9g, \"growth_factor\": %.9g, \"backoff_factor\": %.9g, "
              "\"min_scale\": %.9g, \"max_scale\": %.9g, \"growth_interval\": %d, \"good_steps\": %d, "
              "\"steps\": %ld, \"skipped\": %ld, \"growths\": %ld, \"backoffs\": %ld}}",
              p->opt_t, p->master_filled, p->opt_skipped, p->overflows, (double)s->scale,
              (double)s->growth_factor, (double)s->backoff_factor, (double)s->min_scale,
              (double)s->max_scale, s->growth_interval, s->good_steps, s->steps, s->skipped,
              s->growths, s->backoffs);
}

void manifest_write(JsonBuf *b, uint64_t step, int world, const char *layout, const GPT *g,
                    const TrainProgress *p, const char *files) {
    const GPTConfig *c = &g->cfg;
    size_t start = b->len;
    jb_printf(b, "{\"format\": \"" FORMAT "\", \"step\": %" PRIu64 ", \"world\": %d, \"layout\": ",
              step, world);
    jb_string(b, layout);
    jb_printf(b, ",\n \"model\": {\"n_layer\": %d, \"n_embd\": %d, \"n_head\": %d, \"seq_len\": %d, "
              "\"vocab\": %d},\n \"progress\": ", c->n_layer, c->n_embd, c->n_head, c->seq_len,
              c->vocab);
    progress_json(b, p);
    jb_printf(b, ",\n \"tensors\": [");
    for (int i = 0; i < g->n_slices; i++) {
        jb_printf(b, "%s\n  {\"name\": ", i ? "," : "");
        jb_string(b, g->slices[i].name);
        jb_printf(b, ", \"shape\": [%d, %d]}", g->slices[i].grows, g->slices[i].gcols);
    }
    jb_printf(b, "],\n \"files\": [%s]", files);
    // Last, the checksum of every byte before it (manifest_parse checks it): the
    // progress counters are trusted as they are, and a flipped digit in opt_t or
    // data_step would otherwise resume a different run without a word.
    uint32_t crc = crc32c(0, b->s + start, b->len - start);
    jb_printf(b, CRC_FIELD "\"%08x\"}\n", crc);
}

// ---------------------------------------------------------------- reading

__attribute__((format(printf, 4, 5)))
static int bad(char *err, size_t errn, const char *what, const char *fmt, ...) {
    char d[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d, sizeof d, fmt, ap);
    va_end(ap);
    snprintf(err, errn, "%s: %s", what, d);
    return -1;
}

// A required non-negative integer no larger than max.
static int get_int(const Json *o, const char *key, const char *what, uint64_t max, int64_t *out,
                   char *err, size_t errn) {
    uint64_t v;
    if (json_get_u64(o, key, what, &v, err, errn)) return -1;
    if (v > max) return bad(err, errn, what, "\"%s\" is out of range", key);
    *out = (int64_t)v;
    return 0;
}

// The checksum of the manifest's text before its last field, CRC_FIELD: 0 when
// it matches; else -1 with the reason. (text holds exactly len bytes: no NUL.)
static int check_crc(const char *text, size_t len, const char *what, char *err, size_t errn) {
    static const char key[] = CRC_FIELD;
    size_t k = sizeof key - 1, at = len;
    for (size_t i = len >= k ? len - k + 1 : 0; i-- > 0;)  // the last occurrence
        if (memcmp(text + i, key, k) == 0) {
            at = i;
            break;
        }
    // Then "xxxxxxxx" (8 hex digits), the closing brace, and white space to the end.
    uint32_t want = 0;
    size_t i = at + k;
    int ok = at < len && len - i >= 11 && text[i] == '"' && text[i + 9] == '"';
    for (int d = 1; ok && d <= 8; d++) {
        char c = text[i + d];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        ok = v >= 0;
        want = want << 4 | (uint32_t)(v & 15);
    }
    for (i += 10; ok && i < len && (text[i] == ' ' || text[i] == '\n'); i++) {}
    ok = ok && i < len && text[i] == '}';
    for (i++; ok && i < len; i++) ok = text[i] == ' ' || text[i] == '\n';
    if (!ok)
        return bad(err, errn, what, "%s", "no checksum (\"manifest_crc32c\", its last field): written "
                   "by an older version, or edited");
    uint32_t got = crc32c(0, text, at);
    if (got != want) {
        char d[96];
        snprintf(d, sizeof d, "its text's checksum is %08x, not the %08x it records: damaged", got,
                 want);
        return bad(err, errn, what, "%s", d);
    }
    return 0;
}

static int parse_progress(const Json *o, const char *what, TrainProgress *p, char *err, size_t errn) {
    static const char *ukeys[8] = {"step", "seed", "opt_t", "master_filled", "opt_skipped",
                                   "overflows", "data_step", "data_step_rows"};
    static const char *su_keys[6] = {"growth_interval", "good_steps", "steps", "skipped",
                                     "growths", "backoffs"};
    static const char *sd_keys[5] = {"scale", "growth_factor", "backoff_factor", "min_scale",
                                     "max_scale"};
    uint64_t u[8], su[6];
    double d[5];
    const char *recipe;
    for (int i = 0; i < 8; i++)
        if (json_get_u64(o, ukeys[i], what, &u[i], err, errn)) return -1;
    if (json_get_string(o, "recipe", what, &recipe, err, errn)) return -1;
    // The corpus: in the manifests written since it was recorded; older ones load
    // without it (and are not checked).
    const char *data = "";
    if (json_get(o, "data") && json_get_string(o, "data", what, &data, err, errn)) return -1;
    const Json *s = json_get_typed(o, "scaler", JSON_OBJECT, what, err, errn);
    if (!s) return -1;
    for (int i = 0; i < 6; i++)
        if (json_get_u64(s, su_keys[i], what, &su[i], err, errn)) return -1;
    for (int i = 0; i < 5; i++)
        if (json_get_double(s, sd_keys[i], what, &d[i], err, errn)) return -1;
    if (u[2] > INT32_MAX || u[3] > 1 || u[4] > INT32_MAX || u[5] > INT32_MAX ||
        su[0] > INT32_MAX || su[1] > INT32_MAX || su[2] > INT32_MAX || su[3] > INT32_MAX ||
        su[4] > INT32_MAX || su[5] > INT32_MAX || strlen(recipe) >= sizeof p->recipe ||
        strlen(data) >= sizeof p->data ||
        u[7] == 0 || u[7] > INT32_MAX || u[6] > UINT64_MAX / u[7])
        return bad(err, errn, what, "%s holds a value out of range", "\"progress\"");
    memset(p, 0, sizeof *p);
    p->step = u[0];
    p->seed = u[1];
    p->opt_t = (int)u[2];
    p->master_filled = (int)u[3];
    p->opt_skipped = (long)u[4];
    p->overflows = (long)u[5];
    p->data_step = u[6];
    p->data_step_rows = u[7];
    snprintf(p->recipe, sizeof p->recipe, "%s", recipe);
    snprintf(p->data, sizeof p->data, "%s", data);
    LossScaler *sc = &p->scaler;
    sc->scale = (float)d[0];
    sc->growth_factor = (float)d[1];
    sc->backoff_factor = (float)d[2];
    sc->min_scale = (float)d[3];
    sc->max_scale = (float)d[4];
    sc->growth_interval = (int)su[0];
    sc->good_steps = (int)su[1];
    sc->steps = (long)su[2];
    sc->skipped = (long)su[3];
    sc->growths = (long)su[4];
    sc->backoffs = (long)su[5];
    return 0;
}

int manifest_find_tensor(const CkptManifest *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensor[i], name) == 0) return i;
    return -1;
}

static int parse_files(const Json *files, const char *what, CkptManifest *m, char *err,
                       size_t errn) {
    m->n_files = files->n;
    m->files = calloc((size_t)files->n + 1, sizeof *m->files);
    size_t total = 0;
    for (int i = 0; i < files->n; i++) {
        const Json *f = &files->items[i], *pieces;
        const char *name, *crc;
        int64_t rank = 0, bytes = 0;
        if (f->type != JSON_OBJECT) return bad(err, errn, what, "%s is not an object", "a file entry");
        if (json_get_string(f, "name", what, &name, err, errn) ||
            get_int(f, "rank", what, 1 << 20, &rank, err, errn) ||
            get_int(f, "bytes", what, INT64_MAX, &bytes, err, errn) ||
            json_get_string(f, "crc32c", what, &crc, err, errn) ||
            !(pieces = json_get_typed(f, "pieces", JSON_ARRAY, what, err, errn)))
            return -1;
        // A file name is a plain name inside the checkpoint's directory.
        if (strlen(name) == 0 || strlen(name) >= sizeof m->files[i].name || strchr(name, '/') ||
            strcmp(name, "..") == 0 || strcmp(name, ".") == 0)
            return bad(err, errn, what, "file name \"%.64s\" is not a plain file name", name);
        // Exactly 8 hex digits: strtoul alone would take a sign, spaces or "0x".
        if (strlen(crc) != 8 || strspn(crc, "0123456789abcdefABCDEF") != 8)
            return bad(err, errn, what, "crc32c \"%.16s\" is not 8 hex digits", crc);
        unsigned long v = strtoul(crc, NULL, 16);
        snprintf(m->files[i].name, sizeof m->files[i].name, "%s", name);
        m->files[i].rank = (int)rank;
        m->files[i].bytes = (uint64_t)bytes;
        m->files[i].crc = (uint32_t)v;
        total += (size_t)pieces->n;
    }
    m->pieces = calloc(total + 1, sizeof *m->pieces);
    CHECK(m->files && m->pieces, "out of host memory");
    for (int i = 0; i < files->n; i++) {
        const Json *pieces = json_get(&files->items[i], "pieces");
        for (int k = 0; k < pieces->n; k++) {
            const Json *a = &pieces->items[k];
            if (a->type != JSON_ARRAY || a->n != 6 || a->items[0].type != JSON_STRING ||
                a->items[1].type != JSON_STRING)
                return bad(err, errn, what, "in %s: a piece is not [kind, tensor, r0, nr, c0, nc]",
                           m->files[i].name);
            CkptPiece *p = &m->pieces[m->n_pieces++];
            p->file = i;
            p->kind = -1;
            for (int kk = 0; kk < ST_KINDS; kk++)
                if (strcmp(a->items[0].str, state_kind_name((StateKind)kk)) == 0) p->kind = kk;
            if (p->kind < 0) return bad(err, errn, what, "unknown state kind \"%.32s\"", a->items[0].str);
            p->tensor = manifest_find_tensor(m, a->items[1].str);
            if (p->tensor < 0) return bad(err, errn, what, "a piece of unknown tensor \"%.48s\"", a->items[1].str);
            int64_t v[4];
            for (int d = 0; d < 4; d++) {
                const Json *x = &a->items[2 + d];
                if (x->type != JSON_NUMBER || !x->is_u64 || x->u64 > INT32_MAX)
                    return bad(err, errn, what, "a piece of %s has a bad coordinate", m->tensor[p->tensor]);
                v[d] = (int64_t)x->u64;
            }
            p->r0 = v[0]; p->nr = v[1]; p->c0 = v[2]; p->nc = v[3];
            const int64_t *sh = m->shape[p->tensor];
            if (p->nr < 1 || p->nc < 1 || p->r0 + p->nr > sh[0] || p->c0 + p->nc > sh[1])
                return bad(err, errn, what, "a piece of %s lies outside the tensor", m->tensor[p->tensor]);
        }
    }
    return 0;
}

int manifest_parse(const char *text, size_t len, const char *what, CkptManifest *m, char *err,
                   size_t errn) {
    memset(m, 0, sizeof *m);
    Json *j = json_parse(text, len, what, err, errn);
    if (!j) return -1;
    int rc = -1;
    const char *format, *layout;
    const Json *model, *progress, *tensors, *files;
    int64_t world = 0, dims[5];
    static const char *dim_keys[5] = {"n_layer", "n_embd", "n_head", "seq_len", "vocab"};
    if (j->type != JSON_OBJECT) {
        bad(err, errn, what, "%s", "the manifest is not a JSON object");
        goto out;
    }
    if (json_get_string(j, "format", what, &format, err, errn)) goto out;
    if (strcmp(format, FORMAT) != 0) {
        bad(err, errn, what, "format \"%.40s\" is not " FORMAT, format);
        goto out;
    }
    if (json_get_u64(j, "step", what, &m->step, err, errn) ||
        get_int(j, "world", what, 1 << 20, &world, err, errn) ||
        json_get_string(j, "layout", what, &layout, err, errn) ||
        !(model = json_get_typed(j, "model", JSON_OBJECT, what, err, errn)) ||
        !(progress = json_get_typed(j, "progress", JSON_OBJECT, what, err, errn)) ||
        !(tensors = json_get_typed(j, "tensors", JSON_ARRAY, what, err, errn)) ||
        !(files = json_get_typed(j, "files", JSON_ARRAY, what, err, errn)))
        goto out;
    for (int i = 0; i < 5; i++)
        if (get_int(model, dim_keys[i], what, 1 << 24, &dims[i], err, errn)) goto out;
    for (int i = 0; i < 5; i++)
        if (dims[i] < 1) {
            bad(err, errn, what, "\"%s\" is 0", dim_keys[i]);
            goto out;
        }
    if (world < 1) {  // a layout of no ranks: every rank's share would divide by it
        bad(err, errn, what, "%s", "\"world\" is 0");
        goto out;
    }
    m->world = (int)world;
    snprintf(m->layout, sizeof m->layout, "%s", layout);
    m->cfg = (GPTConfig){(int)dims[0], (int)dims[1], (int)dims[2], (int)dims[3], (int)dims[4]};
    if (parse_progress(progress, what, &m->progress, err, errn)) goto out;
    if (m->progress.step != m->step) {
        bad(err, errn, what, "%s", "\"progress\" is of another step than the manifest");
        goto out;
    }
    m->n_tensors = tensors->n;
    m->tensor = calloc((size_t)tensors->n + 1, sizeof *m->tensor);
    m->shape = calloc((size_t)tensors->n + 1, sizeof *m->shape);
    CHECK(m->tensor && m->shape, "out of host memory");
    for (int i = 0; i < tensors->n; i++) {
        const Json *t = &tensors->items[i], *shape;
        const char *name;
        if (t->type != JSON_OBJECT || json_get_string(t, "name", what, &name, err, errn) ||
            !(shape = json_get_typed(t, "shape", JSON_ARRAY, what, err, errn))) {
            if (t->type != JSON_OBJECT) bad(err, errn, what, "%s", "a tensor entry is not an object");
            goto out;
        }
        if (strlen(name) == 0 || strlen(name) >= sizeof m->tensor[i] || shape->n != 2 ||
            shape->items[0].type != JSON_NUMBER || !shape->items[0].is_u64 ||
            shape->items[1].type != JSON_NUMBER || !shape->items[1].is_u64 ||
            shape->items[0].u64 > INT32_MAX || shape->items[1].u64 > INT32_MAX) {
            bad(err, errn, what, "tensor \"%.48s\": bad name or shape", name);
            goto out;
        }
        if (manifest_find_tensor(m, name) >= 0) {
            bad(err, errn, what, "tensor \"%.48s\" is listed twice", name);
            goto out;
        }
        snprintf(m->tensor[i], sizeof m->tensor[i], "%s", name);
        m->shape[i][0] = (int64_t)shape->items[0].u64;
        m->shape[i][1] = (int64_t)shape->items[1].u64;
    }
    rc = parse_files(files, what, m, err, errn);
    // The checksum last: a manifest edited by hand is named by what is wrong in it.
    if (rc == 0) rc = check_crc(text, len, what, err, errn);
out:
    json_free(j);
    if (rc) manifest_free(m);
    return rc;
}

void manifest_free(CkptManifest *m) {
    free(m->tensor);
    free(m->shape);
    free(m->files);
    free(m->pieces);
    memset(m, 0, sizeof *m);
}
