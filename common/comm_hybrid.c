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
//
// The built-in launcher maps the shm region before it forks; ranks that torchrun
// started separately share one through a named POSIX shared-memory object instead
// (hybrid_transport_after_tcp).
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

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

// The two halves made (c->ops, c->state: the TCP mesh's; near: the shm region's) joined.
static void join(Comm *c, Half near, size_t cap) {
    Hybrid *h = calloc(1, sizeof *h);
    CHECK(h, "out of memory");
    h->near = near;
    h->far = (Half){c->ops, c->state};
    c->ops = &hybrid_ops;
    c->state = h;
    c->transport = TRANSPORT_SHM_TCP;
    c->channel_bytes = cap;  // the shm channel's: what a send may leave unreceived
}

void hybrid_transport_init(Comm *c, void *region, size_t region_bytes, ShmStores stores) {
    shm_transport_init(c, region, region_bytes, stores);
    Half near = {c->ops, c->state};
    size_t cap = c->channel_bytes;
    c->transport = TRANSPORT_SHM_TCP;  // tells the TCP mesh to link the nodes only
    tcp_transport_init(c);
    join(c, near, cap);
}

// The node's first rank creates the object under a name nobody can have chosen before
// (its pid and the clock), gives it its pages at once (a tmpfs too small for them is
// refused here, by name, not by a SIGBUS at the first touch), sends the name to the
// node's other ranks over the TCP mesh, and removes the name once each has mapped it: a
// run killed in between leaves it in /dev/shm, a failure here does not.
#define SHM_NAME_BYTES 64

// Dies naming what failed, the name removed first (the node's first rank made it).
CHECK_NORETURN static void shm_fail(const char *name, int made, const char *fmt, const char *what,
                                    size_t bytes, int err) {
    if (made) shm_unlink(name);
    DIE(fmt, what, name, bytes, strerror(err));
}
void hybrid_transport_after_tcp(Comm *c, ShmStores stores) {
    int k = c->node_size, first = c->rank / k * k, fd;
    size_t bytes = shm_region_bytes(c->size);
    char name[SHM_NAME_BYTES] = "";
    if (c->rank == first) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        snprintf(name, sizeof name, "/course-shm-%d-%ld%09ld", (int)getpid(), (long)ts.tv_sec,
                 ts.tv_nsec);
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR, 0600);
        CHECK(fd >= 0, "rank %d: cannot create the shared memory %s for the ranks of its node: %s",
              c->rank, name, strerror(errno));
        int err = ftruncate(fd, (off_t)bytes) == 0 ? posix_fallocate(fd, 0, (off_t)bytes) : errno;
        if (err)
            shm_fail(name, 1, "%s: the shared memory %s needs %zu bytes for this node's ranks: %s "
                     "(a small /dev/shm, as a container's 64 MB? --transport tcp needs none)",
                     "torchrun's ranks of one node", bytes, err);
        for (int r = first + 1; r < first + k; r++) comm_send(c, &c->world, r, name, sizeof name);
    } else {
        comm_recv(c, &c->world, first, name, sizeof name);
        fd = shm_open(name, O_RDWR, 0);
        CHECK(fd >= 0, "rank %d: cannot open its node's shared memory %s (made by rank %d): %s",
              c->rank, name, first, strerror(errno));
    }
    void *region = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    if (region == MAP_FAILED)
        shm_fail(name, c->rank == first, "%s: cannot map the shared memory %s (%zu bytes): %s",
                 "torchrun's ranks of one node", bytes, errno);
    close(fd);
    char mapped = 1;
    if (c->rank == first) {
        for (int r = first + 1; r < first + k; r++) comm_recv(c, &c->world, r, &mapped, 1);
        shm_unlink(name);
    } else {
        comm_send(c, &c->world, first, &mapped, 1);
    }
    Half far = {c->ops, c->state};
    shm_transport_init(c, region, bytes, stores);
    Half near = {c->ops, c->state};
    size_t cap = c->channel_bytes;
    c->ops = far.ops, c->state = far.state;
    join(c, near, cap);
}
