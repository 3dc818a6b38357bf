// comm_mpi.c — MPI as launcher (mpirun) and as a transport (MPI_Isend/MPI_Irecv).
//
// Launcher: comm_launch sees OpenMPI's environment and calls mpi_launch_init;
// every group then also gets an MPI communicator (g->mpi_comm), which the
// library baselines (MPI_Allreduce, ...) run on.
//
// Transport: every message goes over MPI_COMM_WORLD to the peer's world rank.
// MPI keeps no header of ours, so the tag carries the message's identity
// instead: messages of different collectives (or different sequence numbers)
// have different tags and never match each other; a rank that posts the wrong
// one waits, and comm_wait's timeout names what it waited for. Two messages
// that do match but differ in size are caught on completion (MPI_Get_count).
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"
#include "mpi_check.h"

// Transport tags live in [0, TAG_SPAN); MPI guarantees tags up to 32767.
// MPI_Comm_create_group also talks on MPI_COMM_WORLD: its tag stays above.
#define TAG_SPAN 30000
#define GROUP_TAG (TAG_SPAN + 1)

// ---------------------------------------------------------------- launcher

// The communicators made for groups. MPI itself is one per process, so this
// list is too; it lets mpi_launch_finalize free them (a Group has no
// destructor) before MPI_Finalize.
static MPI_Comm **g_comms;
static int g_ncomms;

int mpi_launch_init(int *rank, int *size) {
    int provided;
    // SERIALIZED: MPI is called by one thread at a time, but not always the main
    // one: stage 03's progress thread runs the collectives while it owns the Comm
    // (comm_bind_thread keeps the others out).
    MPI_CHECK(MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided));
    CHECK(provided >= MPI_THREAD_SERIALIZED, "this MPI library provides thread level %d, below "
          "MPI_THREAD_SERIALIZED (%d), which the progress thread of stage 03 needs", provided,
          MPI_THREAD_SERIALIZED);
    // The default handler aborts the job with a terse message; returning the
    // error lets MPI_CHECK name the call, the file and the rank.
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, size));
    return 1;
}

void mpi_launch_finalize(void) {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) return;
    for (int i = 0; i < g_ncomms; i++) {
        MPI_CHECK(MPI_Comm_free(g_comms[i]));
        free(g_comms[i]);
    }
    free(g_comms);
    g_comms = NULL;
    g_ncomms = 0;
    MPI_CHECK(MPI_Finalize());
}

void mpi_group_comm(Comm *c, Group *g) {
    if (c->launch != LAUNCH_MPIRUN) return;
    MPI_Comm *mc = malloc(sizeof *mc);
    MPI_Comm **list = realloc(g_comms, sizeof *list * (size_t)(g_ncomms + 1));
    CHECK(mc && list, "out of memory");
    g_comms = list;
    if (g == &c->world) {
        MPI_CHECK(MPI_Comm_dup(MPI_COMM_WORLD, mc));
    } else {
        // MPI_Comm_split would need every world rank to take part; only the
        // group's members call comm_group_new, and MPI_Comm_create_group is
        // collective over exactly them. Member i becomes rank i of the new
        // communicator, because MPI_Group_incl keeps the order of g->ranks.
        MPI_Group world, sub;
        MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
        MPI_CHECK(MPI_Group_incl(world, g->size, g->ranks, &sub));
        MPI_CHECK(MPI_Comm_create_group(MPI_COMM_WORLD, sub, GROUP_TAG, mc));
        MPI_CHECK(MPI_Group_free(&sub));
        MPI_CHECK(MPI_Group_free(&world));
    }
    g_comms[g_ncomms++] = mc;
    g->mpi_comm = mc;
}

// ---------------------------------------------------------------- transport

typedef struct {
    MPI_Request req;
    void *tmp;  // RECV_SUM: the message lands here, then is added into r->buf
} MpiReq;

static int tag_of(const CommRequest *r) {
    return (int)((r->hdr.kind * 1000003u + r->hdr.seq) % TAG_SPAN);
}

static void mpi_post(Comm *c, CommRequest *r) {
    (void)c;
    CHECK(r->bytes <= INT_MAX, "--transport mpi: a message of %zu bytes exceeds MPI's int count "
          "(split it)", r->bytes);
    MpiReq *m = calloc(1, sizeof *m);
    CHECK(m, "out of memory");
    r->impl = m;
    int count = (int)r->bytes, tag = tag_of(r);
    if (r->is_send) {
        MPI_CHECK(MPI_Isend(r->buf, count, MPI_BYTE, r->peer, tag, MPI_COMM_WORLD, &m->req));
        return;
    }
    void *dst = r->buf;
    if (r->op == RECV_SUM && r->bytes > 0) {
        m->tmp = malloc(r->bytes);
        CHECK(m->tmp, "out of memory for a %zu-byte receive buffer", r->bytes);
        dst = m->tmp;
    }
    MPI_CHECK(MPI_Irecv(dst, count, MPI_BYTE, r->peer, tag, MPI_COMM_WORLD, &m->req));
}

static int mpi_progress(Comm *c, CommRequest *r) {
    MpiReq *m = r->impl;
    int flag = 0;
    MPI_Status st;
    int rc = MPI_Test(&m->req, &flag, &st);
    if (rc != MPI_SUCCESS) {
        int cls;
        MPI_Error_class(rc, &cls);
        // The peer sent more than we posted for: the same disagreement that
        // comm_die_mismatch reports, except that MPI has dropped the surplus
        // and with it the true size.
        if (cls == MPI_ERR_TRUNCATE)
            DIE("ranks disagree: this rank expects %s #%llu on group %s with %zu bytes from world "
                "rank %d, but that rank sent a larger message", coll_name((CollKind)r->hdr.kind),
                (unsigned long long)r->hdr.seq, r->group->name, r->bytes, r->peer);
        MPI_CHECK(rc);
    }
    if (!flag) return 0;
    if (!r->is_send) {
        int got;
        MPI_CHECK(MPI_Get_count(&st, MPI_BYTE, &got));
        if ((size_t)got != r->bytes) {
            MsgHeader seen = r->hdr;  // same tag, so same kind and sequence number
            seen.src = (uint32_t)r->peer;
            seen.bytes = (uint64_t)got;
            r->done = (size_t)got;
            comm_die_mismatch(c, r, &seen);
        }
        if (m->tmp) reduce_sum_into(r->buf, m->tmp, r->bytes / dtype_size(r->dt), r->dt);
    }
    free(m->tmp);
    free(m);
    r->impl = NULL;
    r->done = r->bytes;
    r->complete = 1;
    return 1;
}

static void mpi_transport_finalize(Comm *c) { c->state = NULL; }

static const TransportOps mpi_ops = {
    .name = "mpi",
    .progress = mpi_progress,
    .post = mpi_post,
    .peer_dead = NULL,  // mpirun tears the whole job down when a rank dies
    .finalize = mpi_transport_finalize,
};

void mpi_transport_init(Comm *c) {
    CHECK(c->launch == LAUNCH_MPIRUN, "--transport mpi needs the ranks to be started by mpirun");
    c->ops = &mpi_ops;
    c->state = NULL;  // MPI keeps all the state
    c->transport = TRANSPORT_MPI;
}
