// publish.c — the commit protocol of a checkpoint (checkpoint.h): what makes it
// atomic. A rename is atomic, but only for what is already on the disk: the
// kernel may write a file's data, a directory's entries and a rename to the
// disk in any order, and a power cut keeps whatever had been written. So each
// rename comes after an fsync of what it publishes, and is itself made durable
// (fsync of the directory) before the next step relies on it:
//
//   1. manifest.json written into DIR/name.tmp/, fsync'd  (the shards already are)
//   2. fsync DIR/name.tmp/       its entries: the shards' and the manifest's names
//   3. rename DIR/name.tmp -> DIR/name, fsync DIR     the checkpoint now exists
//   4. DIR/LATEST.tmp written, fsync'd, renamed over DIR/LATEST, fsync DIR
//
// A crash before 3 leaves a .tmp directory that no load looks at; between 3 and
// 4 a complete checkpoint that LATEST does not name yet (a load that lists the
// directory still finds it); after 4 the new one. Swap any rename before the
// fsync it depends on and some crash leaves LATEST, or the directory, naming
// bytes that never reached the disk.
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "checkpoint.h"

static int fail(char *err, size_t errn, const char *what, const char *path) {
    snprintf(err, errn, "%s %s failed: %s", what, path, strerror(errno));
    return -1;
}

int ckpt_publish(const FsOps *fs, const char *dir, const char *name, const char *manifest,
                 size_t n, char *err, size_t errn) {
    char tmp[4096], final[4096], file[4200], latest[4200], latest_tmp[4200];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
    snprintf(final, sizeof final, "%s/%s", dir, name);
    snprintf(file, sizeof file, "%s/manifest.json", tmp);
    snprintf(latest, sizeof latest, "%s/LATEST", dir);
    snprintf(latest_tmp, sizeof latest_tmp, "%s/LATEST.tmp", dir);

    if (fs->write_file(fs, file, manifest, n)) return fail(err, errn, "writing", file);
    if (fs->fsync_file(fs, file)) return fail(err, errn, "fsync of", file);
    if (fs->fsync_dir(fs, tmp)) return fail(err, errn, "fsync of the directory", tmp);
    if (fs->rename(fs, tmp, final)) return fail(err, errn, "renaming", tmp);
    if (fs->fsync_dir(fs, dir)) return fail(err, errn, "fsync of the directory", dir);

    char line[300];
    int len = snprintf(line, sizeof line, "%s\n", name);
    if (fs->write_file(fs, latest_tmp, line, (size_t)len)) return fail(err, errn, "writing", latest_tmp);
    if (fs->fsync_file(fs, latest_tmp)) return fail(err, errn, "fsync of", latest_tmp);
    if (fs->rename(fs, latest_tmp, latest)) return fail(err, errn, "renaming", latest_tmp);
    if (fs->fsync_dir(fs, dir)) return fail(err, errn, "fsync of the directory", dir);
    return 0;
}
