// power_loss_disk.c — the simulated disk of power_loss_disk.h: its FsOps (the
// page cache a reader sees now, the bytes and directory changes that survive a
// power cut) and the disk states a power cut may leave.
#include "power_loss_disk.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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
    if (j >= 0) v->e[j].dir = o->to_dir, v->e[j].ino = o->ino, snprintf(v->e[j].name, MAX_NAME, "%s", o->to);
}

void sim_build_view(const Sim *s, View *v, uint64_t keep) {
    v->n = 0;
    for (int i = 0, k = 0; i < s->n_op; i++) {
        int durable = op_durable(&s->op[i]), kept = !durable && (k < 64 ? keep >> k & 1 : keep == SIM_CACHE);
        k += !durable;
        if (durable || kept) view_apply(v, &s->op[i]);
    }
}

int sim_resolve(const Sim *s, const View *v, const char *path, char *name) {
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return errno = ENAMETOOLONG, -1;
    int cur = 0;
    char *save = NULL, *tok = strtok_r(buf, "/", &save);
    while (tok) {
        char *next = strtok_r(NULL, "/", &save);
        if (!s->ino[cur].is_dir) return errno = ENOTDIR, -1;
        if (!next && name) {
            if (strlen(tok) >= MAX_NAME) return errno = ENAMETOOLONG, -1;
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
    s->ino[s->n_ino].is_dir = is_dir;  // sim_reset zeroed the rest
    return s->n_ino++;
}

// Records a directory change. Its callers made the room: begin_call refuses a
// call once the table is nearly full (a call makes one change at most), and
// sim_add_durable checks for itself.
static void add_op(Sim *s, OpKind kind, int from_dir, const char *from, int to_dir, const char *to,
                   int ino, int durable) {
    Op *o = &s->op[s->n_op++];
    *o = (Op){kind, from_dir, to_dir, "", "", ino, durable || kind == OP_CREATE, durable,
              durable ? -1 : s->calls - 1};
    snprintf(o->from, MAX_NAME, "%s", from);
    snprintf(o->to, MAX_NAME, "%s", to);
}

// A path as a call's text shows it (code under test may pass NULL).
static const char *shown(const char *path) { return path ? path : "(null)"; }

// Counts a call and records it; 0 when it must fail (EIO): the power is off, the
// test injects an error here, or the tables are full (a caller that loops gets
// errors, not an overflow; calls keeps counting, so the test sees it).
static int begin_call(Sim *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int begin_call(Sim *s, const char *fmt, ...) {
    int i = s->calls;
    if (s->calls < INT_MAX) s->calls++;
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
    if (!begin_call(s, "write_file(%s)", shown(path))) return -1;
    if (!path || (n && !data)) return errno = EFAULT, -1;
    View v;
    sim_build_view(s, &v, SIM_CACHE);
    char name[MAX_NAME];
    int dir = sim_resolve(s, &v, path, name), i, ino;
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
    if (n) memcpy(s->ino[ino].cache, data, n);
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
    if (!begin_call(s, "%s(%s)", dir_only ? "fsync_dir" : "fsync_file", shown(path))) return -1;
    if (!path) return errno = EFAULT, -1;
    View v;
    sim_build_view(s, &v, SIM_CACHE);
    int ino = sim_resolve(s, &v, path, NULL);
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
    if (!begin_call(s, "rename(%s -> %s)", shown(from), shown(to))) return -1;
    if (!from || !to) return errno = EFAULT, -1;
    View v;
    sim_build_view(s, &v, SIM_CACHE);
    char fname[MAX_NAME], tname[MAX_NAME];
    int fd = sim_resolve(s, &v, from, fname), td = sim_resolve(s, &v, to, tname);
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

void sim_reset(Sim *s, int crash_after, int fail_call) {
    memset(s, 0, sizeof *s);
    s->fs = (FsOps){sim_write, sim_fsync_file, sim_fsync_dir, sim_rename, s};
    s->crash_after = crash_after;
    s->fail_call = fail_call;
    new_inode(s, 1);  // the root
}

int sim_add_durable(Sim *s, int dir, const char *name, const char *text) {
    size_t len = text ? strlen(text) : 0;
    if (len > MAX_DATA || s->n_op >= MAX_OPS - 1) return errno = ENOSPC, -1;  // the layout's own bug
    int ino = new_inode(s, !text);
    if (ino < 0) return -1;
    Inode *n = &s->ino[ino];
    n->cache_n = n->disk_n = len;
    memcpy(n->disk, text ? text : "", len);
    memcpy(n->cache, n->disk, n->cache_n);
    add_op(s, OP_CREATE, dir, "", dir, name, ino, 1);
    return ino;
}

// ---------------------------------------------------------------- what a power cut leaves

int sim_file_fault(const Sim *s, const View *v, const char *path, const char *want, int disk,
                   char *what, size_t n) {
    const char *slash = strrchr(path, '/'), *base = slash ? slash + 1 : path;
    int ino = sim_resolve(s, v, path, NULL);
    if (ino < 0 || s->ino[ino].is_dir) return snprintf(what, n, "%s does not exist", base), 1;
    const Inode *f = &s->ino[ino];
    const char *bytes = disk ? f->disk : f->cache;
    size_t len = disk ? f->disk_n : f->cache_n;
    if (len == strlen(want) && memcmp(bytes, want, len) == 0) return 0;
    if (len == 0) return snprintf(what, n, "%s is empty", base), 2;
    return snprintf(what, n, "%s holds %zu bytes that are not its contents", base, len), 2;
}

// The call that made the k-th directory change no fsync_dir has made durable.
static const char *pending_call(const Sim *s, int k) {
    for (int i = 0; i < s->n_op; i++)
        if (!op_durable(&s->op[i]) && k-- == 0)
            return s->op[i].call >= 0 && s->op[i].call < MAX_CALLS ? s->call[s->op[i].call] : "?";
    return "?";
}

static int state_fault(const Sim *s, uint64_t keep, ReaderCheck check, Finding *f, int *states) {
    View v;
    sim_build_view(s, &v, keep);
    ++*states;
    return check(s, &v, 1, f);
}

int sim_crash_fault(const Sim *s, ReaderCheck check, Finding *f, int *states) {
    int pending = 0;
    char more[400];
    for (int i = 0; i < s->n_op; i++) pending += !op_durable(&s->op[i]);
    for (int p = 0; p <= pending; p++) {
        if (!state_fault(s, p >= 64 ? SIM_CACHE : (1ull << p) - 1, check, f, states)) continue;
        if (p > 0) {
            snprintf(more, sizeof more, " (the journal having committed the directory changes up to %s, "
                     "not the data they name)", pending_call(s, p - 1));
            strncat(f->what, more, sizeof f->what - strlen(f->what) - 1);
        }
        return 1;
    }
    for (uint64_t keep = 1; pending <= 10 && keep < (1ull << pending); keep++) {
        if ((keep & (keep + 1)) == 0 || !state_fault(s, keep, check, f, states)) continue;  // prefixes: done
        int hi = 63 - __builtin_clzll(keep), lo = __builtin_ctzll(~keep);  // kept, and lost before it
        snprintf(more, sizeof more, " (the disk having kept %s but not the earlier %s: POSIX lets directory "
                 "changes that no fsync_dir covered reach the disk in any order)", pending_call(s, hi),
                 pending_call(s, lo));
        strncat(f->what, more, sizeof f->what - strlen(f->what) - 1);
        return 1;
    }
    return 0;
}
