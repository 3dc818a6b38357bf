// comm_shm.c — the shared-memory transport: one single-producer/single-consumer
// ring buffer ("channel") for every ordered pair of ranks on this machine.
//
//   sender:   copy bytes into data[head % CAP ...], then publish head (release)
//   receiver: see head (acquire), copy or ADD the bytes out, then publish tail
//
// Nothing is locked: each counter has exactly one writer. Messages are a header
// followed by the payload, padded to 8 bytes so that every header and element
// starts aligned and no element is split by the wrap-around. A receive posted
// with RECV_SUM adds the bytes into the destination straight from the channel:
// the sender's copy-in and the receiver's reduce run at the same time on two
// cores.
//
// Large messages are copied in with non-temporal ("streaming") stores, which
// write around the sender's caches to memory. Ordinary stores leave each line
// modified in the sender's cache, and the receiver must then fetch it from
// there. Within one cache complex that is fast, but across two (the other
// chiplet, the other socket, or wherever the hypervisor has put the other
// virtual CPU) every line becomes a cross-die coherence transfer: on the 2-vCPU
// VM this course was measured on, a 2-rank exchange ran at ~1.5 GB/s with
// cached stores whenever the vCPUs were apart, against 4-6 GB/s with streaming
// stores in the same minutes. Small messages keep ordinary stores: the receiver
// reads them at once, and from cache that is faster than from memory.
//
// Messages of DIRECT_MIN_BYTES or more skip the channel: the sender writes only the
// header and its buffer's address, and the receiver copies the payload straight out of
// the sender's memory (process_vm_readv, Linux's cross-memory attach: OpenMPI's "CMA"
// single-copy path), then counts the bytes in the channel's `direct` counter, which
// completes the send. One copy a byte instead of two: the sender's into the channel
// and the receiver's out. A send then completes only once its receiver has posted
// (a rendezvous, as MPI's large messages), which is what the tests' large messages
// already demand. Where the kernel refuses (no such system call, or a ptrace policy
// that forbids it), the receiver says so in the channel and the payload comes the
// two-copy way; that channel never tries again.
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "check.h"
#include "comm_internal.h"

typedef struct {
    _Alignas(64) _Atomic uint64_t head;   // bytes ever written (by the sender)
    _Alignas(64) _Atomic uint64_t tail;   // bytes ever read (by the receiver)
    _Atomic uint64_t direct;              // payload bytes ever read from the sender's memory
    _Atomic int refused;                  // 1: the receiver cannot read the sender's memory
} ChannelCtl;

typedef struct {
    _Atomic int pid[COMM_MAX_RANKS];      // each rank's process, for liveness checks
    uint64_t cap;                         // bytes per channel
} RegionHeader;

// The requests posted to or from one peer, unfinished, in post order: a
// channel carries one message at a time, so a later request waits for the ones
// before it (linked through r->impl).
typedef struct {
    CommRequest *head, *tail;
} Queue;

typedef struct {
    Queue q[COMM_MAX_RANKS][2];           // [peer][0] receives, [peer][1] sends
    RegionHeader *hdr;
    ChannelCtl *ctl;                      // [src * n + dst]
    unsigned char *data;                  // [(src * n + dst) * cap]
    uint64_t cap;
    size_t stream_min;                    // messages this long or longer: streaming stores
    size_t direct_min;                    // ... read from the sender's memory (SIZE_MAX: never)
    int refuse;                           // COURSE_SHM_DIRECT=refused: act refused
    unsigned char *stage;                 // a reducing direct receive's piece (DIRECT_STAGE)
    int n;
} Shm;

// Single copy from this size on: below it the system call's cost (a few µs, and the
// pages pinned) is more than a second copy through the cache costs.
#define DIRECT_MIN_BYTES ((size_t)256 << 10)
// A direct receive moves at most DIRECT_CHUNK per call, so that a rank's other
// requests (the send of the same exchange) move in between; a reducing one at most
// DIRECT_STAGE, staged there in the cache before it is added in.
#define DIRECT_CHUNK ((size_t)256 << 10)
#define DIRECT_STAGE ((size_t)256 << 10)

typedef struct {
    uint64_t addr;  // the payload in the sender's address space
    int64_t pid;    // the sender's process
} DirectRef;

static uint64_t channel_cap(int n) {
    // Tests make messages outgrow the channel with small models: a power of two
    // from 4 KiB to 1 MiB in COURSE_SHM_CHANNEL_BYTES replaces the rule below.
    const char *force = getenv("COURSE_SHM_CHANNEL_BYTES");
    if (force && *force) {
        unsigned long long want = strtoull(force, NULL, 10);
        CHECK(want >= 4096 && want <= (1u << 20) && (want & (want - 1)) == 0,
              "COURSE_SHM_CHANNEL_BYTES=%s: a power of two from 4096 to 1048576", force);
        return want;
    }
    // About 64 MiB in all, at most 1 MiB and at least 16 KiB per channel; a power of two.
    uint64_t cap = 1u << 20;
    while (cap > (16u << 10) && cap * (uint64_t)n * n > (64u << 20)) cap >>= 1;
    return cap;
}

static size_t ctl_offset(void) { return (sizeof(RegionHeader) + 63) & ~(size_t)63; }
static size_t data_offset(int n) { return ctl_offset() + sizeof(ChannelCtl) * (size_t)n * n; }

size_t shm_region_bytes(int n) { return data_offset(n) + channel_cap(n) * (size_t)n * n; }

static Shm *shm(Comm *c) { return (Shm *)c->state; }

// COURSE_SHM_DIRECT=0 turns the single copy off (the two-copy path, for comparison);
// =refused keeps the senders' direct messages but has every receiver act as if the
// kernel refused its first read (EPERM): the fallback a strict ptrace policy takes,
// exercised on any machine (tests/stage02.sh).
static size_t direct_min_bytes(int *refuse) {
    const char *e = getenv("COURSE_SHM_DIRECT");
    *refuse = 0;
    if (e && *e) {
        CHECK(strcmp(e, "0") == 0 || strcmp(e, "1") == 0 || strcmp(e, "refused") == 0,
              "COURSE_SHM_DIRECT=%s: 0, 1 or refused", e);
        if (*e == '0') return SIZE_MAX;
        *refuse = *e == 'r';
    }
    return DIRECT_MIN_BYTES;
}
static uint64_t pad8(uint64_t x) { return (x + 7) & ~(uint64_t)7; }

// SHM_STORES_AUTO streams messages of at least this many bytes. Below it the
// whole exchange fits in the last-level cache, where ordinary stores measured
// faster (2 ranks, messages of 1-2 MiB: 14-17 GB/s busbw cached, 8-12 streamed).
#define STREAM_MIN_BYTES ((size_t)4 << 20)

// memcpy with non-temporal stores where the CPU has them (x86-64: SSE2, always).
// The caller fences before publishing: these stores are not ordered with the
// release store of `head` until an sfence.
static void copy_streaming(unsigned char *dst, const unsigned char *src, size_t len) {
#if defined(__x86_64__)
    size_t lead = (16 - ((uintptr_t)dst & 15)) & 15;  // the stores need 16-byte alignment
    if (lead > len) lead = len;
    memcpy(dst, src, lead);
    size_t i = lead;
    for (; i + 16 <= len; i += 16)
        _mm_stream_si128((__m128i *)(dst + i), _mm_loadu_si128((const __m128i *)(src + i)));
    memcpy(dst + i, src + i, len - i);
#else
    memcpy(dst, src, len);
#endif
}

static void store_fence(void) {
#if defined(__x86_64__)
    _mm_sfence();
#endif
}

// Copies `len` bytes between the linear buffer `lin` and the ring at position pos.
static void ring_write(unsigned char *ring, uint64_t cap, uint64_t pos, const void *lin, size_t len,
                       int streaming) {
    size_t off = pos & (cap - 1), first = len < cap - off ? len : cap - off;
    const unsigned char *src = lin;
    if (streaming) {
        copy_streaming(ring + off, src, first);
        if (len > first) copy_streaming(ring, src + first, len - first);
        store_fence();
    } else {
        memcpy(ring + off, src, first);
        if (len > first) memcpy(ring, src + first, len - first);
    }
}
static void ring_read(const unsigned char *ring, uint64_t cap, uint64_t pos, void *lin, size_t len,
                      RecvOp op, DType dt) {
    size_t off = pos & (cap - 1), first = len < cap - off ? len : cap - off;
    unsigned char *dst = lin;
    size_t es = dtype_size(dt);
    if (op == RECV_SUM) {
        reduce_sum_into(dst, ring + off, first / es, dt);
        if (len > first) reduce_sum_into(dst + first, ring, (len - first) / es, dt);
    } else {
        memcpy(dst, ring + off, first);
        if (len > first) memcpy(dst + first, ring, len - first);
    }
}

// A direct receive's next piece, read from the sender's memory into the destination
// (or, reducing, into the stage and added from there); the channel's count tells the
// sender. A kernel that refuses the read: the channel is marked, and the payload comes
// through it (the sender sees the mark).
static int direct_receive(Comm *c, Shm *s, ChannelCtl *ch, CommRequest *r) {
    int sum = r->op == RECV_SUM;
    size_t es = sum ? dtype_size(r->dt) : 1, n = r->bytes - r->done;  // a sum: whole elements
    if (n > (sum ? DIRECT_STAGE : DIRECT_CHUNK)) n = sum ? DIRECT_STAGE : DIRECT_CHUNK;
    n -= n % es;
    struct iovec local = {sum ? s->stage : r->buf + r->done, n};
    struct iovec remote = {(void *)(uintptr_t)(r->direct_addr + r->done), n};
    ssize_t got = !n ? 0 : s->refuse ? (errno = EPERM, -1)
                        : process_vm_readv((pid_t)r->direct_pid, &local, 1, &remote, 1, 0);
    if (got < 0 && errno == ESRCH) comm_die_waiting(c, r, "the peer's process has exited");
    if (got < 0 && r->done > 0) {  // part of it read: the two could no longer agree where
        char why[160];             // the payload resumes in the channel
        snprintf(why, sizeof why, "reading the sender's memory failed partway (%s)",
                 strerror(errno));
        comm_die_waiting(c, r, why);
    }
    if (got < 0) {  // EPERM, ENOSYS at the first read: the two-copy way from now on
        r->direct_pid = 0;
        atomic_store_explicit(&ch->refused, 1, memory_order_release);
        return 1;
    }
    got -= got % (ssize_t)es;  // a short read: retried from the last whole element
    if (sum) reduce_sum_into(r->buf + r->done, s->stage, (size_t)got / es, r->dt);
    r->done += (size_t)got;
    atomic_fetch_add_explicit(&ch->direct, (uint64_t)got, memory_order_release);
    if (r->done >= r->bytes) r->complete = 1;
    return 1;
}

static int shm_move(Comm *c, CommRequest *r) {
    Shm *s = shm(c);
    int src = r->is_send ? c->rank : r->peer, dst = r->is_send ? r->peer : c->rank;
    ChannelCtl *ch = &s->ctl[src * s->n + dst];
    unsigned char *ring = s->data + (size_t)(src * s->n + dst) * s->cap;
    uint64_t cap = s->cap, padded = pad8(r->bytes);
    int moved = 0;
    if (r->is_send) {
        uint64_t head = atomic_load_explicit(&ch->head, memory_order_relaxed);
        uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_acquire);
        uint64_t space = cap - (head - tail);
        if (r->hdr_done == 0) {
            int direct = r->bytes >= s->direct_min && !atomic_load(&ch->refused);
            size_t need = sizeof(MsgHeader) + (direct ? sizeof(DirectRef) : 0);
            if (space < need) return 0;
            MsgHeader h = r->hdr;
            if (direct) {
                h.magic = MSG_MAGIC_DIRECT;
                r->direct_base = atomic_load_explicit(&ch->direct, memory_order_relaxed);
                DirectRef ref = {(uint64_t)(uintptr_t)r->buf, (int64_t)getpid()};
                ring_write(ring, cap, head + sizeof h, &ref, sizeof ref, 0);
            }
            ring_write(ring, cap, head, &h, sizeof h, 0);
            head += need;
            space -= need;
            r->hdr_done = sizeof h;
            r->hdr.magic = h.magic;  // which way the payload goes, for the calls below
            atomic_store_explicit(&ch->head, head, memory_order_release);
            moved = 1;
        }
        if (r->hdr.magic == MSG_MAGIC_DIRECT) {  // the receiver reads it; we count
            uint64_t read = atomic_load_explicit(&ch->direct, memory_order_acquire) - r->direct_base;
            if (read > r->done) r->done = read, moved = 1;
            if (r->done >= r->bytes) { r->complete = 1; return moved; }
            if (!atomic_load_explicit(&ch->refused, memory_order_acquire)) return moved;
            r->hdr.magic = MSG_MAGIC;  // refused: the payload follows through the channel
            r->done = 0;
        }
        // Payload in pieces of at most a quarter channel, so the receiver can
        // start on the first piece while we copy the next.
        while (r->done < padded && space > 0) {
            uint64_t n = padded - r->done;
            if (n > space) n = space & ~(uint64_t)7;
            if (n > cap / 4) n = cap / 4;
            if (n == 0) break;
            size_t real = r->done < r->bytes ? (r->bytes - r->done < n ? r->bytes - r->done : n) : 0;
            if (real)  // padding: not copied
                ring_write(ring, cap, head, r->buf + r->done, real, r->bytes >= s->stream_min);
            head += n;
            space -= n;
            r->done += n;
            atomic_store_explicit(&ch->head, head, memory_order_release);
            moved = 1;
        }
        atomic_store_explicit(&ch->head, head, memory_order_release);
        if (r->done >= padded) { r->done = r->bytes; r->complete = 1; }
        return moved;
    }
    // receive
    uint64_t tail = atomic_load_explicit(&ch->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&ch->head, memory_order_acquire);
    uint64_t avail = head - tail;
    if (r->hdr_done == 0) {
        if (avail < sizeof(MsgHeader)) return 0;
        MsgHeader got;
        ring_read(ring, cap, tail, &got, sizeof got, RECV_COPY, DT_F32);
        int direct = got.magic == MSG_MAGIC_DIRECT;
        if (direct) got.magic = MSG_MAGIC;
        if (got.magic != MSG_MAGIC || got.bytes != r->hdr.bytes || got.seq != r->hdr.seq ||
            got.kind != r->hdr.kind || got.group_id != r->hdr.group_id)
            comm_die_mismatch(c, r, &got);
        DirectRef ref = {0, 0};
        if (direct) ring_read(ring, cap, tail + sizeof got, &ref, sizeof ref, RECV_COPY, DT_F32);
        tail += sizeof got + (direct ? sizeof ref : 0);
        avail -= sizeof got + (direct ? sizeof ref : 0);
        r->hdr_done = sizeof got;
        r->direct_addr = ref.addr;
        r->direct_pid = ref.pid;
        atomic_store_explicit(&ch->tail, tail, memory_order_release);
        moved = 1;
    }
    if (r->direct_pid) return direct_receive(c, s, ch, r) | moved;
    while (r->done < padded && avail > 0) {
        uint64_t n = padded - r->done < avail ? padded - r->done : avail;
        if (n > cap / 4) n = cap / 4;
        size_t real = r->done < r->bytes ? (r->bytes - r->done < n ? r->bytes - r->done : n) : 0;
        if (r->op == RECV_SUM) real -= real % dtype_size(r->dt);  // whole elements only
        if (real == 0 && r->done < r->bytes) break;
        if (real) ring_read(ring, cap, tail, r->buf + r->done, real, r->op, r->dt);
        uint64_t step = r->done + real >= r->bytes ? n : real;  // skip padding with the tail
        tail += step;
        avail -= step;
        r->done += step;
        atomic_store_explicit(&ch->tail, tail, memory_order_release);
        moved = 1;
    }
    if (r->done >= padded) { r->done = r->bytes; r->complete = 1; }
    return moved;
}

static void shm_post(Comm *c, CommRequest *r) {
    Queue *q = &shm(c)->q[r->peer][r->is_send];
    r->impl = NULL;
    if (q->tail) q->tail->impl = r;
    else q->head = r;
    q->tail = r;
}

// Moves the channel's oldest requests first; r when its turn comes.
static int shm_progress(Comm *c, CommRequest *r) {
    Queue *q = &shm(c)->q[r->peer][r->is_send];
    int moved = 0;
    while (!r->complete) {
        CommRequest *h = q->head;
        moved |= shm_move(c, h);
        if (!h->complete) break;
        q->head = h->impl;
        if (!q->head) q->tail = NULL;
        h->impl = NULL;
    }
    return moved;
}

static int shm_peer_dead(Comm *c, int world_rank) {
    int pid = atomic_load(&shm(c)->hdr->pid[world_rank]);
    return pid > 0 && kill(pid, 0) != 0 && errno == ESRCH;
}

static void shm_finalize(Comm *c) {
    free(shm(c)->stage);
    free(c->state);
    c->state = NULL;
}

static const TransportOps shm_ops = {
    .name = "shm",
    .progress = shm_progress,
    .post = shm_post,
    .peer_dead = shm_peer_dead,
    .finalize = shm_finalize,
};

void shm_transport_init(Comm *c, void *region, size_t region_bytes, ShmStores stores) {
    Shm *s = calloc(1, sizeof *s);
    CHECK(s, "out of memory");
    s->stream_min = stores == SHM_STORES_CACHED ? SIZE_MAX
                  : stores == SHM_STORES_STREAMING ? 0 : STREAM_MIN_BYTES;
    s->direct_min = direct_min_bytes(&s->refuse);
    c->ops = &shm_ops;
    c->state = s;
    c->transport = TRANSPORT_SHM;
    if (!region) return;  // a single rank talks to nobody
    CHECK(region_bytes >= shm_region_bytes(c->size), "shared region too small");
    s->n = c->size;
    s->cap = channel_cap(c->size);
    // What a send may leave unreceived: the channel, or less where the payload is read
    // from the sender's memory.
    c->channel_bytes = s->cap < s->direct_min ? s->cap : s->direct_min;
    s->hdr = region;
    s->ctl = (ChannelCtl *)((unsigned char *)region + ctl_offset());
    s->data = (unsigned char *)region + data_offset(c->size);
    // Map every page of our channels into this process now (a read: a peer may
    // already be writing). Otherwise the first pass through a channel takes a
    // page fault every 4 KiB, a few microseconds each, and the first few hundred
    // small messages look several times slower than the rest.
    long page = sysconf(_SC_PAGESIZE);
    for (int peer = 0; peer < s->n; peer++)
        for (int dir = 0; dir < 2; dir++) {
            const volatile unsigned char *ch =
                s->data + (size_t)(dir ? peer * s->n + c->rank : c->rank * s->n + peer) * s->cap;
            for (uint64_t off = 0; off < s->cap; off += (uint64_t)page) (void)ch[off];
        }
    atomic_store(&s->hdr->pid[c->rank], (int)getpid());
    // The stage always: a reducing receive reads into it whenever the sender sent a
    // direct message, whatever this rank's own COURSE_SHM_DIRECT.
    s->stage = malloc(DIRECT_STAGE);
    CHECK(s->stage, "out of memory");
    if (s->direct_min != SIZE_MAX) {
        // Yama's ptrace policy 1 lets a process read only its descendants' memory unless
        // they name it; the ranks are siblings. (No Yama: EINVAL, and nothing to do.)
        prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);
    }
}
