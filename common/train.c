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
#include "trainer.h"

int main(int argc, char **argv) {
    TrainJob j;
    train_job_parse(&j, argc, argv, NULL, 0, "train [flags]",
                    "Trains a GPT-2-style model on one device and reports loss, tokens/s, MFU "
                    "and memory.");
    // One process; with --max-restarts (stage 07) the launcher's supervisor runs it as
    // its one rank, and starts it again (resuming from the checkpoints) when it dies.
    train_job_launch(&j, NULL, NULL);
    train_run(&j, NULL);
    train_job_end(&j);
    return 0;
}
