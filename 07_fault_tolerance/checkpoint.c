// checkpoint.c — saving and loading sharded checkpoints (checkpoint.h).
//
// Save, a collective:
//   1. rank 0 makes DIR/step-N.tmp/ (removing one a crash left behind)
//   2. every rank copies its views to host memory, cuts its share of each into
//      rectangles of the whole model's tensors, and writes them to its file
//      (safetensors: written to a temporary name, fsync'd, renamed)
//   3. every rank sends rank 0 its file's entry: size, CRC-32C, rectangles
//   4. rank 0 writes the manifest and publishes (publish.c), then deletes the
//      checkpoints beyond the last `keep`; every rank learns the outcome.
// Load, a collective:
//   1. rank 0 tries the complete checkpoints newest first: the manifest parses,
//      is of this model, and every file has its size and checksum; it names
//      each one it refuses, and tells every rank the one it chose
//   2. every rank reads the rectangles its views need, from whichever files
//      hold them (resharding), checks each file's checksum again, and checks
//      that the rectangles cover every element it needs exactly.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "checkpoint.h"
#include "ops.h"
#include "safetensors.h"

// ---------------------------------------------------------------- the state

void train_state_add(TrainState *s, StateKind kind, const GPT *g, size_t lo, size_t hi,
                     float *data, int replicas, int replica) {
    if (hi <= lo) return;
    if (s->n_views == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 8;
        s->views = realloc(s->views, (size_t)s->cap * sizeof *s->views);
        CHECK(s->views, "out of host memory");
    }
    s->views[s->n_views++] = (StateView){kind, g, lo, hi, data, replicas, replica};
}

void train_state_add_opt(TrainState *s, AdamW *opt, const GPT *g, int replicas, int replica) {
    if (s->n_opts == s->opt_cap) {
        s->opt_cap = s->opt_cap ? 2 * s->opt_cap : 4;
        s->opts = realloc(s->opts, (size_t)s->opt_cap * sizeof *s->opts);
        CHECK(s->opts, "out of host memory");
    }
    s->opts[s->n_opts++] = opt;
    train_state_add(s, ST_EXP_AVG, g, opt->begin, opt->end, opt->m, replicas, replica);
    train_state_add(s, ST_EXP_AVG_SQ, g, opt->begin, opt->end, opt->v, replicas, replica);
    if (opt->master) train_state_add(s, ST_MASTER, g, opt->begin, opt->end, opt->master, replicas, replica);
}

void train_state_free(TrainState *s) {
    free(s->views);
    free(s->opts);
    memset(s, 0, sizeof *s);
}

// ---------------------------------------------------------------- the file system

static int px_write(const FsOps *fs, const char *path, const void *data, size_t n) {
    (void)fs;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return -1;
    const char *p = data;
    while (n > 0) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = errno;
            close(fd);
            errno = k == 0 ? EIO : e;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return close(fd);
}

static int px_fsync_path(const char *path, int flags) {
    int fd = open(path, flags);
    if (fd < 0) return -1;
    int rc = fsync(fd), e = errno;
    close(fd);
    errno = e;
    return rc;
}
static int px_fsync_file(const FsOps *fs, const char *path) { (void)fs; return px_fsync_path(path, O_RDONLY); }
static int px_fsync_dir(const FsOps *fs, const char *d) { (void)fs; return px_fsync_path(d, O_RDONLY | O_DIRECTORY); }
static int px_rename(const FsOps *fs, const char *a, const char *b) { (void)fs; return rename(a, b); }

const FsOps *fs_posix(void) {
    static const FsOps ops = {px_write, px_fsync_file, px_fsync_dir, px_rename, NULL};
    return &ops;
}

int ckpt_mkdirs(const char *dir) {
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return errno = ENAMETOOLONG, -1;
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
            *s = '/';
        }
    if (mkdir(p, 0755) != 0 && errno != EEXIST) return -1;
    struct stat sb;
    if (stat(p, &sb) != 0) return -1;
    if (!S_ISDIR(sb.st_mode)) return errno = ENOTDIR, -1;
    return access(p, W_OK | X_OK);
}

void ckpt_note_step(const char *dir, int step) {
    char path[4200], line[32];
    snprintf(path, sizeof path, "%s/PROGRESS", dir);
    int n = snprintf(line, sizeof line, "%d\n", step);
    px_write(NULL, path, line, (size_t)n);  // best effort: only a report reads it
}

int ckpt_noted_step(const char *dir) {
    char path[4200];
    snprintf(path, sizeof path, "%s/PROGRESS", dir);
    FILE *f = fopen(path, "r");
    int step = -1;
    if (f) {
        if (fscanf(f, "%d", &step) != 1) step = -1;
        fclose(f);
    }
    return step;
}

// Removes a checkpoint directory (files only, one level: what this code writes).
void ckpt_remove_tree(const char *path) {
    DIR *d = opendir(path);
    if (!d) return;
    struct dirent *e;
    char p[4200];
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            snprintf(p, sizeof p, "%s/%s", path, e->d_name);
            unlink(p);
        }
    closedir(d);
    rmdir(path);
}

// The complete checkpoints in dir ("step-<digits>" directories), newest first.
int ckpt_list(const char *dir, uint64_t **steps) {
    int n = 0, cap = 0;
    *steps = NULL;
    DIR *d = opendir(dir);
    if (!d) return 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *s = e->d_name;
        if (strncmp(s, "step-", 5) != 0 || !s[5] || strspn(s + 5, "0123456789") != strlen(s + 5) ||
            strlen(s + 5) > 12)
            continue;
        if (n == cap) {
            cap = cap ? 2 * cap : 16;
            *steps = realloc(*steps, (size_t)cap * sizeof **steps);
            CHECK(*steps, "out of host memory");
        }
        (*steps)[n++] = strtoull(s + 5, NULL, 10);
    }
    closedir(d);
    for (int i = 1; i < n; i++)  // insertion sort, newest first
        for (int j = i; j > 0 && (*steps)[j] > (*steps)[j - 1]; j--) {
            uint64_t t = (*steps)[j];
            (*steps)[j] = (*steps)[j - 1];
            (*steps)[j - 1] = t;
        }
    return n;
}

void ckpt_step_name(uint64_t step, char *out, size_t n) {
    snprintf(out, n, "step-%08" PRIu64, step);
}

// ---------------------------------------------------------------- collectives

void ckpt_sum_p2p(float *buf, int n, void *arg) {
    const CkptP2P *p = arg;
    const Group *g = p->group;
    if (g->rank != 0) {  // to rank 0, which sums in rank order and sends the total back
        comm_send(p->comm, g, 0, buf, (size_t)n * sizeof(float));
        comm_recv(p->comm, g, 0, buf, (size_t)n * sizeof(float));
        return;
    }
    float *in = malloc((size_t)n * sizeof(float));
    CHECK(in, "out of host memory");
    for (int r = 1; r < g->size; r++) {
        comm_recv(p->comm, g, r, in, (size_t)n * sizeof(float));
        for (int i = 0; i < n; i++) buf[i] += in[i];
    }
    for (int r = 1; r < g->size; r++) comm_send(p->comm, g, r, buf, (size_t)n * sizeof(float));
    free(in);
}

int ckpt_agree(const CkptConfig *cc, int ok) {
    if (!cc->sum || cc->world == 1) return ok;
    float bad = ok ? 0.0f : 1.0f;  // the number of ranks that failed
    cc->sum(&bad, 1, cc->sum_arg);
    return bad == 0.0f;
}

// Rank 0's string to every rank: its bytes, the others' zeros, summed (exact in fp32).
void ckpt_broadcast_name(const CkptConfig *cc, char name[256]) {
    if (!cc->sum || cc->world == 1) return;
    float v[256];
    for (int i = 0; i < 256; i++) v[i] = cc->rank == 0 ? (float)(unsigned char)name[i] : 0.0f;
    cc->sum(v, 256, cc->sum_arg);
    for (int i = 0; i < 256; i++) name[i] = (char)(unsigned char)v[i];
    name[255] = 0;
}

// ---------------------------------------------------------------- save

static int errorf(char *err, size_t errn, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int errorf(char *err, size_t errn, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errn, fmt, ap);
    va_end(ap);
    return -1;
}

int ckpt_crc_of_file(const char *path, uint64_t *bytes, uint32_t *crc) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    static const size_t chunk = 1 << 20;
    unsigned char *buf = malloc(chunk);
    CHECK(buf, "out of host memory");
    *bytes = 0;
    *crc = 0;
    size_t k;
    while ((k = fread(buf, 1, chunk, f)) > 0) {
        *crc = crc32c(*crc, buf, k);
        *bytes += k;
    }
    int rc = ferror(f) ? -1 : 0;
    free(buf);
    fclose(f);
    return rc;
}

// This rank's file: its share of every view, as rectangles. Returns its manifest
// entry (malloc'd) or NULL with a message.
static char *write_shard(const CkptConfig *cc, const TrainState *st, const char *tmpdir,
                         char *err, size_t errn) {
    int nt = 0, cap = 0;
    StTensor *t = NULL;
    StateKind *kinds = NULL;
    CkptBox *all = NULL;
    float **bufs = NULL;
    const GPT *g0 = st->n_views ? st->views[0].g : NULL;
    for (int v = 0; v < st->n_views; v++) {
        const StateView *V = &st->views[v];
        // The share of replica k of n: [lo + k*len/n, lo + (k+1)*len/n).
        size_t len = V->hi - V->lo;
        size_t a = V->lo + len * (size_t)V->replica / (size_t)V->replicas;
        size_t b = V->lo + len * (size_t)(V->replica + 1) / (size_t)V->replicas;
        if (b <= a) continue;
        float *host = malloc((b - a) * sizeof(float));
        CHECK(host, "out of host memory");
        V->g->ctx->ops->to_host(V->g->ctx, host, V->data + (a - V->lo), (b - a) * sizeof(float));
        CkptBox *boxes;
        int n = ckpt_boxes(V->g, a, b, &boxes);
        if (nt + n > cap) {
            cap = 2 * (nt + n);
            t = realloc(t, (size_t)cap * sizeof *t);
            kinds = realloc(kinds, (size_t)cap * sizeof *kinds);
            all = realloc(all, (size_t)cap * sizeof *all);
            bufs = realloc(bufs, (size_t)cap * sizeof *bufs);
            CHECK(t && kinds && all && bufs, "out of host memory");
        }
        for (int i = 0; i < n; i++) {
            const CkptBox *x = &boxes[i];
            // What a tensor-parallel group replicates (LayerNorms, wpe, the biases
            // added after a reduction), its rank 0 saves alone.
            if (V->g->tp.size > 1 && V->g->tp.rank != 0 &&
                V->g->slices[x->slice].split == SPLIT_NONE)
                continue;
            float *p = malloc((size_t)(x->nr * x->nc) * sizeof(float));
            CHECK(p, "out of host memory");
            for (int64_t r = 0; r < x->nr; r++)
                memcpy(p + r * x->nc, host + x->local + (size_t)r * x->stride, (size_t)x->nc * sizeof(float));
            StTensor *T = &t[nt];
            memset(T, 0, sizeof *T);
            ckpt_key(V->kind, V->g->slices[x->slice].name, x->r0, x->c0, T->name, sizeof T->name);
            T->dtype = DT_F32;
            T->ndim = 2;
            T->shape[0] = x->nr;
            T->shape[1] = x->nc;
            T->data = p;
            T->nbytes = (size_t)(x->nr * x->nc) * sizeof(float);
            kinds[nt] = V->kind;
            all[nt] = *x;
            bufs[nt++] = p;
        }
        free(boxes);
        free(host);
    }
    char file[64], path[4300];
    snprintf(file, sizeof file, "rank-%05d.safetensors", cc->rank);
    snprintf(path, sizeof path, "%s/%s", tmpdir, file);
    char step_meta[32];
    StMeta meta[2] = {{"format", "course-ckpt-1 shard"}, {"rank", step_meta}};
    snprintf(step_meta, sizeof step_meta, "%d", cc->rank);
    char *entry = NULL;
    uint64_t bytes;
    uint32_t crc;
    if (st_save(path, t, nt, meta, 2, err, errn) == 0) {
        if (ckpt_crc_of_file(path, &bytes, &crc) != 0) {
            errorf(err, errn, "%s: reading it back failed: %s", path, strerror(errno));
        } else {
            JsonBuf b = {0};
            manifest_file_entry(&b, file, cc->rank, bytes, crc, g0, kinds, all, nt);
            entry = b.s;
        }
    }
    for (int i = 0; i < nt; i++) free(bufs[i]);
    free(bufs); free(t); free(kinds); free(all);
    return entry;
}

// Rank 0: every rank's entry, joined for the manifest's "files"; the entry files
// are deleted (the manifest holds them now).
static char *gather_entries(const char *tmpdir, int world, char *err, size_t errn) {
    JsonBuf b = {0};
    for (int r = 0; r < world; r++) {
        char side[4300];
        snprintf(side, sizeof side, "%s/rank-%05d.entry", tmpdir, r);
        FILE *f = fopen(side, "rb");
        if (!f) {
            errorf(err, errn, "rank %d's entry %s is missing: %s", r, side, strerror(errno));
            jb_free(&b);
            return NULL;
        }
        char chunk[4096];
        size_t k;
        if (r) jb_printf(&b, ",\n  ");
        while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) jb_printf(&b, "%.*s", (int)k, chunk);
        fclose(f);
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

int ckpt_save(const CkptConfig *cc, const TrainState *st, const TrainProgress *p, char *err,
              size_t errn) {
    char name[64], tmpdir[4200];
    ckpt_step_name(p->step, name, sizeof name);
    snprintf(tmpdir, sizeof tmpdir, "%s/%s.tmp", cc->dir, name);
    err[0] = 0;
    int ok = 1;
    if (cc->rank == 0) {
        ckpt_remove_tree(tmpdir);  // a save that crashed here before
        if (ckpt_mkdirs(cc->dir) != 0 || mkdir(tmpdir, 0755) != 0) {
            errorf(err, errn, "cannot create %s: %s", tmpdir, strerror(errno));
            ok = 0;
        }
    }
    if (!ckpt_agree(cc, ok)) {
        if (!err[0]) errorf(err, errn, "checkpoint step %" PRIu64 ": rank 0 could not create %s",
                            p->step, tmpdir);
        return -1;
    }
    // Each rank's entry for the manifest goes beside its shard, for rank 0 to read.
    char *entry = write_shard(cc, st, tmpdir, err, errn), *files = NULL, side[4300];
    snprintf(side, sizeof side, "%s/rank-%05d.entry", tmpdir, cc->rank);
    ok = entry && fs_posix()->write_file(fs_posix(), side, entry, strlen(entry)) == 0;
    if (entry && !ok) errorf(err, errn, "writing %s failed: %s", side, strerror(errno));
    free(entry);
    fault_in_ckpt(cc->fault, cc->rank, p->step);
    ok = ckpt_agree(cc, ok);
    if (cc->rank == 0 && ok) ok = (files = gather_entries(tmpdir, cc->world, err, errn)) != NULL;
    if (cc->rank == 0 && ok) {
        JsonBuf m = {0};
        manifest_write(&m, p->step, cc->world, cc->layout, st->views[0].g, p, files);
        ok = ckpt_publish(fs_posix(), cc->dir, name, m.s, m.len, err, errn) == 0;
        jb_free(&m);
        if (ok) prune(cc);
    }
    free(files);
    ok = ckpt_agree(cc, ok);  // the outcome, to every rank
    if (!ok) {
        if (!err[0]) errorf(err, errn, "checkpoint step %" PRIu64 " failed on another rank "
                            "(see its message); the previous checkpoints are intact", p->step);
        if (cc->rank == 0) ckpt_remove_tree(tmpdir);
        return -1;
    }
    return 0;
}
