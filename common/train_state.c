// train_state.c — a rank's state as views (train_state.h), and the job's sum.
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "train_state.h"

static const char *const kind_names[ST_KINDS] = {"params", "exp_avg", "exp_avg_sq", "master"};
const char *state_kind_name(StateKind k) { return k < ST_KINDS ? kind_names[k] : "?"; }

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

void train_state_track_opt(TrainState *s, AdamW *opt) {
    if (s->n_opts == s->opt_cap) {
        s->opt_cap = s->opt_cap ? 2 * s->opt_cap : 4;
        s->opts = realloc(s->opts, (size_t)s->opt_cap * sizeof *s->opts);
        CHECK(s->opts, "out of host memory");
    }
    s->opts[s->n_opts++] = opt;
}

void train_state_opt_views(TrainState *s, const AdamW *opt, const GPT *g, size_t lo, size_t hi,
                           int replicas, int replica) {
    if (lo < opt->begin) lo = opt->begin;
    if (hi > opt->end) hi = opt->end;
    if (hi <= lo) return;
    size_t at = lo - opt->begin;  // the moments hold elements [begin, end)
    train_state_add(s, ST_EXP_AVG, g, lo, hi, opt->m + at, replicas, replica);
    train_state_add(s, ST_EXP_AVG_SQ, g, lo, hi, opt->v + at, replicas, replica);
    if (opt->master) train_state_add(s, ST_MASTER, g, lo, hi, opt->master + at, replicas, replica);
}

void train_state_add_opt(TrainState *s, AdamW *opt, const GPT *g, int replicas, int replica) {
    train_state_track_opt(s, opt);
    train_state_opt_views(s, opt, g, opt->begin, opt->end, replicas, replica);
}

void train_state_free(TrainState *s) {
    free(s->views);
    free(s->opts);
    memset(s, 0, sizeof *s);
}

void job_sum_p2p(float *buf, int n, void *arg) {
    const JobSumP2P *p = arg;
    const Group *g = p->group;
    if (g->rank != 0) {  // to member 0, which sums in member order and sends the total back
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
