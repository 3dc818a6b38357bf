// checkpoint.c — what saving and loading share (checkpoint.h): the training
// state's views, the file system, the checkpoint directory, the collectives.
// The save itself is ckpt_save.c, the load ckpt_load.c.
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

int ckpt_dir_check(const char *dir, int fresh, char *err, size_t n) {
    struct stat sb;
    char probe[4200];
    if (!dir[0]) return snprintf(err, n, "--ckpt-dir: the folder name is empty"), -1;
    if (stat(dir, &sb) == 0) {
        if (!S_ISDIR(sb.st_mode))
            return snprintf(err, n, "--ckpt-dir %s is not a folder", dir), -1;
        if (access(dir, W_OK | X_OK) != 0)
            return snprintf(err, n, "--ckpt-dir %s: cannot write in it: %s", dir, strerror(errno)), -1;
        snprintf(probe, sizeof probe, "%s/manifest.json", dir);
        if (access(probe, F_OK) == 0)
            return snprintf(err, n, "--ckpt-dir %s is one checkpoint (it holds manifest.json): give "
                            "the folder that holds the step-* folders", dir), -1;
        uint64_t *steps = NULL;
        int k = fresh ? ckpt_list(dir, &steps) : 0;
        free(steps);
        if (k > 0)
            return snprintf(err, n, "--ckpt-dir %s already holds checkpoints (an earlier run's): "
                            "--resume continues that run; a new run needs an empty folder", dir), -1;
        return 0;
    }
    if (errno != ENOENT)
        return snprintf(err, n, "--ckpt-dir %s: %s", dir, strerror(errno)), -1;
    // Not there yet: made now (as the run would, later; mkdir -p, so every rank may).
    // Only trying tells: permissions, a read-only or special file system (/proc).
    if (make_dirs(dir) != 0)
        return snprintf(err, n, "--ckpt-dir %s: cannot create it: %s", dir, strerror(errno)), -1;
    return 0;
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
