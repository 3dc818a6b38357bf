// train.c — the single-process training driver: one device, a GPT and AdamW.
//
//   build/train --preset small --steps 50                # CPU, 1 thread
//   build/train --preset small --device cuda             # one GPU
//   build/train --preset tiny --data README.md           # byte-level on any text file
//   build/train --ckpt-dir ck --ckpt-every 50 --max-restarts 3   # survives its own death
//
// The loop itself is common/trainer.c, shared with the stage drivers (stage 02's
// ddp_train adds a gradient all-reduce through a hook). This process is the
// baseline they are all checked against.
#include "check.h"
#include "trainer.h"

int main(int argc, char **argv) {
    TrainArgs a;
    train_args_default(&a);
    Flag flags[TRAIN_MAX_FLAGS];
    int nf = train_flags(&a, flags);
    flags_parse(flags, nf, argc, argv, "train [flags]",
                "Trains a GPT-2-style model on one device and reports loss, tokens/s, MFU and memory.");
    GPTConfig cfg;
    train_resolve(&a, &cfg);  // every flag checked before anything is allocated
    Device dev;
    device_parse(a.device, &dev);
    // --max-restarts: the launcher's supervisor runs this process as its one rank,
    // and starts it again (resuming from the checkpoints) when it dies.
    if (a.elastic) flags_fail("--elastic: one process has no rank to give up");
    Comm *c = NULL;
    if (a.max_restarts) c = comm_launch(&(CommConfig){.np = 1, .timeout_s = 60,
                                                      .max_restarts = a.max_restarts});
    Ctx ctx;
    ctx_init(&ctx, dev, a.threads, a.device_mem);
    train_run(&a, &ctx, NULL);
    ctx_destroy(&ctx);
    comm_finalize(c);
    return 0;
}
