// exercises/resume.c — YOUR resume state.   make grade-7 PART=resume_state
//
// Read ../checkpoint.h (TrainProgress, resume_capture, resume_restore). A
// checkpoint saves every tensor: weights, fp32 masters, AdamW's m and v. That is
// not enough for a resumed run to take the very same steps, bit for bit, as the
// run it replaces. What else does a training step read that changes from step to
// step?
//
//   - the data: which batch comes next? (../../common/data.h: the loader's
//     position counts micro-batches served; with gradient accumulation there
//     are several per optimizer step, so it is not `step`.)
//   - AdamW (../../common/optim.h): its step counter t, read by the bias
//     corrections 1 - beta^t and by stochastic rounding, whose random stream is
//     keyed by (seed, t): the course's generators are counter-based, so a
//     generator's state is its counter. Restore it one draw late and every
//     later draw is its successor's. And master_filled: whether the fp32
//     masters hold the weights (mixed precision), and its count of skipped steps.
//   - the loss scaler (mixed-fp16): the whole LossScaler, its scale and count of
//     good steps (they decide the next steps) and its counters of skips, growths
//     and back-offs (the run's summary reports them).
//   - the trainer's count of overflowed steps.
//
// resume_capture fills *p at the end of optimizer step `step`; resume_restore
// puts it back into the trainer's objects before the resumed run's first step.
// All of a job's optimizers step together: one's counters are every one's.
//
// The tests (tests/stage07.sh, the s7.resume.* checks) kill a rank after the first
// checkpoint of DDP, ZeRO-3, FSDP, tensor-parallel and pipeline runs, resume from the
// checkpoints, and compare the final weights with an uninterrupted run's: cmp,
// bit for bit. Then mixed-bf16, mixed-fp16 with an overflow (and its loss-scale
// summary line), and pure bf16 with stochastic rounding.
#include <stdio.h>
#include <string.h>

#include "checkpoint.h"

void resume_capture(TrainProgress *p, uint64_t step, uint64_t seed, const char *recipe,
                    const TrainState *st, const LossScaler *scaler, long overflows,
                    const DataLoader *dl) {
    memset(p, 0, sizeof *p);
    // Which run this is: a resume checks them (the recipe and the seed must match).
    p->step = step;
    p->seed = seed;
    snprintf(p->recipe, sizeof p->recipe, "%s", recipe);
    // TODO(exercise): the rest of TrainProgress. As it is, a resumed run starts
    // its data, its optimizer's counters and its loss scale from scratch.
    (void)st; (void)scaler; (void)overflows; (void)dl;
}

void resume_restore(const TrainProgress *p, const TrainState *st, LossScaler *scaler,
                    long *overflows, DataLoader *dl) {
    // TODO(exercise): put back what resume_capture saved.
    (void)p; (void)st; (void)scaler; (void)overflows; (void)dl;
}
