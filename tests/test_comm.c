// test_comm.c — the comm layer on every launcher and transport: messages of
// awkward sizes arrive byte for byte, reducing receives add exactly, the barrier
// holds everybody back, mesh groups talk among themselves. Each rank records its
// verdicts; rank 0 collects them (point to point) and prints one PASS/FAIL line
// per check, FAIL naming the first rank that failed it.
//
//   build/tests/test_comm --np 4                                  built-in launcher, shm
//   mpirun -np 3 build/tests/test_comm --transport mpi            MPI
//   RANK=r WORLD_SIZE=n MASTER_ADDR=.. MASTER_PORT=.. build/tests/test_comm   tcp
//   ... --mismatch 8: rank 0 sends 8 bytes more than rank 1 expects; the run must
//   die with the "ranks disagree" diagnostic (tests/test_transports.sh checks it).
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "comm.h"
#include "dtype.h"
#include "flags.h"
#include "timer.h"

typedef struct {
    char name[40];
    int ok;
    char detail[88];
} Verdict;

typedef struct {
    int n;
    Verdict v[32];
} Verdicts;

static void verdict(Verdicts *vs, int ok, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void verdict(Verdicts *vs, int ok, const char *name, const char *fmt, ...) {
    CHECK(vs->n < (int)(sizeof vs->v / sizeof vs->v[0]), "too many checks");
    Verdict *v = &vs->v[vs->n++];
    snprintf(v->name, sizeof v->name, "%s", name);
    v->ok = ok;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->detail, sizeof v->detail, fmt, ap);
    va_end(ap);
}

// Byte i of a b-byte message from world rank s: differs per sender, size and offset.
static unsigned char pattern(int s, size_t b, size_t i) {
    return (unsigned char)(i * 131 + (i >> 8) + (size_t)s * 29 + b * 7);
}

static int right_of(const Comm *c) { return (comm_rank(c) + 1) % comm_size(c); }
static int left_of(const Comm *c) { return (comm_rank(c) + comm_size(c) - 1) % comm_size(c); }

// Everybody sends `bytes` to the right and receives from the left at once.
static void check_ring(Comm *c, Verdicts *vs, size_t bytes) {
    const Group *w = comm_world(c);
    unsigned char *out = xmalloc(bytes + 1), *in = xmalloc(bytes + 1);
    for (size_t i = 0; i < bytes; i++) out[i] = pattern(comm_rank(c), bytes, i);
    memset(in, 0xEE, bytes + 1);
    CommRequest *r[2] = {comm_isend(c, w, right_of(c), out, bytes),
                         comm_irecv(c, w, left_of(c), in, bytes, RECV_COPY, DT_F32)};
    comm_wait(c, r, 2);
    size_t bad = bytes;
    for (size_t i = 0; i < bytes && bad == bytes; i++)
        if (in[i] != pattern(left_of(c), bytes, i)) bad = i;
    char name[40];
    snprintf(name, sizeof name, "p2p.%zu_bytes", bytes);
    if (bad < bytes) verdict(vs, 0, name, "byte %zu is %u, want %u", bad, in[bad],
                             pattern(left_of(c), bytes, bad));
    else if (in[bytes] != 0xEE) verdict(vs, 0, name, "wrote past the end of the buffer");
    else verdict(vs, 1, name, "every byte from rank %d as sent", left_of(c));
    free(out);
    free(in);
}

// Three messages to the same peer in flight at once, waited for in reverse
// order: the transport must keep them apart and in order (a pipeline stage has
// several activations in flight to its neighbour). The 70001-byte one exceeds
// the shm channel of 8 ranks and more.
static void check_queued(Comm *c, Verdicts *vs) {
    const Group *w = comm_world(c);
    enum { K = 3 };
    const size_t sizes[K] = {5, 70001, 3};
    unsigned char *out[K], *in[K];
    CommRequest *recv[K], *rest[K + 1];
    for (int k = 0; k < K; k++) {
        out[k] = xmalloc(sizes[k]);
        in[k] = xcalloc(1, sizes[k]);
        for (size_t i = 0; i < sizes[k]; i++) out[k][i] = pattern(comm_rank(c), sizes[k], i);
        rest[k] = comm_isend(c, w, right_of(c), out[k], sizes[k]);
        recv[k] = comm_irecv(c, w, left_of(c), in[k], sizes[k], RECV_COPY, DT_F32);
    }
    rest[K] = recv[K - 1];  // the last receive, with the sends; the others after it
    comm_wait(c, rest, K + 1);
    for (int k = K - 2; k >= 0; k--) comm_wait(c, &recv[k], 1);
    int ok = 1;
    for (int k = 0; k < K; k++) {
        for (size_t i = 0; i < sizes[k]; i++) ok &= in[k][i] == pattern(left_of(c), sizes[k], i);
        free(out[k]);
        free(in[k]);
    }
    verdict(vs, ok, "p2p.three_in_flight", "%s", ok ? "5, 70001 and 3 bytes, each intact"
                                                     : "a message arrived corrupted or mixed up");
}

// A reducing receive inside a collective: dst += what the left neighbour sent.
static void check_sum(Comm *c, Verdicts *vs, DType dt, size_t n) {
    Group *w = comm_world(c);
    size_t es = dtype_size(dt);
    unsigned char *src = xmalloc(n * es), *dst = xmalloc(n * es), *want = xmalloc(n * es);
    int me = comm_rank(c), left = left_of(c);
    for (size_t i = 0; i < n; i++) {
        // Values of the left rank and our own, as that rank computes them.
        float s_me = (float)me * 0.37f + (float)(i % 97) * 0.013f;
        float s_left = (float)left * 0.37f + (float)(i % 97) * 0.013f;
        float base = 100.0f * (float)me - (float)(i % 777) * 0.5f;
        if (dt == DT_F32) {
            ((float *)src)[i] = s_me;
            ((float *)dst)[i] = base;
            ((float *)want)[i] = base + s_left;
        } else {
            uint16_t b = f32_to_bf16(base), l = f32_to_bf16(s_left);
            ((uint16_t *)src)[i] = f32_to_bf16(s_me);
            ((uint16_t *)dst)[i] = b;
            ((uint16_t *)want)[i] = f32_to_bf16(bf16_to_f32(b) + bf16_to_f32(l));  // one rounding
        }
    }
    comm_coll_begin(c, w, COLL_ALLREDUCE, n, dt);
    CommRequest *r[2] = {comm_isend(c, w, right_of(c), src, n * es),
                         comm_irecv(c, w, left, dst, n * es, RECV_SUM, dt)};
    comm_wait(c, r, 2);
    comm_coll_end(c);
    size_t bad = n;
    for (size_t i = 0; i < n && bad == n; i++)
        if (memcmp(dst + i * es, want + i * es, es) != 0) bad = i;
    char name[40];
    snprintf(name, sizeof name, "sum.%s", dtype_name(dt));
    if (bad < n) verdict(vs, 0, name, "element %zu of %zu differs from the serial sum", bad, n);
    else verdict(vs, 1, name, "%zu elements (%zu bytes) bit-identical to the serial sum", n, n * es);
    free(src);
    free(dst);
    free(want);
}

// Rank 0 arrives 0.3 s late: nobody may leave the barrier before it arrives.
// (Half of that is the margin for ranks leaving the first barrier at different
// times on a busy machine; a barrier that does not wait takes microseconds.)
static void check_barrier(Comm *c, Verdicts *vs) {
    comm_barrier(c, comm_world(c));  // start together
    double t0 = now_seconds();
    if (comm_rank(c) == 0) {
        struct timespec ts = {0, 300 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    comm_barrier(c, comm_world(c));
    double waited = now_seconds() - t0;
    if (comm_rank(c) == 0)
        verdict(vs, 1, "barrier.waits_for_the_last", "rank 0 came 0.3 s late; the others waited");
    else
        verdict(vs, waited >= 0.15, "barrier.waits_for_the_last", "rank %d left after %.3f s, "
                "rank 0 came 0.3 s late", comm_rank(c), waited);
}

// In a 2 x 2 mesh: members as comm_mesh documents; one message and one
// reducing receive inside a collective on the group.
static void check_group(Comm *c, Verdicts *vs, Group *g, const int want[2]) {
    char name[40];
    snprintf(name, sizeof name, "mesh.%s", g->name);
    if (g->size != 2 || g->ranks[0] != want[0] || g->ranks[1] != want[1]) {
        verdict(vs, 0, name, "members {%d, %d}, want {%d, %d}", g->ranks[0],
                g->size > 1 ? g->ranks[1] : -1, want[0], want[1]);
        return;
    }
    if (comm_launch_mode(c) == LAUNCH_MPIRUN && !g->mpi_comm) {
        verdict(vs, 0, name, "no MPI communicator under mpirun");
        return;
    }
    int other = 1 - g->rank, me = comm_rank(c), got = -1;
    CommRequest *r[2] = {comm_isend(c, g, other, &me, sizeof me),
                         comm_irecv(c, g, other, &got, sizeof got, RECV_COPY, DT_F32)};
    comm_wait(c, r, 2);
    float mine[5], sum[5];
    for (int i = 0; i < 5; i++) mine[i] = sum[i] = (float)(me * 10 + i);
    comm_coll_begin(c, g, COLL_ALLREDUCE, 5, DT_F32);
    r[0] = comm_isend(c, g, other, mine, sizeof mine);
    r[1] = comm_irecv(c, g, other, sum, sizeof sum, RECV_SUM, DT_F32);
    comm_wait(c, r, 2);
    comm_coll_end(c);
    int ok = got == g->ranks[other];
    for (int i = 0; i < 5; i++) ok &= sum[i] == (float)((me + got) * 10 + 2 * i);
    verdict(vs, ok, name, "members {%d, %d}; heard world rank %d; sum %s", want[0], want[1], got,
            ok ? "right" : "wrong");
}

// Rank 0 sends 4096 + extra bytes; rank 1 expects 4096. Must die, not hang.
static int run_mismatch(Comm *c, int extra) {
    Group *w = comm_world(c);
    CHECK(comm_size(c) >= 2, "--mismatch needs at least 2 ranks");
    size_t want = 4096, sent = (size_t)(4096 + extra);
    unsigned char *buf = xcalloc(1, want > sent ? want : sent);
    comm_coll_begin(c, w, COLL_ALLREDUCE, want / 4, DT_F32);
    if (comm_rank(c) == 0) comm_send(c, w, 1, buf, sent);
    if (comm_rank(c) == 1) comm_recv(c, w, 0, buf, want);
    comm_coll_end(c);
    comm_barrier(c, w);  // rank 0 is stopped here by rank 1's death
    free(buf);
    if (comm_rank(c) == 0) printf("FAIL mismatch  %zu bytes sent, %zu expected: not noticed\n",
                                  sent, want);
    return 1;
}

static const char *launch_name(LaunchMode m) {
    static const char *names[] = {"single", "fork", "mpirun", "torchrun"};
    return names[m];
}

int main(int argc, char **argv) {
    int np = 1, mismatch = 0;
    double timeout = 60;
    const char *transport = "shm";
    Flag flags[] = {
        F_INT("--np", &np, 1, COMM_MAX_RANKS, "ranks for the built-in launcher"),
        F_DOUBLE("--timeout", &timeout, 0.1, 3600, "seconds any wait may take"),
        F_CHOICE("--transport", &transport, "shm|mpi|tcp", "host transport"),
        F_INT("--mismatch", &mismatch, -8, 8, "rank 0 sends 4096+N bytes, rank 1 expects 4096"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "test_comm [flags]",
                "Checks the comm layer on this launcher and transport.");
    CommConfig cfg = {.np = np, .timeout_s = timeout};
    CHECK(transport_parse(transport, &cfg.transport) == 0, "bad transport");
    Comm *c = comm_launch(&cfg);
    if (mismatch) return run_mismatch(c, mismatch);

    int me = comm_rank(c), n = comm_size(c);
    Verdicts vs = {0};
    const Group *w = comm_world(c);
    verdict(&vs, w->size == n && w->rank == me && me < n, "launch", "rank %d of %d, world group "
            "%d of %d", me, n, w->rank, w->size);
    if (n > 1) {
        const size_t sizes[] = {0, 1, 7, 4096, (1u << 20) + 3};
        for (int i = 0; i < 5; i++) check_ring(c, &vs, sizes[i]);
        check_queued(c, &vs);
        check_sum(c, &vs, DT_F32, (1u << 18) + 3);
        check_sum(c, &vs, DT_BF16, 4099);
        check_barrier(c, &vs);
    } else {
        comm_barrier(c, w);
        verdict(&vs, 1, "barrier.alone", "a world of one passes at once");
    }
    if (n == 4) {
        Group dp, tp, pp;
        comm_mesh(c, 2, 2, 1, &dp, &tp, &pp);
        const int want_tp[2] = {me & ~1, me | 1}, want_dp[2] = {me % 2, me % 2 + 2};
        check_group(c, &vs, &tp, want_tp);
        check_group(c, &vs, &dp, want_dp);
    }

    // Rank 0 collects everybody's verdicts, then prints one line per check.
    int failed = 0;
    if (me != 0) {
        comm_send(c, w, 0, &vs, sizeof vs);
    } else {
        Verdicts *all = xmalloc(sizeof *all * (size_t)n);
        all[0] = vs;
        for (int r = 1; r < n; r++) comm_recv(c, w, r, &all[r], sizeof all[r]);
        char prefix[64];
        snprintf(prefix, sizeof prefix, "comm.%s.%s.n%d", launch_name(comm_launch_mode(c)),
                 transport_name(comm_transport(c)), n);
        for (int i = 0; i < vs.n; i++) {
            int bad = -1;
            for (int r = 0; r < n && bad < 0; r++)
                if (all[r].n != vs.n || !all[r].v[i].ok) bad = r;
            if (bad < 0) {
                printf("PASS %s.%s  %s\n", prefix, vs.v[i].name, vs.v[i].detail);
            } else {
                failed++;
                printf("FAIL %s.%s  rank %d: %s\n", prefix, vs.v[i].name, bad,
                       all[bad].n != vs.n ? "ran a different set of checks" : all[bad].v[i].detail);
            }
        }
        free(all);
        fflush(stdout);
    }
    comm_barrier(c, w);
    comm_finalize(c);
    return failed ? 1 : 0;
}
