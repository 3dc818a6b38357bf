// pp_train.c — training with the layers cut into pipeline stages, composed with
// tensor parallelism inside each stage and data parallelism across pipelines.
//
//   build/pp_train --np 2 --pp 2 --schedule 1f1b --grad-accum 8 --preset small
//   build/pp_train --np 4 --pp 2 --schedule interleaved --chunks 2 --grad-accum 8
//   build/pp_train --np 8 --pp 2 --tp 2 --grad-accum 4         # dp 2 x tp 2 x pp 2
//   build/pp_train --np 2 --pp 2 --trace runs/pp               # the last step's timeline
//   build/pp_train --np 2 --pp 2 --device cuda                 # GPUs: device-to-device messages
//
// The step's micro-batches are the trainer's gradient accumulation (--grad-accum
// m): one optimizer step per m micro-batches, whatever the schedule. Every rank
// prints a MEM line (its ledger's peaks); --trace writes the last step's timeline
// (Chrome JSON and a table for the Gantt charts).
//
// --device cuda: every rank computes on a GPU (ranks share GPUs round-robin).
// The pipeline's messages go device to device over CUDA IPC (comm_cuda.h's
// gpu_isend / gpu_irecv: ranks of one machine), tensor parallelism and DDP use
// the GPU collectives (NCCL, or the IPC ring on a shared GPU), and the trace
// holds the actions' GPU times (CUDA events), not the times the host queued them.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "pipe.h"

static void barrier(GPT *g, void *arg) {
    (void)g;
    Pipe *P = arg;
    comm_barrier(P->comm, comm_world(P->comm));
}

// The driver's own flags (the training flags and the extensions' come from trainer.h).
typedef struct {
    int np, nodes, pp, tp, sp, chunks, kill_rank, kill_at, zero1;
    double timeout;
    const char *sched, *algo, *transport, *cluster, *trace;
} Opts;

static int opts_flags(Opts *o, Flag *rows) {
    *o = (Opts){.np = 1, .nodes = 1, .tp = 1, .kill_rank = -1, .kill_at = -1, .timeout = 60,
                .sched = "1f1b", .algo = "ring", .transport = "shm"};
    Flag f[] = {
        F_INT("--np", &o->np, 1, COMM_MAX_RANKS, "ranks to launch on this machine (built-in launcher)"),
        F_NODES(&o->nodes, &o->cluster),
        F_INT_SENTINEL("--pp", &o->pp, 1, PP_MAX_STAGES, "0 = the ranks / --tp", "pipeline stages"),
        F_INT("--tp", &o->tp, 1, COMM_MAX_RANKS, "tensor-parallel ranks inside each stage"),
        F_BOOL("--sp", &o->sp, "sequence parallelism inside each stage (with --tp >= 2)"),
        F_BOOL("--zero1", &o->zero1, "ZeRO-1 over the data-parallel replicas (stage 03's optimizer "
               "sharding)"),
        F_CHOICE("--schedule", &o->sched, "gpipe|1f1b|interleaved|zb-h1", "the pipeline schedule"),
        F_INT("--chunks", &o->chunks, 0, PP_MAX_CHUNKS, "model chunks per rank (interleaved: >= 2; "
              "0 = 2 there, 1 for the others)"),
        F_CHOICE("--algo", &o->algo, "ring|naive|mpi", "the host collectives (mpi: under mpirun)"),
        F_CHOICE("--transport", &o->transport, "shm|mpi|tcp", "how ranks talk (mpi: under mpirun)"),
        F_DOUBLE("--timeout", &o->timeout, 0.1, 86400, "seconds any wait may take before the rank gives up"),
        F_STRING("--trace", &o->trace, "write the last step's timeline to TRACE.json and TRACE.dat"),
        F_INT_SENTINEL("--kill-rank", &o->kill_rank, 0, COMM_MAX_RANKS - 1, "-1 = none",
                       "fault test: this rank dies (SIGKILL) ..."),
        F_INT_SENTINEL("--kill-at", &o->kill_at, 0, 1 << 30, "-1 = unset",
                       "... at this action of its first step's schedule"),
    };
    memcpy(rows, f, sizeof f);
    return FLAG_COUNT(f);
}

// Everything that can be wrong with the layout, said before any rank starts (o->pp and
// o->chunks resolved); the schedule, built and proved sound.
static PPSchedule *check_layout(Opts *o, const TrainJob *j, const CommConfig *cc) {
    const GPTConfig *cfg = &j->cfg;
    // (--elastic and --recompute are later stages' flags, where they are linked in.)
    if (flag_on(j->flags, j->nf, "--elastic"))
        flags_fail("--elastic: a pipeline cannot lose one rank (use ddp_train or sharded_train)");
    int world = comm_planned_size(cc), tp = o->tp;
    if (world % tp) flags_fail("--tp %d does not divide the %d ranks", tp, world);
    if (o->pp == 0) o->pp = world / tp;
    if (world % (tp * o->pp))
        flags_fail("--tp %d x --pp %d does not divide the %d ranks (--np)", tp, o->pp, world);
    if (o->zero1 && world / (tp * o->pp) == 1)
        flags_fail("--zero1 shards the optimizer over the data-parallel replicas: with --np %d, "
                   "--tp %d and --pp %d there is one (use --np %d --pp %d, or more ranks)", world,
                   tp, o->pp, 2 * tp * o->pp, o->pp);
    SchedKind kind;
    sched_parse(o->sched, &kind);
    char err[512];
    o->chunks = sched_chunks(kind, o->chunks);
    if (pp_error(cfg, o->pp, o->chunks, err, sizeof err)) flags_fail("%s", err);
    if (gpt_tp_error(cfg, tp, o->sp, j->a.batch, cfg->seq_len, err, sizeof err)) flags_fail("%s", err);
    if (kind == SCHED_ZB_H1 && tp > 1)
        flags_fail("--schedule zb-h1 splits the backward of the serial layers: not with --tp %d", tp);
    if (kind == SCHED_ZB_H1 && flag_is(j->flags, j->nf, "--recompute", "full"))
        flags_fail("--schedule zb-h1 keeps activations for its weight pass: not with --recompute full");
    if (strcmp(j->a.precision, "fp8") == 0)
        flags_fail("--precision fp8 is for one process or data parallelism (build/train, "
                   "build/ddp_train), not a pipeline yet");
    PPSchedule *S = sched_build(kind, o->pp, j->a.accum, o->chunks, err, sizeof err);
    if (!S) flags_fail("%s%s", err, strstr(err, "micro-batches") ? " (m is --grad-accum)" : "");
    if (sched_check(S, err, sizeof err))
        flags_fail("the %s schedule (%s) is not sound: %s", o->sched, sched_source(kind), err);
    if ((o->kill_rank >= 0) != (o->kill_at >= 0)) flags_fail("--kill-rank and --kill-at go together");
    return S;
}

// The mesh's groups, and on GPUs a GpuComm for each (collectives over its members, in
// the same order everywhere): the pipeline's for its point-to-point messages, TP's
// and DP's; NCCL where every rank has a GPU of its own, CUDA IPC where not.
typedef struct {
    Group dp, tp, pp;
    GpuComm *gdp, *gtp, *gpp;
} Mesh;

// The pipeline's GPU messages: over NCCL when every rank has a GPU of its own
// (GPU_AUTO), over CUDA IPC when ranks share one. NCCL runs each rank's messages in
// posting order (comm_cuda_p2p_nccl.cu), so the schedule must finish under that rule
// too. Every reference schedule does (tests/test_pp.c); one that cannot (an
// interleaved generator that posts each message at its compute) stays on CUDA IPC,
// which only the processes of one machine can use.
static GpuAlgo pipeline_gpu_algo(const Opts *o, const PPSchedule *S, Comm *c) {
    char err[512];
    if (o->pp == 1 || !sched_check_serialized(S, err, sizeof err)) return GPU_AUTO;
    if (comm_local_size(c) < comm_size(c))
        DIE("--device cuda --pp %d across machines: the pipeline's GPU messages go over NCCL, "
            "which runs each rank's messages in the order they were posted, and the %s "
            "schedule cannot finish that way: %s", o->pp, o->sched, err);
    if (comm_rank(c) == 0)
        log_info("the %s schedule cannot run over NCCL (its messages would deadlock in posting "
                 "order): the pipeline's GPU messages go over CUDA IPC", o->sched);
    return GPU_IPC;
}

static void mesh_init(Mesh *m, const Opts *o, const PPSchedule *S, TrainJob *j) {
    Comm *c = j->comm;
    int dp = comm_size(c) / (o->tp * o->pp);
    *m = (Mesh){0};
    comm_mesh(c, dp, o->tp, o->pp, &m->dp, &m->tp, &m->pp);
    if (j->dev != DEV_CUDA) return;
    if (o->pp > 1) {
        m->gpp = gpu_comm_new(c, &m->pp, &j->ctx, pipeline_gpu_algo(o, S, c));
        gpu_p2p_prepare(m->gpp);
    }
    if (o->tp > 1) m->gtp = gpu_comm_new(c, &m->tp, &j->ctx, GPU_AUTO);
    if (dp > 1) m->gdp = gpu_comm_new(c, &m->dp, &j->ctx, GPU_AUTO);
}

static void mesh_free(Mesh *m) {
    gpu_comm_free(m->gdp);  // collectives too: every member frees them in this order
    gpu_comm_free(m->gtp);
    gpu_comm_free(m->gpp);
}

// What the run is (the banner's label) and its layout (a checkpoint's manifest).
static void describe(const Opts *o, const Mesh *m, int accum, char *label, size_t n,
                     char *layout, size_t nl) {
    char chunk_words[32];
    snprintf(chunk_words, sizeof chunk_words, ", %d chunks a rank", o->chunks);
    snprintf(label, n, "PP %d (%s%s, %d micro-batches) x TP %d%s x DP %d%s%s%s", o->pp, o->sched,
             o->chunks > 1 ? chunk_words : "", accum, o->tp, o->sp ? " + SP" : "", m->dp.size,
             o->zero1 ? " (ZeRO-1)" : "", m->gpp ? "; the pipeline group on GPUs: " : "",
             m->gpp ? gpu_comm_describe(m->gpp) : "");
    snprintf(layout, nl, "dp=%d tp=%d pp=%d chunks=%d%s%s", m->dp.size, o->tp, o->pp, o->chunks,
             o->sp ? " sp" : "", o->zero1 ? " zero1" : "");
}

// Every rank's ledger (MEM, with its stage and micro-batches in flight) and, with
// --trace, the last step's timeline.
static void report(const Opts *o, const PPSchedule *S, const Mesh *m, Timeline *tl, TrainJob *j) {
    Ctx *ctx = &j->ctx;
    char where[64];
    snprintf(where, sizeof where, "stage=%d in_flight=%d", m->pp.rank,
             sched_max_in_flight(S, m->pp.rank));
    ledger_print_mem_line(&ctx->ledger, stdout, ctx->rank, where);
    if (!o->trace) return;
    timeline_write_prefix(tl, j->comm, comm_world(j->comm), o->trace);
}

int main(int argc, char **argv) {
    Opts o;
    Flag mine[16];
    int n = opts_flags(&o, mine);
    TrainJob j;
    train_job_parse(&j, argc, argv, mine, n, "pp_train [flags]",
                    "Pipeline parallelism (GPipe, 1F1B, interleaved 1F1B, zero-bubble ZB-H1) "
                    "composed with tensor and data parallelism over a dp x tp x pp mesh of ranks.");
    if (o.trace) timeline_check_output(o.trace);  // written at the end: a bad path fails now
    CommConfig cc = {.np = o.np, .timeout_s = o.timeout, .nodes = o.nodes, .cluster = o.cluster};
    transport_parse(o.transport, &cc.transport);
    PPSchedule *S = check_layout(&o, &j, &cc);
    char words[160];
    snprintf(words, sizeof words, "--pp=%d --tp=%d --sp=%d --zero1=%d --schedule=%s --chunks=%d "
             "--algo=%s", o.pp, o.tp, o.sp, o.zero1, o.sched, o.chunks, o.algo);
    train_job_launch(&j, &cc, words);  // from here on, one rank of many
    Mesh m;
    mesh_init(&m, &o, S, &j);
    Algo al;
    algo_parse(o.algo, &al);
    TensorParallel tps = {.comm = j.comm, .group = &m.tp, .algo = al, .gpu = m.gtp, .sp = o.sp};
    Timeline tl;
    timeline_init(&tl, o.trace != NULL);
    Pipe P;
    pipe_init(&P, j.comm, &m.pp, &m.dp, o.tp > 1 ? &tps : NULL, al, S, &tl);
    CHECK(o.kill_rank < j.ctx.world, "--kill-rank %d: there are %d ranks (0 to %d)", o.kill_rank,
          j.ctx.world, j.ctx.world - 1);
    if (j.ctx.rank == o.kill_rank) P.kill_at = o.kill_at;
    P.zero1 = o.zero1;
    P.gpu = m.gpp;
    P.gpu_dp = m.gdp;
    char label[400], layout[96];
    describe(&o, &m, j.a.accum, label, sizeof label, layout, sizeof layout);
    TrainHooks h = {.data_rank = m.dp.rank, .data_world = m.dp.size, .label = label,
                    .strategy = &P.strategy, .sync_params = barrier, .arg = &P, .layout = layout};
    train_run(&j, &h);
    report(&o, S, &m, &tl, &j);
    timeline_free(&tl);
    mesh_free(&m);
    sched_free(S);
    train_job_end(&j);
    return 0;
}
