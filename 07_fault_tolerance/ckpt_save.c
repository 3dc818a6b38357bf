// ckpt_save.c — writing a checkpoint, at once or in the background (checkpoint.h).
//
// A save has three parts. The snapshot copies this rank's share of every view to
// host memory and cuts it into rectangles: training must wait for it, since the
// next step changes the weights. The write puts the rectangles into the rank's
// safetensors file and its manifest entry beside it: nothing on the GPU or in the
// model is touched, so a thread can do it while training goes on (async save).
// The finish is a collective: every rank's write succeeded, rank 0 writes the
// manifest and publishes (publish.c), every rank learns the outcome.
//
// Synchronous: snapshot, write, finish, then the next step. Asynchronous: the
// snapshot, then the next steps while the thread writes; the finish comes at the
// start of the first step at which every rank's writer is done (one small
// agreement per step: ckpt_save_written), so the snapshot is the training's whole
// stall. A save still in flight when the next one is due, or when training ends,
// is finished first, waiting for its writer: one in flight at most.
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "checkpoint.h"
#include "files.h"
#include "ops.h"
#include "safetensors.h"
#include "timer.h"

struct CkptSave {
    CkptConfig cc;
    TrainProgress p;
    const GPT *g0;          // the slice table the manifest lists
    char name[64], tmpdir[4200];
    float *stage;           // the snapshot's shares, on the host (cc.staging's, or own_stage)
    size_t staged;          // floats in use
    float *own_stage;       // without cc.staging: this save's, freed with it
    int nt;                 // the snapshot: nt rectangles, their kinds and bytes,
    int n_local;            // then n_local tensors of the rank's own (not pieces)
    StTensor *t;            // data: in stage, or malloc'd (a rectangle of a row band)
    StateKind *kinds;
    CkptBox *boxes;
    pthread_t thread;
    int threaded;
    atomic_int written;     // the writer is done (set last, by the thread)
    int ok;                 // the write's outcome (the thread's, when threaded)
    char err[4600];
    double snapshot_ms, write_ms, wait_ms;
};

// The share of replica k of n of view V: [lo + k*len/n, lo + (k+1)*len/n).
static void share(const StateView *V, size_t *a, size_t *b) {
    size_t len = V->hi - V->lo;
    *a = V->lo + len * (size_t)V->replica / (size_t)V->replicas;
    *b = V->lo + len * (size_t)(V->replica + 1) / (size_t)V->replicas;
}

void ckpt_staging_free(CkptStaging *s) {
    if (s->buf && s->pinned) s->ctx->ops->host_free(s->ctx, s->buf);
    else free(s->buf);
    memset(s, 0, sizeof *s);
}

// Room for n floats in the reused staging buffer: grown if need be, and touched
// here, so that its page faults (a fresh buffer's pages are mapped at their first
// write) are paid now and not by the snapshot that training waits for.
static void staging_grow(CkptStaging *cs, Ctx *ctx, size_t n) {
    if (cs->cap >= n) return;
    ckpt_staging_free(cs);
    cs->ctx = ctx;
    cs->buf = ctx->ops->host_alloc(ctx, n * sizeof(float));
    cs->pinned = cs->buf != NULL;
    if (!cs->buf) cs->buf = malloc(n * sizeof(float) + 1);
    CHECK(cs->buf, "out of host memory for a checkpoint's snapshot (%zu MB)", n >> 18);
    memset(cs->buf, 0, n * sizeof(float));
    cs->cap = n;
}

// The floats of this rank's shares of every view: what one snapshot copies.
static size_t snapshot_floats(const TrainState *st) {
    size_t total = 0;
    for (int v = 0; v < st->n_views; v++) {
        size_t a, b;
        share(&st->views[v], &a, &b);
        total += b - a;
    }
    return total;
}

void ckpt_staging_reserve(CkptStaging *cs, const TrainState *st) {
    if (st->n_views) staging_grow(cs, st->views[0].g->ctx, snapshot_floats(st));
}

// Room for n floats: the reused staging buffer, or one of this save's own.
static float *stage_buffer(CkptSave *s, CkptStaging *cs, Ctx *ctx, size_t n) {
    if (!cs) {
        s->own_stage = malloc(n * sizeof(float) + 1);
        CHECK(s->own_stage, "out of host memory for a checkpoint's snapshot (%zu MB)", n >> 18);
        return s->own_stage;
    }
    staging_grow(cs, ctx, n);
    return cs->buf;
}

static int in_stage(const CkptSave *s, const void *p) {
    return (const float *)p >= s->stage && (const float *)p < s->stage + s->staged;
}

// The next tensor of the snapshot: an F32 rows x cols matrix at data.
static void add_tensor_of(CkptSave *s, const char *name, DType dt, int64_t rows, int64_t cols,
                          const void *data) {
    StTensor *T = &s->t[s->nt + s->n_local];
    memset(T, 0, sizeof *T);
    snprintf(T->name, sizeof T->name, "%s", name);
    T->dtype = dt;
    T->ndim = 2;
    T->shape[0] = rows;
    T->shape[1] = cols;
    T->data = data;
    T->nbytes = (size_t)(rows * cols) * dtype_size(dt);
}
static void add_tensor(CkptSave *s, const char *name, int64_t rows, int64_t cols, const float *data) {
    add_tensor_of(s, name, DT_F32, rows, cols, data);
}
// One of the rank's own tensors after the pieces (data malloc'd: freed with the save).
static void add_local(CkptSave *s, const char *name, DType dt, int64_t rows, int64_t cols,
                      void *data) {
    s->t = realloc(s->t, (size_t)(s->nt + s->n_local + 1) * sizeof *s->t);
    CHECK(s->t, "out of host memory");
    add_tensor_of(s, name, dt, rows, cols, data);
    s->n_local++;
}

// The snapshot: this rank's share of every view, copied to the host (the only
// copy: a rectangle of whole rows is written to the file from where it lies),
// then cut into rectangles.
static void snapshot(CkptSave *s, const TrainState *st) {
    size_t total = snapshot_floats(st);
    s->stage = stage_buffer(s, s->cc.staging, st->views[0].g->ctx, total);
    s->staged = total;
    int cap = 0;
    size_t off = 0;
    for (int v = 0; v < st->n_views; v++) {
        const StateView *V = &st->views[v];
        size_t a, b;
        share(V, &a, &b);
        if (b <= a) continue;
        float *host = s->stage + off;
        off += b - a;
        V->g->ctx->ops->to_host(V->g->ctx, host, V->data + (a - V->lo), (b - a) * sizeof(float));
        CkptBox *boxes;
        int n = ckpt_boxes(V->g, a, b, &boxes);
        if (s->nt + n > cap) {
            cap = 2 * (s->nt + n);
            s->t = realloc(s->t, (size_t)cap * sizeof *s->t);
            s->kinds = realloc(s->kinds, (size_t)cap * sizeof *s->kinds);
            s->boxes = realloc(s->boxes, (size_t)cap * sizeof *s->boxes);
            CHECK(s->t && s->kinds && s->boxes, "out of host memory");
        }
        for (int i = 0; i < n; i++) {
            const CkptBox *x = &boxes[i];
            // What a tensor-parallel group replicates (LayerNorms, wpe, the biases
            // added after a reduction), its rank 0 saves alone.
            if (V->g->tp.size > 1 && V->g->tp.rank != 0 &&
                V->g->slices[x->slice].split == SPLIT_NONE)
                continue;
            size_t bytes = (size_t)(x->nr * x->nc) * sizeof(float);
            const float *p = host + x->local;
            if (x->nr > 1 && x->stride != (size_t)x->nc) {  // a band of columns: gathered
                float *q = malloc(bytes);
                CHECK(q, "out of host memory");
                for (int64_t r = 0; r < x->nr; r++)
                    memcpy(q + r * x->nc, p + (size_t)r * x->stride, (size_t)x->nc * sizeof(float));
                p = q;
            }
            char key[sizeof s->t[0].name];
            ckpt_key(V->kind, V->g->slices[x->slice].name, x->r0, x->c0, key, sizeof key);
            add_tensor(s, key, x->nr, x->nc, p);
            s->kinds[s->nt] = V->kind;
            s->boxes[s->nt++] = *x;
        }
        free(boxes);
    }
    // The fp8 recipe's amax histories: this rank's own (it measured them).
    int rows, cols;
    float *fp8 = st->model ? gpt_fp8_state(st->model, &rows, &cols) : NULL;
    if (fp8 && rows > 0) add_local(s, CKPT_FP8_KEY, DT_F32, rows, cols, fp8);
    else free(fp8);
    // The loss-spike check's history: this rank's own (it judged its own losses).
    const SpikeDetector *d = s->cc.spike;
    if (d && d->n > 0) {
        double *h = malloc((size_t)d->n * sizeof *h);
        CHECK(h, "out of host memory");
        for (int i = 0; i < d->n; i++)  // oldest first: the ring starts at next once full
            h[i] = d->loss[(d->n < SPIKE_WINDOW ? i : d->next + i) % SPIKE_WINDOW];
        add_local(s, CKPT_SPIKE_KEY, DT_F64, 1, d->n, h);
    }
}

// The write: the rank's file, then its manifest entry beside it (rank 0 reads
// every entry when it writes the manifest). Host memory and files only.
static void *write_shard(void *arg) {
    CkptSave *s = arg;
    double t0 = now_seconds();
    char file[64], path[4300], side[4300], meta_rank[32];
    snprintf(file, sizeof file, "rank-%05d.safetensors", s->cc.rank);
    snprintf(path, sizeof path, "%s/%s", s->tmpdir, file);
    snprintf(side, sizeof side, "%s/rank-%05d.entry", s->tmpdir, s->cc.rank);
    snprintf(meta_rank, sizeof meta_rank, "%d", s->cc.rank);
    StMeta meta[2] = {{"format", "course-ckpt-1 shard"}, {"rank", meta_rank}};
    uint64_t bytes;
    uint32_t crc;
    s->ok = 0;
    if (st_save(path, s->t, s->nt + s->n_local, meta, 2, s->err, sizeof s->err) != 0) goto out;
    if (ckpt_crc_of_file(path, &bytes, &crc) != 0) {
        snprintf(s->err, sizeof s->err, "%s: reading it back failed: %s", path, strerror(errno));
        goto out;
    }
    JsonBuf b = {0};
    manifest_file_entry(&b, file, s->cc.rank, bytes, crc, s->g0, s->kinds, s->boxes, s->nt);
    s->ok = fs_posix()->write_file(fs_posix(), side, b.s, b.len) == 0;
    if (!s->ok) snprintf(s->err, sizeof s->err, "writing %s failed: %s", side, strerror(errno));
    jb_free(&b);
out:
    s->write_ms = (now_seconds() - t0) * 1e3;
    atomic_store(&s->written, 1);
    return NULL;
}

int ckpt_save_written(CkptSave *s) { return atomic_load(&s->written); }

// Rank 0: every rank's entry, joined for the manifest's "files"; the entry files
// are deleted (the manifest holds them now).
static char *gather_entries(const char *tmpdir, int world, char *err, size_t errn) {
    JsonBuf b = {0};
    for (int r = 0; r < world; r++) {
        char side[4300];
        snprintf(side, sizeof side, "%s/rank-%05d.entry", tmpdir, r);
        FILE *f = fopen(side, "rb");
        if (!f) {
            snprintf(err, errn, "rank %d's entry %s is missing: %s", r, side, strerror(errno));
            jb_free(&b);
            return NULL;
        }
        char chunk[4096];
        size_t k;
        if (r) jb_printf(&b, ",\n  ");
        while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) jb_printf(&b, "%.*s", (int)k, chunk);
        int bad = ferror(f) ? (errno ? errno : EIO) : 0;
        fclose(f);
        if (bad) {  // a short entry would publish a manifest that no resume can read
            snprintf(err, errn, "rank %d's entry %s could not be read: %s", r, side, strerror(bad));
            jb_free(&b);
            return NULL;
        }
        unlink(side);
    }
    return b.s;
}

// Deletes complete checkpoints beyond the newest `keep` (rank 0, after publishing).
static void prune(const CkptConfig *cc) {
    uint64_t *steps;
    int n = ckpt_list(cc->dir, &steps);
    for (int i = cc->keep; i < n; i++) {
        char name[64], path[4200];
        ckpt_step_name(steps[i], name, sizeof name);
        snprintf(path, sizeof path, "%s/%s", cc->dir, name);
        ckpt_remove_tree(path);
    }
    free(steps);
}

int ckpt_save_start(const CkptConfig *cc, const TrainState *st, const TrainProgress *p, int async,
                    CkptSave **out, char *err, size_t errn) {
    *out = NULL;
    CkptSave *s = calloc(1, sizeof *s);
    CHECK(s, "out of host memory");
    s->cc = *cc;
    s->p = *p;
    s->g0 = st->views[0].g;
    ckpt_step_name(p->step, s->name, sizeof s->name);
    snprintf(s->tmpdir, sizeof s->tmpdir, "%s/%s.tmp", cc->dir, s->name);
    err[0] = 0;
    int ok = 1;
    if (cc->rank == 0) {
        ckpt_remove_tree(s->tmpdir);  // a save that crashed here before
        if (make_dirs(cc->dir) != 0 || mkdir(s->tmpdir, 0755) != 0) {
            snprintf(err, errn, "cannot create %s: %s", s->tmpdir, strerror(errno));
            ok = 0;
        }
    }
    if (!ckpt_agree(cc, ok)) {
        if (!err[0]) snprintf(err, errn, "checkpoint step %" PRIu64 ": rank 0 could not create %s",
                              p->step, s->tmpdir);
        free(s);
        return -1;
    }
    double t0 = now_seconds();
    snapshot(s, st);
    s->snapshot_ms = (now_seconds() - t0) * 1e3;
    s->threaded = async && pthread_create(&s->thread, NULL, write_shard, s) == 0;
    if (!s->threaded) write_shard(s);  // synchronous (or no thread to be had)
    *out = s;
    return 0;
}

int ckpt_save_finish(CkptSave *s, CkptSaveStats *stats, char *err, size_t errn) {
    const CkptConfig *cc = &s->cc;
    double t0 = now_seconds();
    if (s->threaded) pthread_join(s->thread, NULL);
    s->wait_ms = (now_seconds() - t0) * 1e3;
    err[0] = 0;
    if (!s->ok) snprintf(err, errn, "%s", s->err);
    fault_in_ckpt(cc->fault, cc->rank, s->p.step);
    int ok = ckpt_agree(cc, s->ok);
    char *files = NULL;
    if (cc->rank == 0 && ok) ok = (files = gather_entries(s->tmpdir, cc->world, err, errn)) != NULL;
    if (cc->rank == 0 && ok) {
        JsonBuf m = {0};
        manifest_write(&m, s->p.step, cc->world, cc->layout, s->g0, &s->p, files);
        ok = ckpt_publish(fs_posix(), cc->dir, s->name, m.s, m.len, err, errn) == 0;
        jb_free(&m);
        if (ok) prune(cc);
    }
    free(files);
    ok = ckpt_agree(cc, ok);  // the outcome, to every rank
    if (ok) fault_after_publish(cc->fault, cc->rank, s->p.step, cc->dir, s->name);
    if (!ok) {
        if (!err[0]) snprintf(err, errn, "checkpoint step %" PRIu64 " failed on another rank "
                              "(see its message); the previous checkpoints are intact", s->p.step);
        if (cc->rank == 0) ckpt_remove_tree(s->tmpdir);
    }
    if (stats) {
        size_t bytes = 0;
        for (int i = 0; i < s->nt + s->n_local; i++) bytes += s->t[i].nbytes;
        *stats = (CkptSaveStats){.snapshot_ms = s->snapshot_ms, .write_ms = s->write_ms,
                                 .wait_ms = s->wait_ms, .bytes = bytes, .async = s->threaded};
    }
    for (int i = 0; i < s->nt + s->n_local; i++)
        if (!in_stage(s, s->t[i].data)) free((void *)s->t[i].data);
    free(s->own_stage);
    free(s->t);
    free(s->kinds);
    free(s->boxes);
    free(s);
    return ok ? 0 : -1;
}

int ckpt_save(const CkptConfig *cc, const TrainState *st, const TrainProgress *p, char *err,
              size_t errn) {
    CkptSave *s;
    if (ckpt_save_start(cc, st, p, 0, &s, err, errn)) return -1;
    return ckpt_save_finish(s, NULL, err, errn);
}
