// exercises/young_daly.c — YOUR checkpoint interval.   make grade-7 PART=young_daly
// Stuck? make hint-7 PART=young_daly   (tier 1 a nudge; TIER=2, 3 more)
//
// Read the lesson's opening section (the waste of checkpointing every T seconds),
// ../young_daly.h (the units, Daly's published form, and the model goodput_simulate
// runs). All times
// in seconds: C what one checkpoint costs (training stopped), M the job's mean time
// between failures, T the compute between two checkpoints, R what a failure costs
// beyond the lost work (a restart and a load).
//
// THE CONTRACT
//   young_interval(C, M)   Young's first-order optimum: the T that minimises the
//                          waste per unit of time, C/T for the writes plus the work
//                          a failure throws away (half an interval on average, at
//                          rate 1/M). Derive it.
//   daly_interval(C, M)    Daly's (2006) higher-order estimate exactly as
//                          ../young_daly.h states it, in both of its regimes
//                          (C below 2M, and from 2M on). Not either of the simpler
//                          forms that software sometimes calls Daly's.
//   goodput_model(C,M,T,R) the expected goodput of goodput_simulate's model over a
//                          long run, in closed form (no simulation, no loop): the
//                          fraction of the wall clock that ends up saved by a
//                          completed checkpoint. The model: T of compute then C of
//                          checkpoint, over and over; failures a Poisson process of
//                          mean gap M that may strike anywhere (in a checkpoint or a
//                          restart too); a failure loses everything since the last
//                          completed checkpoint and costs a restart of R, which a
//                          failure during it starts over.
//
// What the grader checks (tests/test_interval.c, interval.*): the published test
// vector (C = 60 s, M = 1.8 h: Young 881.8 s, Daly 842.3 s, the simple form 821.8 s)
// to 0.05 s; Daly at and beyond C = 2M, and Daly -> Young as C/M -> 0; your
// goodput_model against a simulation of failures (four settings, within 5 sigma);
// your intervals near the best interval of a sweep; a restart cost that changes the
// goodput but not the best interval (to 1e-12); the cluster-scale optimum; and
// failures so rare (M = 1e15 s) that the goodput must be T/(T+C) to 1e-9.
//
// Pitfalls: Young's interval off by its constant factor; Daly's regime boundary; a
// goodput that forgets failures during the checkpoint or during a restart; and
// floating point: at tiny ratios a difference of nearly equal numbers cancels to one
// significant digit (math.h has functions made for that case).
#include "young_daly.h"

#include <math.h>

double young_interval(double C, double M) {
    (void)C; (void)M;
    return 0;  // TODO(exercise)
}

double daly_interval(double C, double M) {
    (void)C; (void)M;
    return 0;  // TODO(exercise)
}

double goodput_model(double C, double M, double T, double R) {
    (void)C; (void)M; (void)T; (void)R;
    return 0;  // TODO(exercise)
}
