// young_daly.c — how often to checkpoint: Young's and Daly's intervals, and the exact
// goodput of the failure model they approximate (goodput.c simulates it).
//
// A checkpoint costs C seconds of stopped training; a failure throws away everything
// computed since the last one. Checkpoint often and the writes eat the run; rarely, and
// each failure eats more. Between the two lies an optimum interval, which depends only
// on C and the mean time between failures M. The sources are collected in
// docs/formulas.md §10.
#include "young_daly.h"

#include <math.h>

// ---------------------------------------------------------------- the two formulas

// Young (J. W. Young, CACM 17(9), 1974). Per unit of time, checkpointing every T
// seconds of compute wastes about C/T on the writes; failures come at rate 1/M and
// each strikes, on average, halfway through an interval, losing T/2: T/(2M). The
// waste W(T) = C/T + T/(2M) is smallest where W'(T) = -C/T² + 1/(2M) = 0:
// T = sqrt(2·C·M). (First order: it ignores failures during the checkpoint and the
// restart, and more than one failure per interval, so it needs C << M.)
double young_interval(double C, double M) {
    return sqrt(2.0 * C * M);
}

// Daly (J. T. Daly, Future Generation Computer Systems 22(3), 2006) kept the higher-order
// terms of the same expansion (failures during the checkpoint included): with
// x = C/(2M), T = sqrt(2CM)·[1 + sqrt(x)/3 + x/9] - C while C < 2M, and T = M beyond
// that, where checkpoints are so dear that one per MTBF is the best there is. Some
// software calls sqrt(2CM) - C or sqrt(2CM + C²) - C "Daly's"; this is the higher-order
// one (C = 60 s, M = 1.8 h: 842.3 s, against 821.8 s for sqrt(2CM) - C).
double daly_interval(double C, double M) {
    if (C >= 2.0 * M) return M;
    double x = C / (2.0 * M);
    return sqrt(2.0 * C * M) * (1.0 + sqrt(x) / 3.0 + x / 9.0) - C;
}

// ---------------------------------------------------------------- the model, exactly

// The simulation's expectation. One segment needs τ = T + C seconds without a failure.
// With failures at rate λ = 1/M and nothing else, the expected time to get through it
// is (e^(λτ) - 1)/λ: (e^(λτ) - 1) failed attempts are expected (a geometric count with
// success e^(-λτ)), each losing the expected E[X | X < τ], and the sum telescopes.
// Every failure adds a restart, itself a block of R that a failure begins again:
// (e^(λR) - 1)/λ expected. Together, (e^(λτ) - 1)/λ · (1 + (e^(λR) - 1)), that is
// M·e^(R/M)·(e^(τ/M) - 1) seconds of wall clock per T of saved work.
// R multiplies every interval's cost alike, so it lowers the goodput but does not move
// the best interval.
double goodput_model(double C, double M, double T, double R) {
    return T / (M * exp(R / M) * expm1((T + C) / M));
}

