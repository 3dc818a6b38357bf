// test_publish.c — the commit protocol of a checkpoint (publish.c) against a
// simulated disk that loses power between any two of its calls.
//
// What it proves: ckpt_publish is atomic. Whatever instant the power fails, a
// recovering reader finds DIR/LATEST naming a checkpoint that is whole on the
// disk (the previous one or the new one, never a torn or empty manifest), and
// every step-* directory a loader lists (ckpt_list) is whole; after a return of
// 0 the new checkpoint is durable. An error from any call is reported, naming
// the call, and leaves the same guarantees.
//
// Why a simulation: a real power cut cannot be scheduled between two system
// calls, and a process that dies (without a power cut) loses nothing the kernel
// already holds. So the test gives ckpt_publish an FsOps table (checkpoint.h)
// over a model of what the kernel promises, and cuts the power after call k,
// for every k. The model is ext4's with default options, and POSIX's:
//
//   - write_file puts bytes in the page cache; they are durable only at
//     fsync_file. Until then a crash leaves the file empty (delayed allocation:
//     no blocks yet). Truncating an existing file counts as on the disk at
//     once, its new bytes not: the old "zero-length file after a crash".
//   - a directory's entries (a file created in it, a rename into or out of it)
//     are durable at fsync_dir of that directory. Renames are atomic.
//   - but the other directory changes may reach the disk on their own, without
//     the data they name: ext4's journal commits them every few seconds, in
//     order, so a crash keeps what was fsync'd plus any PREFIX of the rest; and
//     POSIX promises no order at all, so any SUBSET of the rest too. Every such
//     disk state is checked (a model where only fsync'd changes survive would
//     pass a protocol that renames LATEST.tmp over LATEST before fsync'ing it;
//     ext4's auto_da_alloc narrows that case, but it is a heuristic, not a
//     promise, and other file systems lack it).
//
// The test then proves it can fail: broken protocols, written here the way a
// learner might, must each be caught at some crash point. A FAIL line says what
// the reader found and what the protocol did wrong.
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "harness.h"

enum { MAX_INODES = 64, MAX_OPS = 256, MAX_ENTRIES = 256, MAX_CALLS = 64, MAX_DATA = 4096, NM = 64 };

typedef struct {
    int is_dir;
    char cache[MAX_DATA], disk[MAX_DATA];  // what a reader sees now; what survives a power
    size_t cache_n, disk_n;                // cut: the bytes at the last fsync_file
} Inode;

// A change to a directory: an entry created (write_file) or moved (rename).
typedef enum { OP_CREATE, OP_RENAME } OpKind;
typedef struct {
    OpKind kind;
    int from_dir, to_dir;   // directory inodes (from_dir: renames only)
    char from[NM], to[NM];
    int ino;
    int synced_from, synced_to;  // made durable by fsync_dir of that directory
    int call;               // the call that made it; -1: the initial disk
} Op;

typedef struct { int dir, ino; char name[NM]; } Entry;
typedef struct { Entry e[MAX_ENTRIES]; int n; } View;  // a tree: the cache's, or one a crash leaves

typedef struct {
    FsOps fs;
    Inode ino[MAX_INODES];
    Op op[MAX_OPS];
    int n_ino, n_op, calls, crash_after, fail_call;  // crash_after, fail_call: -1 for never
    char call[MAX_CALLS][200];                       // each call, as text
} Sim;

static int op_durable(const Op *o) { return o->synced_from && o->synced_to; }

static int view_find(const View *v, int dir, const char *name) {
    for (int i = 0; i < v->n; i++)
        if (v->e[i].dir == dir && strcmp(v->e[i].name, name) == 0) return i;
    return -1;
}

static void view_apply(View *v, const Op *o) {
    if (o->kind == OP_RENAME) {
        int i = view_find(v, o->from_dir, o->from);
        if (i >= 0) v->e[i] = v->e[--v->n];
    }
    int j = view_find(v, o->to_dir, o->to);
    if (j < 0 && v->n < MAX_ENTRIES) j = v->n++;
    if (j >= 0) v->e[j].dir = o->to_dir, v->e[j].ino = o->ino, snprintf(v->e[j].name, NM, "%s", o->to);
}

// The tree made by every durable change plus the others that `keep` selects: bit
// k for the k-th of them, in the order they were made (CACHE: all of them).
#define CACHE UINT64_MAX
static void build_view(const Sim *s, View *v, uint64_t keep) {
    v->n = 0;
    for (int i = 0, k = 0; i < s->n_op; i++) {
        int durable = op_durable(&s->op[i]), kept = !durable && (k < 64 ? keep >> k & 1 : keep == CACHE);
        k += !durable;
        if (durable || kept) view_apply(v, &s->op[i]);
    }
}

// The inode at path (relative to the simulated root, inode 0), or -1 with errno.
// With name != NULL, the inode of its parent directory, and its last component.
static int resolve(const Sim *s, const View *v, const char *path, char *name) {
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return errno = ENAMETOOLONG, -1;
    int cur = 0;
    char *save = NULL, *tok = strtok_r(buf, "/", &save);
    while (tok) {
        char *next = strtok_r(NULL, "/", &save);
        if (!s->ino[cur].is_dir) return errno = ENOTDIR, -1;
        if (!next && name) {
            if (strlen(tok) >= NM) return errno = ENAMETOOLONG, -1;
            strcpy(name, tok);
            return cur;
        }
        int i = view_find(v, cur, tok);
        if (i < 0) return errno = ENOENT, -1;
        cur = v->e[i].ino;
        tok = next;
    }
    if (name) return errno = EINVAL, -1;
    return cur;
}

static int new_inode(Sim *s, int is_dir) {
    if (s->n_ino == MAX_INODES) return errno = ENOSPC, -1;
    s->ino[s->n_ino].is_dir = is_dir;  // sim_init zeroed the rest
    return s->n_ino++;
}

static void add_op(Sim *s, OpKind kind, int from_dir, const char *from, int to_dir, const char *to,
                   int ino, int durable) {
    Op *o = &s->op[s->n_op++];
    *o = (Op){kind, from_dir, to_dir, "", "", ino, durable || kind == OP_CREATE, durable,
              durable ? -1 : s->calls - 1};
    snprintf(o->from, NM, "%s", from);
    snprintf(o->to, NM, "%s", to);
}

// Counts a call and records it; 0 when it must fail (EIO): the power is off, or
// the test injects an error here.
static int begin_call(Sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int begin_call(Sim *s, const char *fmt, ...) {
    int i = s->calls++;
    if (i < MAX_CALLS) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(s->call[i], sizeof s->call[i], fmt, ap);
        va_end(ap);
    }
    if ((s->crash_after >= 0 && i >= s->crash_after) || i == s->fail_call || i >= MAX_CALLS ||
        s->n_op >= MAX_OPS - 1)
        return errno = EIO, 0;
    return 1;
}

static int sim_write(const FsOps *fs, const char *path, const void *data, size_t n) {
    Sim *s = fs->arg;
    if (!begin_call(s, "write_file(%s)", path)) return -1;
    View v;
    build_view(s, &v, CACHE);
    char name[NM];
    int dir = resolve(s, &v, path, name), i, ino;
    if (dir < 0) return -1;
    if (n > MAX_DATA) return errno = EFBIG, -1;
    if ((i = view_find(&v, dir, name)) >= 0) {
        ino = v.e[i].ino;
        if (s->ino[ino].is_dir) return errno = EISDIR, -1;
        s->ino[ino].disk_n = 0;  // O_TRUNC: on the disk before the new bytes
    } else {
        if ((ino = new_inode(s, 0)) < 0) return -1;
        add_op(s, OP_CREATE, dir, "", dir, name, ino, 0);
    }
    memcpy(s->ino[ino].cache, data, n);
    s->ino[ino].cache_n = n;
    return 0;
}

static void sync_dir(Sim *s, int dir) {
    for (int i = 0; i < s->n_op; i++) {
        if (s->op[i].from_dir == dir) s->op[i].synced_from = 1;
        if (s->op[i].to_dir == dir) s->op[i].synced_to = 1;
    }
}

// fsync_file (dir_only 0) or fsync_dir (1). fsync_file of a directory (opened
// read-only, as fs_posix does) syncs its entries, as on Linux.
static int sim_fsync(const FsOps *fs, const char *path, int dir_only) {
    Sim *s = fs->arg;
    if (!begin_call(s, "%s(%s)", dir_only ? "fsync_dir" : "fsync_file", path)) return -1;
    View v;
    build_view(s, &v, CACHE);
    int ino = resolve(s, &v, path, NULL);
    if (ino < 0) return -1;
    Inode *n = &s->ino[ino];
    if (dir_only && !n->is_dir) return errno = ENOTDIR, -1;
    if (n->is_dir) sync_dir(s, ino);
    else memcpy(n->disk, n->cache, n->disk_n = n->cache_n);
    return 0;
}
static int sim_fsync_file(const FsOps *fs, const char *path) { return sim_fsync(fs, path, 0); }
static int sim_fsync_dir(const FsOps *fs, const char *path) { return sim_fsync(fs, path, 1); }

static int sim_rename(const FsOps *fs, const char *from, const char *to) {
    Sim *s = fs->arg;
    if (!begin_call(s, "rename(%s -> %s)", from, to)) return -1;
    View v;
    build_view(s, &v, CACHE);
    char fname[NM], tname[NM];
    int fd = resolve(s, &v, from, fname), td = resolve(s, &v, to, tname);
    if (fd < 0 || td < 0) return -1;
    int i = view_find(&v, fd, fname), j = view_find(&v, td, tname);
    if (i < 0) return errno = ENOENT, -1;
    int ino = v.e[i].ino;
    if (j >= 0) {
        int old = v.e[j].ino;
        if (old == ino) return 0;
        if (s->ino[old].is_dir != s->ino[ino].is_dir) return errno = s->ino[ino].is_dir ? ENOTDIR : EISDIR, -1;
        for (int k = 0; s->ino[old].is_dir && k < v.n; k++)
            if (v.e[k].dir == old) return errno = ENOTEMPTY, -1;
    }
    add_op(s, OP_RENAME, fd, fname, td, tname, ino, 0);
    return 0;
}

// ---------------------------------------------------------------- the scene

static const char *NEW_MANIFEST =
    "{\"format\": \"course-ckpt-1\", \"step\": 6, \"world\": 2, \"layout\": \"dp=2 tp=1 pp=1 zero=1\",\n"
    " \"files\": [{\"name\": \"rank-00000.safetensors\", \"rank\": 0, \"bytes\": 27, \"crc32c\": \"1c2d3e4f\"},\n"
    "           {\"name\": \"rank-00001.safetensors\", \"rank\": 1, \"bytes\": 27, \"crc32c\": \"5a6b7c8d\"}]}\n";
static const char *OLD_MANIFEST =
    "{\"format\": \"course-ckpt-1\", \"step\": 3, \"world\": 2, \"layout\": \"dp=2 tp=1 pp=1 zero=1\"}\n";

typedef struct { const char *name, *manifest, *shard[2]; } Ckpt;
static Ckpt CKPTS[2];  // the previous checkpoint and the new one: what "whole" means

static const char *SHARDS[2] = {"rank-00000.safetensors", "rank-00001.safetensors"};

// A file holding text (NULL: a directory), durable in dir.
static int durable(Sim *s, int dir, const char *name, const char *text) {
    int ino = new_inode(s, !text);
    Inode *n = &s->ino[ino];
    n->cache_n = n->disk_n = text ? strlen(text) : 0;
    memcpy(n->disk, text ? text : "", n->disk_n);
    memcpy(n->cache, n->disk, n->cache_n);
    add_op(s, OP_CREATE, dir, "", dir, name, ino, 1);
    return ino;
}

// The disk as checkpoint.c leaves it before calling ckpt_publish: the previous
// checkpoint published, the new one's shards durable in step-00000006.tmp/.
static void sim_init(Sim *s, int crash_after, int fail_call) {
    memset(s, 0, sizeof *s);
    s->fs = (FsOps){sim_write, sim_fsync_file, sim_fsync_dir, sim_rename, s};
    s->crash_after = crash_after;
    s->fail_call = fail_call;
    new_inode(s, 1);  // the root
    int dir = durable(s, 0, "DIR", NULL);
    for (int c = 0; c < 2; c++) {
        int d = durable(s, dir, c ? "step-00000006.tmp" : CKPTS[c].name, NULL);
        if (!c) durable(s, d, "manifest.json", CKPTS[c].manifest);
        for (int r = 0; r < 2; r++) durable(s, d, SHARDS[r], CKPTS[c].shard[r]);
    }
    durable(s, dir, "LATEST", "step-00000003\n");
}

// ---------------------------------------------------------------- the reader's invariant

// What a recovering reader finds wrong with the state (view v, the disk's bytes),
// and what the protocol must have done wrong; 0 if the state is whole. `disk`: 0
// reads the cache (a reader right now) instead of the disk.
typedef struct { char what[800]; const char *hint; } Finding;

static int file_fault(const Sim *s, const View *v, const char *path, const char *want, int disk,
                      char *what, size_t n) {
    const char *base = strrchr(path, '/') + 1;
    int ino = resolve(s, v, path, NULL);
    if (ino < 0 || s->ino[ino].is_dir) return snprintf(what, n, "%s does not exist", base), 1;
    const Inode *f = &s->ino[ino];
    const char *bytes = disk ? f->disk : f->cache;
    size_t len = disk ? f->disk_n : f->cache_n;
    if (len == strlen(want) && memcmp(bytes, want, len) == 0) return 0;
    if (len == 0) return snprintf(what, n, "%s is empty", base), 2;
    return snprintf(what, n, "%s holds %zu bytes that are not its contents", base, len), 2;
}

static const char *H_DIR = "LATEST moved before the rename of step-00000006.tmp to step-00000006 was "
                           "durable: fsync_dir(DIR) after renaming the directory, before LATEST moves";
static const char *H_ENTRY = "the manifest's name was not durable before its directory was published: "
                             "fsync_dir(DIR/step-00000006.tmp) after writing the manifest, before the rename";
static const char *H_BYTES = "the manifest's bytes were not fsync'd before the rename that published "
                             "its directory (fsync_file it first): the journal can commit a rename "
                             "before delayed allocation writes the data the new name points to";
static const char *H_SHARD = "the shards were durable before ckpt_publish began: the protocol lost "
                             "them (did it rename or overwrite the wrong path?)";
static const char *H_LATEST = "LATEST's new contents were not durable when they replaced the old: write "
                              "DIR/LATEST.tmp, fsync_file it, then rename it over DIR/LATEST (never "
                              "write LATEST in place: O_TRUNC reaches the disk before the new bytes)";
static const char *H_NAME = "the protocol published a directory under a name that is not the "
                            "checkpoint's";
static const char *H_GONE = "LATEST must exist at every instant: replace it by a rename over it, "
                            "never by removing it first";

// Checkpoint `name` must be whole: its directory, its manifest and its shards.
static int ckpt_fault(const Sim *s, const View *v, const char *name, int disk, Finding *f,
                      const char *prefix) {
    const Ckpt *c = NULL;
    for (int i = 0; i < 2; i++)
        if (strcmp(name, CKPTS[i].name) == 0) c = &CKPTS[i];
    char path[200], what[300];
    snprintf(path, sizeof path, "DIR/%s", name);
    int ino = resolve(s, v, path, NULL);
    if (!c || ino < 0 || !s->ino[ino].is_dir) {
        snprintf(f->what, sizeof f->what, "%s%s, which %s", prefix, name,
                 c ? "does not exist" : "is no checkpoint");
        f->hint = c ? H_DIR : prefix[0] == 'L' ? H_LATEST : H_NAME;
        return 1;
    }
    snprintf(path, sizeof path, "DIR/%s/manifest.json", name);
    int k = file_fault(s, v, path, c->manifest, disk, what, sizeof what);
    if (k) {
        snprintf(f->what, sizeof f->what, "%s%s, whose %s", prefix, name, what);
        f->hint = k == 1 ? H_ENTRY : H_BYTES;
        return 1;
    }
    for (int r = 0; r < 2; r++) {
        snprintf(path, sizeof path, "DIR/%s/%s", name, SHARDS[r]);
        if (file_fault(s, v, path, c->shard[r], disk, what, sizeof what)) {
            snprintf(f->what, sizeof f->what, "%s%s, whose %s", prefix, name, what);
            f->hint = H_SHARD;
            return 1;
        }
    }
    return 0;
}

// 0 if the state is whole for a recovering reader, else 1 with f filled.
static int reader_fault(const Sim *s, const View *v, int disk, Finding *f) {
    char name[64];
    int ino = resolve(s, v, "DIR/LATEST", NULL);
    if (ino < 0) {
        snprintf(f->what, sizeof f->what, "no DIR/LATEST");
        f->hint = H_GONE;
        return 1;
    }
    const Inode *l = &s->ino[ino];
    size_t len = disk ? l->disk_n : l->cache_n;
    const char *bytes = disk ? l->disk : l->cache;
    if (l->is_dir || len == 0 || len >= sizeof name || bytes[len - 1] != '\n') {
        snprintf(f->what, sizeof f->what, "DIR/LATEST %s", len == 0 ? "empty" : "holding no step name and newline");
        f->hint = H_LATEST;
        return 1;
    }
    memcpy(name, bytes, len - 1);
    name[len - 1] = 0;
    if (ckpt_fault(s, v, name, disk, f, "LATEST naming ")) return 1;
    // A loader also lists DIR: every step-<digits> directory must be whole.
    int dir = resolve(s, v, "DIR", NULL);
    for (int i = 0; dir >= 0 && i < v->n; i++) {
        const char *e = v->e[i].name;
        if (v->e[i].dir != dir || strncmp(e, "step-", 5) || !e[5] || strspn(e + 5, "0123456789") != strlen(e + 5))
            continue;
        if (ckpt_fault(s, v, e, disk, f, "a loader listing DIR/")) return 1;
    }
    return 0;
}

// ---------------------------------------------------------------- crashing

typedef int (*PublishFn)(const FsOps *, const char *, const char *, const char *, size_t, char *, size_t);

static int publish(PublishFn fn, Sim *s, char *err, size_t errn) {
    err[0] = 0;
    return fn(&s->fs, "DIR", "step-00000006", NEW_MANIFEST, strlen(NEW_MANIFEST), err, errn);
}

// The call that made the k-th directory change no fsync_dir has made durable.
static const char *pending_call(const Sim *s, int k) {
    for (int i = 0; i < s->n_op; i++)
        if (!op_durable(&s->op[i]) && k-- == 0) return s->op[i].call >= 0 ? s->call[s->op[i].call] : "?";
    return "?";
}

// Every disk state a power cut may leave now: what was fsync'd, plus the other
// directory changes that reached the disk on their own -- first each prefix of
// them (ext4's journal commits them in order), then any other subset (POSIX
// promises no order; up to 10 of them). 0 if all are whole; else 1, with the
// first broken one described in f. *states counts the states checked.
static int state_fault(const Sim *s, uint64_t keep, Finding *f, int *states) {
    View v;
    build_view(s, &v, keep);
    ++*states;
    return reader_fault(s, &v, 1, f);
}

static int disk_fault(const Sim *s, Finding *f, int *states) {
    int pending = 0;
    char more[400];
    for (int i = 0; i < s->n_op; i++) pending += !op_durable(&s->op[i]);
    for (int p = 0; p <= pending; p++) {
        if (!state_fault(s, p >= 64 ? CACHE : (1ull << p) - 1, f, states)) continue;
        if (p > 0) {
            snprintf(more, sizeof more, " (the journal having committed the directory changes up to %s, "
                     "not the data they name)", pending_call(s, p - 1));
            strncat(f->what, more, sizeof f->what - strlen(f->what) - 1);
        }
        return 1;
    }
    for (uint64_t keep = 1; pending <= 10 && keep < (1ull << pending); keep++) {
        if ((keep & (keep + 1)) == 0 || !state_fault(s, keep, f, states)) continue;  // prefixes: done
        int hi = 63 - __builtin_clzll(keep), lo = __builtin_ctzll(~keep);  // kept, and lost before it
        snprintf(more, sizeof more, " (the disk having kept %s but not the earlier %s: POSIX lets directory "
                 "changes that no fsync_dir covered reach the disk in any order)", pending_call(s, hi),
                 pending_call(s, lo));
        strncat(f->what, more, sizeof f->what - strlen(f->what) - 1);
        return 1;
    }
    return 0;
}

typedef struct {
    int calls, broken, first;    // crash points; how many break; the first that does
    int latest_k;                // the first that leaves LATEST naming a broken checkpoint (-1)
    char first_what[1200], latest_what[1200];
} Sweep;

// Runs fn with the power cut after call k for every k, checking each.
static void sweep(PublishFn fn, TestState *ts, Sweep *sw) {
    static Sim full, s;
    char err[512];
    sim_init(&full, -1, -1);
    publish(fn, &full, err, sizeof err);
    *sw = (Sweep){full.calls < MAX_CALLS ? full.calls : MAX_CALLS, 0, -1, -1, "", ""};
    for (int k = 0; k <= sw->calls; k++) {
        sim_init(&s, k, -1);
        publish(fn, &s, err, sizeof err);
        Finding f;
        int states = 0, bad = disk_fault(&s, &f, &states);
        char crash[300] = "crash before the first call", name[64];
        if (k) snprintf(crash, sizeof crash, "crash after %s (call %d of %d)", full.call[k - 1], k, sw->calls);
        if (ts) {
            snprintf(name, sizeof name, "publish.crash_point_%02d", k);
            if (bad) test_report(ts, 0, name, "%s leaves %s: %s", crash, f.what, f.hint);
            else test_report(ts, 1, name, "%s: the disk state%s a power cut may leave (%d) %s whole", crash,
                             states > 1 ? "s" : "", states, states > 1 ? "are all" : "is");
        }
        if (!bad) continue;
        if (sw->broken++ == 0) {
            sw->first = k;
            snprintf(sw->first_what, sizeof sw->first_what, "%s leaves %s", crash, f.what);
        }
        if (sw->latest_k < 0 && strncmp(f.what, "LATEST naming ", 14) == 0) {
            sw->latest_k = k;
            snprintf(sw->latest_what, sizeof sw->latest_what, "%s leaves %s", crash, f.what);
        }
    }
}

// ---------------------------------------------------------------- broken protocols

// The paths a protocol uses, for checkpoint `name` in dir.
typedef struct {
    char tmp[256], final[256], man_tmp[300], man_final[300], latest[300], latest_tmp[300], line[64];
    size_t len;
} Paths;
static Paths paths(const char *dir, const char *name) {
    Paths p;
    snprintf(p.tmp, sizeof p.tmp, "%s/%s.tmp", dir, name);
    snprintf(p.final, sizeof p.final, "%s/%s", dir, name);
    snprintf(p.man_tmp, sizeof p.man_tmp, "%s/manifest.json", p.tmp);
    snprintf(p.man_final, sizeof p.man_final, "%s/manifest.json", p.final);
    snprintf(p.latest, sizeof p.latest, "%s/LATEST", dir);
    snprintf(p.latest_tmp, sizeof p.latest_tmp, "%s/LATEST.tmp", dir);
    p.len = (size_t)snprintf(p.line, sizeof p.line, "%s\n", name);
    return p;
}
// (Broken protocols report no errors.)
#define PATHS Paths p = paths(dir, name); (void)err, (void)errn

// A learner's first try, "fsync everything at the end": the directory is renamed
// (and LATEST moved) while the manifest's bytes are only in the cache.
static int publish_rename_before_fsync(const FsOps *fs, const char *dir, const char *name,
                                       const char *manifest, size_t n, char *err, size_t errn) {
    PATHS;
    return -(fs->write_file(fs, p.man_tmp, manifest, n) || fs->rename(fs, p.tmp, p.final) ||
           fs->fsync_dir(fs, dir) || fs->write_file(fs, p.latest_tmp, p.line, p.len) ||
           fs->fsync_file(fs, p.latest_tmp) || fs->rename(fs, p.latest_tmp, p.latest) ||
           fs->fsync_dir(fs, dir) || fs->fsync_file(fs, p.man_final) || fs->fsync_dir(fs, p.final));
}

// The checkpoint done right, then LATEST.tmp renamed over LATEST before its
// bytes are fsync'd (the fsync comes after, under the new name).
static int publish_latest_before_fsync(const FsOps *fs, const char *dir, const char *name,
                                       const char *manifest, size_t n, char *err, size_t errn) {
    PATHS;
    return -(fs->write_file(fs, p.man_tmp, manifest, n) || fs->fsync_file(fs, p.man_tmp) ||
           fs->fsync_dir(fs, p.tmp) || fs->rename(fs, p.tmp, p.final) || fs->fsync_dir(fs, dir) ||
           fs->write_file(fs, p.latest_tmp, p.line, p.len) || fs->rename(fs, p.latest_tmp, p.latest) ||
           fs->fsync_file(fs, p.latest) || fs->fsync_dir(fs, dir));
}

// LATEST overwritten in place and fsync'd at once: still a moment when it is empty.
static int publish_latest_in_place(const FsOps *fs, const char *dir, const char *name,
                                   const char *manifest, size_t n, char *err, size_t errn) {
    PATHS;
    return -(fs->write_file(fs, p.man_tmp, manifest, n) || fs->fsync_file(fs, p.man_tmp) ||
           fs->fsync_dir(fs, p.tmp) || fs->rename(fs, p.tmp, p.final) || fs->fsync_dir(fs, dir) ||
           fs->write_file(fs, p.latest, p.line, p.len) || fs->fsync_file(fs, p.latest));
}

// Everything fsync'd but the step directory: the manifest's name may be lost.
static int publish_no_dir_fsync(const FsOps *fs, const char *dir, const char *name,
                                const char *manifest, size_t n, char *err, size_t errn) {
    PATHS;
    return -(fs->write_file(fs, p.man_tmp, manifest, n) || fs->fsync_file(fs, p.man_tmp) ||
           fs->rename(fs, p.tmp, p.final) || fs->fsync_dir(fs, dir) ||
           fs->write_file(fs, p.latest_tmp, p.line, p.len) || fs->fsync_file(fs, p.latest_tmp) ||
           fs->rename(fs, p.latest_tmp, p.latest) || fs->fsync_dir(fs, dir));
}

static void expect_caught(TestState *ts, const char *name, const char *mistake, PublishFn fn) {
    Sweep sw;
    sweep(fn, NULL, &sw);
    if (!sw.broken) {
        test_report(ts, 0, name, "a protocol that %s survived all %d crash points: the simulator "
                    "is too kind to catch it", mistake, sw.calls + 1);
        return;
    }
    test_report(ts, 1, name, "a protocol that %s is caught: %s%s%s; %d of its %d crash points break%s it",
                mistake, sw.first_what, sw.latest_k > sw.first ? "; and " : "",
                sw.latest_k > sw.first ? sw.latest_what : "", sw.broken, sw.calls + 1,
                sw.broken == 1 ? "s" : "");
}

// ---------------------------------------------------------------- the tests

// The model itself, on three calls: a new file is lost without fsync_file and
// fsync_dir, and the journal may keep a rename without the data it names.
static void test_simulator(TestState *ts) {
    static Sim s;
    View v;
    Finding f;
    int st = 0;
    sim_init(&s, -1, -1);
    s.fs.write_file(&s.fs, "DIR/new", "x\n", 2);
    build_view(&s, &v, 0);
    int lost = resolve(&s, &v, "DIR/new", NULL) < 0;
    build_view(&s, &v, CACHE);
    int ino = resolve(&s, &v, "DIR/new", NULL), empty = ino > 0 && s.ino[ino].disk_n == 0;
    s.fs.fsync_file(&s.fs, "DIR/new");
    build_view(&s, &v, 0);
    int nameless = resolve(&s, &v, "DIR/new", NULL) < 0;
    s.fs.fsync_dir(&s.fs, "DIR");
    build_view(&s, &v, 0);
    int kept = resolve(&s, &v, "DIR/new", NULL) == ino && s.ino[ino].disk_n == 2;
    test_report(ts, lost && empty && nameless && kept, "publish.simulator_durability",
                "a new file: lost on a crash %d, its bytes not on the disk %d, nameless after fsync_file "
                "alone %d, kept after fsync_dir %d (want 1 1 1 1)", lost, empty, nameless, kept);

    sim_init(&s, -1, -1);
    s.fs.write_file(&s.fs, "DIR/LATEST.tmp", "step-00000006\n", 14);
    s.fs.rename(&s.fs, "DIR/LATEST.tmp", "DIR/LATEST");
    int caught = disk_fault(&s, &f, &st);
    test_report(ts, caught && st == 3 && strcmp(f.what, "DIR/LATEST empty (the journal having committed "
                "the directory changes up to rename(DIR/LATEST.tmp -> DIR/LATEST), not the data they name)") == 0,
                "publish.simulator_journal_order", "LATEST.tmp renamed over LATEST, nothing fsync'd: the "
                "third of %d disk states is %s", st, caught ? f.what : "whole (want: LATEST empty)");
}

static void test_real(TestState *ts) {
    static Sim s;
    char err[512];
    sim_init(&s, -1, -1);
    int rc = publish(ckpt_publish, &s, err, sizeof err);
    Finding f = {"", NULL};
    int st = 0, bad = rc != 0 || disk_fault(&s, &f, &st);
    View v;
    build_view(&s, &v, 0);
    int ino = resolve(&s, &v, "DIR/LATEST", NULL);
    int latest6 = ino >= 0 && s.ino[ino].disk_n == 14 && memcmp(s.ino[ino].disk, "step-00000006\n", 14) == 0;
    const char *found = bad ? f.what : latest6 ? "LATEST naming step-00000006, whole" : "LATEST still naming "
        "step-00000003", *why = bad && f.hint ? f.hint : !latest6 && rc == 0 ? "ckpt_publish returned 0 before the "
        "new checkpoint was durable: the last rename needs fsync_dir(DIR) before it returns" : NULL;
    test_report(ts, !bad && latest6 && s.calls <= MAX_CALLS, "publish.completes_durably", "rc %d%s%s; %d calls; on "
                "the disk after the last one, with nothing left to the journal: %s%s%s", rc, err[0] ? " " : "", err,
                s.calls, found, why ? ": " : "", why ? why : "");

    Sweep sw;
    sweep(ckpt_publish, ts, &sw);

    // An error at call k (EIO): ckpt_publish returns -1 naming the call, and
    // neither the reader now nor any crash afterwards sees a broken checkpoint.
    for (int k = 0; k < sw.calls; k++) {
        sim_init(&s, -1, k);
        rc = publish(ckpt_publish, &s, err, sizeof err);
        char path[200] = "", name[64];
        const char *lp = strchr(s.call[k], '('), *end = strpbrk(lp ? lp + 1 : "", " )");
        if (lp && end) snprintf(path, sizeof path, "%.*s", (int)(end - lp - 1), lp + 1);
        build_view(&s, &v, CACHE);
        st = 0;
        bad = reader_fault(&s, &v, 0, &f) || disk_fault(&s, &f, &st);
        int named = path[0] && strstr(err, path) && strstr(err, strerror(EIO));
        snprintf(name, sizeof name, "publish.error_at_call_%02d", k);
        test_report(ts, rc == -1 && named && !bad, name, "%s fails (EIO): rc %d \"%s\"%s%s%s%s%s", s.call[k],
                    rc, err, named ? "" : " (the message must name the path and the error)",
                    bad ? "; afterwards: " : "", bad ? f.what : "", bad ? ": " : "", bad && f.hint ? f.hint : "");
    }
}

int main(void) {
    CKPTS[0] = (Ckpt){"step-00000003", OLD_MANIFEST, {"step 3, rank 0's weights", "step 3, rank 1's weights"}};
    CKPTS[1] = (Ckpt){"step-00000006", NEW_MANIFEST, {"step 6, rank 0's weights", "step 6, rank 1's weights"}};
    TestState ts = {0};
    test_simulator(&ts);
    test_real(&ts);
    expect_caught(&ts, "publish.rename_before_fsync_is_caught",
                  "renames the directory (and moves LATEST) before fsync'ing the manifest", publish_rename_before_fsync);
    expect_caught(&ts, "publish.latest_rename_before_fsync_is_caught",
                  "renames LATEST.tmp over LATEST before fsync'ing LATEST.tmp", publish_latest_before_fsync);
    expect_caught(&ts, "publish.latest_in_place_is_caught", "writes LATEST in place", publish_latest_in_place);
    expect_caught(&ts, "publish.missing_dir_fsync_is_caught",
                  "never fsync's the step directory after writing the manifest into it", publish_no_dir_fsync);
    return test_finish(&ts);
}
