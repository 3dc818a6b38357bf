// comm.c — process groups, and the progress engine that every point-to-point
// message (and so every collective) goes through. Starting the ranks, and
// restarting them, is launch.c's.
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "comm_internal.h"
#include "perf.h"
#include "timer.h"

static const char *kind_names[COLL_KINDS] = {"point-to-point", "barrier", "all-reduce",
                                             "reduce-scatter", "all-gather", "broadcast",
                                             "reduce", "all-to-all"};
const char *coll_name(CollKind k) { return k < COLL_KINDS ? kind_names[k] : "?"; }

static const char *transport_names[TRANSPORT_COUNT] = {"shm", "mpi", "tcp", "shm+tcp"};
const char *transport_name(Transport t) { return t < TRANSPORT_COUNT ? transport_names[t] : "?"; }
int transport_parse(const char *s, Transport *out) {
    for (int t = 0; t < TRANSPORT_COUNT; t++)
        if (strcmp(s, transport_names[t]) == 0) { *out = (Transport)t; return 0; }
    return -1;
}

static const char *shm_stores_names[] = {"auto", "cached", "streaming"};
int shm_stores_parse(const char *s, ShmStores *out) {
    for (int i = 0; i <= SHM_STORES_STREAMING; i++)
        if (strcmp(s, shm_stores_names[i]) == 0) { *out = (ShmStores)i; return 0; }
    return -1;
}

int comm_rank(const Comm *c) { return c->rank; }
int comm_size(const Comm *c) { return c->size; }
LaunchMode comm_launch_mode(const Comm *c) { return c->launch; }
Transport comm_transport(const Comm *c) { return c->transport; }
double comm_timeout(const Comm *c) { return c->timeout_s; }
size_t comm_channel_bytes(const Comm *c) { return c->channel_bytes; }
Group *comm_world(Comm *c) { return &c->world; }
int comm_local_size(const Comm *c) { return c->local_size; }
int comm_slot(const Comm *c) { return c->slot; }
int comm_local_cores(const Comm *c) { return c->local_cores; }
int comm_node_size(const Comm *c) { return c->node_size > 0 ? c->node_size : c->size; }
int comm_node(const Comm *c, int world_rank) { return world_rank / comm_node_size(c); }
LinkBytes comm_link_bytes(const Comm *c) { return (LinkBytes){c->link_sent[0], c->link_sent[1]}; }
LinkBytes link_bytes_since(LinkBytes now, LinkBytes before) {
    return (LinkBytes){now.inside - before.inside, now.across - before.across};
}

// ---------------------------------------------------------------- groups

void comm_group_new(Comm *c, Group *g, const char *name, const int *ranks, int n) {
    CHECK(n >= 1 && n <= c->size, "group %s: %d members in a world of %d", name, n, c->size);
    memset(g, 0, sizeof *g);
    snprintf(g->name, sizeof g->name, "%s", name);
    g->size = n;
    g->rank = -1;
    // The id is a hash of the member list: equal on every member, different for
    // different groups (so a message meant for another group is caught).
    uint32_t h = 2166136261u;
    for (int i = 0; i < n; i++) {
        CHECK(ranks[i] >= 0 && ranks[i] < c->size, "group %s: rank %d outside the world", name,
              ranks[i]);
        g->ranks[i] = ranks[i];
        if (ranks[i] == c->rank) g->rank = i;
        h = (h ^ (uint32_t)ranks[i]) * 16777619u;
    }
    for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
    g->id = h;
    CHECK(g->rank >= 0, "group %s: this rank (%d) is not a member", name, c->rank);
    mpi_group_comm(c, g);
}

void comm_mesh(Comm *c, int dp, int tp, int pp, Group *dp_g, Group *tp_g, Group *pp_g) {
    CHECK(dp >= 1 && tp >= 1 && pp >= 1 && dp * tp * pp == c->size,
          "mesh dp=%d x tp=%d x pp=%d does not match the %d ranks", dp, tp, pp, c->size);
    int r = c->rank, t = r % tp, d = (r / tp) % dp, p = r / (tp * dp);
    int ranks[COMM_MAX_RANKS];
    for (int i = 0; i < dp; i++) ranks[i] = (p * dp + i) * tp + t;
    if (dp_g) comm_group_new(c, dp_g, "dp", ranks, dp);
    for (int i = 0; i < tp; i++) ranks[i] = (p * dp + d) * tp + i;
    if (tp_g) comm_group_new(c, tp_g, "tp", ranks, tp);
    for (int i = 0; i < pp; i++) ranks[i] = (i * dp + d) * tp + t;
    if (pp_g) comm_group_new(c, pp_g, "pp", ranks, pp);
}

// ---------------------------------------------------------------- collectives

void comm_share_core(Comm *c, int share) { c->share_core = share; }

void comm_bind_thread(Comm *c, int bind) {
    c->bound = bind;
    c->owner = pthread_self();
}

// Called wherever a thread changes the Comm's state (a message, a collective's start).
static void check_owner(const Comm *c, const char *what, const Group *g) {
    CHECK(!c->bound || pthread_equal(c->owner, pthread_self()), "%s on group %s from a thread "
          "that does not own this rank's Comm: a progress thread drives it now (wait for its "
          "collectives, or start this one through it)", what, g->name);
}

void comm_coll_begin(Comm *c, Group *g, CollKind kind, size_t count, DType dt) {
    check_owner(c, coll_name(kind), g);
    g->seq++;
    c->cur_kind = kind;
    c->cur_seq = g->seq;
    c->cur_group = g;
    c->cur_count = count;
    c->cur_dt = dt;
    c->counters[kind].calls++;
    if (c->kill_mid == 1) c->kill_mid = 2;  // this one: after its first send
    if (c->kill_seq >= 0 && c->rank == c->kill_rank && g->id == c->world.id &&
        (int64_t)g->seq == c->kill_seq) {
        log_warn("fault injection: rank %d kills itself at %s #%llu", c->rank, coll_name(kind),
                 (unsigned long long)g->seq);
        fflush(stdout);
        fflush(stderr);
        raise(SIGKILL);
    }
    if (c->stall_seq >= 0 && c->rank == c->stall_rank && g->id == c->world.id &&
        (int64_t)g->seq == c->stall_seq) {
        log_warn("fault injection: rank %d stops responding at %s #%llu", c->rank,
                 coll_name(kind), (unsigned long long)g->seq);
        for (;;) pause();
    }
}

void comm_coll_end(Comm *c) {
    c->cur_kind = COLL_P2P;
    c->cur_seq = 0;
    c->cur_group = NULL;
}

const CommCounter *comm_counters(const Comm *c) { return c->counters; }
void comm_reset_counters(Comm *c) {
    memset(c->counters, 0, sizeof c->counters);
    memset(c->link_sent, 0, sizeof c->link_sent);
}
void comm_inject_kill(Comm *c, int rank, int64_t seq) { c->kill_rank = rank; c->kill_seq = seq; }
void comm_inject_stall(Comm *c, int rank, int64_t seq) { c->stall_rank = rank; c->stall_seq = seq; }
void comm_inject_kill_mid(Comm *c) { c->kill_mid = 1; }

// ---------------------------------------------------------------- requests

static CommRequest *request(Comm *c, const Group *g, int peer, void *buf, size_t bytes, int send) {
    check_owner(c, coll_name(c->cur_kind), g);
    CHECK(peer >= 0 && peer < g->size && peer != g->rank, "%s #%llu on group %s: peer %d is not "
          "another member of the %d-rank group", coll_name(c->cur_kind),
          (unsigned long long)c->cur_seq, g->name, peer, g->size);
    CommRequest *r = calloc(1, sizeof *r);
    CHECK(r, "out of memory");
    r->is_send = send;
    r->peer = g->ranks[peer];
    r->group = g;
    r->buf = buf;
    r->bytes = bytes;
    int in_coll = c->cur_group == g;
    r->hdr = (MsgHeader){.magic = MSG_MAGIC, .group_id = g->id, .seq = in_coll ? c->cur_seq : 0,
                         .kind = in_coll ? c->cur_kind : COLL_P2P, .src = (uint32_t)c->rank,
                         .bytes = bytes};
    CollKind k = in_coll ? c->cur_kind : COLL_P2P;
    if (send) c->counters[k].bytes_sent += bytes; else c->counters[k].bytes_recv += bytes;
    if (send) c->link_sent[comm_node(c, r->peer) != comm_node(c, c->rank)] += bytes;
    if (send && k == COLL_P2P) c->counters[k].calls++;
    return r;
}

CommRequest *comm_isend(Comm *c, const Group *g, int peer, const void *buf, size_t bytes) {
    CommRequest *r = request(c, g, peer, (void *)buf, bytes, 1);
    if (c->ops->post) c->ops->post(c, r);
    if (c->kill_mid == 2 && c->cur_kind != COLL_P2P) {  // fault injection (comm_inject_kill_mid)
        c->ops->progress(c, r);  // its first message on its way: the others are inside now
        fprintf(stderr, "warning: rank %d: injected death in the middle of %s #%llu on group %s, "
                "after posting its first message (--inject)\n", c->rank, coll_name(c->cur_kind),
                (unsigned long long)c->cur_seq, c->cur_group ? c->cur_group->name : "?");
        log_event("killed");
        fflush(NULL);
        raise(SIGKILL);
    }
    return r;
}

CommRequest *comm_irecv(Comm *c, const Group *g, int peer, void *buf, size_t bytes, RecvOp op,
                        DType dt) {
    CommRequest *r = request(c, g, peer, buf, bytes, 0);
    r->op = op;
    r->dt = dt;
    CHECK(op == RECV_COPY || bytes % dtype_size(dt) == 0, "reducing receive of %zu bytes is not a "
          "whole number of %s elements", bytes, dtype_name(dt));
    if (c->ops->post) c->ops->post(c, r);  // after op and dt: a transport may need them
    return r;
}

// Moves r along; a large receive notes when its first bytes came and, complete, adds
// the rest's bytes and seconds to its peer's flow.
static int progress(Comm *c, CommRequest *r) {
    size_t before = r->done;
    int moved = c->ops->progress(c, r);
    if (!moved || r->is_send || r->bytes < COMM_FLOW_MIN) return moved;
    double now = now_seconds();
    if (before == 0) {
        r->t_first = now;
        r->done_first = r->done;
    }
    // Only a message seen mostly in flight says how fast its link is: one that had
    // mostly arrived before this rank looked would time its tail alone.
    if (r->complete && r->done_first <= r->bytes / 2 && now > r->t_first) {
        c->flow[r->peer].bytes += r->done - r->done_first;
        c->flow[r->peer].seconds += now - r->t_first;
    }
    return moved;
}

void comm_take_flows(Comm *c, PeerFlow flows[COMM_MAX_RANKS]) {
    memcpy(flows, c->flow, sizeof c->flow);
    memset(c->flow, 0, sizeof c->flow);
}

void comm_progress_meanwhile(Comm *c, CommRequest **reqs, int n) {
    if (c->n_meanwhile + n > COMM_MAX_MEANWHILE) {
        const CommRequest *r = c->meanwhile[0];
        DIE("more than %d requests moved along meanwhile (comm_progress_meanwhile): each must be "
            "waited for (comm_wait) once it is no longer needed, and the oldest, a %s of %zu bytes "
            "%s world rank %d on group %s, never was", COMM_MAX_MEANWHILE,
            r->is_send ? "send" : "receive", r->bytes, r->is_send ? "to" : "from", r->peer,
            r->group->name);
    }
    for (int i = 0; i < n; i++) c->meanwhile[c->n_meanwhile++] = reqs[i];
}

// Frees r, first taking it off the list of those moved along meanwhile.
static void release(Comm *c, CommRequest *r) {
    for (int i = 0; i < c->n_meanwhile; i++)
        if (c->meanwhile[i] == r) c->meanwhile[i--] = c->meanwhile[--c->n_meanwhile];
    free(r);
}

// Moves every request of reqs[0..n) along until the first `need` of them are
// complete (need = n: all of them); those of comm_progress_meanwhile too.
static void wait_for(Comm *c, CommRequest **reqs, int n, int need) {
    double start = now_seconds(), last_moved = start, next_check = start + 0.1;
    int remaining = need;
    while (remaining > 0) {
        int moved = 0;
        remaining = 0;
        for (int i = 0; i < n; i++) {
            if (reqs[i]->complete) continue;
            moved |= progress(c, reqs[i]);
            if (!reqs[i]->complete && i < need) remaining++;
        }
        for (int i = 0; i < c->n_meanwhile; i++)
            if (!c->meanwhile[i]->complete) moved |= progress(c, c->meanwhile[i]);
        if (remaining == 0) break;
        double now = now_seconds();
        if (moved) { last_moved = now; continue; }
        // Nothing moved. Spin briefly (the peer is usually mid-copy), then yield
        // the core (ranks may outnumber cores), and after a long silence sleep: 200 µs
        // naps once 10 ms have passed, at most 2 % more on a wait that long, where
        // waking every 20 µs took the cores from the ranks (and the network stack) it
        // waited for.
        double idle = now - last_moved;
        // (Not with requests moved along meanwhile: the transport would sleep until one of
        // reqs could move, and theirs would wait for it.)
        if (idle >= c->spin_s && c->ops->idle_wait && c->n_meanwhile == 0 &&
            c->ops->idle_wait(c, reqs, n, 2e-3)) {
            // slept in the transport (sockets) until a byte could move, 2 ms at most
        } else if (idle > 10e-3) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        } else if (c->share_core) {
            struct timespec ts = {0, 20000};
            nanosleep(&ts, NULL);
        } else if (idle >= c->spin_s) {
            sched_yield();
        }
        // Every 100 ms: the clock, and the peers we are waiting for.
        if (now < next_check) continue;
        next_check = now + 0.1;
        for (int i = 0; i < n; i++) {
            if (reqs[i]->complete) continue;
            if (c->ops->peer_dead && c->ops->peer_dead(c, reqs[i]->peer))
                comm_die_waiting(c, reqs[i], "the peer's process has exited");
            if (i < need && now - start > c->timeout_s) comm_die_waiting(c, reqs[i], "timeout");
        }
    }
}

void comm_wait(Comm *c, CommRequest **reqs, int n) {
    wait_for(c, reqs, n, n);
    for (int i = 0; i < n; i++) release(c, reqs[i]);
}

void comm_wait_first(Comm *c, CommRequest **reqs, int n) {
    wait_for(c, reqs, n, n > 0 ? 1 : 0);
    if (n > 0) release(c, reqs[0]);
}

int comm_test(Comm *c, CommRequest *r) {
    if (!r->complete) progress(c, r);
    return r->complete;
}

void comm_send(Comm *c, const Group *g, int peer, const void *buf, size_t bytes) {
    CommRequest *r = comm_isend(c, g, peer, buf, bytes);
    comm_wait(c, &r, 1);
}

void comm_recv(Comm *c, const Group *g, int peer, void *buf, size_t bytes) {
    CommRequest *r = comm_irecv(c, g, peer, buf, bytes, RECV_COPY, DT_F32);
    comm_wait(c, &r, 1);
}

void comm_barrier(Comm *c, const Group *g) {
    // Dissemination barrier: lg(p) rounds; in round k, send to rank+2^k and hear
    // from rank-2^k. Nobody leaves before everybody has arrived.
    comm_coll_begin(c, (Group *)g, COLL_BARRIER, 0, DT_F32);
    unsigned char token = 1, got = 0;
    for (int k = 1; k < g->size; k <<= 1) {
        CommRequest *r[2] = {comm_isend(c, g, (g->rank + k) % g->size, &token, 1),
                             comm_irecv(c, g, (g->rank - k + g->size) % g->size, &got, 1, RECV_COPY,
                                        DT_F32)};
        comm_wait(c, r, 2);
    }
    comm_coll_end(c);
}

// ---------------------------------------------------------------- reduction, errors

void reduce_sum_into(void *dst, const void *src, size_t n, DType dt) {
    if (dt == DT_F32) {
        float *d = dst;
        const float *s = src;
        for (size_t i = 0; i < n; i++) d[i] += s[i];
    } else if (dt == DT_BF16) {
        uint16_t *d = dst;
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++) d[i] = f32_to_bf16(bf16_to_f32(d[i]) + bf16_to_f32(s[i]));
    } else if (dt == DT_F16) {
        uint16_t *d = dst;
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++) d[i] = f32_to_f16(f16_to_f32(d[i]) + f16_to_f32(s[i]));
    } else if (dt == DT_I32) {
        int32_t *d = dst;
        const int32_t *s = src;
        for (size_t i = 0; i < n; i++) d[i] += s[i];
    } else if (dt == DT_F64) {
        double *d = dst;
        const double *s = src;
        for (size_t i = 0; i < n; i++) d[i] += s[i];
    }
}

// On several nodes, which link a message takes: " (node 1, across the link from node 0)".
static void link_of(const Comm *c, int peer, char *buf, size_t n) {
    int mine = comm_node(c, c->rank), theirs = comm_node(c, peer);
    buf[0] = '\0';
    if (comm_node_size(c) == c->size) return;
    if (mine == theirs) snprintf(buf, n, " (node %d, this rank's own)", theirs);
    else snprintf(buf, n, " (node %d, across the link from node %d)", theirs, mine);
}

static void describe(const Comm *c, const CommRequest *r, char *buf, size_t n) {
    const Group *g = r->group;
    char link[64];
    link_of(c, r->peer, link, sizeof link);
    snprintf(buf, n, "%s #%llu on group %s (%d ranks, id %08x): %s %zu bytes %s world rank %d%s; "
             "%zu of them moved", coll_name((CollKind)r->hdr.kind), (unsigned long long)r->hdr.seq,
             g->name, g->size, g->id, r->is_send ? "sending" : "receiving", r->bytes,
             r->is_send ? "to" : "from", r->peer, link, r->done);
}

void comm_die_waiting(Comm *c, const CommRequest *r, const char *why) {
    char d[400];
    describe(c, r, d, sizeof d);
    // The usual causes, in the order they happen to people writing collectives.
    if (strcmp(why, "timeout") == 0) {
        char chan[64] = "", link[96] = "";
        if (c->channel_bytes) snprintf(chan, sizeof chan, " %zu-byte", c->channel_bytes);
        int mine = comm_node(c, c->rank), theirs = comm_node(c, r->peer);
        if (mine != theirs)
            snprintf(link, sizeof link, "; the link between node %d and node %d is down or slow",
                     mine, theirs);
        DIE("timeout after %.1f s in %s. Usual causes: a rank waited for its send before posting "
            "its receive (post both, then wait for both: a message larger than the transport's%s "
            "eager limit cannot finish until the peer receives it); a rank posted its messages to "
            "one peer in another order than the peer posted its receives (a pair's messages are "
            "matched in order); the ranks called different collectives, counts or peers; a rank "
            "is stuck or dead%s; or the peer is still busy "
            "(--timeout %.1f s is shorter than the work it does before it gets here)",
            c->timeout_s, d, chan, link, c->timeout_s);
    }
    DIE("%s, in %s", why, d);
}

void comm_die_mismatch(Comm *c, const CommRequest *r, const MsgHeader *got) {
    char d[400];
    describe(c, r, d, sizeof d);
    if (got->magic != MSG_MAGIC) DIE("corrupt message header from world rank %d: %s", r->peer, d);
    DIE("ranks disagree: this rank expects %s, but world rank %u sent %s #%llu on group %08x with "
        "%llu bytes", d, got->src, coll_name((CollKind)got->kind), (unsigned long long)got->seq,
        got->group_id, (unsigned long long)got->bytes);
}

// ---------------------------------------------------------------- same configuration everywhere

// Ranks started by hand (mpirun's `-np 1 prog --x 1 : -np 1 prog --x 2`, or
// torchrun on machines with different scripts) can disagree, and then collectives
// of different sizes meet and time out far from the cause. So every rank sends its
// configuration, "flag=value" words, to rank 0, which names the first that differs.
void comm_check_same_config(Comm *c, const char *mine) {
    const Group *w = comm_world(c);
    char buf[COMM_CONFIG_BYTES] = {0}, verdict[COMM_CONFIG_BYTES] = {0};
    snprintf(buf, sizeof buf, "%s", mine);
    if (w->rank != 0) {
        comm_send(c, w, 0, buf, sizeof buf);
        comm_recv(c, w, 0, verdict, sizeof verdict);
        CHECK(!verdict[0], "%s", verdict);
        return;
    }
    for (int r = 1; r < w->size; r++) {
        char theirs[COMM_CONFIG_BYTES];
        comm_recv(c, w, r, theirs, sizeof theirs);
        if (verdict[0] || strcmp(theirs, buf) == 0) continue;
        // The first word that differs: "--bucket-mb=25" against "--bucket-mb=1".
        char a[COMM_CONFIG_BYTES], b[COMM_CONFIG_BYTES], *sa, *sb;
        snprintf(a, sizeof a, "%s", buf);
        snprintf(b, sizeof b, "%s", theirs);
        char *wa = strtok_r(a, " ", &sa), *wb = strtok_r(b, " ", &sb);
        while (wa && wb && strcmp(wa, wb) == 0) {
            wa = strtok_r(NULL, " ", &sa);
            wb = strtok_r(NULL, " ", &sb);
        }
        snprintf(verdict, sizeof verdict, "the ranks run different configurations: rank 0 has %s, "
                 "rank %d has %s; every rank must be started with the same flags", wa ? wa : "(less)",
                 r, wb ? wb : "(less)");
    }
    for (int r = 1; r < w->size; r++) comm_send(c, w, r, verdict, sizeof verdict);
    CHECK(!verdict[0], "%s", verdict);
}
