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

int main(int argc, char **argv) {
    int np = 1, pp = 0, tp = 1, sp = 0, chunks = 0, kill_rank = -1, kill_at = -1, zero1 = 0;
    double timeout = 60;
    const char *sched = "1f1b", *algo = "ring", *transport = "shm", *trace = NULL;
    Flag mine[] = {
        F_INT("--np", &np, 1, COMM_MAX_RANKS, "ranks to launch on this machine (built-in launcher)"),
        F_INT_SENTINEL("--pp", &pp, 1, PP_MAX_STAGES, "0 = the ranks / --tp", "pipeline stages"),
        F_INT("--tp", &tp, 1, COMM_MAX_RANKS, "tensor-parallel ranks inside each stage"),
        F_BOOL("--sp", &sp, "sequence parallelism inside each stage (with --tp >= 2)"),
        F_BOOL("--zero1", &zero1, "ZeRO-1 over the data-parallel replicas (stage 03's optimizer "
               "sharding)"),
        F_CHOICE("--schedule", &sched, "gpipe|1f1b|interleaved|zb-h1", "the pipeline schedule"),
        F_INT("--chunks", &chunks, 0, PP_MAX_CHUNKS, "model chunks per rank (interleaved: >= 2; 0 = 2 there, 1 for the others)"),
        F_CHOICE("--algo", &algo, "ring|naive|mpi", "the host collectives (mpi: under mpirun)"),
        F_CHOICE("--transport", &transport, "shm|mpi|tcp", "how ranks talk (mpi: under mpirun)"),
        F_DOUBLE("--timeout", &timeout, 0.1, 86400, "seconds any wait may take before the rank gives up"),
        F_STRING("--trace", &trace, "write the last step's timeline to TRACE.json and TRACE.dat"),
        F_INT_SENTINEL("--kill-rank", &kill_rank, 0, COMM_MAX_RANKS - 1, "-1 = none",
                       "fault test: this rank dies (SIGKILL) ..."),
        F_INT_SENTINEL("--kill-at", &kill_at, 0, 1 << 30, "-1 = unset",
                       "... at this action of its first step's schedule"),
    };
    TrainJob j;
    train_job_parse(&j, argc, argv, mine, FLAG_COUNT(mine), "pp_train [flags]",
                    "Pipeline parallelism (GPipe, 1F1B, interleaved 1F1B, zero-bubble ZB-H1) "
                    "composed with tensor and data parallelism over a dp x tp x pp mesh of ranks.");
    const GPTConfig *cfg = &j.cfg;
    const TrainArgs *a = &j.a;
    if (trace) timeline_check_output(trace);  // written at the end: a bad path fails now
    // (--elastic and --recompute are later stages' flags, where they are linked in.)
    if (flag_on(j.flags, j.nf, "--elastic"))
        flags_fail("--elastic: a pipeline cannot lose one rank (use ddp_train or sharded_train)");
    // Everything that can be wrong with the layout is said before any rank starts.
    CommConfig cc = {.np = np, .timeout_s = timeout};
    transport_parse(transport, &cc.transport);
    int world = comm_planned_size(&cc);
    if (world % tp) flags_fail("--tp %d does not divide the %d ranks", tp, world);
    if (pp == 0) pp = world / tp;
    if (world % (tp * pp))
        flags_fail("--tp %d x --pp %d does not divide the %d ranks (--np)", tp, pp, world);
    if (zero1 && world / (tp * pp) == 1)
        flags_fail("--zero1 shards the optimizer over the data-parallel replicas: with --np %d, "
                   "--tp %d and --pp %d there is one (use --np %d --pp %d, or more ranks)", world,
                   tp, pp, 2 * tp * pp, pp);
    SchedKind kind;
    sched_parse(sched, &kind);
    char err[512];
    chunks = sched_chunks(kind, chunks);
    if (pp_error(cfg, pp, chunks, err, sizeof err)) flags_fail("%s", err);
    if (gpt_tp_error(cfg, tp, sp, a->batch, cfg->seq_len, err, sizeof err)) flags_fail("%s", err);
    if (kind == SCHED_ZB_H1 && tp > 1)
        flags_fail("--schedule zb-h1 splits the backward of the serial layers: not with --tp %d", tp);
    if (kind == SCHED_ZB_H1 && flag_is(j.flags, j.nf, "--recompute", "full"))
        flags_fail("--schedule zb-h1 keeps activations for its weight pass: not with --recompute full");
    if (strcmp(a->precision, "fp8") == 0)
        flags_fail("--precision fp8 is for one process or data parallelism (build/train, "
                   "build/ddp_train), not a pipeline yet");
    PPSchedule *S = sched_build(kind, pp, a->accum, chunks, err, sizeof err);
    if (!S) flags_fail("%s%s", err, strstr(err, "micro-batches") ? " (m is --grad-accum)" : "");
    if (sched_check(S, err, sizeof err))
        flags_fail("the %s schedule (%s) is not sound: %s", sched, sched_source(kind), err);
    if ((kill_rank >= 0) != (kill_at >= 0)) flags_fail("--kill-rank and --kill-at go together");
    Algo al;
    algo_parse(algo, &al);
    Device dev = j.dev;
    char words[160];
    snprintf(words, sizeof words, "--pp=%d --tp=%d --sp=%d --zero1=%d --schedule=%s --chunks=%d "
             "--algo=%s", pp, tp, sp, zero1, sched, chunks, algo);
    train_job_launch(&j, &cc, words);  // from here on, one rank of many
    Comm *c = j.comm;
    Ctx *ctx = &j.ctx;
    // The pipeline's GPU messages: over NCCL when every rank has a GPU of its own
    // (GPU_AUTO), over CUDA IPC when ranks share one. NCCL runs each rank's messages
    // in posting order (comm_cuda_p2p_nccl.cu), so the schedule must finish under
    // that rule too. Every reference schedule does (tests/test_pp.c); one that
    // cannot (an interleaved generator that posts each message at its compute)
    // stays on CUDA IPC, which only the processes of one machine can use.
    GpuAlgo pp_want = GPU_AUTO;
    if (dev == DEV_CUDA && pp > 1 && sched_check_serialized(S, err, sizeof err)) {
        if (comm_local_size(c) < comm_size(c))
            DIE("--device cuda --pp %d across machines: the pipeline's GPU messages go over "
                "NCCL, which runs each rank's messages in the order they were posted, and the "
                "%s schedule cannot finish that way: %s", pp, sched, err);
        pp_want = GPU_IPC;
        if (comm_rank(c) == 0)
            log_info("the %s schedule cannot run over NCCL (its messages would deadlock in "
                     "posting order): the pipeline's GPU messages go over CUDA IPC", sched);
    }

    int dp = comm_size(c) / (tp * pp);
    Group dpg, tpg, ppg;
    comm_mesh(c, dp, tp, pp, &dpg, &tpg, &ppg);
    // On GPUs each group gets its GpuComm (collectives over its members, in the
    // same order everywhere): the pipeline's for its point-to-point messages, TP's
    // and DP's; NCCL where every rank has a GPU of its own, CUDA IPC where not.
    GpuComm *gpp = NULL, *gtp = NULL, *gdp = NULL;
    if (dev == DEV_CUDA) {
        if (pp > 1) {
            gpp = gpu_comm_new(c, &ppg, ctx, pp_want);
            gpu_p2p_prepare(gpp);
        }
        if (tp > 1) gtp = gpu_comm_new(c, &tpg, ctx, GPU_AUTO);
        if (dp > 1) gdp = gpu_comm_new(c, &dpg, ctx, GPU_AUTO);
    }
    TensorParallel tps = {.comm = c, .group = &tpg, .algo = al, .gpu = gtp, .sp = sp};
    Timeline tl;
    timeline_init(&tl, trace != NULL);
    Pipe P;
    pipe_init(&P, c, &ppg, &dpg, tp > 1 ? &tps : NULL, al, S, &tl);
    CHECK(kill_rank < ctx->world, "--kill-rank %d: there are %d ranks (0 to %d)", kill_rank, ctx->world,
          ctx->world - 1);
    if (ctx->rank == kill_rank) P.kill_at = kill_at;
    P.zero1 = zero1;
    P.gpu = gpp;
    P.gpu_dp = gdp;
    char label[400], chunk_words[32];
    snprintf(chunk_words, sizeof chunk_words, ", %d chunks a rank", chunks);
    snprintf(label, sizeof label, "PP %d (%s%s, %d micro-batches) x TP %d%s x DP %d%s%s%s", pp,
             sched, chunks > 1 ? chunk_words : "", a->accum, tp, sp ? " + SP" : "", dp,
             zero1 ? " (ZeRO-1)" : "", gpp ? "; the pipeline group on GPUs: " : "",
             gpp ? gpu_comm_describe(gpp) : "");
    char layout[96];  // for a checkpoint's manifest
    snprintf(layout, sizeof layout, "dp=%d tp=%d pp=%d chunks=%d%s%s", dp, tp, pp, chunks,
             sp ? " sp" : "", zero1 ? " zero1" : "");
    TrainHooks h = {.data_rank = dpg.rank, .data_world = dp, .label = label,
                    .strategy = &P.strategy, .sync_params = barrier, .arg = &P, .layout = layout};
    train_run(&j, &h);

    char where[64];
    snprintf(where, sizeof where, "stage=%d in_flight=%d", ppg.rank, sched_max_in_flight(S, ppg.rank));
    ledger_print_mem_line(&ctx->ledger, stdout, ctx->rank, where);
    if (trace) {
        char json[1024], dat[1024];
        snprintf(json, sizeof json, "%s.json", trace);
        snprintf(dat, sizeof dat, "%s.dat", trace);
        int rc = timeline_write(&tl, c, comm_world(c), json, dat);
        if (ctx->rank == 0 && rc == 0) log_info("timeline of the last step: %s (Perfetto), %s", json, dat);
    }
    timeline_free(&tl);
    gpu_comm_free(gdp);  // collectives too: every member frees them in this order
    gpu_comm_free(gtp);
    gpu_comm_free(gpp);
    sched_free(S);
    train_job_end(&j);
    return 0;
}
