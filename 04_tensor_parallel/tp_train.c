// tp_train.c — training with every layer split over a tensor-parallel group, and
// data parallelism across groups.
//
//   build/tp_train --np 2 --tp 2 --preset small --steps 20        # TP = 2
//   build/tp_train --np 2 --tp 2 --sp                             # + sequence parallelism
//   build/tp_train --np 4 --tp 2                                  # a 2 (dp) x 2 (tp) mesh
//   mpirun -np 4 build/tp_train --transport mpi --algo mpi --tp 2
//   build/tp_train --np 2 --tp 2 --device cuda                    # NCCL, or CUDA IPC on one GPU
//
// The loop is common/trainer.c; tp_model.c's strategy builds this rank's pieces
// of the model and does the step. Every rank prints one MEM line (its ledger's
// peaks), one BYTES line (what it sent in the last step) and one TPCOMM line
// (the time its tensor-parallel collectives took in the last step), which the
// tests and the benchmark read.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "tp.h"

// While rank 0 measures the CPU's peak for MFU, the others wait here.
static void barrier(GPT *g, void *arg) {
    (void)g;
    TPTrain *s = arg;
    comm_barrier(s->tp.comm, comm_world(s->tp.comm));
}

int main(int argc, char **argv) {
    int nodes = 1;
    const char *cluster = NULL;
    int np = 1, tp = 0, sp = 0;
    double timeout = 60;
    const char *algo = "ring", *transport = "shm";
    Flag mine[] = {
        F_INT("--np", &np, 1, COMM_MAX_RANKS, "ranks to launch on this machine (built-in launcher)"),
        F_NODES(&nodes, &cluster),
        F_INT_SENTINEL("--tp", &tp, 1, COMM_MAX_RANKS, "0 = all ranks", "tensor-parallel ranks "
                       "per group; must divide the ranks and --heads (the rest is data parallel)"),
        F_BOOL("--sp", &sp, "sequence parallelism: LayerNorms and the residual stream split over "
               "the tokens (needs --tp >= 2 dividing --batch x --seq)"),
        F_CHOICE("--algo", &algo, "ring|naive|mpi", "the host collectives (mpi: under mpirun)"),
        F_CHOICE("--transport", &transport, "shm|mpi|tcp", "how ranks talk (mpi: under mpirun)"),
        F_DOUBLE("--timeout", &timeout, 0.1, 86400, "seconds any wait may take before the rank gives up"),
    };
    TrainJob j;
    train_job_parse(&j, argc, argv, mine, FLAG_COUNT(mine), "tp_train [flags]",
                    "Megatron tensor parallelism (with sequence parallelism), composed with data "
                    "parallelism over a dp x tp mesh of ranks.");
    const GPTConfig *cfg = &j.cfg;
    // Everything that can be wrong with the layout is said before any rank starts.
    CommConfig cc = {.np = np, .timeout_s = timeout, .nodes = nodes, .cluster = cluster};
    transport_parse(transport, &cc.transport);
    int world = comm_planned_size(&cc);
    if (flag_on(j.flags, j.nf, "--elastic"))  // (stage 07's flag, where it is linked in)
        flags_fail("--elastic: a tensor-parallel layout cannot lose one rank (use ddp_train or "
                   "sharded_train)");
    if (tp == 0) tp = world;
    if (world % tp) flags_fail("--tp %d does not divide the %d ranks (--np)", tp, world);
    char err[200];
    if (gpt_tp_error(cfg, tp, sp, j.a.batch, cfg->seq_len, err, sizeof err)) flags_fail("%s", err);
    if (tp > 1 && strcmp(j.a.precision, "fp8") == 0)
        flags_fail("--precision fp8 casts the serial linear layers: not with --tp %d", tp);
    Algo al;
    algo_parse(algo, &al);
    char words[64];
    snprintf(words, sizeof words, "--tp=%d --sp=%d --algo=%s", tp, sp, algo);
    train_job_launch(&j, &cc, words);  // from here on, one rank of many
    Comm *c = j.comm;
    Ctx *ctx = &j.ctx;
    CHECK(comm_size(c) % tp == 0, "--tp %d does not divide the %d ranks", tp, comm_size(c));
    int dp = comm_size(c) / tp;
    Group dpg, tpg, ppg;
    comm_mesh(c, dp, tp, 1, &dpg, &tpg, &ppg);
    GpuComm *gtp = NULL, *gdp = NULL;
    if (j.dev == DEV_CUDA) {
        if (tp > 1) gtp = gpu_comm_new(c, &tpg, ctx, GPU_AUTO);
        if (dp > 1) gdp = gpu_comm_new(c, &dpg, ctx, GPU_AUTO);
    }
    TPTrain s;
    tp_train_init(&s, c, &tpg, &dpg, al, sp, gtp, gdp);
    char label[256];
    snprintf(label, sizeof label, "TP %d%s x DP %d (%s%s)", tp, sp ? " + SP" : "", dp,
             gtp ? gpu_comm_describe(gtp) : algo_name(al), gtp ? "" : " collectives");
    char layout[64];  // for a checkpoint's manifest
    snprintf(layout, sizeof layout, "dp=%d tp=%d pp=1%s", dp, tp, s.tp.sp ? " sp" : "");
    TrainHooks h = {.data_rank = dpg.rank, .data_world = dp, .label = label,
                    .strategy = &s.strategy, .sync_params = barrier, .arg = &s, .layout = layout};
    TrainResult res = train_run(&j, &h);

    ledger_print_mem_line(&ctx->ledger, stdout, ctx->rank, "");
    printf("BYTES rank=%d sent_per_step=%llu\n", ctx->rank,
           (unsigned long long)(s.step_sent.inside + s.step_sent.across));
    printf("TPCOMM rank=%d tp_ms=%.3f step_ms=%.3f share=%.1f%%\n", ctx->rank, s.step_tp_s * 1e3,
           res.ms_per_step, res.ms_per_step > 0 ? 100.0 * s.step_tp_s * 1e3 / res.ms_per_step : 0);
    fflush(stdout);
    gpu_comm_free(gdp);
    gpu_comm_free(gtp);
    train_job_end(&j);
    return 0;
}
