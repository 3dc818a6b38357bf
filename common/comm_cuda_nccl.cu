// comm_cuda_nccl.cu — the GPU collectives over NCCL (one process per GPU).
//
// Member 0 of the group creates the unique id (it names a bootstrap socket on
// its host) and sends it to the others over the host transport; then every
// member joins with ncclCommInitRankConfig. The communicator is nonblocking, so
// that nothing inside NCCL can block without our timeout: every call is
// followed by nccl_settle, which polls its state. NCCL's collectives need equal
// shards, so reduce-scatter and all-gather of a count that the group size does
// not divide go through a padded copy (shard_range's uneven shards placed at
// equal strides).
#include "comm_cuda_p2p.cuh"
#include "timer.h"

// Blocks until NCCL's state leaves "in progress". A nonblocking communicator
// returns ncclInProgress from its set-up and may from any call; the state must
// settle before the next call. r is what the call returned.
void nccl_settle(GpuComm *gc, ncclResult_t r, const char *what) {
    double start = now_seconds();
    while (r == ncclInProgress) {
        double now = now_seconds();
        if (now - start > comm_timeout(gc->c)) {
            char w[160];
            gc_where(gc, w, sizeof w);
            ncclCommAbort(gc->nccl);  // frees NCCL's threads; we are about to exit anyway
            DIE("timeout after %.1f s in %s: %s has not completed (did every member of the "
                "group reach it?)", comm_timeout(gc->c), w, what);
        }
        gc_backoff(now - start);
        ncclResult_t q = ncclCommGetAsyncError(gc->nccl, &r);
        if (q != ncclSuccess) r = q;
    }
    if (r != ncclSuccess) {
        char w[160];
        gc_where(gc, w, sizeof w);
        DIE("NCCL error %d in %s: %s failed: %s (%s)", (int)r, w, what, ncclGetErrorString(r),
            gc->nccl ? ncclGetLastError(gc->nccl) : "no communicator");
    }
}

void nccl_init(GpuComm *gc) {
    Group *g = gc->g;
    ncclUniqueId id;
    if (g->rank == 0) {
        NCCL_CHECK(ncclGetUniqueId(&id));
        for (int q = 1; q < g->size; q++) comm_send(gc->c, g, q, &id, sizeof id);
    } else {
        comm_recv(gc->c, g, 0, &id, sizeof id);
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;  // never block inside NCCL: we poll, with the timeout
    ncclResult_t r = ncclCommInitRankConfig(&gc->nccl, g->size, id, g->rank, &cfg);
    nccl_settle(gc, r, "ncclCommInitRankConfig");
}

static ncclDataType_t nccl_type(DType dt) { return dt == DT_F32 ? ncclFloat32 : ncclBfloat16; }

// Grow-only device staging for the padded layout, charged as MEM_COMM.
static unsigned char *nccl_staging(GpuComm *gc, size_t bytes) {
    if (bytes <= gc->pad_bytes) return gc->pad;
    if (gc->pad) {  // our stream is idle: every collective ends with gc_sync
        CUDA_CHECK(cudaFree(gc->pad));
        ledger_release(&gc->ctx->ledger, MEM_COMM, gc->pad_bytes);
    }
    gc->pad = NULL;
    gc->pad_bytes = 0;
    ledger_charge(&gc->ctx->ledger, MEM_COMM, bytes);
    CUDA_CHECK(cudaMalloc((void **)&gc->pad, bytes));
    gc->pad_bytes = bytes;
    return gc->pad;
}

// The ring's per-rank traffic, which is what NCCL's ring moves (NCCL does not
// say what it moved; its tree algorithm moves the same for all-reduce).
static void nccl_count(GpuComm *gc, double factor, size_t bytes) {
    size_t b = (size_t)(factor * (double)bytes);
    gc_count_bytes(gc, b, b);
}

void nccl_allreduce(GpuComm *gc, void *buf, size_t count, DType dt) {
    int p = gc->g->size;
    size_t bytes = count * dtype_size(dt);
    if (count == 0) return;
    nccl_settle(gc, ncclAllReduce(buf, buf, count, nccl_type(dt), ncclSum, gc->nccl, gc->stream),
                "ncclAllReduce");
    gc_sync(gc, "running ncclAllReduce", bytes);
    nccl_count(gc, 2.0 * (p - 1) / p, bytes);
}

void nccl_reduce_scatter(GpuComm *gc, void *buf, size_t count, DType dt) {
    int p = gc->g->size, r = gc->g->rank;
    size_t es = dtype_size(dt), m = (count + p - 1) / p, lo, len;
    unsigned char *b = (unsigned char *)buf;
    if (count == 0) return;
    if (count % p == 0) {  // shard_range's shards are NCCL's: in place
        nccl_settle(gc, ncclReduceScatter(b, b + r * m * es, m, nccl_type(dt), ncclSum, gc->nccl,
                                          gc->stream), "ncclReduceScatter");
    } else {
        unsigned char *pad = nccl_staging(gc, m * p * es);
        for (int q = 0; q < p; q++) {  // shard q to offset q*m; the gaps are never read back
            shard_of(count, p, q, &lo, &len);
            copy_async(pad + q * m * es, b + lo * es, len * es, gc->stream);
        }
        nccl_settle(gc, ncclReduceScatter(pad, pad + r * m * es, m, nccl_type(dt), ncclSum,
                                          gc->nccl, gc->stream), "ncclReduceScatter");
        shard_of(count, p, r, &lo, &len);
        copy_async(b + lo * es, pad + r * m * es, len * es, gc->stream);
    }
    gc_sync(gc, "running ncclReduceScatter", count * es);
    nccl_count(gc, (double)(p - 1) / p, count * es);
}

void nccl_all_gather(GpuComm *gc, void *buf, size_t count, DType dt) {
    int p = gc->g->size, r = gc->g->rank;
    size_t es = dtype_size(dt), m = (count + p - 1) / p, lo, len;
    unsigned char *b = (unsigned char *)buf;
    if (count == 0) return;
    if (count % p == 0) {
        nccl_settle(gc, ncclAllGather(b + r * m * es, b, m, nccl_type(dt), gc->nccl, gc->stream),
                    "ncclAllGather");
    } else {
        unsigned char *pad = nccl_staging(gc, m * p * es);
        shard_of(count, p, r, &lo, &len);
        copy_async(pad + r * m * es, b + lo * es, len * es, gc->stream);
        nccl_settle(gc, ncclAllGather(pad + r * m * es, pad, m, nccl_type(dt), gc->nccl,
                                      gc->stream), "ncclAllGather");
        for (int q = 0; q < p; q++) {
            shard_of(count, p, q, &lo, &len);
            copy_async(b + lo * es, pad + q * m * es, len * es, gc->stream);
        }
    }
    gc_sync(gc, "running ncclAllGather", count * es);
    nccl_count(gc, (double)(p - 1) / p, count * es);
}

void nccl_broadcast(GpuComm *gc, void *buf, size_t count, DType dt, int root) {
    size_t bytes = count * dtype_size(dt);
    if (count == 0) return;
    nccl_settle(gc, ncclBroadcast(buf, buf, count, nccl_type(dt), root, gc->nccl, gc->stream),
                "ncclBroadcast");
    gc_sync(gc, "running ncclBroadcast", bytes);
    // A pipelined chain: the root sends the buffer once, every other member receives it once.
    gc_count_bytes(gc, gc->g->rank == root ? bytes : 0, gc->g->rank == root ? 0 : bytes);
}

// Blocks of any size (stage 03's shards): NCCL's reduce-scatter and all-gather
// want equal blocks, so member i's block is reduced to member i (ncclReduce)
// or broadcast from it (ncclBroadcast), all in one group call, which NCCL runs
// as one fused operation.
static void per_member(GpuComm *gc, void *buf, size_t count, const Spans *sp, DType dt,
                       int reduce) {
    int p = gc->g->size;
    size_t es = dtype_size(dt);
    unsigned char *b = (unsigned char *)buf;
    const char *what = reduce ? "ncclReduce (reduce-scatter over blocks)"
                              : "ncclBroadcast (all-gather over blocks)";
    if (count == 0) return;
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < p; i++) {
        unsigned char *at = b + sp->lo[i] * es;
        if (!sp->len[i]) continue;
        if (reduce)
            NCCL_CHECK(ncclReduce(at, at, sp->len[i], nccl_type(dt), ncclSum, i, gc->nccl,
                                  gc->stream));
        else
            NCCL_CHECK(ncclBroadcast(at, at, sp->len[i], nccl_type(dt), i, gc->nccl, gc->stream));
    }
    nccl_settle(gc, ncclGroupEnd(), what);
    gc_sync(gc, what, count * es);
    nccl_count(gc, (double)(p - 1) / p, count * es);
}

void nccl_reduce_scatter_v(GpuComm *gc, void *buf, size_t count, const Spans *sp, DType dt) {
    per_member(gc, buf, count, sp, dt, 1);
}

void nccl_all_gather_v(GpuComm *gc, void *buf, size_t count, const Spans *sp, DType dt) {
    per_member(gc, buf, count, sp, dt, 0);
}

void nccl_free(GpuComm *gc) {
    nccl_p2p_free(gc);  // its stream, before the communicator goes
    if (gc->nccl) {
        nccl_settle(gc, ncclCommFinalize(gc->nccl), "ncclCommFinalize");
        NCCL_CHECK(ncclCommDestroy(gc->nccl));
        gc->nccl = NULL;
    }
    if (gc->pad) {
        CUDA_CHECK(cudaFree(gc->pad));
        ledger_release(&gc->ctx->ledger, MEM_COMM, gc->pad_bytes);
        gc->pad = NULL;
        gc->pad_bytes = 0;
    }
}
