// baseline_mpi.c — the MPI library's collectives behind our interface, so a
// test or a benchmark can swap a hand-written algorithm for the library's.
// Compiled with mpicc's flags and HAVE_MPI when the build found mpicc; they
// need the job to run under mpirun (each Group then carries an MPI_Comm).
#include "collectives.h"

#ifdef HAVE_MPI
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mpi_check.h"

// MPI has no bf16: bf16 travels as 16-bit integers and is summed by our own op,
// in fp32, rounded once per addition (like the hand-written collectives).
static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    uint16_t *a = in, *b = inout;
    for (int i = 0; i < *len; i++) b[i] = f32_to_bf16(bf16_to_f32(a[i]) + bf16_to_f32(b[i]));
}

// The datatype and sum op for dt; NULL comm when MPI is not in use.
static MPI_Comm setup(Group *g, DType dt, MPI_Datatype *type, MPI_Op *op) {
    static MPI_Op bf16_op = MPI_OP_NULL;  // created once per process
    if (!g->mpi_comm) return MPI_COMM_NULL;
    CHECK(dt == DT_F32 || dt == DT_F64 || dt == DT_BF16, "MPI baseline: %s is not supported",
          dtype_name(dt));
    if (dt == DT_F32) { *type = MPI_FLOAT; *op = MPI_SUM; }
    else if (dt == DT_F64) { *type = MPI_DOUBLE; *op = MPI_SUM; }  // a norm's sum of squares
    else {
        if (bf16_op == MPI_OP_NULL) MPI_CHECK(MPI_Op_create(bf16_sum, 1, &bf16_op));
        *type = MPI_UINT16_T;
        *op = bf16_op;
    }
    return *(MPI_Comm *)g->mpi_comm;
}

// MPI counts are ints: member i's block [lo[i], hi[i]) as a count and displacement.
static void counts(const size_t *lo, const size_t *hi, int p, int *cnt, int *displ) {
    for (int i = 0; i < p; i++) {
        CHECK(hi[i] >= lo[i] && hi[i] < (size_t)1 << 31, "MPI baseline: block [%zu, %zu) does not "
              "fit MPI's int counts", lo[i], hi[i]);
        cnt[i] = (int)(hi[i] - lo[i]);
        displ[i] = (int)lo[i];
    }
}

// The even split of collectives.h, as the blocks of the _v calls.
static void even(size_t count, int p, size_t *lo, size_t *hi) {
    for (int i = 0; i < p; i++) shard_range(count, p, i, &lo[i], &hi[i]);
}

int mpi_allreduce(Comm *c, Group *g, void *buf, size_t count, DType dt) {
    (void)c;
    MPI_Datatype t; MPI_Op op;
    MPI_Comm mc = setup(g, dt, &t, &op);
    if (mc == MPI_COMM_NULL) return 0;
    CHECK(count < (size_t)1 << 31, "MPI baseline: %zu elements exceed int", count);
    MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, buf, (int)count, t, op, mc));
    return 1;
}

int mpi_reduce_scatter_v(Comm *c, Group *g, void *buf, const size_t *lo, const size_t *hi,
                         DType dt) {
    (void)c;
    MPI_Datatype t; MPI_Op op;
    MPI_Comm mc = setup(g, dt, &t, &op);
    if (mc == MPI_COMM_NULL) return 0;
    int cnt[COMM_MAX_RANKS], displ[COMM_MAX_RANKS];
    counts(lo, hi, g->size, cnt, displ);
    // MPI leaves this rank's block at the start of the buffer; ours lives at its
    // own offset, so receive into a temporary and put it there. (MPI's blocks are
    // consecutive from offset 0: the blocks must tile the buffer in member order.)
    for (int i = 0; i < g->size; i++)
        CHECK(displ[i] == (i ? displ[i - 1] + cnt[i - 1] : 0), "MPI baseline: the blocks of a "
              "reduce-scatter must tile the buffer in member order");
    size_t es = dtype_size(dt);
    void *tmp = malloc(cnt[g->rank] * es + 1);
    CHECK(tmp, "out of memory");
    MPI_CHECK(MPI_Reduce_scatter(buf, tmp, cnt, t, op, mc));
    memcpy((unsigned char *)buf + displ[g->rank] * es, tmp, cnt[g->rank] * es);
    free(tmp);
    return 1;
}

int mpi_reduce_scatter(Comm *c, Group *g, void *buf, size_t count, DType dt) {
    size_t lo[COMM_MAX_RANKS], hi[COMM_MAX_RANKS];
    even(count, g->size, lo, hi);
    return mpi_reduce_scatter_v(c, g, buf, lo, hi, dt);
}

int mpi_all_gather_v(Comm *c, Group *g, void *buf, const size_t *lo, const size_t *hi, DType dt) {
    (void)c;
    MPI_Datatype t; MPI_Op op;
    MPI_Comm mc = setup(g, dt, &t, &op);
    if (mc == MPI_COMM_NULL) return 0;
    int cnt[COMM_MAX_RANKS], displ[COMM_MAX_RANKS];
    counts(lo, hi, g->size, cnt, displ);
    MPI_CHECK(MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, cnt, displ, t, mc));
    return 1;
}

int mpi_all_gather(Comm *c, Group *g, void *buf, size_t count, DType dt) {
    size_t lo[COMM_MAX_RANKS], hi[COMM_MAX_RANKS];
    even(count, g->size, lo, hi);
    return mpi_all_gather_v(c, g, buf, lo, hi, dt);
}

int mpi_broadcast(Comm *c, Group *g, void *buf, size_t count, DType dt, int root) {
    (void)c;
    MPI_Datatype t; MPI_Op op;
    MPI_Comm mc = setup(g, dt, &t, &op);
    if (mc == MPI_COMM_NULL) return 0;
    CHECK(count < (size_t)1 << 31, "MPI baseline: %zu elements exceed int", count);
    MPI_CHECK(MPI_Bcast(buf, (int)count, t, root, mc));
    return 1;
}

// Counts in elements of dt's MPI type (nothing is summed: bf16 travels as 16-bit
// integers), blocks tiled in member order as all_to_all_v's.
int mpi_all_to_all_v(Comm *c, Group *g, const void *send, const size_t *send_counts, void *recv,
                     const size_t *recv_counts, DType dt) {
    (void)c;
    MPI_Datatype t; MPI_Op op;
    MPI_Comm mc = setup(g, dt, &t, &op);
    if (mc == MPI_COMM_NULL) return 0;
    size_t slo[COMM_MAX_RANKS], shi[COMM_MAX_RANKS], rlo[COMM_MAX_RANKS], rhi[COMM_MAX_RANKS];
    for (int i = 0; i < g->size; i++) {
        slo[i] = i ? shi[i - 1] : 0, shi[i] = slo[i] + send_counts[i];
        rlo[i] = i ? rhi[i - 1] : 0, rhi[i] = rlo[i] + recv_counts[i];
    }
    int scnt[COMM_MAX_RANKS], sdis[COMM_MAX_RANKS], rcnt[COMM_MAX_RANKS], rdis[COMM_MAX_RANKS];
    counts(slo, shi, g->size, scnt, sdis);
    counts(rlo, rhi, g->size, rcnt, rdis);
    MPI_CHECK(MPI_Alltoallv(send, scnt, sdis, t, recv, rcnt, rdis, t, mc));
    return 1;
}

#else  // built without MPI

int mpi_allreduce(Comm *c, Group *g, void *b, size_t n, DType dt) { (void)c; (void)g; (void)b; (void)n; (void)dt; return 0; }
int mpi_reduce_scatter(Comm *c, Group *g, void *b, size_t n, DType dt) { (void)c; (void)g; (void)b; (void)n; (void)dt; return 0; }
int mpi_all_gather(Comm *c, Group *g, void *b, size_t n, DType dt) { (void)c; (void)g; (void)b; (void)n; (void)dt; return 0; }
int mpi_reduce_scatter_v(Comm *c, Group *g, void *b, const size_t *lo, const size_t *hi, DType dt) { (void)c; (void)g; (void)b; (void)lo; (void)hi; (void)dt; return 0; }
int mpi_all_gather_v(Comm *c, Group *g, void *b, const size_t *lo, const size_t *hi, DType dt) { (void)c; (void)g; (void)b; (void)lo; (void)hi; (void)dt; return 0; }
int mpi_broadcast(Comm *c, Group *g, void *b, size_t n, DType dt, int root) { (void)c; (void)g; (void)b; (void)n; (void)dt; (void)root; return 0; }
int mpi_all_to_all_v(Comm *c, Group *g, const void *s, const size_t *sc, void *r, const size_t *rc, DType dt) { (void)c; (void)g; (void)s; (void)sc; (void)r; (void)rc; (void)dt; return 0; }

#endif
