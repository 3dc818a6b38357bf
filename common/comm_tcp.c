// comm_tcp.c — the TCP transport: one socket per pair of ranks, set up through
// MASTER_ADDR:MASTER_PORT the way torchrun does it, so ranks can be on any
// machines that reach each other.
//
// Rendezvous (once, at launch; every wait in it has the comm timeout):
//   1. every rank except 0 listens on a port the kernel picks, connects to rank 0
//      at MASTER_ADDR:MASTER_PORT (retrying: rank 0 may start later) and says
//      who it is and on which port it listens;
//   2. rank 0 notes each one's IP address as accept() saw it and sends everybody
//      the table of (ip, port);
//   3. every other pair i < j connects i -> j; the connecting side says its rank.
// The connections of step 1 stay, as the links between rank 0 and the others.
// Under shm+tcp (comm_hybrid.c) step 3 links only ranks on different nodes: the
// ranks of one node talk through shared memory.
//
// Data: a message on a stream is its MsgHeader followed by the payload. The
// sockets are non-blocking; `progress` moves as much as the kernel takes or has,
// and a receive checks the header as comm_shm.c does before it touches the
// destination. A reducing receive stages the bytes and adds whole elements.
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "comm_internal.h"
#include "timer.h"

#define HELLO_MAGIC 0x54435031u     // "TCP1": the first bytes on every rendezvous connection
#define STAGE_BYTES (256u << 10)    // reducing receives land here before they are added

// What a rank says when it connects (step 1 to rank 0, step 3 to a peer). All
// ranks run the same binary on the same kind of machine, so structs travel as is.
typedef struct {
    uint32_t magic, rank, size, port;
} Hello;

typedef struct {
    uint32_t ip[COMM_MAX_RANKS];    // each rank's address as rank 0 saw it (network order)
    uint32_t port[COMM_MAX_RANKS];  // and the port it listens on
} Table;

typedef struct {
    CommRequest *head, *tail;       // posted, unfinished; linked through r->impl
} Queue;

typedef struct {
    int fd;                         // the socket to this peer; -1 for ourselves
    Queue q[2];                     // [0] receives, [1] sends, in post order
    MsgHeader hdr_in;               // the header of the message being received
    unsigned char carry[8];         // reducing receive: the first bytes of a split element
} Peer;

typedef struct {
    Peer peer[COMM_MAX_RANKS];
    unsigned char *stage;           // STAGE_BYTES, for reducing receives
    int nodes_only;                 // shm+tcp: sockets between different nodes only
} Tcp;

// Does the pair (i, j) talk over a socket of ours?
static int linked(const Comm *c, const Tcp *t, int i, int j) {
    return !t->nodes_only || comm_node(c, i) != comm_node(c, j);
}

// ---------------------------------------------------------------- socket helpers

static int tcp_socket(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0, "tcp: socket: %s", strerror(errno));
    return fd;
}

static const char *ip_str(uint32_t ip, char *buf) {  // buf: INET_ADDRSTRLEN bytes
    struct in_addr a = {.s_addr = ip};
    return inet_ntop(AF_INET, &a, buf, INET_ADDRSTRLEN);
}

// 1 when fd is ready for `events`, 0 when the deadline passed first.
static int wait_fd(int fd, short events, double deadline) {
    for (;;) {
        double left = deadline - now_seconds();
        if (left <= 0) return 0;
        struct pollfd p = {.fd = fd, .events = events};
        int k = poll(&p, 1, (int)(left * 1000) + 1);
        if (k > 0) return 1;
        CHECK(k == 0 || errno == EINTR, "tcp: poll: %s", strerror(errno));
    }
}

// Moves exactly n bytes before the deadline. Returns 0, or why not: ETIMEDOUT,
// ECONNRESET when the other side closed, or the socket's errno.
static int xfer_all(int fd, void *buf, size_t n, int sending, double deadline) {
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t k = sending ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k > 0) { p += k; n -= (size_t)k; continue; }
        if (k == 0) return ECONNRESET;
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) return errno;
        if (!wait_fd(fd, sending ? POLLOUT : POLLIN, deadline)) return ETIMEDOUT;
    }
    return 0;
}

// A socket listening on every interface at `port` (0: one the kernel picks);
// sets *bound to the port. -1 with errno on failure.
static int listen_on(int port, int *bound) {
    int fd = tcp_socket(), one = 1;
    // A restarted job can take MASTER_PORT again while the last run's
    // connections linger in TIME_WAIT (two listeners are still refused).
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY),
                            .sin_port = htons((uint16_t)port)};
    socklen_t len = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, COMM_MAX_RANKS) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    *bound = ntohs(a.sin_port);
    return fd;
}

// Linux quirk: connecting to a port on this machine where nobody listens can,
// once in many retries, connect the socket to itself (its own port was picked
// as the source port). That is "nobody there", not a connection.
static int connected_to_self(int fd) {
    struct sockaddr_in me, peer;
    socklen_t lm = sizeof me, lp = sizeof peer;
    return getsockname(fd, (struct sockaddr *)&me, &lm) == 0 &&
           getpeername(fd, (struct sockaddr *)&peer, &lp) == 0 && me.sin_port == peer.sin_port &&
           me.sin_addr.s_addr == peer.sin_addr.s_addr;
}

// Connects before the deadline, retrying whatever the error: the other side may
// simply not be listening yet. -1 with errno = the last answer (e.g. ECONNREFUSED)
// on failure, or ETIMEDOUT if there never was one.
static int connect_until(const struct sockaddr_in *a, double deadline) {
    int last = ETIMEDOUT;
    for (;;) {
        int fd = tcp_socket(), err = 0;
        if (connect(fd, (const struct sockaddr *)a, sizeof *a) != 0) err = errno;
        if (err == EINPROGRESS) {  // non-blocking: the handshake finishes later
            socklen_t len = sizeof err;
            if (!wait_fd(fd, POLLOUT, deadline)) err = -1;  // cut short by us: no answer
            else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
        }
        if (err == 0 && connected_to_self(fd)) err = ECONNREFUSED;
        if (err == 0) return fd;
        close(fd);
        if (err > 0) last = err;
        if (now_seconds() >= deadline) { errno = last; return -1; }
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

// Accepts one connection before the deadline; -1 if none came.
static int accept_until(int lfd, double deadline, struct sockaddr_in *from) {
    for (;;) {
        socklen_t len = sizeof *from;
        int fd = accept4(lfd, (struct sockaddr *)from, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) return fd;
        if (errno == EINTR || errno == ECONNABORTED) continue;
        CHECK(errno == EAGAIN || errno == EWOULDBLOCK, "tcp: accept: %s", strerror(errno));
        if (!wait_fd(lfd, POLLIN, deadline)) return -1;
    }
}

// "1 3 4": the ranks in [lo, hi) that rank `me` should have a socket to and has not yet.
static void missing_ranks(const Comm *c, const Tcp *t, int me, int lo, int hi, char *buf,
                          size_t n) {
    size_t len = 0;
    buf[0] = '\0';
    for (int i = lo; i < hi && len + 12 < n; i++)
        if (t->peer[i].fd < 0 && (me == 0 || linked(c, t, i, me))) len += (size_t)snprintf(buf + len, n - len, "%s%d", len ? " " : "", i);
}

// ---------------------------------------------------------------- rendezvous

// MASTER_ADDR and MASTER_PORT, checked: every rank needs them, so every rank
// names the one that is wrong.
static struct sockaddr_in master_address(void) {
    const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");
    CHECK(addr && *addr, "tcp transport: MASTER_ADDR is not set (the torchrun convention needs "
          "RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; e.g. MASTER_ADDR=127.0.0.1)");
    char *end = NULL;
    long p = port ? strtol(port, &end, 10) : 0;
    CHECK(port && *port && *end == '\0' && p >= 1 && p <= 65535, "tcp transport: MASTER_PORT=%s "
          "is not a port number in 1..65535", port ? port : "(not set)");
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res = NULL;
    int rc = getaddrinfo(addr, NULL, &hints, &res);
    CHECK(rc == 0 && res, "tcp transport: MASTER_ADDR=%s cannot be resolved to an IPv4 address: "
          "%s", addr, gai_strerror(rc));
    struct sockaddr_in a;
    memcpy(&a, res->ai_addr, sizeof a);
    freeaddrinfo(res);
    a.sin_port = htons((uint16_t)p);
    return a;
}

static void rendezvous_rank0(Comm *c, Tcp *t, const struct sockaddr_in *master) {
    int port = ntohs(master->sin_port), bound;
    int lfd = listen_on(port, &bound);
    CHECK(lfd >= 0, "tcp rendezvous: rank 0 cannot listen on MASTER_PORT=%d: %s (is another "
          "job using it?)", port, strerror(errno));
    Table tab = {0};
    double deadline = now_seconds() + c->timeout_s;
    for (int joined = 1; joined < c->size;) {
        struct sockaddr_in from;
        int fd = accept_until(lfd, deadline, &from);
        if (fd < 0) {
            char miss[256];
            missing_ranks(c, t, 0, 1, c->size, miss, sizeof miss);
            DIE("tcp rendezvous: rank 0 waited %.0f s on MASTER_PORT=%d for all WORLD_SIZE=%d "
                "ranks; rank(s) %s never connected (started? same MASTER_ADDR and MASTER_PORT?)",
                c->timeout_s, port, c->size, miss);
        }
        Hello h;
        char ip[INET_ADDRSTRLEN];
        if (xfer_all(fd, &h, sizeof h, 0, deadline) != 0 || h.magic != HELLO_MAGIC) {
            log_warn("tcp rendezvous: ignoring a connection from %s that is not one of our ranks",
                     ip_str(from.sin_addr.s_addr, ip));
            close(fd);
            continue;
        }
        CHECK(h.size == (uint32_t)c->size, "tcp rendezvous: rank %u has WORLD_SIZE=%u but rank 0 "
              "has WORLD_SIZE=%d", h.rank, h.size, c->size);
        CHECK(h.rank >= 1 && h.rank < (uint32_t)c->size && t->peer[h.rank].fd < 0,
              "tcp rendezvous: two processes have RANK=%u", h.rank);
        t->peer[h.rank].fd = fd;
        tab.ip[h.rank] = from.sin_addr.s_addr;
        tab.port[h.rank] = h.port;
        joined++;
    }
    close(lfd);
    deadline = now_seconds() + c->timeout_s;
    for (int i = 1; i < c->size; i++) {
        int e = xfer_all(t->peer[i].fd, &tab, sizeof tab, 1, deadline);
        CHECK(e == 0, "tcp rendezvous: rank 0 could not send the address table to rank %d: %s", i,
              strerror(e));
    }
}

static void rendezvous_member(Comm *c, Tcp *t, const struct sockaddr_in *master) {
    int me = c->rank, my_port;
    int lfd = listen_on(0, &my_port);
    CHECK(lfd >= 0, "tcp rendezvous: rank %d cannot open a listening socket: %s", me,
          strerror(errno));
    char where[INET_ADDRSTRLEN + 8], ip[INET_ADDRSTRLEN];
    snprintf(where, sizeof where, "%s:%d", ip_str(master->sin_addr.s_addr, ip),
             ntohs(master->sin_port));

    // 1. Introduce ourselves to rank 0, 2. and get the table back. A member gives up on
    // rank 0 at half the timeout, before rank 0 gives up on it: when the two cannot
    // reach each other (a link down), the side cut off from rank 0 fails first, and an
    // elastic restart gives that side up, not rank 0's.
    int fd = connect_until(master, now_seconds() + c->timeout_s / 2);
    CHECK(fd >= 0, "tcp rendezvous: rank 0 at %s (MASTER_ADDR:MASTER_PORT) did not answer within "
          "%.1f s (half the --timeout): %s", where, c->timeout_s / 2, strerror(errno));
    t->peer[0].fd = fd;
    Hello h = {HELLO_MAGIC, (uint32_t)me, (uint32_t)c->size, (uint32_t)my_port};
    int e = xfer_all(fd, &h, sizeof h, 1, now_seconds() + c->timeout_s);
    CHECK(e == 0, "tcp rendezvous: rank %d could not introduce itself to rank 0 at %s: %s", me,
          where, strerror(e));
    Table tab;
    e = xfer_all(fd, &tab, sizeof tab, 0, now_seconds() + c->timeout_s);
    CHECK(e == 0, "tcp rendezvous: rank 0 at %s did not send the address table within %.0f s "
          "(%s); it sends it once all WORLD_SIZE=%d ranks have connected", where, c->timeout_s,
          e == ECONNRESET ? "it closed the connection" : strerror(e), c->size);

    // 3. Connect to every higher rank: their listeners exist (each opened its own
    // before step 1), and the kernel completes a connection before accept().
    for (int j = me + 1; j < c->size; j++) {
        if (!linked(c, t, me, j)) continue;
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = tab.ip[j],
                                .sin_port = htons((uint16_t)tab.port[j])};
        int s = connect_until(&a, now_seconds() + c->timeout_s);
        CHECK(s >= 0, "tcp rendezvous: rank %d at %s:%u did not accept a connection within %.0f s: "
              "%s", j, ip_str(tab.ip[j], ip), tab.port[j], c->timeout_s, strerror(errno));
        Hello hj = {HELLO_MAGIC, (uint32_t)me, (uint32_t)c->size, 0};
        e = xfer_all(s, &hj, sizeof hj, 1, now_seconds() + c->timeout_s);
        CHECK(e == 0, "tcp rendezvous: could not introduce ourselves to rank %d: %s", j, strerror(e));
        t->peer[j].fd = s;
    }
    // ... and accept every lower one except rank 0.
    int lower = 0;
    for (int i = 1; i < me; i++) lower += linked(c, t, i, me);
    double deadline = now_seconds() + c->timeout_s;
    for (int joined = 0; joined < lower;) {
        struct sockaddr_in from;
        int s = accept_until(lfd, deadline, &from);
        if (s < 0) {
            char miss[256];
            missing_ranks(c, t, me, 1, me, miss, sizeof miss);
            DIE("tcp rendezvous: rank %d waited %.0f s on port %d for rank(s) %s to connect", me,
                c->timeout_s, my_port, miss);
        }
        Hello hi;
        if (xfer_all(s, &hi, sizeof hi, 0, deadline) != 0 || hi.magic != HELLO_MAGIC ||
            hi.rank == 0 || hi.rank >= (uint32_t)me || t->peer[hi.rank].fd >= 0 ||
            !linked(c, t, (int)hi.rank, me)) {
            log_warn("tcp rendezvous: ignoring a connection from %s that is not one of our ranks",
                     ip_str(from.sin_addr.s_addr, ip));
            close(s);
            continue;
        }
        t->peer[hi.rank].fd = s;
        joined++;
    }
    close(lfd);
}

// ---------------------------------------------------------------- data

// A send or receive failed: a closed connection means the peer is gone.
static _Noreturn void io_failed(Comm *c, CommRequest *r, int err) {
    if (err == EPIPE || err == ECONNRESET) comm_die_waiting(c, r, "the peer closed its connection");
    char why[128];
    snprintf(why, sizeof why, "tcp %s failed (%s)", r->is_send ? "send" : "recv", strerror(err));
    comm_die_waiting(c, r, why);
}

// Receives up to n (> 0) bytes; 0 when none are there yet.
static size_t take(Comm *c, int fd, CommRequest *r, void *dst, size_t n) {
    for (;;) {
        ssize_t k = recv(fd, dst, n, 0);
        if (k > 0) return (size_t)k;
        if (k == 0) comm_die_waiting(c, r, "the peer closed its connection");
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
        io_failed(c, r, errno);
    }
}

static int send_some(Comm *c, Peer *p, CommRequest *r) {
    const size_t H = sizeof r->hdr;
    int moved = 0;
    while (!r->complete) {
        // Header and payload in one call: a small message leaves as one segment.
        struct iovec iov[2] = {{(unsigned char *)&r->hdr + r->hdr_done, H - r->hdr_done}};
        int parts = 1;
        if (r->done < r->bytes) iov[parts++] = (struct iovec){r->buf + r->done, r->bytes - r->done};
        struct msghdr m = {.msg_iov = iov, .msg_iovlen = (size_t)parts};
        ssize_t k = sendmsg(p->fd, &m, MSG_NOSIGNAL);  // a dead peer: EPIPE, not SIGPIPE
        if (k < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            io_failed(c, r, errno);
        }
        size_t n = (size_t)k, h = H - r->hdr_done < n ? H - r->hdr_done : n;
        r->hdr_done += h;
        r->done += n - h;
        r->complete = r->hdr_done == H && r->done == r->bytes;
        moved = 1;
    }
    return moved;
}

static int recv_some(Comm *c, Tcp *t, Peer *p, CommRequest *r) {
    const size_t H = sizeof p->hdr_in;
    int moved = 0;
    while (r->hdr_done < H) {
        size_t k = take(c, p->fd, r, (unsigned char *)&p->hdr_in + r->hdr_done, H - r->hdr_done);
        if (k == 0) return moved;
        r->hdr_done += k;
        moved = 1;
        const MsgHeader *got = &p->hdr_in;
        if (r->hdr_done == H &&
            (got->magic != MSG_MAGIC || got->bytes != r->hdr.bytes || got->seq != r->hdr.seq ||
             got->kind != r->hdr.kind || got->group_id != r->hdr.group_id))
            comm_die_mismatch(c, r, got);
    }
    size_t es = dtype_size(r->dt);
    while (r->done < r->bytes) {
        size_t k;
        if (r->op == RECV_COPY) {
            k = take(c, p->fd, r, r->buf + r->done, r->bytes - r->done);
        } else {
            // The stream may end mid-element: keep that element's first bytes in
            // carry, put them back in front of the next bytes, add whole elements.
            size_t have = r->done % es, want = r->bytes - r->done;
            if (want > STAGE_BYTES - have) want = STAGE_BYTES - have;
            memcpy(t->stage, p->carry, have);
            k = take(c, p->fd, r, t->stage + have, want);
            size_t whole = (have + k) / es * es;
            reduce_sum_into(r->buf + r->done - have, t->stage, whole / es, r->dt);
            memcpy(p->carry, t->stage + whole, have + k - whole);
        }
        if (k == 0) break;
        r->done += k;
        moved = 1;
    }
    r->complete = r->done == r->bytes;
    return moved;
}

static void tcp_post(Comm *c, CommRequest *r) {
    Queue *q = &((Tcp *)c->state)->peer[r->peer].q[r->is_send];
    r->impl = NULL;
    if (q->tail) q->tail->impl = r;
    else q->head = r;
    q->tail = r;
}

static int tcp_progress(Comm *c, CommRequest *r) {
    Tcp *t = c->state;
    Peer *p = &t->peer[r->peer];
    Queue *q = &p->q[r->is_send];
    int moved = 0;
    // One byte stream per peer and direction: its requests finish in post order.
    // Work on the oldest; when it completes, the next one (perhaps r) moves up.
    while (!r->complete) {
        CommRequest *h = q->head;
        moved |= h->is_send ? send_some(c, p, h) : recv_some(c, t, p, h);
        if (!h->complete) break;
        q->head = h->impl;
        if (!q->head) q->tail = NULL;
        h->impl = NULL;
    }
    return moved;
}

// A rank waiting on sockets sleeps in the kernel until a byte arrives or the
// socket's buffer drains: a rank that napped and looked again instead, as on shared
// memory, took the cores (ranks outnumber them) that the network stack needed to move
// the very bytes it waited for.
static int tcp_idle_wait(Comm *c, CommRequest **reqs, int n, double max_s) {
    Tcp *t = c->state;
    struct pollfd fds[2 * COMM_MAX_RANKS];
    nfds_t k = 0;
    for (int i = 0; i < n && k < 2 * COMM_MAX_RANKS; i++) {
        if (reqs[i]->complete) continue;
        fds[k++] = (struct pollfd){.fd = t->peer[reqs[i]->peer].fd,
                                   .events = reqs[i]->is_send ? POLLOUT : POLLIN};
    }
    struct timespec ts = {(time_t)max_s, (long)((max_s - (double)(time_t)max_s) * 1e9)};
    if (k > 0) ppoll(fds, k, &ts, NULL);  // EINTR or a timeout: the caller looks again
    return 1;
}

static void tcp_finalize(Comm *c) {
    Tcp *t = c->state;
    if (!t) return;
    for (int i = 0; i < COMM_MAX_RANKS; i++)
        if (t->peer[i].fd >= 0) close(t->peer[i].fd);
    free(t->stage);
    free(t);
    c->state = NULL;
}

static const TransportOps tcp_ops = {
    .name = "tcp",
    .progress = tcp_progress,
    .post = tcp_post,
    // A dead peer shows itself in progress: its socket reads end-of-stream or
    // fails with ECONNRESET / EPIPE, and we die naming the request.
    .peer_dead = NULL,
    .idle_wait = tcp_idle_wait,
    .finalize = tcp_finalize,
};

void tcp_transport_init(Comm *c) {
    Tcp *t = calloc(1, sizeof *t);
    CHECK(t, "out of memory");
    for (int i = 0; i < COMM_MAX_RANKS; i++) t->peer[i].fd = -1;
    t->nodes_only = c->transport == TRANSPORT_SHM_TCP;
    c->ops = &tcp_ops;
    c->state = t;
    c->transport = TRANSPORT_TCP;
    struct sockaddr_in master = master_address();  // checked even when alone
    if (c->size == 1) return;
    t->stage = malloc(STAGE_BYTES);
    CHECK(t->stage, "out of memory");
    if (c->rank == 0) rendezvous_rank0(c, t, &master);
    else rendezvous_member(c, t, &master);
    for (int i = 0; i < c->size; i++) {
        int one = 1;
        // Collectives send small messages and wait for the answer; Nagle's
        // algorithm would hold each one back for an ACK.
        if (t->peer[i].fd >= 0)
            CHECK(setsockopt(t->peer[i].fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0,
                  "tcp: TCP_NODELAY: %s", strerror(errno));
    }
}
