// sharded_train.c — data-parallel training that overlaps and shards.
//
//   build/sharded_train --np 4 --strategy zero2 --preset small --steps 20
//   build/sharded_train --np 2 --strategy ddp --bucket-mb 1 --trace runs/ddp    # timeline
//   build/sharded_train --np 4 --strategy hsdp --shard-size 2
//   mpirun -np 4 build/sharded_train --transport mpi --algo mpi --strategy zero3
//   build/sharded_train --np 2 --device cuda --strategy fsdp    # 2 ranks sharing one GPU
//
// The loop is common/trainer.c; the strategy (sharded.c and its pieces) builds the
// model states and does the step. Every rank prints one MEM line (its ledger's
// peaks) and one BYTES line (what it sent in the last step), which the tests and
// the benchmark read; --trace writes the last step's timeline (Chrome JSON and a
// table for gnuplot) and prints how much communication hid behind compute.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sharded.h"

// While rank 0 measures the CPU's peak for MFU, the others wait here instead of
// computing beside it.
static void barrier(GPT *g, void *arg) {
    (void)g;
    Sharded *s = arg;
    async_barrier(s->ac, s->world);
}

// The driver's own flags (the training flags and the extensions' come from trainer.h).
typedef struct {
    int np, nodes, no_overlap, no_prefetch, no_reshard, unit_layers, shard_size;
    int kill_rank, kill_at, stall_rank, stall_at;
    double timeout, bucket_mb;
    const char *strategy, *algo, *transport, *cluster, *trace, *grad_comm, *param_comm;
} Opts;

static int opts_flags(Opts *o, Flag *rows) {
    *o = (Opts){.np = 1, .nodes = 1, .unit_layers = 1, .kill_rank = -1, .stall_rank = -1, .timeout = 60,
                .bucket_mb = 25, .strategy = "ddp", .algo = "ring", .transport = "shm",
                .grad_comm = "auto", .param_comm = "auto"};
    Flag f[] = {
        F_INT("--np", &o->np, 1, COMM_MAX_RANKS, "ranks to launch on this machine (built-in launcher)"),
        F_NODES(&o->nodes, &o->cluster),
        F_CHOICE("--strategy", &o->strategy, "ddp|zero1|zero2|zero3|fsdp|hsdp", "what is sharded "
                 "(03_bucketing_zero/README.md)"),
        F_CHOICE("--algo", &o->algo, "ring|naive|mpi", "the collectives (naive: member order, bit "
                 "for bit stage 02's naive all-reduce; mpi: under mpirun)"),
        F_CHOICE("--transport", &o->transport, "shm|mpi|tcp", "how ranks talk (mpi: under mpirun)"),
        F_DOUBLE("--timeout", &o->timeout, 0.1, 86400, "seconds any wait may take before the rank gives up"),
        F_DOUBLE("--bucket-mb", &o->bucket_mb, 0, 1e6, "gradient bucket size, MB (10^6 bytes); 0 = "
                 "one bucket per layer group"),
        F_BOOL("--no-overlap", &o->no_overlap, "no progress thread: collectives run when waited "
               "for (ddp: one all-reduce after backward, as stage 02)"),
        F_BOOL("--no-prefetch", &o->no_prefetch, "zero3/fsdp/hsdp: gather a unit only when it is used"),
        F_BOOL("--no-reshard", &o->no_reshard, "zero3/fsdp/hsdp: keep units whole from forward to "
               "backward"),
        F_INT("--fsdp-unit-layers", &o->unit_layers, 1, 1 << 20, "fsdp/hsdp: layer groups per unit "
              "(embeddings, blocks and ln_f are groups; L+2 = the whole model)"),
        F_INT_SENTINEL("--shard-size", &o->shard_size, 1, COMM_MAX_RANKS, "0 = all ranks",
                       "hsdp: ranks per shard group (must divide --np)"),
        F_STRING("--trace", &o->trace, "write the last step's timeline to TRACE.json and TRACE.dat"),
        F_CHOICE("--grad-comm", &o->grad_comm, "auto|fp32|bf16", "the gradient buckets' type on "
                 "the wire (auto: bf16 when --precision computes in bf16; stage 06)"),
        F_CHOICE("--param-comm", &o->param_comm, "auto|fp32|bf16", "the gathered weights' type on "
                 "the wire: bf16 only for weights that are bf16 values, which it moves exactly "
                 "(auto: then; stage 06)"),
        F_INT_SENTINEL("--kill-rank", &o->kill_rank, 0, COMM_MAX_RANKS - 1, "-1 = none",
                       "fault test: this rank dies (SIGKILL) ..."),
        F_INT_SENTINEL("--kill-at", &o->kill_at, 1, 1 << 30, "0 = unset",
                       "... when it starts world collective number N"),
        F_INT_SENTINEL("--stall-rank", &o->stall_rank, 0, COMM_MAX_RANKS - 1, "-1 = none",
                       "fault test: this rank stops responding ..."),
        F_INT_SENTINEL("--stall-at", &o->stall_at, 1, 1 << 30, "0 = unset",
                       "... when it starts world collective number N"),
    };
    memcpy(rows, f, sizeof f);
    return FLAG_COUNT(f);
}

// The strategy's configuration, everything wrong with it said before any rank starts.
static ShardConfig shard_config(const Opts *o, const TrainJob *j) {
    ShardConfig sc = {.overlap = !o->no_overlap, .prefetch = !o->no_prefetch,
                      .reshard = !o->no_reshard, .unit_layers = o->unit_layers,
                      .shard_size = o->shard_size,
                      .bucket_bytes = (size_t)llround(o->bucket_mb * 1e6)};
    shard_kind_parse(o->strategy, &sc.kind);
    algo_parse(o->algo, &sc.algo);
    if (o->shard_size && sc.kind != SH_HSDP) flags_fail("--shard-size is for --strategy hsdp");
    // Stage 3's switches do nothing for a strategy that keeps its weights whole.
    int stage3 = sc.kind == SH_ZERO3 || sc.kind == SH_FSDP || sc.kind == SH_HSDP;
    if ((o->no_prefetch || o->no_reshard) && !stage3)
        flags_fail("%s is for zero3, fsdp and hsdp (they gather weights; --strategy %s keeps "
                   "them whole)", o->no_prefetch ? "--no-prefetch" : "--no-reshard", o->strategy);
    if (flag_given(j->flags, j->nf, "--fsdp-unit-layers") && sc.kind != SH_FSDP && sc.kind != SH_HSDP)
        flags_fail("--fsdp-unit-layers is for fsdp and hsdp");
    // (--elastic is stage 07's: a program linked without that stage has no such flag.)
    if (flag_on(j->flags, j->nf, "--elastic") && o->shard_size)
        flags_fail("--elastic with --shard-size: one rank fewer breaks the shard groups");
    // fp8 keeps its scales per linear layer, known by where its weight lives; ZeRO-3
    // and FSDP gather every layer's weights into the same buffers.
    if (strcmp(j->a.precision, "fp8") == 0 && stage3)
        flags_fail("--precision fp8 is not for --strategy %s (the gathered weights share "
                   "buffers): use ddp, zero1 or zero2", o->strategy);
    if (o->shard_size && o->np > 1 && o->np % o->shard_size)
        flags_fail("--shard-size %d does not divide --np %d", o->shard_size, o->np);
    // The types on the wire: auto picks bf16 when the recipe's values are bf16 (on a
    // GPU too: checked on an H200, results/gpu/2026-11-26-h200).
    GPTRecipe recipe = PREC_FP32;
    gpt_recipe_parse(j->a.precision, &recipe);
    int bf16_values = gpt_recipe_dtype(recipe) == DT_BF16;
    if (strcmp(o->param_comm, "bf16") == 0 && !bf16_values)
        flags_fail("--param-comm bf16 with --precision %s: its weights are not bf16 values, and "
                   "sending them as bf16 would round them", j->a.precision);
    sc.grad_wire = strcmp(o->grad_comm, "bf16") == 0 ||
                   (strcmp(o->grad_comm, "auto") == 0 && bf16_values) ? DT_BF16 : DT_F32;
    sc.param_wire = strcmp(o->param_comm, "bf16") == 0 ||
                    (strcmp(o->param_comm, "auto") == 0 && bf16_values) ? DT_BF16 : DT_F32;
    if ((o->kill_rank >= 0) != (o->kill_at > 0)) flags_fail("--kill-rank and --kill-at go together");
    if ((o->stall_rank >= 0) != (o->stall_at > 0)) flags_fail("--stall-rank and --stall-at go together");
    return sc;
}

// The comm layer's own fault tests (stage 02's watchdog, a rank that dies mid-step),
// armed on this rank. Checked in the first attempt: after an elastic restart gave a
// rank up, the world is smaller than the flags', and a fault aimed past it has
// struck already.
static void arm_faults(const Opts *o, Comm *c, int first_attempt) {
    int world = comm_size(c);
    CHECK(!first_attempt || (o->kill_rank < world && o->stall_rank < world),
          "--%s-rank %d: there are %d ranks (0 to %d)", o->kill_rank >= world ? "kill" : "stall",
          o->kill_rank >= world ? o->kill_rank : o->stall_rank, world, world - 1);
    if (o->kill_rank >= 0) comm_inject_kill(c, o->kill_rank, o->kill_at);
    if (o->stall_rank >= 0) comm_inject_stall(c, o->stall_rank, o->stall_at);
}

// A fault asked for and never struck is a failed test, not a clean run. (In the first
// attempt only: a restarted one resumes, and runs fewer collectives than it counts.)
static void check_faults_struck(const Opts *o, Comm *c, int first_attempt) {
    int rank = comm_rank(c);
    const Group *world = comm_world(c);
    int64_t target = !first_attempt ? -1 : rank == o->kill_rank ? o->kill_at
                     : rank == o->stall_rank ? o->stall_at : -1;
    CHECK(target < 0 || (int64_t)world->seq >= target, "--%s-at %lld never came: this rank started "
          "%llu world collectives", rank == o->kill_rank ? "kill" : "stall", (long long)target,
          (unsigned long long)world->seq);
}

// What every rank prints after training (the tests and the benchmark read it): its
// ledger's peaks (MEM), what it sent in the last step (BYTES), a prefetch's lateness,
// and with --trace the last step's timeline and the share of communication it hid.
static void report(const char *trace, Sharded *s, Timeline *tl, Ctx *ctx, Comm *c) {
    LinkBytes sent = s->step_sent;
    long late = s->prefetch_late;
    int audited = s->cfg.kind >= SH_ZERO3 && s->cfg.prefetch;  // stage 3, prefetching
    long launched = s->launched_in_backward, early = s->early_waits;
    sharded_free(s);  // the progress thread stops: the Comm is the main thread's again
    ledger_print_mem_line(&ctx->ledger, stdout, ctx->rank, "");
    printf("BYTES rank=%d sent_per_step=%llu\n", ctx->rank,
           (unsigned long long)(sent.inside + sent.across));
    if (audited) printf("PREFETCH rank=%d late=%ld\n", ctx->rank, late);
    printf("BUCKETS rank=%d launched_in_backward=%ld early_waits=%ld\n", ctx->rank, launched, early);
    fflush(stdout);
    if (!trace) return;
    double comm_s, hidden_s;
    timeline_overlap(tl, &comm_s, &hidden_s);
    timeline_write_prefix(tl, c, comm_world(c), trace);
    printf("OVERLAP rank=%d comm_ms=%.3f hidden_ms=%.3f overlap=%.1f%%\n", ctx->rank,
           comm_s * 1e3, hidden_s * 1e3, comm_s > 0 ? 100.0 * hidden_s / comm_s : 0.0);
    fflush(stdout);
}

int main(int argc, char **argv) {
    Opts o;
    Flag mine[24];
    int n = opts_flags(&o, mine);
    TrainJob j;
    train_job_parse(&j, argc, argv, mine, n, "sharded_train [flags]",
                    "Data-parallel training with gradient buckets overlapped with backward, and "
                    "ZeRO-1/2/3, FSDP or HSDP sharding.");
    if (o.trace) timeline_check_output(o.trace);  // written at the end: a bad path fails now
    ShardConfig sc = shard_config(&o, &j);
    CommConfig cc = {.np = o.np, .timeout_s = o.timeout, .nodes = o.nodes, .cluster = o.cluster};
    transport_parse(o.transport, &cc.transport);
    char words[512];
    snprintf(words, sizeof words, "--strategy=%s --algo=%s --bucket-mb=%g --overlap=%d "
             "--prefetch=%d --reshard=%d --fsdp-unit-layers=%d --shard-size=%d --grad-comm=%s "
             "--param-comm=%s", o.strategy, o.algo, o.bucket_mb, sc.overlap, sc.prefetch,
             sc.reshard, o.unit_layers, o.shard_size, dtype_name(sc.grad_wire),
             dtype_name(sc.param_wire));
    train_job_launch(&j, &cc, words);  // from here on, one rank of many
    Comm *c = j.comm;
    int first_attempt = comm_ranks_dropped() == 0 && comm_attempt() == 0;
    arm_faults(&o, c, first_attempt);
    Timeline tl;
    timeline_init(&tl, o.trace != NULL);
    Sharded *s = sharded_new(c, comm_world(c), &j.ctx, &sc, &tl);
    char label[256], layout[64];  // (the layout: for a checkpoint's manifest)
    sharded_describe(s, label, sizeof label);
    snprintf(layout, sizeof layout, "dp=%d tp=1 pp=1 strategy=%s", comm_size(c),
             shard_kind_name(s->cfg.kind));
    TrainHooks h = {.label = label, .strategy = &s->strategy, .sync_params = barrier, .arg = s,
                    .layout = layout};
    train_run(&j, &h);
    check_faults_struck(&o, c, first_attempt);
    report(o.trace, s, &tl, &j.ctx, c);
    timeline_free(&tl);
    train_job_end(&j);
    return 0;
}
