// comm_internal.h — what a transport implements, and the state comm.c shares
// with the transports. Not for code above the comm layer.
#pragma once
#include <pthread.h>
#include <stdint.h>

#include "check.h"
#include "comm.h"

// Every message on the shm and tcp transports starts with this header. The
// receiver checks it against what it expects: a different size, collective or
// sequence number is a bug in the caller (ranks disagree), reported with both
// sides' view instead of silently reading garbage.
typedef struct {
    uint32_t magic;      // MSG_MAGIC
    uint32_t group_id;
    uint64_t seq;        // the group's collective sequence number (0 for plain p2p)
    uint32_t kind;       // CollKind
    uint32_t src;        // sender's world rank
    uint64_t bytes;      // payload bytes that follow
} MsgHeader;
#define MSG_MAGIC 0x434f4d4du  // "COMM"
// comm_shm.c's single-copy messages: the header says the payload stays in the sender's
// memory, at the address that follows it, for the receiver to read.
#define MSG_MAGIC_DIRECT 0x434f4d44u  // "COMD"

struct CommRequest {
    int is_send;
    int peer;              // world rank
    const Group *group;
    unsigned char *buf;    // send: source; recv: destination
    size_t bytes;          // payload bytes
    RecvOp op;
    DType dt;
    MsgHeader hdr;         // send: the header to send; recv: the header received
    size_t hdr_done;       // header bytes moved so far
    size_t done;           // payload bytes moved so far
    // comm_shm.c's single-copy messages: a send's count of the channel's direct reads
    // before it; a receive's source in the sender's memory (direct_pid 0: none).
    uint64_t direct_base, direct_addr;
    int64_t direct_pid;
    size_t done_first;     // a receive: what had arrived when this rank first saw bytes,
    double t_first;        // and when (comm_take_flows)
    int complete;
    void *impl;            // transport's own state (MPI_Request*, ...)
};

typedef struct TransportOps {
    const char *name;
    // Moves as much of r as possible without blocking; sets r->complete when done.
    // Returns 1 if it made any progress.
    int (*progress)(Comm *c, CommRequest *r);
    // Called once per request when it is posted (may be NULL).
    void (*post)(Comm *c, CommRequest *r);
    // Peer liveness: 1 if the peer's process is known to be gone (may be NULL).
    int (*peer_dead)(Comm *c, int world_rank);
    // Sleeps until one of the unfinished requests among reqs[0..n) may move, or max_s
    // passes; 0 when it cannot tell (then the caller naps). May be NULL.
    int (*idle_wait)(Comm *c, CommRequest **reqs, int n, double max_s);
    void (*finalize)(Comm *c);
} TransportOps;

struct Comm {
    int rank, size;
    int slot;              // the built-in launcher's place for this rank (its core, its GPU):
                           // its rank, unless an elastic restart gave a rank up and the
                           // ranks after it moved down (comm_slot)
    int local_size;        // ranks of this job on this machine
    int local_cores;       // the cores those ranks may run on, together
    int node_size;         // ranks per node (comm_node_size)
    uint64_t link_sent[2]; // bytes sent inside this rank's node, and to other nodes
    PeerFlow flow[COMM_MAX_RANKS];  // receive rates per peer (comm_take_flows)
    LaunchMode launch;
    Transport transport;
    double timeout_s;
    double spin_s;         // a wait with nothing moving spins this long, then yields the core
    int share_core;        // comm_share_core: idle waits sleep at once
    size_t channel_bytes;  // see comm_channel_bytes (set by the transport)
    int bound;             // comm_bind_thread: only `owner` may post messages
    pthread_t owner;
    Group world;
    CommCounter counters[COLL_KINDS];
    // The collective in progress (for headers, counters and diagnostics).
    CollKind cur_kind;
    uint64_t cur_seq;
    const Group *cur_group;
    size_t cur_count;
    DType cur_dt;
    int kill_rank, stall_rank;
    int64_t kill_seq, stall_seq;
    int kill_mid;          // comm_inject_kill_mid: 1 armed, 2 inside the collective to die in
    CommRequest *meanwhile[COMM_MAX_MEANWHILE];  // comm_progress_meanwhile's requests
    int n_meanwhile;
    const TransportOps *ops;
    void *state;           // the transport's state
};

// The transports. Each init fills c->ops and c->state; world size and rank are
// already known from the launcher.
void shm_transport_init(Comm *c, void *region, size_t region_bytes, ShmStores stores);
size_t shm_region_bytes(int world);
void mpi_transport_init(Comm *c);    // comm_mpi.c (or comm_mpi_absent.c without mpicc)
void tcp_transport_init(Comm *c);    // comm_tcp.c (with c->transport = TRANSPORT_SHM_TCP
                                     // beforehand: sockets between nodes only)
// shm inside the node, tcp across (comm_hybrid.c): shm_transport_init's arguments.
// The built-in launcher's nodes (launch_nodes.c): planned from --nodes/--cluster before
// the fork, checked against the ranks and the namespaces; MASTER_ADDR
// and MASTER_PORT set for the TCP mesh; each child enters its node's namespace.
typedef struct {
    int nodes, node_size;   // nodes, and ranks on each
    const char *cluster;    // the namespaces' prefix, or NULL: all on the loopback
} LaunchNodes;
void launch_nodes_plan(LaunchNodes *ln, int nodes, const char *cluster, int np);
void launch_nodes_master(const LaunchNodes *ln, int node);  // MASTER_ADDR: node's address
void launch_nodes_enter(const LaunchNodes *ln, int node);
void hybrid_transport_init(Comm *c, void *region, size_t region_bytes, ShmStores stores);
// The same for ranks connected by tcp_transport_init already (all pairs: torchrun's,
// started separately): the node's ranks map one named shared-memory object (the region
// is then never unmapped: the process's exit does it).
void hybrid_transport_after_tcp(Comm *c, ShmStores stores);
// MPI as launcher: MPI_Init, world rank and size; 0 if this build has no MPI.
int mpi_launch_init(int *rank, int *size);
void mpi_launch_finalize(void);
void mpi_group_comm(Comm *c, Group *g);  // sets g->mpi_comm (MPI_Comm_create_group); no-op without MPI

// Dies with the diagnostic for request r (timeout or dead peer).
CHECK_NORETURN void comm_die_waiting(Comm *c, const CommRequest *r, const char *why);
CHECK_NORETURN void comm_die_mismatch(Comm *c, const CommRequest *r, const MsgHeader *got);
