// cp_train.c — training with each sequence split over a context-parallel group, each
// layer optionally over a tensor-parallel one inside it, and data parallelism across.
//
//   build/cp_train --np 2 --cp 2 --seq 256                  # ring attention, zigzag
//   build/cp_train --np 4 --cp 2 --cp-attention ulysses      # Ulysses, 2 (dp) x 2 (cp)
//   build/cp_train --np 2 --cp 2 --cp-layout contiguous      # the unbalanced placement
//   build/cp_train --np 2 --cp 2 --seq 1024 --trace runs/cp   # the ring's last step, timed
//   build/cp_train --np 4 --cp 2 --tp 2                      # CP x TP: 2 x 2
//
// The loop is common/trainer.c; cp_model.c's strategy runs each rank's rows of every
// micro-batch and averages the gradients over the dp x cp ranks holding the same pieces
// of the weights (all ranks without TP). Every rank prints one MEM line
// (its ledger's peaks), which the tests read.
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "cp.h"

// The last step's spans (cp_model.c clears them as each step begins) on rank 0, and every
// rank's share of its ring messages' time spent while it computed, and the time it
// waited for them (the communication it did not hide).
static void write_trace(const char *trace, const Timeline *tl, Comm *c) {
    double comm_s, hidden_s, wait_s = 0;
    timeline_overlap(tl, &comm_s, &hidden_s);
    for (size_t i = 0; i < tl->lane[TL_WAIT].n; i++)
        wait_s += tl->lane[TL_WAIT].spans[i].t1 - tl->lane[TL_WAIT].spans[i].t0;
    timeline_write_prefix(tl, c, comm_world(c), trace);
    printf("OVERLAP rank=%d comm_ms=%.3f hidden_ms=%.3f overlap=%.1f%% wait_ms=%.3f\n",
           comm_rank(c), comm_s * 1e3, hidden_s * 1e3, comm_s > 0 ? 100.0 * hidden_s / comm_s : 0.0,
           wait_s * 1e3);
}

int main(int argc, char **argv) {
    int nodes = 1;
    const char *cluster = NULL;
    int np = 1, cp = 0, tp = 1;
    double timeout = 60;
    const char *algo = "pairwise", *layout = "zigzag", *attention = "ring", *transport = "shm";
    const char *trace = NULL;
    int no_overlap = 0;
    Flag mine[] = {
        F_INT("--np", &np, 1, COMM_MAX_RANKS, "ranks to launch on this machine (built-in launcher)"),
        F_NODES(&nodes, &cluster),
        F_INT_SENTINEL("--cp", &cp, 1, COMM_MAX_RANKS, "0 = all ranks / --tp", "context-parallel ranks "
                       "per group, which share each sequence; must divide the ranks (the rest "
                       "is data parallel)"),
        F_INT("--tp", &tp, 1, COMM_MAX_RANKS, "tensor-parallel ranks inside each context-parallel "
              "rank's place (stage 04's Megatron layers; neighbours: they talk most); must "
              "divide the heads"),
        F_CHOICE("--cp-attention", &attention, "ring|ulysses", "ring attention (any heads), or "
                 "Ulysses' all-to-all (--heads divisible by --cp)"),
        F_CHOICE("--cp-layout", &layout, "zigzag|contiguous", "which tokens a rank holds: chunks "
                 "r and 2cp-1-r of 2cp (every rank the same causal work), or chunk r of cp"),
        F_CHOICE("--algo", &algo, "pairwise|naive|mpi", "Ulysses' all-to-all; the gradients' "
                 "all-reduce is the ring (naive and mpi: theirs)"),
        F_CHOICE("--transport", &transport, "shm|mpi|tcp", "how ranks talk (mpi: under mpirun)"),
        F_BOOL("--no-overlap", &no_overlap, "the ring moves its blocks only while it waits for "
               "them, not between blocks of compute (to measure the overlap against)"),
        F_STRING("--trace", &trace, "write the last step's timeline of the ring to TRACE.json "
                 "(Perfetto) and TRACE.dat, and print each rank's OVERLAP line"),
        F_DOUBLE("--timeout", &timeout, 0.1, 86400, "seconds any wait may take before the rank gives up"),
    };
    TrainJob j;
    train_job_parse(&j, argc, argv, mine, FLAG_COUNT(mine), "cp_train [flags]",
                    "Context parallelism (ring attention or Ulysses), composed with data "
                    "parallelism over dp x cp ranks.");
    const GPTConfig *cfg = &j.cfg;
    CommConfig cc = {.np = np, .timeout_s = timeout, .nodes = nodes, .cluster = cluster};
    transport_parse(transport, &cc.transport);
    int world = comm_planned_size(&cc), zigzag = strcmp(layout, "zigzag") == 0;
    int ulysses = strcmp(attention, "ulysses") == 0;
    if (world % tp) flags_fail("--tp %d does not divide the %d ranks (--np)", tp, world);
    if (cp == 0) cp = world / tp;
    if (world % (cp * tp))
        flags_fail("--cp %d x --tp %d does not divide the %d ranks (--np)", cp, tp, world);
    if (cfg->n_head % tp)
        flags_fail("--tp %d does not divide --heads %d (each rank computes whole heads)", tp,
                   cfg->n_head);
    if (cfg->seq_len % (zigzag ? 2 * cp : cp))
        flags_fail("--seq %d does not split into %d %s chunks: make it a multiple of %d",
                   cfg->seq_len, zigzag ? 2 * cp : cp, layout, zigzag ? 2 * cp : cp);
    if (ulysses && (cfg->n_head / tp) % cp && tp == 1)
        flags_fail("--cp-attention ulysses: --heads %d is not divisible by --cp %d (each rank "
                   "takes whole heads; the ring splits any)", cfg->n_head, cp);
    else if (ulysses && (cfg->n_head / tp) % cp)
        flags_fail("--cp-attention ulysses: a tensor-parallel rank's %d heads (--heads %d / --tp "
                   "%d) are not divisible by --cp %d (each rank takes whole heads; the ring "
                   "splits any)", cfg->n_head / tp, cfg->n_head, tp, cp);
    if (strcmp(j.a.device, "cpu") != 0)
        flags_fail("--device %s: context parallelism runs on the CPU (its blocks are host "
                   "buffers)", j.a.device);
    if (flag_given(j.flags, j.nf, "--attention") && strcmp(j.a.attention, "flash") != 0)
        flags_fail("--attention %s: context parallelism keeps no (T, T) matrix; its attention "
                   "is flash attention's blocks (--attention flash, the default here)",
                   j.a.attention);
    j.a.attention = "flash";  // the trainer sets the model's attention from it
    if (strcmp(j.a.precision, "fp32") != 0)
        flags_fail("--precision %s: context parallelism's attention is fp32 for now",
                   j.a.precision);
    if (flag_on(j.flags, j.nf, "--elastic"))  // (stage 07's flag, where it is linked in)
        flags_fail("--elastic: a context-parallel layout cannot lose one rank");
    if (trace) timeline_check_output(trace);  // written at the end: a bad path fails now
    Algo al;
    algo_parse(algo, &al);
    char words[96];
    snprintf(words, sizeof words, "--cp=%d --tp=%d --cp-attention=%s --cp-layout=%s --algo=%s "
             "--no-overlap=%d", cp, tp, attention, layout, algo, no_overlap);
    train_job_launch(&j, &cc, words);  // from here on, one rank of many
    Comm *c = j.comm;
    // rank = (d cp + k) tp + t: the tp ranks neighbours (they talk most), then cp, then dp.
    int dp = comm_size(c) / (cp * tp), me = comm_rank(c), t = me % tp, ranks[COMM_MAX_RANKS];
    Group cpg, tpg, replicas;
    for (int i = 0; i < cp; i++) ranks[i] = (me / tp / cp * cp + i) * tp + t;
    comm_group_new(c, &cpg, "cp", ranks, cp);
    for (int i = 0; i < tp; i++) ranks[i] = me / tp * tp + i;
    comm_group_new(c, &tpg, "tp", ranks, tp);
    for (int i = 0; i < dp * cp; i++) ranks[i] = i * tp + t;  // the same pieces of the weights
    comm_group_new(c, &replicas, "dp.cp", ranks, dp * cp);
    CPTrain s;
    cp_train_init(&s, c, &cpg, &tpg, &replicas, al, zigzag, ulysses, &j.ctx);
    Timeline tl;
    timeline_init(&tl, trace != NULL);
    s.cp.overlap = !no_overlap;
    s.cp.tl = &tl;
    char label[160], lay[64];
    snprintf(label, sizeof label, "CP %d (%s, %s) x TP %d x DP %d", cp, attention, layout, tp, dp);
    snprintf(lay, sizeof lay, "dp=%d cp=%d tp=%d", dp, cp, tp);
    TrainHooks h = {.data_rank = me / tp / cp, .data_world = dp, .label = label,
                    .strategy = &s.strategy, .layout = lay};
    train_run(&j, &h);
    ledger_print_mem_line(&j.ctx.ledger, stdout, j.ctx.rank, "");
    if (trace) write_trace(trace, &tl, c);
    timeline_free(&tl);
    fflush(stdout);
    train_job_end(&j);
    return 0;
}
