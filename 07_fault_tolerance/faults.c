// faults.c — faults a run gives itself on purpose (checkpoint.h's --inject), so
// that a test can kill a rank at step 8, or in the middle of writing the step-6
// checkpoint, and check what the restart recovers. Random choices come from the
// core's generator and a seed: a failing trial reruns exactly.
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "checkpoint.h"
#include "ops.h"
#include "rng.h"

// "random" draws from [lo, hi]; else a number in that range.
static int number(const char *key, const char *v, int lo, int hi, Rng *r, int *out, char *err,
                  size_t errn) {
    if (strcmp(v, "random") == 0) {
        *out = lo + (int)rng_below(r, (uint32_t)(hi - lo + 1));
        return 0;
    }
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi) {
        snprintf(err, errn, "--inject: %s=%s is not a number in [%d, %d] or \"random\"", key, v, lo, hi);
        return -1;
    }
    *out = (int)x;
    return 0;
}

int fault_parse(const char *spec, int world, int steps, Fault *f, char *err, size_t errn) {
    memset(f, 0, sizeof *f);
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", spec) >= (int)sizeof buf) {
        snprintf(err, errn, "--inject: the spec is longer than %zu characters", sizeof buf - 1);
        return -1;
    }
    char *save, *kind = strtok_r(buf, ",", &save);
    static const char *kinds[] = {"", "kill", "hang", "spike", "bitflip", "slow", "corrupt"};
    for (int k = 1; kind && k <= FAULT_CORRUPT; k++)
        if (strcmp(kind, kinds[k]) == 0) f->kind = (FaultKind)k;
    if (f->kind == FAULT_NONE) {
        snprintf(err, errn, "--inject %s: the fault is kill, hang, spike, bitflip, slow or corrupt "
                 "(e.g. kill,step=8,rank=1)", spec);
        return -1;
    }
    // The seed first, wherever it is written: it fixes every "random".
    unsigned long long seed = 1;
    const char *step = NULL, *rank = "0", *during = NULL, *attempt = "0", *factor = NULL;
    for (char *kv = strtok_r(NULL, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        if (strcmp(kv, "permanent") == 0) {
            f->permanent = 1;
            continue;
        }
        char *eq = strchr(kv, '=');
        if (!eq) goto bad_key;
        *eq = 0;
        const char *v = eq + 1;
        if (strcmp(kv, "step") == 0) step = v;
        else if (strcmp(kv, "rank") == 0) rank = v;
        else if (strcmp(kv, "during") == 0) during = v;
        else if (strcmp(kv, "seed") == 0) {
            char *end;
            errno = 0;
            seed = strtoull(v, &end, 10);
            if (!*v || *end || errno || *v == '-') {
                snprintf(err, errn, "--inject %s: seed=%s is not a whole number", spec, v);
                return -1;
            }
        }
        else if (strcmp(kv, "attempt") == 0) attempt = v;
        else if (strcmp(kv, "factor") == 0) factor = v;
        else goto bad_key;
        continue;
    bad_key:
        snprintf(err, errn, "--inject %s: \"%s\" is not step=, rank=, during=, attempt=, factor=, "
                 "seed= or permanent", spec, kv);
        return -1;
    }
    if (!step) {
        snprintf(err, errn, "--inject %s: which step? (step=N or step=random)", spec);
        return -1;
    }
    Rng r;
    rng_seed(&r, seed);
    f->step_random = strcmp(step, "random") == 0;
    if (number("step", step, 1, steps, &r, &f->step, err, errn) ||
        number("rank", rank, 0, world - 1, &r, &f->rank, err, errn) ||
        number("attempt", attempt, 0, 1000, &r, &f->attempt, err, errn))
        return -1;
    if (during && strcmp(during, "ckpt") != 0 && strcmp(during, "collective") != 0) {
        snprintf(err, errn, "--inject %s: during=%s: the places are during=ckpt and "
                 "during=collective", spec, during);
        return -1;
    }
    f->during_ckpt = during && strcmp(during, "ckpt") == 0;
    f->during_coll = during && strcmp(during, "collective") == 0;
    f->factor = 3.0;
    if (factor) {
        char *end;
        f->factor = strtod(factor, &end);
        if (f->kind != FAULT_SLOW || *end || !(f->factor >= 1.0 && f->factor <= 1000.0)) {
            snprintf(err, errn, "--inject %s: factor=%s is for slow, a number in [1, 1000]", spec,
                     factor);
            return -1;
        }
    }
    if (f->kind == FAULT_HANG && world == 1) {
        snprintf(err, errn, "--inject %s: a hang is noticed by the ranks that wait for the hung "
                 "one (their timeout); one process has none: use 2 or more ranks", spec);
        return -1;
    }
    if (during && f->kind != FAULT_KILL) {
        snprintf(err, errn, "--inject %s: during=%s is for kill", spec, during);
        return -1;
    }
    if (f->during_coll && world == 1) {
        snprintf(err, errn, "--inject %s: one process has no collective to die in: use 2 or "
                 "more ranks", spec);
        return -1;
    }
    return 0;
}

static void strike(const Fault *f, int rank, const char *where) {
    fprintf(stderr, "warning: rank %d: injected %s %s (--inject)\n", rank,
            f->kind == FAULT_KILL ? "death" : "hang", where);
    log_event(f->kind == FAULT_KILL ? "killed" : "hung");
    fflush(NULL);
    if (f->kind == FAULT_KILL) raise(SIGKILL);
    for (;;) pause();  // a hang: alive, silent, until someone kills it
}

void fault_at_step(const Fault *f, int rank, int step) {
    if ((f->kind == FAULT_KILL || f->kind == FAULT_HANG) && !f->during_ckpt && !f->during_coll &&
        f->rank == rank && f->step == step) {
        char where[64];
        snprintf(where, sizeof where, "as step %d begins", step);
        strike(f, rank, where);
    }
}

void fault_spike_batch(const Fault *f, int rank, int step, int *targets, size_t n) {
    if (f->kind != FAULT_SPIKE || f->rank != rank || f->step != step) return;
    // Every target the same token, one the synthetic language never emits after
    // most contexts: the model is confidently wrong about all of them.
    for (size_t i = 0; i < n; i++) targets[i] = targets[0] == 0 ? 1 : 0;
    fprintf(stderr, "warning: rank %d: injected loss spike: step %d's targets are one token "
            "(--inject)\n", rank, step);
}

void fault_bitflip(const Fault *f, int rank, int step, const TrainState *st) {
    if (f->kind != FAULT_BITFLIP || f->rank != rank || f->step != step) return;
    for (int v = 0; v < st->n_views; v++) {
        const StateView *V = &st->views[v];
        if (V->kind != ST_PARAMS) continue;
        size_t at = (V->hi - V->lo) / 2;  // the middle of the first weights the rank holds
        uint32_t bits;
        V->g->ctx->ops->to_host(V->g->ctx, &bits, V->data + at, sizeof bits);
        bits ^= 1u << 22;
        V->g->ctx->ops->to_device(V->g->ctx, V->data + at, &bits, sizeof bits);
        fprintf(stderr, "warning: rank %d: injected bit flip in weight %zu after step %d's update "
                "(--inject)\n", rank, V->lo + at, step);
        return;
    }
}

void fault_slow(const Fault *f, int rank, int step, double ms) {
    if (f->kind != FAULT_SLOW || f->rank != rank || step < f->step) return;
    if (step == f->step)
        fprintf(stderr, "warning: rank %d: injected slowness from step %d: %gx (--inject)\n", rank,
                step, f->factor);
    double s = (f->factor - 1.0) * ms * 1e-3;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

void fault_in_ckpt(const Fault *f, int rank, uint64_t step) {
    if (f && f->kind == FAULT_KILL && f->during_ckpt && f->rank == rank && (uint64_t)f->step == step) {
        char where[96];
        snprintf(where, sizeof where, "after writing its shard of the step-%llu checkpoint",
                 (unsigned long long)step);
        strike(f, rank, where);
    }
}

void fault_arm_collective(const Fault *f, int rank, int step, Comm *c) {
    if (f->kind == FAULT_KILL && f->during_coll && f->rank == rank && f->step == step && c)
        comm_inject_kill_mid(c);
}

// One byte in the middle of the file, inverted, in place: the file keeps its size,
// so only its checksum can tell (as with a flipped bit on a disk).
void fault_after_publish(const Fault *f, int rank, uint64_t step, const char *dir, const char *name) {
    if (!f || f->kind != FAULT_CORRUPT || f->rank != rank || (uint64_t)f->step != step) return;
    char path[4300];
    snprintf(path, sizeof path, "%s/%s/rank-%05d.safetensors", dir, name, rank);
    FILE *fp = fopen(path, "r+b");
    int c = EOF;
    long at = -1;
    if (fp && fseek(fp, 0, SEEK_END) == 0 && (at = ftell(fp) / 2) > 0 && fseek(fp, at, SEEK_SET) == 0)
        c = fgetc(fp);
    int ok = c != EOF && fseek(fp, at, SEEK_SET) == 0 && fputc(c ^ 0xFF, fp) != EOF;
    if (fp && fclose(fp) != 0) ok = 0;  // closed either way: a stream is gone after fclose
    if (ok) {
        fprintf(stderr, "warning: rank %d: injected corruption: byte %ld of %s inverted (--inject)\n",
                rank, at, path);
        return;
    }
    DIE("--inject corrupt: could not rewrite a byte of %s", path);
}
