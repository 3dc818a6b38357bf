// comm.h — ranks and how they talk: launch, process groups, point-to-point.
//
// One binary runs as N ranks, launched three ways (comm_launch decides):
//   1. built in:  `prog --np 4 ...` forks 4 ranks on this machine (the default);
//   2. `mpirun -np 4 prog ...`  (detected from OpenMPI's environment);
//   3. torchrun's convention: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT.
// and talks over one of these transports for host buffers:
//   shm  shared-memory channels between processes on one machine (hand-written; the
//        default for the built-in launcher; under mpirun, shm means mpi);
//   mpi  MPI point-to-point (MPI_Isend / MPI_Irecv);
//   tcp  sockets, a full mesh set up through MASTER_ADDR:MASTER_PORT;
//   shm+tcp  chosen per peer, as NCCL picks NVLink or the network: shm between ranks
//        of one node, tcp between nodes (the built-in launcher's --nodes N with shm;
//        comm_hybrid.c).
// GPU buffers (stage 02 on one or many GPUs) use CUDA IPC or NCCL: comm_cuda.h.
//
// Everything above this layer — every collective, hand-written or library — is
// built from comm_isend / comm_irecv / comm_wait on a Group. Every wait has a
// timeout; when it fires, the rank names the collective, its sequence number,
// the group, the bytes and the peer it waited for, and exits non-zero. Messages
// carry a small header, so a collective called with different sizes (or a
// different collective) on two ranks is reported instead of corrupting memory.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "dtype.h"

#ifdef __cplusplus
extern "C" {
#endif

#define COMM_MAX_RANKS 64

typedef enum {
    TRANSPORT_SHM = 0, TRANSPORT_MPI, TRANSPORT_TCP, TRANSPORT_SHM_TCP, TRANSPORT_COUNT
} Transport;
typedef enum { LAUNCH_SINGLE = 0, LAUNCH_FORK, LAUNCH_MPIRUN, LAUNCH_TORCHRUN } LaunchMode;

// What a message belongs to: counters are kept per kind, and a timeout names it.
typedef enum {
    COLL_P2P = 0, COLL_BARRIER, COLL_ALLREDUCE, COLL_REDUCE_SCATTER, COLL_ALLGATHER,
    COLL_BROADCAST, COLL_REDUCE, COLL_ALLTOALL, COLL_KINDS
} CollKind;
const char *coll_name(CollKind k);  // "all-reduce", ...

typedef struct {
    uint64_t calls;        // collectives started (p2p: messages sent)
    uint64_t bytes_sent;   // payload bytes this rank sent
    uint64_t bytes_recv;   // payload bytes this rank received
} CommCounter;

// A process group: an ordered subset of the world ranks. Collectives take one.
typedef struct {
    uint32_t id;                  // same on every member; part of every message header
    char name[32];                // "world", "dp", "tp", "pp"
    int size, rank;               // members and this rank's index among them
    int ranks[COMM_MAX_RANKS];    // world rank of member i
    uint64_t seq;                 // collectives started on this group (same on all members)
    void *mpi_comm;               // the MPI communicator (MPI_Comm*) under mpirun, else NULL
} Group;

typedef struct Comm Comm;

// How the shm transport copies a message into its channel (comm_shm.c says why):
// ordinary stores, or streaming stores that write around the cache. Auto streams
// messages of 4 MiB and more.
typedef enum { SHM_STORES_AUTO, SHM_STORES_CACHED, SHM_STORES_STREAMING } ShmStores;

typedef struct {
    int np;               // --np: ranks for the built-in launcher (1 = single process)
    double timeout_s;     // every blocking wait gives up after this long
    Transport transport;  // host-buffer transport (shm unless asked otherwise)
    ShmStores shm_stores; // shm only
    int max_restarts;     // built-in launcher: when a rank dies or hangs, start the whole
                          // job again up to this many times (stage 07); each attempt's
                          // ranks see COURSE_RESTART=k in their environment
    int elastic;          // ...and when the same rank failed first twice in a row, go on
                          // without it (COURSE_RANKS_DROPPED=k: ranks given up so far)
    int nodes;            // built-in launcher: the ranks split into this many nodes of
                          // np/nodes consecutive ranks (0 or 1: one node); shm then
                          // means shm+tcp.
    const char *cluster;  // ...and node i's ranks run inside the network namespace
                          // CLUSTER-node<i> (scripts/cluster.sh's; needs root), talking
                          // to the other nodes over its link; else all on this machine's
                          // loopback (NULL).
} CommConfig;

// Call once at the top of main, after parsing flags. Decides the launch mode from
// the environment and cfg->np; with the built-in launcher the calling process
// forks the ranks and becomes their supervisor: it never returns, and exits with
// the ranks' status, reporting a rank that died and how (exit code or signal).
// Returns this rank's communicator (never NULL; a world of 1 when single).
Comm *comm_launch(const CommConfig *cfg);
void comm_finalize(Comm *c);
// The number of ranks comm_launch will start, known before it: under mpirun or
// torchrun from their environment, else cfg->np. Drivers check a layout (does
// --tp divide the ranks?) with it before any rank exists.
int comm_planned_size(const CommConfig *cfg);
// Restarts (stage 07), as the supervisor tells each attempt through the environment:
// this process's attempt (COURSE_RESTART: 0 the first, and 0 when no supervisor set
// it); whether a supervisor set it at all (the launcher's, or supervise.sh: more
// attempts may follow); the ranks an elastic restart has given up so far
// (COURSE_RANKS_DROPPED).
int comm_attempt(void);
int comm_supervised(void);
int comm_ranks_dropped(void);

int comm_rank(const Comm *c);
int comm_size(const Comm *c);
LaunchMode comm_launch_mode(const Comm *c);
Transport comm_transport(const Comm *c);
const char *transport_name(Transport t);
int transport_parse(const char *s, Transport *out);
int shm_stores_parse(const char *s, ShmStores *out);  // "auto", "cached", "streaming": 0, else -1
double comm_timeout(const Comm *c);
// Bytes a send can hand to the transport before its receiver has taken any: the
// shm channel's capacity, or the size from which the receiver reads the payload from
// the sender's memory if that is smaller (comm_shm.c; 0 when the transport does not
// say). A message larger
// than this completes only while the peer receives it, so a rank that waits for
// its send before posting its own receive deadlocks with a neighbour doing the
// same; the tests size their messages past it to catch that ordering.
size_t comm_channel_bytes(const Comm *c);
Group *comm_world(Comm *c);  // collectives on it advance its seq
// The ranks of this job on this machine (the built-in launcher's --np; under
// mpirun OMPI_COMM_WORLD_LOCAL_SIZE, under torchrun LOCAL_WORLD_SIZE; else the
// world), and the cores they may run on together: the launcher's affinity before
// it pins ranks to cores (CPU MFU counts these, not the ranks).
int comm_local_size(const Comm *c);
int comm_local_cores(const Comm *c);
// The node this rank is on, and the ranks per node: nodes hold consecutive ranks
// (node = rank / node_size). From the built-in launcher's --nodes, torchrun's
// LOCAL_WORLD_SIZE, mpirun's OMPI_COMM_WORLD_LOCAL_SIZE; COURSE_NODE_RANKS=k
// overrides them all (to give a flat machine a hierarchy). One node by default.
int comm_node_size(const Comm *c);
int comm_node(const Comm *c, int world_rank);
// Bytes this rank has sent to ranks of its own node and of other nodes, whatever the
// transport: what each class of link carried (a step's are the difference of two).
typedef struct {
    uint64_t inside, across;
} LinkBytes;
LinkBytes comm_link_bytes(const Comm *c);
LinkBytes link_bytes_since(LinkBytes now, LinkBytes before);
// How fast each peer's messages arrive: for every receive of at least COMM_FLOW_MIN
// bytes seen mostly in flight (at most half of it there when this rank first looked),
// the bytes after the first ones and the seconds from then to its last (the link's
// rate, whatever the wait before it began). Summed per world rank since the last
// call, which hands them over and starts again (stage 07's slow-link check).
#define COMM_FLOW_MIN (64u << 10)
typedef struct {
    uint64_t bytes;
    double seconds;
} PeerFlow;
void comm_take_flows(Comm *c, PeerFlow flows[COMM_MAX_RANKS]);
// The built-in launcher's place for this rank, which picks its core and its GPU:
// the rank, until an elastic restart (stage 07) gives up a rank and those after it
// move down into the slots that are left (the failed rank's is not reused).
int comm_slot(const Comm *c);

// Groups. comm_group_new builds the group of world ranks `ranks[0..n)`; every
// member must call it (with the same list). comm_mesh builds the three groups
// of a dp x tp x pp mesh that this rank belongs to; rank = (pp*dp + d)*tp + t, so
// tensor-parallel ranks are neighbours (they talk most).
void comm_group_new(Comm *c, Group *g, const char *name, const int *ranks, int n);
void comm_mesh(Comm *c, int dp, int tp, int pp, Group *dp_g, Group *tp_g, Group *pp_g);

// ---- point to point ----
// Non-blocking send/receive of `bytes` to/from member `peer` of group g. The
// buffers must stay untouched until comm_wait returns. A receive with `reduce`
// set adds the incoming elements of type `dt` into buf instead of copying them
// (bf16 is added in fp32 and rounded once): the transport streams and reduces in
// one pass, which is what makes a ring all-reduce fast.
typedef struct CommRequest CommRequest;
typedef enum { RECV_COPY = 0, RECV_SUM } RecvOp;
CommRequest *comm_isend(Comm *c, const Group *g, int peer, const void *buf, size_t bytes);
CommRequest *comm_irecv(Comm *c, const Group *g, int peer, void *buf, size_t bytes, RecvOp op,
                        DType dt);
// Waits for all n requests (and frees them); dies with the timeout diagnostic.
void comm_wait(Comm *c, CommRequest **reqs, int n);
// Waits for reqs[0] only (and frees it), moving reqs[1..n) along meanwhile without
// waiting for them: a pipeline stage that needs one message must keep its other
// sends and receives flowing, or two stages whose messages exceed the channel
// wait on each other. The others stay posted.
void comm_wait_first(Comm *c, CommRequest **reqs, int n);
// Moves r along without blocking; 1 when it is complete (then comm_wait frees it
// at once).
int comm_test(Comm *c, CommRequest *r);
// Requests that every wait moves along while it waits for its own, until they are
// waited for themselves (MPI moves every request a rank has posted; here only those a
// caller names, at most COMM_MAX_MEANWHILE at once): a pipelined all-reduce keeps the
// slow link busy with one chunk while its ranks work on another over the fast one.
#define COMM_MAX_MEANWHILE 8
void comm_progress_meanwhile(Comm *c, CommRequest **reqs, int n);
// Blocking conveniences.
void comm_send(Comm *c, const Group *g, int peer, const void *buf, size_t bytes);
void comm_recv(Comm *c, const Group *g, int peer, void *buf, size_t bytes);
void comm_barrier(Comm *c, const Group *g);

// Ranks started by hand (mpirun's `-np 1 prog --x 1 : -np 1 prog --x 2`, or torchrun
// on machines with different scripts) can disagree, and then collectives of different
// sizes meet and time out far from the cause. Every rank calls this with its
// configuration as "flag=value" words (at most COMM_CONFIG_BYTES); rank 0 compares and
// every rank exits naming the first word that differs ("rank 0 has --tp=2, rank 3 has
// --tp=4").
#define COMM_CONFIG_BYTES 1024
void comm_check_same_config(Comm *c, const char *words);

// ---- collective bookkeeping (used by every collective implementation) ----
// Marks the start of a collective on g: advances g->seq, stamps every message
// of the collective with (kind, seq, count, dtype) so that mismatches are caught,
// and counts the call. comm_coll_end closes it.
void comm_coll_begin(Comm *c, Group *g, CollKind kind, size_t count, DType dt);
void comm_coll_end(Comm *c);
// Bytes moved, per collective kind, by this rank.
const CommCounter *comm_counters(const Comm *c);
void comm_reset_counters(Comm *c);

// dst[i] += src[i] for n elements of type dt (bf16 and fp16: added in fp32 and
// rounded once; fp64 and int32 exactly). The reduction every summing collective uses.
void reduce_sum_into(void *dst, const void *src, size_t n, DType dt);

// One thread at a time drives a Comm. A rank that communicates from a progress
// thread (stage 03's non-blocking collectives) hands the Comm to that thread with
// comm_bind_thread(c, 1), called by the thread, and back with comm_bind_thread(c, 0);
// while it is bound, a message posted from any other thread is a bug (two threads
// would interleave their collectives) and ends the run saying so.
void comm_bind_thread(Comm *c, int bind);
// A progress thread shares its rank's core with a thread that computes. A wait
// that finds nothing to do then sleeps (20 µs at a time) instead of spinning or
// yielding: a thread that is always runnable gets half of the core from Linux's
// fair scheduler, which is half of the compute it was meant to hide behind.
void comm_share_core(Comm *c, int share);

// Fault injection for tests: the rank `rank` kills itself (SIGKILL) when it
// starts collective number `seq` on the world group. -1 disables.
void comm_inject_kill(Comm *c, int rank, int64_t seq);
// The same, except that the rank stops responding (stays alive, sends nothing):
// a hung rank, which the others must diagnose by their timeout.
void comm_inject_stall(Comm *c, int rank, int64_t seq);
// This rank kills itself in the middle of its next collective (on any group, on
// the host transports): after posting its first message of it, so that
// the others are inside it, waiting for the rest (stage 07's during=collective).
void comm_inject_kill_mid(Comm *c);

#ifdef __cplusplus
}
#endif
