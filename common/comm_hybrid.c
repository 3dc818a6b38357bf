// comm_hybrid.c — the transport chosen per peer: shared memory to the ranks of this
// node, TCP to the others. A cluster's library does the same (NCCL takes NVLink or
// PCIe inside a node and the network between nodes; OpenMPI's ob1 takes its sm BTL or
// its tcp BTL per peer), so that a collective's messages inside a node move at memory
// speed and only those that must cross the slow link pay for it.
//
// It is a thin layer: both transports are set up whole (the shm region has channels
// for every pair; the TCP mesh connects only ranks of different nodes: comm_tcp.c) and
// each request goes to the one its peer's node chooses. A transport's functions find
// their state in c->state, so the layer puts the chosen one there for the call (one
// thread drives a Comm at a time: comm_bind_thread).
#include <stdlib.h>

#include "check.h"
#include "comm_internal.h"

typedef struct {
    const TransportOps *ops;
    void *state;
} Half;

typedef struct {
    Half near, far;  // [shm] this node's ranks, [tcp] every other node's
} Hybrid;

static Half *half_for(Comm *c, Hybrid *h, int peer) {
    return comm_node(c, peer) == comm_node(c, c->rank) ? &h->near : &h->far;
}

static int hybrid_progress(Comm *c, CommRequest *r) {
    Hybrid *h = c->state;
    Half *x = half_for(c, h, r->peer);
    c->state = x->state;
    int moved = x->ops->progress(c, r);
    c->state = h;
    return moved;
}

static void hybrid_post(Comm *c, CommRequest *r) {
    Hybrid *h = c->state;
    Half *x = half_for(c, h, r->peer);
    if (!x->ops->post) return;
    c->state = x->state;
    x->ops->post(c, r);
    c->state = h;
}

// A rank of this node is seen dying by its pid (shm's way); one on another node only
// by its socket closing (tcp's, in progress), as on a real cluster.
static int hybrid_peer_dead(Comm *c, int world_rank) {
    Hybrid *h = c->state;
    if (half_for(c, h, world_rank) != &h->near) return 0;
    c->state = h->near.state;
    int dead = h->near.ops->peer_dead(c, world_rank);
    c->state = h;
    return dead;
}

// Only a wait on other nodes alone may sleep in the sockets: a rank of this node
// announces its bytes through memory, which no poll() sees.
static int hybrid_idle_wait(Comm *c, CommRequest **reqs, int n, double max_s) {
    Hybrid *h = c->state;
    for (int i = 0; i < n; i++)
        if (!reqs[i]->complete && half_for(c, h, reqs[i]->peer) == &h->near) return 0;
    c->state = h->far.state;
    int slept = h->far.ops->idle_wait(c, reqs, n, max_s);
    c->state = h;
    return slept;
}

static void hybrid_finalize(Comm *c) {
    Hybrid *h = c->state;
    if (!h) return;
    Half *both[2] = {&h->near, &h->far};
    for (int i = 0; i < 2; i++) {
        c->state = both[i]->state;
        both[i]->ops->finalize(c);
    }
    free(h);
    c->state = NULL;
}

static const TransportOps hybrid_ops = {
    .name = "shm+tcp",
    .progress = hybrid_progress,
    .post = hybrid_post,
    .peer_dead = hybrid_peer_dead,
    .idle_wait = hybrid_idle_wait,
    .finalize = hybrid_finalize,
};

void hybrid_transport_init(Comm *c, void *region, size_t region_bytes, ShmStores stores) {
    Hybrid *h = calloc(1, sizeof *h);
    CHECK(h, "out of memory");
    shm_transport_init(c, region, region_bytes, stores);
    h->near = (Half){c->ops, c->state};
    size_t cap = c->channel_bytes;  // the shm channel's: what a send may leave unreceived
    c->transport = TRANSPORT_SHM_TCP;  // tells the TCP mesh to link the nodes only
    tcp_transport_init(c);
    h->far = (Half){c->ops, c->state};
    c->ops = &hybrid_ops;
    c->state = h;
    c->transport = TRANSPORT_SHM_TCP;
    c->channel_bytes = cap;
}
