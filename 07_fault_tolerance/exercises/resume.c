// exercises/resume.c — YOUR resume state.   make grade-7 PART=resume_state
// Stuck? make hint-7 PART=resume_state   (tier 1 a nudge; TIER=2, 3 more)
//
// Read the lesson ("What a checkpoint must hold for a bit-exact resume") and
// ../checkpoint.h (TrainProgress, resume_capture, resume_restore). A checkpoint saves
// every tensor: weights, fp32 masters, AdamW's m and v. That is not enough for a
// resumed run to take the very same steps, bit for bit, as the run it replaces: a
// training step also reads state that is not a tensor and changes from step to step.
//
// THE CONTRACT
//   resume_capture(p, step, seed, recipe, st, scaler, overflows, dl) is called at the
//     end of optimizer step `step`; it fills *p (TrainProgress: it has a field for
//     each such piece of state) from the trainer's objects: the optimizers of the
//     TrainState (../../common/train_state.h, optim.h's AdamW), the loss scaler, the
//     trainer's count of overflowed steps, the data loader (data.h). The identity of
//     the run (step, seed, recipe) is filled already. data and data_step_rows are set
//     by fault_tolerance_ext.c, not here.
//   resume_restore(p, st, scaler, overflows, dl) is called before the resumed run's
//     first step, in a fresh process (perhaps in another layout, with other numbers
//     of optimizers): afterwards every one of those objects reads exactly what the
//     run that saved *p read at the end of step `step`.
//   Invariant: all of a job's optimizers step together, so their counters are equal:
//     one optimizer's are every one's, and every one must get them back.
//
// What the grader checks (tests/stage07.sh, s7.resume.*): 24 runs of DDP, ZeRO-3, FSDP
// with accumulation, tensor-parallel and pipeline layouts, killed at a random step
// and rank, resumed from their checkpoints, end with weights bitwise (cmp) those of
// the run never killed; so do mixed-bf16 (its fp32 masters, also with several
// optimizers a rank), mixed-fp16 after an overflow (and its loss-scale summary line,
// and the final manifest's progress), pure bf16 with stochastic rounding (its stream),
// and a run whose loss-spike check skipped a step before a checkpoint.
//
// Pitfalls: the data position is not the step (gradient accumulation serves several
// micro-batches per step); a counter restored one off (the course's random streams
// are counter-based: off by one, every later draw is its successor's); state restored
// into one optimizer only; part of the loss scaler; counting the optimizer's skipped
// steps as the trainer's overflows (they differ once a step is skipped for another
// reason); assuming the masters are filled (not after a checkpoint whose every step
// overflowed).
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
