// ddp_train.c — data-parallel training: N ranks, one model replica each.
//
//   build/ddp_train --np 4 --preset small --steps 50           # 4 processes, shm
//   mpirun -np 4 build/ddp_train --transport mpi --algo mpi    # MPI's all-reduce
//   RANK=.. WORLD_SIZE=.. MASTER_ADDR=.. MASTER_PORT=.. build/ddp_train   # torchrun style
//   build/ddp_train --np 4 --device cuda          # 4 ranks; GPUs round-robin, grads GPU to GPU
//
// Each rank trains on its own --batch sequences; the global batch is np x batch.
// The loop is common/trainer.c; DDP adds two hooks (ddp.c).
//
// With --device cuda each rank takes GPU (local rank) mod (GPUs) (gpu_pick_device:
// LOCAL_RANK, OMPI_COMM_WORLD_LOCAL_RANK or SLURM_LOCALID, else the rank), and
// the gradients move between GPUs without touching the host (--gpu-comm): NCCL
// when every rank has a GPU of its own, our ring over CUDA IPC when ranks share
// one (NCCL refuses that). --gpu-comm host copies them to host memory instead
// and all-reduces there with --algo, as on the CPU.
#include <string.h>

#include "check.h"
#include "comm_cuda.h"
#include "ddp.h"
#include "trainer.h"

static void sync_params(GPT *g, void *arg) { ddp_broadcast_params(arg, g); }
static void sync_grads(GPT *g, void *arg) { ddp_sync_grads(arg, g); }
static void sync_grads_bf16(GPT *g, void *arg) { ddp_sync_grads_bf16(arg, g); }

// The gradients' type on the wire. auto: bf16 when the recipe computes in bf16, where
// it can go: on the CPU, or on a GPU through host memory (--gpu-comm host); the GPU
// collectives keep fp32.
static int wire_is_bf16(const TrainJob *j, const char *grad_comm, const char *gpu_comm) {
    GPTRecipe recipe = PREC_FP32;
    gpt_recipe_parse(j->a.precision, &recipe);
    int host = j->dev == DEV_CPU || strcmp(gpu_comm, "host") == 0;
    int bf16 = strcmp(grad_comm, "bf16") == 0 ||
               (strcmp(grad_comm, "auto") == 0 && gpt_recipe_dtype(recipe) == DT_BF16 && host);
    if (bf16 && !host)
        flags_fail("--grad-comm bf16 with --device cuda goes through host memory: add --gpu-comm host");
    if (j->dev == DEV_CPU && flag_given(j->flags, j->nf, "--gpu-comm"))
        flags_fail("--gpu-comm %s needs --device cuda", gpu_comm);
    return bf16;
}

// What the run is, for the banner.
static void describe(const DDP *d, const TrainJob *j, int wire_bf16, char *label, size_t n) {
    int world = j->ctx.world;
    if (d->gpu)
        snprintf(label, n, "DDP over %d rank%s (all-reduce GPU to GPU: %s)", world,
                 world == 1 ? "" : "s", gpu_comm_describe(d->gpu));
    else
        snprintf(label, n, "DDP over %d rank%s (%s all-reduce, %s%s%s)", world,
                 world == 1 ? "" : "s", algo_name(d->algo), transport_name(comm_transport(j->comm)),
                 j->dev == DEV_CUDA ? ", gradients staged through host memory" : "",
                 wire_bf16 ? ", gradients sent as bf16" : "");
}

int main(int argc, char **argv) {
    int nodes = 1;
    const char *cluster = NULL;
    int np = 1;
    double timeout = 60;
    const char *algo = "ring", *transport = "shm", *gpu_comm = "auto", *grad_comm = "auto";
    Flag mine[] = {
        F_INT("--np", &np, 1, COMM_MAX_RANKS, "ranks to launch on this machine (built-in launcher)"),
        F_NODES(&nodes, &cluster),
        F_CHOICE("--algo", &algo, "naive|ring|rd|mpi|hier", "the gradient all-reduce (hier: inside each node, then across; nodes from LOCAL_WORLD_SIZE or COURSE_NODE_RANKS)"),
        F_CHOICE("--transport", &transport, "shm|mpi|tcp", "how ranks talk (mpi: under mpirun)"),
        F_DOUBLE("--timeout", &timeout, 0.1, 86400, "seconds any wait may take before the rank gives up"),
        F_CHOICE("--gpu-comm", &gpu_comm, "auto|nccl|ipc|host", "with --device cuda, how gradients "
                 "move: auto = NCCL if every rank has its own GPU, else CUDA IPC; host = via host "
                 "memory with --algo"),
        F_CHOICE("--grad-comm", &grad_comm, "auto|fp32|bf16", "the gradients' type on the wire "
                 "(auto: bf16 when --precision computes in bf16, but on the GPU's own "
                 "collectives, else fp32; ddp_bf16.c)"),
    };
    TrainJob j;
    train_job_parse(&j, argc, argv, mine, FLAG_COUNT(mine), "ddp_train [flags]",
                    "Data-parallel training: every rank a full replica, gradients all-reduced each step.");
    int wire_bf16 = wire_is_bf16(&j, grad_comm, gpu_comm);
    CommConfig cc = {.np = np, .timeout_s = timeout, .nodes = nodes, .cluster = cluster};
    transport_parse(transport, &cc.transport);
    char words[128];  // every rank the same flags (mpirun: each its own command line)
    snprintf(words, sizeof words, "--algo=%s --gpu-comm=%s --grad-comm=%s", algo, gpu_comm,
             wire_bf16 ? "bf16" : "fp32");
    train_job_launch(&j, &cc, words);  // from here on, this is one rank of many
    Ctx *ctx = &j.ctx;
    Comm *c = j.comm;

    DDP d;
    Algo al;
    algo_parse(algo, &al);
    Group *world = comm_world(c);
    ddp_init(&d, c, world, al);
    GpuComm *gc = NULL;
    if (j.dev == DEV_CUDA && strcmp(gpu_comm, "host") != 0)
        gc = gpu_comm_new(c, world, ctx, strcmp(gpu_comm, "nccl") == 0  ? GPU_NCCL
                                         : strcmp(gpu_comm, "ipc") == 0 ? GPU_IPC
                                                                        : GPU_AUTO);
    d.gpu = gc;  // after ddp_init, which clears the struct
    char label[256];
    describe(&d, &j, wire_bf16, label, sizeof label);
    char layout[64];  // for a checkpoint's manifest
    snprintf(layout, sizeof layout, "dp=%d tp=1 pp=1 zero=0", ctx->world);
    TrainHooks h = {.sync_grads = wire_bf16 ? sync_grads_bf16 : sync_grads,
                    .sync_params = sync_params, .arg = &d, .label = label, .layout = layout};
    train_run(&j, &h);
    const CommCounter *k = comm_counters(c);
    if (ctx->rank == 0)
        log_info("communication (rank 0): all-reduce %llu calls, %.2f MB sent, %.2f MB received%s",
                 (unsigned long long)k[COLL_ALLREDUCE].calls, k[COLL_ALLREDUCE].bytes_sent / 1e6,
                 k[COLL_ALLREDUCE].bytes_recv / 1e6,
                 al == ALGO_MPI ? " (MPI_Allreduce moves its own bytes, which are not counted "
                 "here)" : "");
    gpu_comm_free(gc);  // collective; before the stream it uses goes away
    ddp_free(&d, NULL);  // the host staging buffer of a GPU run through host memory
    train_job_end(&j);
    return 0;
}
