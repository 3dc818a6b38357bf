// timeline.c — spans per rank and lane; overlap; Chrome trace JSON and a table.
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "files.h"
#include "flags.h"
#include "timeline.h"

static const char *lane_names[TL_LANES] = {"compute", "communication", "waiting"};

void timeline_init(Timeline *t, int enabled) {
    memset(t, 0, sizeof *t);
    t->enabled = enabled;
}

void timeline_free(Timeline *t) {
    for (int l = 0; l < TL_LANES; l++) free(t->lane[l].spans);
    memset(t, 0, sizeof *t);
}

void timeline_clear(Timeline *t) {
    for (int l = 0; l < TL_LANES; l++) t->lane[l].n = 0;
}

void timeline_span(Timeline *t, TimelineLane lane, const char *name, double t0, double t1) {
    if (!t || !t->enabled) return;
    SpanList *L = &t->lane[lane];
    if (L->n == L->cap) {
        size_t cap = L->cap ? 2 * L->cap : 256;
        Span *s = realloc(L->spans, cap * sizeof *s);
        CHECK(s, "out of host memory for the timeline (%zu spans)", cap);
        L->spans = s;
        L->cap = cap;
    }
    Span *s = &L->spans[L->n++];
    snprintf(s->name, sizeof s->name, "%s", name);
    s->t0 = t0;
    s->t1 = t1 > t0 ? t1 : t0;
}

// Both lanes are recorded in time order by one thread each, so a single pass
// with two cursors finds every intersection.
void timeline_overlap(const Timeline *t, double *comm, double *hidden) {
    *comm = *hidden = 0;
    const Span *c = t->lane[TL_COMM].spans, *k = t->lane[TL_COMPUTE].spans;
    size_t nc = t->lane[TL_COMM].n, nk = t->lane[TL_COMPUTE].n, j = 0;
    for (size_t i = 0; i < nc; i++) {
        *comm += c[i].t1 - c[i].t0;
        while (j < nk && k[j].t1 <= c[i].t0) j++;
        for (size_t q = j; q < nk && k[q].t0 < c[i].t1; q++) {
            double a = c[i].t0 > k[q].t0 ? c[i].t0 : k[q].t0;
            double b = c[i].t1 < k[q].t1 ? c[i].t1 : k[q].t1;
            if (b > a) *hidden += b - a;
        }
    }
}

// ---------------------------------------------------------------- gathering and writing

// A rank's spans travel as: count per lane, then the Span array of each lane.
static void send_spans(Comm *c, const Group *g, const Timeline *t) {
    uint64_t n[TL_LANES];
    for (int l = 0; l < TL_LANES; l++) n[l] = t->lane[l].n;
    comm_send(c, g, 0, n, sizeof n);
    for (int l = 0; l < TL_LANES; l++)
        if (n[l]) comm_send(c, g, 0, t->lane[l].spans, n[l] * sizeof(Span));
}

static void recv_spans(Comm *c, const Group *g, int from, Timeline *t) {
    uint64_t n[TL_LANES];
    comm_recv(c, g, from, n, sizeof n);
    timeline_init(t, 1);
    for (int l = 0; l < TL_LANES; l++) {
        if (!n[l]) continue;
        t->lane[l].spans = malloc(n[l] * sizeof(Span));
        CHECK(t->lane[l].spans, "out of host memory for rank %d's timeline", from);
        t->lane[l].n = t->lane[l].cap = n[l];
        comm_recv(c, g, from, t->lane[l].spans, n[l] * sizeof(Span));
    }
}

// JSON strings: our names are plain text, but a quote or backslash must not break the file.
static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', f);
        if ((unsigned char)*s >= 0x20) fputc(*s, f);
    }
    fputc('"', f);
}

// The folder a file goes in, made if it is missing (--trace runs/pp: runs/).
static void make_parent(const char *path) {
    const char *slash = path ? strrchr(path, '/') : NULL;
    if (!slash || slash == path) return;
    char dir[4096];
    snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    if (make_dirs(dir) != 0) log_warn("cannot create the folder %s: %s", dir, strerror(errno));
}

void timeline_check_output(const char *prefix) {
    char json[4200];
    snprintf(json, sizeof json, "%s.json", prefix);
    const char *slash = strrchr(json, '/');
    if (slash && slash != json) {  // (quietly: flags_check_output says what is wrong)
        char dir[4200];
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - json), json);
        make_dirs(dir);
    }
    flags_check_output("--trace", json);
}

static int write_files(const Timeline *all, int p, const char *json, const char *dat) {
    make_parent(json);
    make_parent(dat);
    double origin = 1e300;
    for (int r = 0; r < p; r++)
        for (int l = 0; l < TL_LANES; l++)
            for (size_t i = 0; i < all[r].lane[l].n; i++)
                if (all[r].lane[l].spans[i].t0 < origin) origin = all[r].lane[l].spans[i].t0;
    if (origin == 1e300) origin = 0;
    FILE *f = json ? fopen(json, "w") : NULL;
    if (json && !f) {
        log_warn("cannot write the timeline %s: %s", json, strerror(errno));
        return -1;
    }
    if (f) {
        // Chrome's trace event format: "X" events carry a start and a duration in µs;
        // "M" (metadata) events name the processes (ranks) and threads (lanes).
        fprintf(f, "{\"displayTimeUnit\": \"ms\", \"otherData\": {\"clock\": \"CLOCK_MONOTONIC of "
                   "one machine\"},\n \"traceEvents\": [\n");
        int first = 1;
        for (int r = 0; r < p; r++) {
            fprintf(f, "%s  {\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, \"args\": "
                       "{\"name\": \"rank %d\"}}", first ? "" : ",\n", r, r);
            first = 0;
            for (int l = 0; l < TL_LANES; l++)
                fprintf(f, ",\n  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": %d, \"tid\": "
                           "%d, \"args\": {\"name\": \"%s\"}}", r, l, lane_names[l]);
            for (int l = 0; l < TL_LANES; l++)
                for (size_t i = 0; i < all[r].lane[l].n; i++) {
                    const Span *s = &all[r].lane[l].spans[i];
                    fprintf(f, ",\n  {\"name\": ");
                    json_string(f, s->name);
                    fprintf(f, ", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, "
                               "\"ts\": %.3f, \"dur\": %.3f}", lane_names[l], r, l,
                            (s->t0 - origin) * 1e6, (s->t1 - s->t0) * 1e6);
                }
        }
        fprintf(f, "\n]}\n");
        if (fclose(f) != 0) {
            log_warn("cannot write the timeline %s: %s", json, strerror(errno));
            return -1;
        }
    }
    f = dat ? fopen(dat, "w") : NULL;
    if (dat && !f) {
        log_warn("cannot write the timeline %s: %s", dat, strerror(errno));
        return -1;
    }
    if (f) {
        fprintf(f, "# rank lane(0 compute, 1 communication, 2 waiting) t0_ms t1_ms name\n");
        for (int r = 0; r < p; r++)
            for (int l = 0; l < TL_LANES; l++)
                for (size_t i = 0; i < all[r].lane[l].n; i++) {
                    const Span *s = &all[r].lane[l].spans[i];
                    fprintf(f, "%d %d %.4f %.4f \"%s\"\n", r, l, (s->t0 - origin) * 1e3,
                            (s->t1 - origin) * 1e3, s->name);
                }
        if (fclose(f) != 0) {
            log_warn("cannot write the timeline %s: %s", dat, strerror(errno));
            return -1;
        }
    }
    return 0;
}

int timeline_write(const Timeline *t, Comm *c, const Group *g, const char *json, const char *dat) {
    if (g->rank != 0) {
        send_spans(c, g, t);
        return 0;
    }
    Timeline *all = calloc((size_t)g->size, sizeof *all);
    CHECK(all, "out of host memory");
    all[0] = *t;  // borrowed: not freed below
    for (int r = 1; r < g->size; r++) recv_spans(c, g, r, &all[r]);
    int rc = write_files(all, g->size, json, dat);
    for (int r = 1; r < g->size; r++) timeline_free(&all[r]);
    free(all);
    return rc;
}

int timeline_write_prefix(const Timeline *t, Comm *c, const Group *g, const char *prefix) {
    char json[1024], dat[1024];
    snprintf(json, sizeof json, "%s.json", prefix);
    snprintf(dat, sizeof dat, "%s.dat", prefix);
    int rc = timeline_write(t, c, g, json, dat);
    if (g->rank == 0 && rc == 0) log_info("timeline of the last step: %s (Perfetto), %s", json, dat);
    return rc;
}
