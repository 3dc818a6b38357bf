// young_daly.h — how often to checkpoint: the Young/Daly interval, and a simulation of
// the goodput a given interval buys when failures arrive at random.
//
// Units are seconds throughout. C is the cost of one checkpoint (the time training
// stops to write it), M the mean time between failures of the whole job, T the
// compute between two checkpoints, R what a failure costs beyond the lost work
// (noticing it, restarting every rank, loading the last checkpoint).
// The sources and their numbers are in docs/formulas.md §10.
#pragma once
#include <stdint.h>

// Young (1974): the interval T that minimises the lesson's first-order waste per unit
// time, C/T + T/(2M) (derive it).
double young_interval(double C, double M);
// Daly (2006), the higher-order estimate (not Young's interval minus C, which some codes
// call Daly's): T_Y·[1 + (1/3)·sqrt(C/(2M)) + (1/9)·C/(2M)] - C for C < 2M, else M,
// where T_Y is Young's interval.
double daly_interval(double C, double M);

// What one simulated run did (every time in seconds of wall clock).
typedef struct {
    double wall;          // the horizon
    double useful;        // compute a completed checkpoint saved: the goodput's numerator
    double lost;          // compute and checkpoint writing a failure threw away
    double restarting;    // time spent in restarts (R each, restarted by a failure in one)
    long failures;        // failures, those during a restart included
    long checkpoints;     // checkpoints completed
} GoodputStats;

// A run of `horizon` seconds: T of compute, then a checkpoint of C, over and over;
// failures are a Poisson process of mean gap M (exponential gaps drawn from `seed`)
// that may strike anywhere, in a checkpoint or a restart too. A failure loses
// everything since the last completed checkpoint and costs a restart of R. Returns
// useful / horizon; fills *out when out is not NULL. Same arguments, same result.
double goodput_simulate(double C, double M, double T, double R, double horizon, uint64_t seed,
                        GoodputStats *out);

// The simulated model's expected goodput over a long run, exactly: a closed form,
// no simulation (young_daly.c derives it; exercises/young_daly.c is the starter).
double goodput_model(double C, double M, double T, double R);
// Its first-order form, for small C/T, T/M and R/M: T/(T+C) · (1 - ((T+C)/2 + R)/M),
// i.e. about 1 - C/T - (T/2 + R)/M. Clamped at 0.
double goodput_first_order(double C, double M, double T, double R);
// The interval with the highest goodput_model (found numerically), and that goodput.
double goodput_best_interval(double C, double M, double R, double *best_goodput);

// Job failure rates at cluster scale, from the published figures (docs/formulas.md §10).
typedef struct {
    int gpus;
    double mtbf_s;       // the job's mean time between failures
    const char *source;  // one word for a table column: "measured", "projected", "llama3"
    const char *what;    // where the number comes from, for a comment line
} ClusterPoint;
// The cited points, in order of GPUs; returns their count.
int cluster_points(const ClusterPoint **points);
// A job's MTBF at N GPUs the way Kokolis et al. project theirs: RSC-1's 6.50 failures
// per 1000 node-days, 8 GPUs a node, the job failing when any node does.
double cluster_mtbf_projected(int gpus);
