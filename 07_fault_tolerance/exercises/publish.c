// exercises/publish.c — YOUR commit protocol.   make grade-7 PART=publish
// Stuck? make hint-7 PART=publish   (tier 1 a nudge; TIER=2, 3 more)
//
// Read ../checkpoint.h (FsOps, ckpt_publish).
//
// THE CONTRACT of ckpt_publish(fs, dir, name, manifest, n, err, errn). On entry every
// rank has written its shard into DIR/name.tmp/ and made it durable. Write the
// manifest (n bytes) there as manifest.json and make the checkpoint the latest one,
// DIR/LATEST holding one line, "name\n", so that a power cut at ANY instant leaves
//
//   - DIR/LATEST naming a checkpoint that is whole on the disk: the previous one or
//     this one; never a torn or empty LATEST, and never no LATEST once one exists (a
//     run's first checkpoint has none before it);
//   - every DIR/step-* directory (a loader lists them too) whole: a directory that
//     has the name must have the manifest and its bytes;
//   - after you return 0, the new checkpoint durable, LATEST naming it.
//
// On an error, return -1 at once, with a message in err that names the failing call's
// path (a rename's source or its target) and strerror(errno) (FsOps calls return -1
// with errno set), and still leave nothing broken.
//
// What the disk promises (FsOps): write_file (create or truncate, then write) puts
// bytes in the page cache, which a power cut loses unless fsync_file made them
// durable. A name (a file created in a folder, a rename into it) is durable only
// after fsync_dir of that folder, and until then may reach the disk on its own, in
// any order, and without the data it names. A rename is atomic: readers see the old
// name or the new one. Nothing else is promised.
//
// What the grader checks (tests/test_publish.c, publish.*): your ckpt_publish against a
// simulated disk that loses power after each of your calls in turn and keeps what
// was made durable plus any prefix or subset of the rest: every state it may then
// hold must satisfy the invariants above; against a disk that fails each call (EIO);
// and, on the real disk, a rank killed while writing a checkpoint (LATEST must still
// name the previous one).
//
// The body below publishes a checkpoint, and every run that never loses power resumes
// from it. Find the crash points where it loses the checkpoint, or all of them, and
// fix them. Pitfall: anything that is renamed or pointed to before its own bytes and
// names are durable.
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "checkpoint.h"

int ckpt_publish(const FsOps *fs, const char *dir, const char *name, const char *manifest,
                 size_t n, char *err, size_t errn) {
    char tmp[4096], final[4096], file[4200], latest[4200];
    snprintf(tmp, sizeof tmp, "%s/%s.tmp", dir, name);
    snprintf(final, sizeof final, "%s/%s", dir, name);
    snprintf(file, sizeof file, "%s/manifest.json", tmp);
    snprintf(latest, sizeof latest, "%s/LATEST", dir);

    // TODO(exercise): not atomic, and an error is reported without its path.
    char line[300];
    int len = snprintf(line, sizeof line, "%s\n", name);
    if (fs->write_file(fs, file, manifest, n) || fs->rename(fs, tmp, final) ||
        fs->write_file(fs, latest, line, (size_t)len)) {
        snprintf(err, errn, "publishing %s failed", name);
        return -1;
    }
    return 0;
}
