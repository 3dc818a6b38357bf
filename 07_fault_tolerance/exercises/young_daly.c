// exercises/young_daly.c — YOUR checkpoint interval.   make grade-7 PART=young_daly
//
// Read ../young_daly.h. C is what one checkpoint costs (seconds of stopped
// training), M the job's mean time between failures, T the compute between two
// checkpoints, R what a failure costs beyond the lost work (a restart and a load).
//
// young_interval: checkpointing every T seconds wastes C/T of the time on writes;
//   failures come at rate 1/M and each throws away, on average, half an interval,
//   T/2. Find the T that minimises the waste C/T + T/(2M).
// daly_interval: Daly (2006) kept the higher-order terms of the same expansion.
//   With x = C/(2M): T = sqrt(2CM)·[1 + sqrt(x)/3 + x/9] - C while C < 2M, and
//   T = M from there on (one checkpoint per MTBF is then the best there is).
//   Beware: some software calls sqrt(2CM) - C "Daly's". It is not.
// goodput_model: the fraction of the wall clock that ends up saved by a
//   checkpoint, exactly, when failures are a Poisson process of mean gap M. One
//   segment (T of compute, then C of checkpoint) must run τ = T + C seconds with
//   no failure; a failure loses the segment and costs R, itself restarted by a
//   failure during it. The expected wall clock per segment saved is
//   M·e^(R/M)·(e^(τ/M) - 1), so the goodput is T divided by that. When τ << M,
//   e^(τ/M) - 1 loses its digits in floating point: math.h has a function for it.
//
// The tests (tests/test_interval.c, the interval.* checks) take the published
// test vector (C = 60 s, M = 1.8 h: Young 881.8 s, Daly 842.3 s), the limits, and
// a simulation of failures (goodput.c) that your goodput_model must predict and
// your intervals must land near the best of.
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
