// ckpt_load.c — finding the newest checkpoint that is whole, and reading a
// rank's state back from it in whatever layout this run has (checkpoint.h).
//
// Rank 0 verifies before anyone reads: the manifest must parse and describe this
// model, and every file must have the size and CRC-32C the manifest recorded. A
// checkpoint that fails is named with the reason and the next older one tried,
// so a torn or corrupted save costs the steps since the one before it, never
// the run. Then each rank, for each of its views, intersects the view's
// rectangles with the stored ones of the same kind and tensor, copies the
// overlaps, and insists that every element it needs was covered exactly once.
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check.h"
#include "checkpoint.h"
#include "ops.h"
#include "safetensors.h"

#define MANIFEST_MAX (64u << 20)  // a manifest larger than this is refused unread

static int read_text(const char *path, char **out, size_t *len, char *err, size_t errn) {
    FILE *f = fopen(path, "rb");
    if (!f) return snprintf(err, errn, "%s: cannot open: %s", path, strerror(errno)), -1;
    struct stat sb;
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > MANIFEST_MAX) {
        fclose(f);
        return snprintf(err, errn, "%s: not a regular file of at most %u bytes", path, MANIFEST_MAX), -1;
    }
    *len = (size_t)sb.st_size;
    *out = malloc(*len + 1);
    CHECK(*out, "out of host memory");
    size_t got = fread(*out, 1, *len, f);
    fclose(f);
    if (got != *len) {
        free(*out);
        return snprintf(err, errn, "%s: read %zu of %zu bytes", path, got, *len), -1;
    }
    (*out)[*len] = 0;
    return 0;
}

static int read_manifest(const char *dir, const char *name, CkptManifest *m, char *err, size_t errn) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s/manifest.json", dir, name);
    char *text;
    size_t len;
    if (read_text(path, &text, &len, err, errn)) return -1;
    int rc = manifest_parse(text, len, path, m, err, errn);
    free(text);
    return rc;
}

// Rank 0: is checkpoint `name` whole, and of this model?
static int verify(const CkptConfig *cc, const GPT *g, const char *name, char *err, size_t errn) {
    CkptManifest m;
    if (read_manifest(cc->dir, name, &m, err, errn)) return -1;
    const GPTConfig *a = &m.cfg, *b = &g->cfg;
    int rc = 0;
    char want[64];
    ckpt_step_name(m.step, want, sizeof want);
    if (strcmp(want, name) != 0) {  // a manifest copied, or its step edited
        snprintf(err, errn, "%s: its manifest is of step %" PRIu64 " (%s)", name, m.step, want);
        rc = -1;
    } else if (a->n_layer != b->n_layer || a->n_embd != b->n_embd || a->n_head != b->n_head ||
        a->seq_len != b->seq_len || a->vocab != b->vocab) {
        snprintf(err, errn, "%s is of another model (L=%d C=%d NH=%d T=%d V=%d; this run's: "
                 "L=%d C=%d NH=%d T=%d V=%d)", name, a->n_layer, a->n_embd, a->n_head, a->seq_len,
                 a->vocab, b->n_layer, b->n_embd, b->n_head, b->seq_len, b->vocab);
        rc = -1;
    }
    for (int i = 0; rc == 0 && i < m.n_files; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s/%s", cc->dir, name, m.files[i].name);
        uint64_t bytes;
        uint32_t crc;
        if (ckpt_crc_of_file(path, &bytes, &crc) != 0) {
            snprintf(err, errn, "%s: missing or unreadable: %s", path, strerror(errno));
            rc = -1;
        } else if (bytes != m.files[i].bytes) {
            snprintf(err, errn, "%s: %" PRIu64 " bytes, the manifest says %" PRIu64 " (truncated?)",
                     path, bytes, m.files[i].bytes);
            rc = -1;
        } else if (crc != m.files[i].crc) {
            snprintf(err, errn, "%s: CRC-32C %08" PRIx32 ", the manifest says %08" PRIx32 " (corrupt)",
                     path, crc, m.files[i].crc);
            rc = -1;
        }
    }
    manifest_free(&m);
    return rc;
}

// Rank 0 picks; every rank learns the name ("" for none, "!" + reason when every
// checkpoint there was refused).
static void choose(const CkptConfig *cc, const GPT *g, char chosen[256]) {
    chosen[0] = 0;
    if (cc->rank == 0) {
        uint64_t *steps;
        int n = ckpt_list(cc->dir, &steps), refused = 0;
        for (int i = 0; i < n && !chosen[0]; i++) {
            char name[64], why[4600];
            ckpt_step_name(steps[i], name, sizeof name);
            if (verify(cc, g, name, why, sizeof why) == 0) {
                snprintf(chosen, 256, "%s", name);
            } else {
                log_warn("checkpoint %s/%s refused: %s", cc->dir, name, why);
                refused++;
            }
        }
        if (!chosen[0] && refused)
            snprintf(chosen, 256, "!all %d checkpoint%s in %s failed verification (see above)",
                     refused, refused == 1 ? "" : "s", cc->dir);
        // The refused ones newer than the one chosen are set aside (step-N.refused, kept
        // for a post-mortem): the resumed run saves step N again where the refused one
        // was, and pruning must not count it among the checkpoints it keeps. (When
        // every one is refused, none is moved: the run stops and the files stay as they
        // are, perhaps for a run with the right flags.)
        for (int i = 0; chosen[0] && chosen[0] != '!' && i < refused; i++) {
            char name[64], from[4200], to[4300];
            ckpt_step_name(steps[i], name, sizeof name);
            snprintf(from, sizeof from, "%s/%s", cc->dir, name);
            snprintf(to, sizeof to, "%s.refused", from);
            ckpt_remove_tree(to);  // an older post-mortem of the same step
            if (rename(from, to) == 0) log_warn("checkpoint %s set aside as %s", from, to);
            else log_warn("checkpoint %s could not be set aside: %s", from, strerror(errno));
        }
        free(steps);
    }
    ckpt_broadcast_name(cc, chosen);
}

typedef struct {
    const CkptConfig *cc;
    const char *name;
    CkptManifest *m;
    StFile *files;    // opened on first use
    int *opened;
} Reader;

static const StFile *open_file(Reader *R, int f, char *err, size_t errn) {
    if (R->opened[f]) return &R->files[f];
    char path[4200];
    snprintf(path, sizeof path, "%s/%s/%s", R->cc->dir, R->name, R->m->files[f].name);
    if (st_load(path, &R->files[f], err, errn)) return NULL;
    R->opened[f] = 1;
    uint32_t crc = crc32c(0, R->files[f].image, R->files[f].image_bytes);
    if (crc != R->m->files[f].crc || R->files[f].image_bytes != R->m->files[f].bytes) {
        snprintf(err, errn, "%s: changed since it was verified (CRC-32C %08" PRIx32 ")", path, crc);
        return NULL;
    }
    return &R->files[f];
}

// Fills view V (host copy `host`, V->hi - V->lo floats) from the stored pieces.
static int fill_view(Reader *R, const StateView *V, float *host, char *err, size_t errn) {
    CkptBox *boxes;
    int n = ckpt_boxes(V->g, V->lo, V->hi, &boxes), rc = 0;
    for (int i = 0; rc == 0 && i < n; i++) {
        const CkptBox *x = &boxes[i];
        const char *tname = V->g->slices[x->slice].name;
        int tensor = manifest_find_tensor(R->m, tname);
        int64_t covered = 0;
        for (int k = 0; rc == 0 && tensor >= 0 && k < R->m->n_pieces; k++) {
            const CkptPiece *p = &R->m->pieces[k];
            if (p->kind != (int)V->kind || p->tensor != tensor) continue;
            int64_t r0 = p->r0 > x->r0 ? p->r0 : x->r0, c0 = p->c0 > x->c0 ? p->c0 : x->c0;
            int64_t r1 = p->r0 + p->nr < x->r0 + x->nr ? p->r0 + p->nr : x->r0 + x->nr;
            int64_t c1 = p->c0 + p->nc < x->c0 + x->nc ? p->c0 + p->nc : x->c0 + x->nc;
            if (r0 >= r1 || c0 >= c1) continue;
            const StFile *f = open_file(R, p->file, err, errn);
            if (!f) { rc = -1; break; }
            char key[128];
            ckpt_piece_key(R->m, p, key, sizeof key);
            const StTensor *t = st_find(f, key);
            if (!t || t->dtype != DT_F32 || t->ndim != 2 || t->shape[0] != p->nr || t->shape[1] != p->nc) {
                snprintf(err, errn, "%s/%s/%s: no F32 [%" PRId64 ", %" PRId64 "] tensor \"%s\" as the "
                         "manifest says", R->cc->dir, R->name, R->m->files[p->file].name, p->nr, p->nc, key);
                rc = -1;
                break;
            }
            const float *src = t->data;
            int finite = 1;
            for (int64_t r = r0; r < r1; r++) {
                float *dst = host + x->local + (size_t)(r - x->r0) * x->stride + (size_t)(c0 - x->c0);
                memcpy(dst, src + (r - p->r0) * p->nc + (c0 - p->c0), (size_t)(c1 - c0) * sizeof(float));
                for (int64_t j = 0; j < c1 - c0; j++) finite &= isfinite(dst[j]) != 0;
            }
            // Weights, masters and moments are finite in any state training continues
            // from: a NaN here is a file whose checksums were made after its damage.
            if (!finite) {
                snprintf(err, errn, "%s/%s/%s: tensor \"%s\" holds a value that is not finite: no "
                         "training state does (the file is damaged, or the run had diverged)",
                         R->cc->dir, R->name, R->m->files[p->file].name, key);
                rc = -1;
                break;
            }
            covered += (r1 - r0) * (c1 - c0);
        }
        if (rc == 0 && covered != x->nr * x->nc) {
            snprintf(err, errn, "%s/%s holds %" PRId64 " of the %" PRId64 " elements of %s %s rows "
                     "[%" PRId64 ", %" PRId64 ") x cols [%" PRId64 ", %" PRId64 ") this rank needs%s",
                     R->cc->dir, R->name, covered, x->nr * x->nc, state_kind_name(V->kind), tname,
                     x->r0, x->r0 + x->nr, x->c0, x->c0 + x->nc,
                     covered > x->nr * x->nc ? " (pieces overlap)" : "");
            rc = -1;
        }
    }
    free(boxes);
    return rc;
}

// The rank's own state from its shard (rank r mod the writers' when the world
// changed: it is per rank, and any rank's is a sound start): the fp8 recipe's
// scaling state, and the loss-spike check's history.
static int fill_local(Reader *R, const TrainState *st, char *err, size_t errn) {
    GPT *g = st->model && st->model->fp8 ? st->model : NULL;
    SpikeDetector *d = R->cc->spike;
    if (!g && !d) return 0;
    int want = R->cc->rank % R->m->world, f = -1;
    for (int i = 0; i < R->m->n_files; i++)
        if (R->m->files[i].rank == want) f = i;
    const StFile *file = f >= 0 ? open_file(R, f, err, errn) : NULL;
    if (f < 0) snprintf(err, errn, "%s/%s lists no file of rank %d", R->cc->dir, R->name, want);
    if (!file) return -1;
    const char *path = R->m->files[f].name;
    if (g) {
        const StTensor *t = st_find(file, CKPT_FP8_KEY);
        if (!t || t->dtype != DT_F32 || t->ndim != 2) {
            snprintf(err, errn, "%s/%s/%s: no F32 matrix \"%s\" (the fp8 scaling state)",
                     R->cc->dir, R->name, path, CKPT_FP8_KEY);
            return -1;
        }
        char why[512];
        if (gpt_fp8_restore(g, t->data, (int)t->shape[0], (int)t->shape[1], why, sizeof why)) {
            snprintf(err, errn, "%s/%s/%s: %s", R->cc->dir, R->name, path, why);
            return -1;
        }
    }
    if (d) {  // none saved (the run had no spike checks): an empty history
        const StTensor *t = st_find(file, CKPT_SPIKE_KEY);
        d->n = d->next = 0;
        if (!t) return 0;
        if (t->dtype != DT_F64 || t->ndim != 2 || t->shape[0] != 1 || t->shape[1] < 1 ||
            t->shape[1] > SPIKE_WINDOW) {
            snprintf(err, errn, "%s/%s/%s: \"%s\" is not a 1 x n F64 row with n <= %d (the "
                     "loss-spike history)", R->cc->dir, R->name, path, CKPT_SPIKE_KEY, SPIKE_WINDOW);
            return -1;
        }
        d->n = (int)t->shape[1];
        memcpy(d->loss, t->data, (size_t)d->n * sizeof(double));
        d->next = d->n % SPIKE_WINDOW;
    }
    return 0;
}

int ckpt_load(const CkptConfig *cc, const TrainState *st, TrainProgress *p, char *err,
              size_t errn) {
    char chosen[256];
    err[0] = 0;
    const GPT *g0 = st->n_views ? st->views[0].g : NULL;
    CHECK(g0, "ckpt_load: the training state has no views");
    choose(cc, g0, chosen);
    if (!chosen[0]) return 0;
    if (chosen[0] == '!') {
        snprintf(err, errn, "%s", chosen + 1);
        return -1;
    }
    CkptManifest m;
    int have = read_manifest(cc->dir, chosen, &m, err, errn) == 0, ok = have;
    Reader R = {cc, chosen, &m, NULL, NULL};
    if (have && cc->recipe && (strcmp(m.progress.recipe, cc->recipe) != 0 || m.progress.seed != cc->seed)) {
        snprintf(err, errn, "%s/%s was trained with --precision %s --seed %llu; this run asks for "
                 "--precision %s --seed %llu (a resume continues the same training)", cc->dir,
                 chosen, m.progress.recipe, (unsigned long long)m.progress.seed, cc->recipe,
                 (unsigned long long)cc->seed);
        ok = 0;
    }
    if (ok && cc->data && m.progress.data[0] && strcmp(m.progress.data, cc->data) != 0) {
        snprintf(err, errn, "%s/%s was trained on --data %s; this run reads %s (a resume "
                 "continues the same training)", cc->dir, chosen, m.progress.data, cc->data);
        ok = 0;
    }
    if (ok) {
        R.files = calloc((size_t)m.n_files + 1, sizeof *R.files);
        R.opened = calloc((size_t)m.n_files + 1, sizeof *R.opened);
        CHECK(R.files && R.opened, "out of host memory");
        *p = m.progress;
    }
    for (int v = 0; ok && v < st->n_views; v++) {
        const StateView *V = &st->views[v];
        size_t n = V->hi - V->lo;
        float *host = malloc(n * sizeof(float));
        CHECK(host, "out of host memory");
        ok = fill_view(&R, V, host, err, errn) == 0;
        if (ok) V->g->ctx->ops->to_device(V->g->ctx, V->data, host, n * sizeof(float));
        free(host);
    }
    if (ok) ok = fill_local(&R, st, err, errn) == 0;
    if (R.files)
        for (int f = 0; f < m.n_files; f++)
            if (R.opened[f]) st_close(&R.files[f]);
    free(R.files);
    free(R.opened);
    char from[320] = "";
    if (have && (m.world != cc->world || strcmp(m.layout, cc->layout) != 0))
        snprintf(from, sizeof from, "; written by %d rank%s (%s), resharded to this run's %d (%s)",
                 m.world, m.world == 1 ? "" : "s", m.layout, cc->world, cc->layout);
    if (have) manifest_free(&m);
    ok = ckpt_agree(cc, ok);
    if (!ok && !err[0]) snprintf(err, errn, "loading %s/%s failed on another rank (see its message)",
                                 cc->dir, chosen);
    if (ok && cc->rank == 0)
        log_info("resumed from %s/%s (step %" PRIu64 ")%s", cc->dir, chosen, p->step, from);
    return ok ? 1 : -1;
}
