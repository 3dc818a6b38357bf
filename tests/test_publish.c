// test_publish.c — the commit protocol of a checkpoint (publish.c) against a
// simulated disk that loses power between any two of its calls
// (power_loss_disk.h: the model of what the kernel promises, and why a simulation).
//
// What it proves: ckpt_publish is atomic. Whatever instant the power fails, a
// recovering reader finds DIR/LATEST naming a checkpoint that is whole on the
// disk (the previous one or the new one, never a torn or empty manifest), and
// every step-* directory a loader lists (ckpt_list) is whole; after a return of
// 0 the new checkpoint is durable. An error from any call is reported, naming
// the call, and leaves the same guarantees.
//
// Each crash point and each injected error is a check of its own (its FAIL line
// says what the reader found and what the protocol did wrong), and their number
// is the number of calls ckpt_publish makes; a grader scores the fixed names
// publish.every_crash_point and publish.every_error_named, which sum them up.
//
// The test then proves it can fail: broken protocols, written here the way a
// learner might, must each be caught at some crash point.
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "checkpoint.h"
#include "harness.h"
#include "power_loss_disk.h"

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

// The disk as checkpoint.c leaves it before calling ckpt_publish: the previous
// checkpoint published, the new one's shards durable in step-00000006.tmp/.
static void scene_init(Sim *s, int crash_after, int fail_call) {
    sim_reset(s, crash_after, fail_call);
    int dir = sim_add_durable(s, 0, "DIR", NULL);
    for (int c = 0; c < 2; c++) {
        int d = sim_add_durable(s, dir, c ? "step-00000006.tmp" : CKPTS[c].name, NULL);
        if (!c) sim_add_durable(s, d, "manifest.json", CKPTS[c].manifest);
        for (int r = 0; r < 2; r++) sim_add_durable(s, d, SHARDS[r], CKPTS[c].shard[r]);
    }
    sim_add_durable(s, dir, "LATEST", "step-00000003\n");
}

// ---------------------------------------------------------------- the reader's invariant

// What a recovering reader may find wrong, each with what the protocol must have
// done wrong (a Finding's hint).
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
static const char *H_LATEST_FORM = "LATEST must hold one line: the published checkpoint directory's "
                                   "name and a newline (\"step-00000006\\n\"), not a path, not the "
                                   ".tmp name";
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
    int ino = sim_resolve(s, v, path, NULL);
    if (!c || ino < 0 || !s->ino[ino].is_dir) {
        snprintf(f->what, sizeof f->what, "%s%s, which %s", prefix, name,
                 c ? "does not exist" : "is no checkpoint");
        f->hint = c ? H_DIR : prefix[0] == 'L' ? H_LATEST_FORM : H_NAME;
        return 1;
    }
    snprintf(path, sizeof path, "DIR/%s/manifest.json", name);
    int k = sim_file_fault(s, v, path, c->manifest, disk, what, sizeof what);
    if (k) {
        snprintf(f->what, sizeof f->what, "%s%s, whose %s", prefix, name, what);
        f->hint = k == 1 ? H_ENTRY : H_BYTES;
        return 1;
    }
    for (int r = 0; r < 2; r++) {
        snprintf(path, sizeof path, "DIR/%s/%s", name, SHARDS[r]);
        if (sim_file_fault(s, v, path, c->shard[r], disk, what, sizeof what)) {
            snprintf(f->what, sizeof f->what, "%s%s, whose %s", prefix, name, what);
            f->hint = H_SHARD;
            return 1;
        }
    }
    return 0;
}

// The ReaderCheck of power_loss_disk.h: 0 if the state is whole for a recovering
// reader, else 1 with f filled.
static int reader_fault(const Sim *s, const View *v, int disk, Finding *f) {
    char name[64];
    int ino = sim_resolve(s, v, "DIR/LATEST", NULL);
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
        f->hint = len == 0 ? H_LATEST : H_LATEST_FORM;  // emptied by O_TRUNC, or written wrong
        return 1;
    }
    memcpy(name, bytes, len - 1);
    name[len - 1] = 0;
    if (ckpt_fault(s, v, name, disk, f, "LATEST naming ")) return 1;
    // A loader also lists DIR: every step-<digits> directory must be whole.
    int dir = sim_resolve(s, v, "DIR", NULL);
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

typedef struct {
    int calls, broken, first;    // crash points; how many break; the first that does
    int latest_k;                // the first that leaves LATEST naming a broken checkpoint (-1)
    char first_what[1200], latest_what[1200];
    const char *first_hint;      // what the protocol did wrong, at the first
} Sweep;

// Runs fn with the power cut after call k for every k, checking each.
static void sweep(PublishFn fn, TestState *ts, Sweep *sw) {
    static Sim full, s;
    char err[512];
    scene_init(&full, -1, -1);
    publish(fn, &full, err, sizeof err);
    // Past MAX_CALLS every call fails: the crash points after it are not the protocol's.
    *sw = (Sweep){full.calls < MAX_CALLS ? full.calls : MAX_CALLS, 0, -1, -1, "", "", NULL};
    for (int k = 0; k <= sw->calls; k++) {
        scene_init(&s, k, -1);
        publish(fn, &s, err, sizeof err);
        Finding f;
        int states = 0, bad = sim_crash_fault(&s, reader_fault, &f, &states);
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
            sw->first_hint = f.hint;
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
    scene_init(&s, -1, -1);
    s.fs.write_file(&s.fs, "DIR/new", "x\n", 2);
    sim_build_view(&s, &v, 0);
    int lost = sim_resolve(&s, &v, "DIR/new", NULL) < 0;
    sim_build_view(&s, &v, SIM_CACHE);
    int ino = sim_resolve(&s, &v, "DIR/new", NULL), empty = ino > 0 && s.ino[ino].disk_n == 0;
    s.fs.fsync_file(&s.fs, "DIR/new");
    sim_build_view(&s, &v, 0);
    int nameless = sim_resolve(&s, &v, "DIR/new", NULL) < 0;
    s.fs.fsync_dir(&s.fs, "DIR");
    sim_build_view(&s, &v, 0);
    int kept = sim_resolve(&s, &v, "DIR/new", NULL) == ino && s.ino[ino].disk_n == 2;
    test_report(ts, lost && empty && nameless && kept, "publish.simulator_durability",
                "a new file: lost on a crash %d, its bytes not on the disk %d, nameless after fsync_file "
                "alone %d, kept after fsync_dir %d (want 1 1 1 1)", lost, empty, nameless, kept);

    scene_init(&s, -1, -1);
    s.fs.write_file(&s.fs, "DIR/LATEST.tmp", "step-00000006\n", 14);
    s.fs.rename(&s.fs, "DIR/LATEST.tmp", "DIR/LATEST");
    int caught = sim_crash_fault(&s, reader_fault, &f, &st);
    test_report(ts, caught && st == 3 && strcmp(f.what, "DIR/LATEST empty (the journal having committed "
                "the directory changes up to rename(DIR/LATEST.tmp -> DIR/LATEST), not the data they name)") == 0,
                "publish.simulator_journal_order", "LATEST.tmp renamed over LATEST, nothing fsync'd: the "
                "third of %d disk states is %s", st, caught ? f.what : "whole (want: LATEST empty)");
}

// Whether DIR/LATEST names the new checkpoint: in the tree a reader sees now
// (disk 0), or on the disk with nothing left to the journal (1).
static int latest_names_new(const Sim *s, int disk) {
    View v;
    sim_build_view(s, &v, disk ? 0 : SIM_CACHE);
    int ino = sim_resolve(s, &v, "DIR/LATEST", NULL);
    if (ino < 0 || s->ino[ino].is_dir) return 0;
    const Inode *l = &s->ino[ino];
    return (disk ? l->disk_n : l->cache_n) == 14 && memcmp(disk ? l->disk : l->cache, "step-00000006\n", 14) == 0;
}

static void test_real(TestState *ts) {
    // The checks a grader scores by name (07_fault_tolerance/exercises/parts.txt),
    // announced before anything runs ckpt_publish: if it crashes the test, they
    // are named as never reported.
    printf("PLAN publish.completes_durably\nPLAN publish.every_crash_point\nPLAN publish.every_error_named\n");
    fflush(stdout);  // before any check: a crash in the first must not lose the plan
    fflush(stdout);
    static Sim s;
    char err[512];
    scene_init(&s, -1, -1);
    int rc = publish(ckpt_publish, &s, err, sizeof err);
    // made: how many calls it makes. published: whether a reader sees the new
    // checkpoint afterwards; a protocol that never gets there (no calls at all,
    // say) survives every crash and every error without proving anything.
    int made = s.calls, published = latest_names_new(&s, 0);
    Finding f = {"", NULL};
    int st = 0, faulty = sim_crash_fault(&s, reader_fault, &f, &st), latest6 = latest_names_new(&s, 1);
    const char *found = faulty ? f.what : latest6 ? "LATEST naming step-00000006, whole"
                                                  : "LATEST still naming step-00000003";
    const char *why = faulty && f.hint ? f.hint
                      : made == 0 ? "ckpt_publish made no calls"
                      : made > MAX_CALLS ? "more calls than the simulated disk allows (every call after them fails)"
                      : !latest6 && rc == 0 ? "ckpt_publish returned 0 before the new checkpoint was durable: "
                                              "the last rename needs fsync_dir(DIR) before it returns"
                      : NULL;
    test_report(ts, rc == 0 && !faulty && latest6 && made <= MAX_CALLS, "publish.completes_durably", "rc %d%s%s; "
                "%d calls; on the disk after the last one, with nothing left to the journal: %s%s%s", rc,
                err[0] ? " " : "", err, made, found, why ? ": " : "", why ? why : "");

    Sweep sw;
    sweep(ckpt_publish, ts, &sw);

    // An error at call k (EIO): ckpt_publish returns -1 naming the call, and
    // neither the reader now nor any crash afterwards sees a broken checkpoint.
    int wrong = 0, first_wrong = -1;
    char detail[2048], first_detail[2048] = "";
    for (int k = 0; k < sw.calls; k++) {
        scene_init(&s, -1, k);
        int erc = publish(ckpt_publish, &s, err, sizeof err);
        // The call's path: "write_file(P)", "fsync_dir(P)"; a rename, "rename(A -> B)",
        // may be named by either of its two.
        char path[200] = "", to[200] = "", name[64];
        const char *lp = strchr(s.call[k], '('), *end = strpbrk(lp ? lp + 1 : "", " )");
        if (lp && end) snprintf(path, sizeof path, "%.*s", (int)(end - lp - 1), lp + 1);
        const char *arrow = strstr(s.call[k], " -> "), *close = arrow ? strchr(arrow, ')') : NULL;
        if (close) snprintf(to, sizeof to, "%.*s", (int)(close - arrow - 4), arrow + 4);
        View v;
        sim_build_view(&s, &v, SIM_CACHE);
        st = 0;
        int bad = reader_fault(&s, &v, 0, &f) || sim_crash_fault(&s, reader_fault, &f, &st);
        int named = ((path[0] && strstr(err, path)) || (to[0] && strstr(err, to))) &&
                    strstr(err, strerror(EIO));
        // (An empty s.call[k]: with call k failing, the protocol never got that far.)
        snprintf(detail, sizeof detail, "%s fails (EIO): rc %d \"%s\"%s%s%s%s%s",
                 s.call[k][0] ? s.call[k] : "a call it no longer makes", erc, err,
                 named ? "" : " (the message must name the path, either one for a rename, and the error)", bad ? "; afterwards: " : "",
                 bad ? f.what : "", bad ? ": " : "", bad && f.hint ? f.hint : "");
        snprintf(name, sizeof name, "publish.error_at_call_%02d", k);
        int ok = erc == -1 && named && !bad;
        test_report(ts, ok, name, "%s", detail);
        if (!ok && wrong++ == 0) first_wrong = k, memcpy(first_detail, detail, sizeof detail);
    }

    // The sums a grader scores: each passes only if every point above did, and
    // there was something to prove (at least one call, no more than the disk
    // records, and for the crash points, a checkpoint published).
    char msg[2400];
    int points = sw.calls + 1;
    if (made == 0)
        snprintf(msg, sizeof msg, "ckpt_publish made no calls (rc %d): it published nothing, so no crash "
                 "point tests it", rc);
    else if (sw.broken)
        snprintf(msg, sizeof msg, "%d of the %d crash points break%s a checkpoint; the first: %s: %s", sw.broken,
                 points, sw.broken == 1 ? "s" : "", sw.first_what, sw.first_hint ? sw.first_hint : "");
    else if (made > MAX_CALLS)
        snprintf(msg, sizeof msg, "ckpt_publish made %d calls, more than the %d the simulated disk allows: the "
                 "crash points after call %d go unchecked", made, MAX_CALLS, MAX_CALLS);
    else if (!published)
        snprintf(msg, sizeof msg, "none of the %d crash points breaks a checkpoint, but ckpt_publish (rc %d) never "
                 "makes LATEST name step-00000006: a protocol that publishes nothing survives every crash", points, rc);
    else
        snprintf(msg, sizeof msg, "all %d crash points (before the first call, and after each of the %d) leave "
                 "every disk state a power cut may leave whole", points, sw.calls);
    test_report(ts, made > 0 && made <= MAX_CALLS && !sw.broken && published, "publish.every_crash_point", "%s", msg);

    if (made == 0)
        snprintf(msg, sizeof msg, "ckpt_publish made no calls (rc %d): no error could be injected, so none was "
                 "reported", rc);
    else if (wrong)
        snprintf(msg, sizeof msg, "%d of the %d calls failing (EIO) went wrong; the first, call %d: %s", wrong,
                 sw.calls, first_wrong, first_detail);
    else if (made > MAX_CALLS)
        snprintf(msg, sizeof msg, "ckpt_publish made %d calls, more than the %d the simulated disk allows: an "
                 "error after call %d goes untested", made, MAX_CALLS, MAX_CALLS);
    else
        snprintf(msg, sizeof msg, "each of the %d calls failing (EIO) returned -1 naming the path and the error, "
                 "and left no broken checkpoint", sw.calls);
    test_report(ts, made > 0 && made <= MAX_CALLS && !wrong, "publish.every_error_named", "%s", msg);
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
