// resume.c — the training state that is not a tensor (checkpoint.h's
// TrainProgress): what a resumed run needs to take the very same steps, bit for
// bit, that the run it replaces would have taken.
//
// The course's randomness is counter-based, so no generator state needs saving:
// the corpus is fixed by the seed and each batch by the step number (data.h),
// and stochastic rounding draws from (seed, AdamW's step counter t). Restore
// the counters and every draw repeats. What a resume easily gets wrong:
//   - the data loader's position (micro-batches served, not optimizer steps:
//     with gradient accumulation there are several per step); without it the
//     resumed run trains on the first batches again (the loss looks fine; the
//     weights are not the same);
//   - AdamW's t: the bias corrections 1 - beta^t and the rounding stream follow it;
//   - whether the fp32 masters are filled (mixed precision): a run that refills
//     them from the bf16 weights throws away the bits only the masters hold;
//   - the loss scaler (mixed-fp16): the whole LossScaler, its scale and count of
//     good steps (they decide the next steps) and its counters of skips, growths
//     and back-offs (the run's summary reports them).
#include <stdio.h>
#include <string.h>

#include "checkpoint.h"

void resume_capture(TrainProgress *p, uint64_t step, uint64_t seed, const char *recipe,
                    const TrainState *st, const LossScaler *scaler, long overflows,
                    const DataLoader *dl) {
    memset(p, 0, sizeof *p);
    p->step = step;
    p->data_step = dl->step;
    p->seed = seed;
    snprintf(p->recipe, sizeof p->recipe, "%s", recipe);
    // Every optimizer of the job steps together: one's counters are all of theirs.
    if (st->n_opts > 0) {
        p->opt_t = st->opts[0]->t;
        p->master_filled = st->opts[0]->master_filled;
        p->opt_skipped = st->opts[0]->skipped;
    }
    p->scaler = *scaler;
    p->overflows = overflows;
}

void resume_restore(const TrainProgress *p, const TrainState *st, LossScaler *scaler,
                    long *overflows, DataLoader *dl) {
    for (int i = 0; i < st->n_opts; i++) {
        st->opts[i]->t = p->opt_t;
        st->opts[i]->master_filled = p->master_filled;
        st->opts[i]->skipped = p->opt_skipped;
    }
    *scaler = p->scaler;
    *overflows = p->overflows;
    dl->step = p->data_step;  // the next batch: the one after the last step's
}
