// comm_cuda_p2p.cu — point to point on device buffers over CUDA IPC (comm_cuda.h:
// gpu_isend, gpu_irecv, gpu_test, gpu_wait): the messages between a pipeline's
// stages when they compute on GPUs of one machine, or share one GPU.
//
//   1. the protocol: an outbox per peer, READY and TAKEN, and why it is safe;
//   2. a channel's state, its outbox, its control messages;
//   3. moving a message along: a send's steps, a receive's steps;
//   4. the API: posting, testing, waiting with the timeout and a diagnostic.
#include <stdlib.h>
#include <string.h>

#include "comm_cuda_p2p.cuh"
#include "timer.h"

// ================================================================ 1. the protocol
//
// A CHANNEL is one direction between two members: the messages member a sends to
// member b, in the order a posts them, which is the order b posts its receives.
// The sender owns the channel's OUTBOX, a device buffer exported with
// cudaIpcGetMemHandle; the receiver maps it once (cudaIpcOpenMemHandle) and only
// ever reads it. Message k of a channel:
//
//   sender                                      receiver
//   (message k-1 was TAKEN: the outbox is free)
//   copy buf -> outbox on the send stream,
//     after the compute queued before gpu_isend
//   see the copy finish (polled)
//   READY(k, bytes, outbox generation, handle) ->  (its receive posted)
//                                                copy outbox -> buf on the receive
//                                                  stream, after the compute queued
//                                                  before gpu_irecv
//                                                see the copy finish (polled)
//                                             <- TAKEN(k); the receive is complete
//   the send is complete
//
// Why a message is never read half-written: READY leaves only after the sender's
// host has seen the copy into the outbox finish, and the receiver's copy starts
// only after READY has arrived; a finished copy's writes are visible to every
// later reader of that memory, whichever process queued it (the argument of the
// IPC ring, comm_cuda_ipc.cu). Why it is never overwritten while read: the next
// copy into the outbox starts only after TAKEN, which the receiver sends after
// its copy out has finished. So one outbox per channel carries one message at a
// time, and a send completes when it is TAKEN: the host transports' rule for a
// message larger than their channel, which the pipeline's engine is built for
// (it posts its receives before it waits for its sends).
//
// Growing: a message larger than the outbox gets a new, larger one (generation
// g+1; its handle travels in the READY). The old one stays allocated while the
// receiver may still map it — CUDA leaves freeing memory another process maps
// undefined — until a TAKEN reports that the receiver maps g+1 (it closes g
// before it opens g+1).
//
// The host messages. Both directions of a pair share one host channel, so a
// member's READYs (for its sends) and TAKENs (for its receives) reach the peer in
// the order sent. A member keeps at most one host receive posted per peer, and
// only while a control message from it is due (its first send waits for TAKEN,
// its first receive for READY); what arrives is dispatched by its tag, and a
// READY that comes before its receive was posted waits in the channel (at most
// one: its sender waits for TAKEN before the next). Every send completes only
// at TAKEN and every receive only once its TAKEN has left, so when no message is
// in flight no control message is on the wire and no control receive is posted:
// the group's other host traffic (the pipeline's loss, a collective) never
// meets one. Control messages are not payload: they are taken back out of the
// counters, as the ring's handshakes are; the payload counts as point-to-point.

// The control messages and the requests: comm_cuda_p2p.cuh.

// ================================================================ 2. channels

typedef struct {
    GpuRequest *sends, *sends_tail;  // this member's messages to the peer, oldest first;
    GpuRequest *recvs, *recvs_tail;  // only the first of each queue is under way
    uint64_t n_sends, n_recvs;       // posted so far: the next one's number
    unsigned char *outbox;           // ours, for the peer to read
    size_t outbox_bytes;
    uint32_t gen;                    // its generation (0: none yet)
    cudaIpcMemHandle_t handle;
    unsigned char *retired;          // the outbox before the last growth, which the peer
    size_t retired_bytes;            // may still map
    unsigned char *inbox;            // the peer's outbox to us, mapped here
    uint32_t inbox_gen;
    CommRequest *ctl_recv;           // the one host receive posted from the peer
    Ctl ctl_in;
    int have_ready, have_taken;      // control messages arrived and not used yet
    Ctl ready, taken;
} Chan;

struct GpuP2P {
    cudaStream_t compute;                   // the CUDA backend's stream
    cudaStream_t send_stream, recv_stream;  // the copies, beside the compute
    Chan ch[COMM_MAX_RANKS];                // by peer
};

static GpuP2P *p2p_state(GpuComm *gc) {
    if (gc->p2p) return gc->p2p;
    GpuP2P *s = (GpuP2P *)calloc(1, sizeof *s);
    CHECK(s, "out of host memory");
    s->compute = ((CudaBackend *)gc->ctx->backend)->stream;
    // Non-blocking: they must not wait for the legacy default stream either.
    CUDA_CHECK(cudaStreamCreateWithFlags(&s->send_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamCreateWithFlags(&s->recv_stream, cudaStreamNonBlocking));
    gc->p2p = s;
    return s;
}

// What a diagnostic says about r: the group, the message, the step it is at.
static void describe(const GpuComm *gc, const GpuRequest *r, char *buf, size_t n) {
    const Group *g = gc->g;
    const Chan *ch = &gc->p2p->ch[r->peer];
    const GpuRequest *first = r->is_send ? ch->sends : ch->recvs;
    char where[200];
    if (r->complete)
        snprintf(where, sizeof where, "complete");
    else if (r != first)
        snprintf(where, sizeof where, "queued behind message #%llu of the same channel (one "
                 "message at a time per direction)", (unsigned long long)first->seq);
    else if (r->state == ST_COPYING)
        snprintf(where, sizeof where, "the GPU has not finished copying it %s",
                 r->is_send ? "into this rank's outbox" : "out of the peer's outbox");
    else if (r->is_send && r->state == ST_ANNOUNCED && !r->taken)
        snprintf(where, sizeof where, "announced (READY); the peer has not TAKEN it: has it "
                 "posted the matching receive?");
    else if (!r->is_send && r->state == ST_QUEUED)
        snprintf(where, sizeof where, "the peer has not announced it (no READY): has it posted "
                 "the matching send?");
    else
        snprintf(where, sizeof where, "its %s has not left this rank's host transport",
                 r->is_send ? "READY" : "TAKEN");
    snprintf(buf, n, "point-to-point on GPU buffers on group %s (%d ranks, id %08x): %s message "
             "#%llu (%zu bytes) %s member %d (world rank %d) over CUDA IPC; %s", g->name, g->size,
             g->id, r->is_send ? "sending" : "receiving", (unsigned long long)r->seq, r->bytes,
             r->is_send ? "to" : "from", r->peer, g->ranks[r->peer], where);
}

CHECK_NORETURN static void die_waiting(GpuComm *gc, const GpuRequest *r, const char *why) {
    char d[480];
    describe(gc, r, d, sizeof d);
    if (strcmp(why, "timeout") == 0)
        DIE("timeout after %.1f s in %s. Usual causes: the ranks posted different messages "
            "(peers, sizes or order), a receive was never posted, or the peer is stuck or dead",
            comm_timeout(gc->c), d);
    DIE("%s, in %s", why, d);
}

// 1 once the work before ev has run, 0 while it has not; a CUDA error ends the run.
static int event_done(GpuComm *gc, const GpuRequest *r, cudaEvent_t ev) {
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaSuccess) return 1;
    if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();  // an answer, not an error (see comm_cuda.cu's poll_event)
        return 0;
    }
    char d[480];
    describe(gc, r, d, sizeof d);
    DIE("CUDA error %s (%s) in %s", cudaGetErrorName(e), cudaGetErrorString(e), d);
}

// Control messages, taken back out of the counters (see the protocol).
static CollKind counted_as(const GpuComm *gc) {
    return gc->c->cur_group == gc->g ? gc->c->cur_kind : COLL_P2P;
}
static CommRequest *ctl_isend(GpuComm *gc, int peer, const Ctl *m) {
    CommRequest *r = comm_isend(gc->c, gc->g, peer, m, sizeof *m);
    CollKind k = counted_as(gc);
    gc->c->counters[k].bytes_sent -= sizeof *m;
    if (k == COLL_P2P) gc->c->counters[k].calls--;
    return r;
}
static CommRequest *ctl_irecv(GpuComm *gc, int peer, Ctl *m) {
    CommRequest *r = comm_irecv(gc->c, gc->g, peer, m, sizeof *m, RECV_COPY, DT_F32);
    gc->c->counters[counted_as(gc)].bytes_recv -= sizeof *m;
    return r;
}

// The control message `got` must be about r: its number and its size.
static void ctl_check(GpuComm *gc, const GpuRequest *r, const Ctl *got) {
    if (got->seq == r->seq && got->bytes == r->bytes) return;
    char d[480];
    describe(gc, r, d, sizeof d);
    DIE("ranks disagree in %s: the peer's %s is for message #%llu of %llu bytes (do both ranks "
        "post the same messages in the same order?)", d, got->tag == P2P_READY ? "READY" : "TAKEN",
        (unsigned long long)got->seq, (unsigned long long)got->bytes);
}

static void free_device(GpuComm *gc, unsigned char **p, size_t *bytes) {
    if (!*p) return;
    CUDA_CHECK(cudaFree(*p));
    ledger_release(&gc->ctx->ledger, MEM_COMM, *bytes);
    *p = NULL;
    *bytes = 0;
}

// A larger outbox for the channel to `peer`, a new generation. The old one is
// retired, not freed: the peer maps it until its TAKEN names the new one.
static void outbox_grow(GpuComm *gc, Chan *ch, int peer, size_t bytes) {
    size_t chunk = (size_t)2 << 20;  // rounded up: a few growths, not one per size
    size_t want = (bytes + chunk - 1) / chunk * chunk;
    // Growing happens only once the last message is TAKEN, and that TAKEN freed
    // anything older than the outbox it named: at most one is ever retired.
    CHECK(!ch->retired, "point-to-point to member %d of group %s: an outbox retired twice",
          peer, gc->g->name);
    ch->retired = ch->outbox;
    ch->retired_bytes = ch->outbox_bytes;
    ledger_charge(&gc->ctx->ledger, MEM_COMM, want);
    cudaError_t e = cudaMalloc((void **)&ch->outbox, want);
    if (e != cudaSuccess) {
        char w[32];
        format_bytes(want, w, sizeof w);
        DIE("out of memory on cuda:%d: cudaMalloc refused %s for the point-to-point outbox to "
            "member %d of group %s (%s)", gc->device, w, peer, gc->g->name, cudaGetErrorString(e));
    }
    ch->outbox_bytes = want;
    ch->gen++;
    CUDA_CHECK(cudaIpcGetMemHandle(&ch->handle, ch->outbox));
}

// Maps the peer's outbox of generation m->gen in place of the one mapped. Our
// receive stream is idle: the receive before this one finished its copy out.
static void inbox_map(Chan *ch, const Ctl *m) {
    if (ch->inbox) CUDA_CHECK(cudaIpcCloseMemHandle(ch->inbox));
    ch->inbox = NULL;
    // LazyEnablePeerAccess: on another GPU of this machine, P2P is enabled on
    // first use; on the same GPU it changes nothing.
    CUDA_CHECK(cudaIpcOpenMemHandle((void **)&ch->inbox, m->handle,
                                    cudaIpcMemLazyEnablePeerAccess));
    ch->inbox_gen = m->gen;
}

// ================================================================ 3. moving a message along

// Removes the first request of a queue: it is complete.
static void finish(GpuRequest **head, GpuRequest **tail, GpuRequest *r) {
    r->state = ST_DONE;
    r->complete = 1;
    *head = r->next;
    if (!*head) *tail = NULL;
    r->next = NULL;
}

// One step of the channel's first send, if it can take one: 1 if it did.
static int send_step(GpuComm *gc, int peer) {
    GpuP2P *s = gc->p2p;
    Chan *ch = &s->ch[peer];
    GpuRequest *r = ch->sends;
    if (!r) return 0;
    if (r->state == ST_QUEUED) {  // first in line: the message before it was TAKEN
        if (r->bytes) {
            if (r->bytes > ch->outbox_bytes) outbox_grow(gc, ch, peer, r->bytes);
            CUDA_CHECK(cudaStreamWaitEvent(s->send_stream, r->after, 0));
            copy_async(ch->outbox, r->buf, r->bytes, s->send_stream);
        }
        CUDA_CHECK(cudaEventRecord(r->copied, s->send_stream));
        r->state = ST_COPYING;
        return 1;
    }
    if (r->state == ST_COPYING) {
        if (!event_done(gc, r, r->copied)) return 0;
        r->msg = Ctl{P2P_READY, ch->gen, r->seq, r->bytes, ch->handle};
        r->ctl = ctl_isend(gc, peer, &r->msg);
        r->state = ST_ANNOUNCED;
        return 1;
    }
    int moved = 0;  // ANNOUNCED: READY must leave, TAKEN must come
    if (r->ctl && comm_test(gc->c, r->ctl)) {
        comm_wait(gc->c, &r->ctl, 1);
        r->ctl = NULL;
        moved = 1;
    }
    if (ch->have_taken) {
        ch->have_taken = 0;
        ctl_check(gc, r, &ch->taken);
        if (ch->retired && ch->taken.gen == ch->gen)  // the peer has let go of the old one
            free_device(gc, &ch->retired, &ch->retired_bytes);
        r->taken = 1;
        moved = 1;
    }
    if (r->taken && !r->ctl) {
        finish(&ch->sends, &ch->sends_tail, r);
        moved = 1;
    }
    return moved;
}

// One step of the channel's first receive, if it can take one: 1 if it did.
static int recv_step(GpuComm *gc, int peer) {
    GpuP2P *s = gc->p2p;
    Chan *ch = &s->ch[peer];
    GpuRequest *r = ch->recvs;
    if (!r) return 0;
    if (r->state == ST_QUEUED) {
        if (!ch->have_ready) return 0;
        ch->have_ready = 0;
        ctl_check(gc, r, &ch->ready);
        if (r->bytes) {
            if (ch->ready.gen != ch->inbox_gen) inbox_map(ch, &ch->ready);
            CUDA_CHECK(cudaStreamWaitEvent(s->recv_stream, r->after, 0));
            copy_async(r->buf, ch->inbox, r->bytes, s->recv_stream);
        }
        CUDA_CHECK(cudaEventRecord(r->copied, s->recv_stream));
        r->state = ST_COPYING;
        return 1;
    }
    if (r->state == ST_COPYING) {
        if (!event_done(gc, r, r->copied)) return 0;
        r->msg = Ctl{P2P_TAKEN, ch->inbox_gen, r->seq, r->bytes, {}};
        r->ctl = ctl_isend(gc, peer, &r->msg);
        r->state = ST_ACKING;
        return 1;
    }
    if (!comm_test(gc->c, r->ctl)) return 0;  // ACKING
    comm_wait(gc->c, &r->ctl, 1);
    r->ctl = NULL;
    finish(&ch->recvs, &ch->recvs_tail, r);
    return 1;
}

// The host receive of control messages from the peer: posted while one is due,
// dispatched by its tag when it arrives. 1 if a message arrived.
static int ctl_step(GpuComm *gc, int peer) {
    Chan *ch = &gc->p2p->ch[peer];
    if (!ch->ctl_recv) {
        const GpuRequest *s = ch->sends, *r = ch->recvs;
        int due = (s && s->state == ST_ANNOUNCED && !s->taken && !ch->have_taken) ||
                  (r && r->state == ST_QUEUED && !ch->have_ready);
        if (!due) return 0;
        ch->ctl_recv = ctl_irecv(gc, peer, &ch->ctl_in);
    }
    if (!comm_test(gc->c, ch->ctl_recv)) return 0;
    comm_wait(gc->c, &ch->ctl_recv, 1);
    ch->ctl_recv = NULL;
    const Ctl *m = &ch->ctl_in;
    if (m->tag == P2P_READY && !ch->have_ready) {
        ch->ready = *m;
        ch->have_ready = 1;
    } else if (m->tag == P2P_TAKEN && !ch->have_taken) {
        ch->taken = *m;
        ch->have_taken = 1;
    } else {
        DIE("point-to-point on GPU buffers on group %s: member %d (world rank %d) sent control "
            "message %u (message #%llu) while an earlier one was unused: the ranks are out of "
            "step", gc->g->name, peer, gc->g->ranks[peer], m->tag, (unsigned long long)m->seq);
    }
    return 1;
}

// Everything the channel to and from `peer` can do now; 1 if anything moved.
static int chan_progress(GpuComm *gc, int peer) {
    int any = 0, moved;
    do {  // `|`, not `||`: every part gets its turn
        moved = ctl_step(gc, peer) | send_step(gc, peer) | recv_step(gc, peer);
        any |= moved;
    } while (moved);
    return any;
}

// ================================================================ 4. the API

static GpuRequest *post(GpuComm *gc, int is_send, int peer, void *buf, size_t bytes) {
    const char *what = is_send ? "gpu_isend" : "gpu_irecv";
    CHECK(gc, "%s: no GpuComm (gpu_comm_new)", what);
    const Group *g = gc->g;
    CHECK(peer >= 0 && peer < g->size && peer != g->rank, "%s on group %s: peer %d is not another "
          "member of the %d-rank group", what, g->name, peer, g->size);
    CHECK(buf || bytes == 0, "%s on group %s: NULL buffer of %zu bytes", what, g->name, bytes);
    if (gc->algo == GPU_NCCL) return nccl_p2p_post(gc, is_send, peer, buf, bytes);
    GpuP2P *s = p2p_state(gc);
    Chan *ch = &s->ch[peer];
    GpuRequest *r = p2p_request(gc, is_send, peer, buf, bytes, is_send ? ch->n_sends++ : ch->n_recvs++);
    CUDA_CHECK(cudaEventCreateWithFlags(&r->copied, cudaEventDisableTiming));
    GpuRequest **head = is_send ? &ch->sends : &ch->recvs;
    GpuRequest **tail = is_send ? &ch->sends_tail : &ch->recvs_tail;
    if (*tail) (*tail)->next = r;
    else *head = r;
    *tail = r;
    // Payload, as comm_isend / comm_irecv count theirs.
    gc_count_bytes(gc, is_send ? bytes : 0, is_send ? 0 : bytes);
    if (is_send && counted_as(gc) == COLL_P2P) gc->c->counters[COLL_P2P].calls++;
    chan_progress(gc, peer);  // a free channel starts the copy now, not at the next test
    return r;
}

extern "C" GpuRequest *gpu_isend(GpuComm *gc, int peer, const void *buf, size_t bytes) {
    return post(gc, 1, peer, (void *)buf, bytes);
}

extern "C" GpuRequest *gpu_irecv(GpuComm *gc, int peer, void *buf, size_t bytes) {
    return post(gc, 0, peer, buf, bytes);
}

extern "C" int gpu_test(GpuComm *gc, GpuRequest *r) {
    if (gc->algo == GPU_NCCL) return nccl_p2p_test(gc, r);
    if (!r->complete) chan_progress(gc, r->peer);
    return r->complete;
}

static void free_request(GpuRequest *r) {
    CUDA_CHECK(cudaEventDestroy(r->after));
    CUDA_CHECK(cudaEventDestroy(r->copied));
    free(r);
}

// Moves every request of reqs[0..n) along until the first `need` are complete;
// gives up after the comm timeout, or when a peer's process has gone.
static void wait_for(GpuComm *gc, GpuRequest **reqs, int n, int need) {
    double start = now_seconds(), last_moved = start, next_check = start + 0.1;
    Comm *c = gc->c;
    for (;;) {
        int moved = 0, remaining = 0;
        for (int i = 0; i < n; i++) {
            if (reqs[i]->complete) continue;
            moved |= chan_progress(gc, reqs[i]->peer);
            if (!reqs[i]->complete && i < need) remaining++;
        }
        if (remaining == 0) return;
        double now = now_seconds();
        if (moved) {
            last_moved = now;
            continue;
        }
        gc_backoff(now - last_moved);
        if (now < next_check) continue;
        next_check = now + 0.1;  // every 100 ms: the clock, and the peers we wait for
        for (int i = 0; i < n; i++) {
            if (reqs[i]->complete) continue;
            if (c->ops->peer_dead && c->ops->peer_dead(c, gc->g->ranks[reqs[i]->peer]))
                die_waiting(gc, reqs[i], "the peer's process has exited");
            if (i < need && now - start > comm_timeout(c)) die_waiting(gc, reqs[i], "timeout");
        }
    }
}

extern "C" void gpu_wait(GpuComm *gc, GpuRequest **reqs, int n) {
    if (gc->algo == GPU_NCCL) return nccl_p2p_wait(gc, reqs, n, n);
    wait_for(gc, reqs, n, n);
    for (int i = 0; i < n; i++) free_request(reqs[i]);
}

extern "C" void gpu_wait_first(GpuComm *gc, GpuRequest **reqs, int n) {
    if (gc->algo == GPU_NCCL) return nccl_p2p_wait(gc, reqs, n, n > 0 ? 1 : 0);
    wait_for(gc, reqs, n, n > 0 ? 1 : 0);
    if (n > 0) free_request(reqs[0]);
}

// Over NCCL nothing needs connecting up front beyond what nccl_p2p_prepare does;
// over CUDA IPC the first message to a peer sets its channel up.
extern "C" void gpu_p2p_prepare(GpuComm *gc) {
    if (gc && gc->algo == GPU_NCCL) nccl_p2p_prepare(gc);
}

// The teardown (from ipc_free, a collective): every message must be complete.
void p2p_unmap(GpuComm *gc) {
    GpuP2P *s = gc->p2p;
    if (!s) return;
    for (int q = 0; q < gc->g->size; q++) {
        Chan *ch = &s->ch[q];
        CHECK(!ch->sends && !ch->recvs && !ch->ctl_recv && !ch->have_ready, "gpu_comm_free on "
              "group %s with point-to-point messages to or from member %d still in flight",
              gc->g->name, q);
        if (ch->inbox) CUDA_CHECK(cudaIpcCloseMemHandle(ch->inbox));
        ch->inbox = NULL;
    }
}

void p2p_free(GpuComm *gc) {
    GpuP2P *s = gc->p2p;
    if (!s) return;
    for (int q = 0; q < gc->g->size; q++) {
        free_device(gc, &s->ch[q].outbox, &s->ch[q].outbox_bytes);
        free_device(gc, &s->ch[q].retired, &s->ch[q].retired_bytes);
    }
    CUDA_CHECK(cudaStreamDestroy(s->send_stream));
    CUDA_CHECK(cudaStreamDestroy(s->recv_stream));
    free(s);
    gc->p2p = NULL;
}
