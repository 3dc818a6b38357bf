// pp_sim.c — a pipeline schedule's step, simulated: the bubble without the noise.
//
//   build/pp_sim --pp 4 --schedule 1f1b --microbatches 8              # T_F = T_B = T_W = 1
//   build/pp_sim --pp 4 --schedule zb-h1 --microbatches 8 --tf 1 --tb 1 --tw 1 --gantt zb.dat
//   build/pp_sim --pp 2 --schedule gpipe --microbatches 8 --tf 0.012,0.010 --tb 0.025,0.024 --tw 0
//
// The same schedule as build/pp_train runs (sched_build, proved by sched_check),
// executed against a clock instead of a model. Each rank walks its list in order:
//
//   FORWARD          takes tF      (per stage; with v chunks a rank's chunk takes tF / v)
//   BACKWARD         takes tB + tW (the fused backward of GPipe, 1F1B, interleaved)
//   BACKWARD_INPUT   takes tB      (zero-bubble: the input gradient ...)
//   BACKWARD_WEIGHT  takes tW      (... and the weights' gradients, which nobody waits for)
//   SEND_*           posted when the rank reaches it (after the compute before it)
//   RECV_*           posted: no time
//
// A compute that needs a message (a forward its input, a backward its gradient)
// starts at max(the rank is free, the message was posted + --msg). The step is the
// last end; each rank's busy time is the sum of its computes. Two measures of the
// time lost:
//
//   bubble = (step - busy_max) / busy_max   the step beyond the busiest rank's work
//   idle   = mean over ranks of (step - busy) / busy
//
// The bubble is the textbook's (GPipe's (p-1)/m: the time the pipeline takes to fill
// and drain, over the ideal step, which is the slowest stage's m micro-batches). With
// equal stages the two are the same number; with unequal ones, idle also counts the
// faster ranks waiting for the slowest in the steady state (the load imbalance,
// busy_max / busy_min - 1), which no schedule removes and the formulas leave out.
// A time flag takes one value (every stage), p values
// (one per rank: stages that differ, as the embedding's and the head's do), or
// p·v (one per virtual stage: the chunk's own time, not divided by v).
//
// Messages travel by themselves once posted (a transport that progresses on its own;
// pp_train's shared-memory sends move only while their rank waits or tests).
//
// Checked against the formulas (tF = tB = tW = 1, --msg 0, p = 4, m = 8): GPipe and
// 1F1B 33 time units for 24 busy, bubble 0.375 = (p-1)/m; interleaved v = 2: 0.1875 =
// (p-1)/(v m), v = 4: 0.09375; any tF, tB: the same (the bubble of equal stages does not
// depend on them). zb-h1: 0.125 = (p-1)(tF+tB-tW)/(m(tF+tB+tW)), the paper's ZB-H1
// (1F1B: 0.375), and so for any tW <= min(tF, tB) (at p = 4 and 8, m = 8 to 32).
//
// --gantt FILE writes the simulated spans in common/timeline.c's table format
// (rank, lane 0 compute / 2 waiting, ms, name F3 B3 W3, with chunks F3.1): a
// compute's span begins when the rank reaches it, its wait inside, as the
// engine's trace records them, so one gnuplot script draws both.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "flags.h"
#include "schedule.h"

typedef struct {
    int rank, lane;  // lane 0 compute, 2 waiting (timeline.c's numbering)
    double t0, t1;
    char name[16];
} SimSpan;

// "x" or "x0,x1,...": fills per[0..p·v) with one virtual stage's time each.
static void stage_times(const char *flag, const char *s, int p, int v, double *per) {
    double x[PP_MAX_STAGES * 8];
    int n = 0;
    const char *c = s;
    for (;;) {
        char *end;
        double t = strtod(c, &end);
        if (end == c || !(t >= 0 && t <= 1e6) || n == PP_MAX_STAGES * 8)
            flags_fail("%s %s: one time in seconds (0 to 1e6), or one per rank or per virtual stage, "
                       "separated by commas", flag, s);
        x[n++] = t;
        if (*end == '\0') break;
        if (*end != ',') flags_fail("%s %s: times are separated by commas", flag, s);
        c = end + 1;
    }
    if (n != 1 && n != p && n != p * v)
        flags_fail("%s %s: %d values; give 1, p = %d (one per rank) or p·v = %d (one per virtual "
                   "stage)", flag, s, n, p, p * v);
    for (int k = 0; k < p * v; k++)
        per[k] = n == 1 ? x[0] / v : n == p ? x[k % p] / v : x[k];
}

static double mean_per_stage(const double *per, int p, int v) {  // per rank, all its chunks
    double s = 0;
    for (int k = 0; k < p * v; k++) s += per[k];
    return s / p;
}

int main(int argc, char **argv) {
    int p = 4, m = 8, v = 0;
    double msg = 0;
    const char *sched = "1f1b", *tf_s = "1", *tb_s = "1", *tw_s = "1", *gantt = NULL;
    Flag flags[] = {
        F_INT("--pp", &p, 1, PP_MAX_STAGES, "pipeline stages (ranks)"),
        F_CHOICE("--schedule", &sched, "gpipe|1f1b|interleaved|zb-h1", "the pipeline schedule"),
        F_INT("--microbatches", &m, 1, 1 << 16, "micro-batches per step (pp_train's --grad-accum)"),
        F_INT("--chunks", &v, 0, 8, "model chunks per rank (interleaved: >= 2; 0 = 2 there, 1 for the others)"),
        F_STRING("--tf", &tf_s, "forward of one micro-batch through a stage, seconds (1, p or p·v values)"),
        F_STRING("--tb", &tb_s, "its backward's input-gradient pass B, seconds"),
        F_STRING("--tw", &tw_s, "its backward's weight-gradient pass W, seconds (fused: B + W)"),
        F_DOUBLE("--msg", &msg, 0, 1e6, "seconds from a message's send to its arrival"),
        F_STRING("--gantt", &gantt, "write the simulated spans to this file (timeline.c's .dat)"),
    };
    flags_parse(flags, FLAG_COUNT(flags), argc, argv, "pp_sim [flags]",
                "Simulates one step of a pipeline schedule with given per-stage times: the step "
                "time, each rank's busy and idle time, the bubble beside the textbook formulas.");
    SchedKind kind;
    sched_parse(sched, &kind);
    v = sched_chunks(kind, v);
    char err[512];
    PPSchedule *S = sched_build(kind, p, m, v, err, sizeof err);
    if (!S) flags_fail("%s%s", err, strstr(err, "micro-batches") ? " (m is --microbatches)" : "");
    if (sched_check(S, err, sizeof err))
        flags_fail("the %s schedule (%s) is not sound: %s", sched, sched_source(kind), err);
    int K = p * v;
    double *tf = calloc(K, sizeof *tf), *tb = calloc(K, sizeof *tb), *tw = calloc(K, sizeof *tw);
    // When vstage k posted its output activation / its input gradient of micro-batch mb.
    double *act_at = malloc((size_t)K * m * sizeof *act_at);
    double *grad_at = malloc((size_t)K * m * sizeof *grad_at);
    size_t total = 0;
    for (int s = 0; s < p; s++) total += (size_t)S->n[s];
    SimSpan *sp = malloc((2 * total + 1) * sizeof *sp);
    CHECK(tf && tb && tw && act_at && grad_at && sp, "out of memory");
    stage_times("--tf", tf_s, p, v, tf);
    stage_times("--tb", tb_s, p, v, tb);
    stage_times("--tw", tw_s, p, v, tw);
    for (int i = 0; i < K * m; i++) act_at[i] = grad_at[i] = -1;
    double clock[PP_MAX_STAGES] = {0}, busy[PP_MAX_STAGES] = {0};
    int pc[PP_MAX_STAGES] = {0};
    size_t nsp = 0;

    // Round robin over the ranks, each as far as it can go; the checker proved that
    // every rank gets to its end, so a round in which none moves is a bug here.
    for (;;) {
        int moved = 0, left = 0;
        for (int s = 0; s < p; s++) {
            while (pc[s] < S->n[s]) {
                const PPAction *a = &S->acts[s][pc[s]];
                int k = pp_vstage(S, s, a->chunk), mb = a->mb;
                double dur = 0, ready = clock[s];
                char letter = 0;
                if (a->op == PP_SEND_ACT) act_at[k * m + mb] = clock[s];
                if (a->op == PP_SEND_GRAD) grad_at[k * m + mb] = clock[s];
                if (a->op == PP_FORWARD) {
                    if (k > 0) {
                        if (act_at[(k - 1) * m + mb] < 0) break;  // not sent yet
                        ready = act_at[(k - 1) * m + mb] + msg;
                    }
                    dur = tf[k], letter = 'F';
                } else if (a->op == PP_BACKWARD || a->op == PP_BACKWARD_INPUT) {
                    if (k < K - 1) {
                        if (grad_at[(k + 1) * m + mb] < 0) break;
                        ready = grad_at[(k + 1) * m + mb] + msg;
                    }
                    dur = tb[k] + (a->op == PP_BACKWARD ? tw[k] : 0), letter = 'B';
                } else if (a->op == PP_BACKWARD_WEIGHT) {
                    dur = tw[k], letter = 'W';
                }
                if (letter) {
                    double start = ready > clock[s] ? ready : clock[s];
                    SimSpan *x = &sp[nsp++];
                    *x = (SimSpan){s, 0, clock[s], start + dur, ""};
                    int c = snprintf(x->name, sizeof x->name, "%c%d", letter, mb);
                    if (v > 1) snprintf(x->name + c, sizeof x->name - c, ".%d", a->chunk);
                    if (start > clock[s]) sp[nsp++] = (SimSpan){s, 2, clock[s], start, "wait"};
                    clock[s] = start + dur;
                    busy[s] += dur;
                }
                pc[s]++;
                moved = 1;
            }
            left += pc[s] < S->n[s];
        }
        if (!left) break;
        CHECK(moved, "pp_sim: no rank can move, although the checker passed the schedule");
    }

    double step = 0;
    for (int s = 0; s < p; s++) step = clock[s] > step ? clock[s] : step;
    double F = mean_per_stage(tf, p, v), B = mean_per_stage(tb, p, v), W = mean_per_stage(tw, p, v);
    printf("# pp_sim: %s, p = %d ranks, m = %d micro-batches, v = %d chunk%s per rank\n", sched, p, m,
           v, v > 1 ? "s" : "");
    printf("# per stage and micro-batch (the mean over the ranks, s): tF = %.6g, tB = %.6g, tW = %.6g;"
           " message %.6g s\n", F, B, W, msg);
    printf("# rank  busy_s  idle_s  idle  in_flight   (idle = (step - busy) / busy)\n");
    double isum = 0, bmax = 0, bmin = 0;
    for (int s = 0; s < p; s++) {
        double x = busy[s] > 0 ? (step - busy[s]) / busy[s] : 0;
        isum += x;
        bmax = s == 0 || busy[s] > bmax ? busy[s] : bmax;
        bmin = s == 0 || busy[s] < bmin ? busy[s] : bmin;
        printf("rank %d %.6g %.6g %.4f %d\n", s, busy[s], step - busy[s], x, sched_max_in_flight(S, s));
    }
    double bubble = bmax > 0 ? (step - bmax) / bmax : 0, idle = isum / p;
    double imbalance = bmin > 0 ? bmax / bmin - 1 : 0;
    double formula;
    const char *why;
    if (kind == SCHED_INTERLEAVED) {
        formula = (p - 1.0) / ((double)v * m);
        why = "interleaved 1F1B: (p-1)/(v m)";
    } else if (kind == SCHED_ZB_H1) {
        formula = (p - 1.0) * (F + B - W) / (m * (F + B + W));
        why = "ZB-H1 (Qi et al., the handcrafted schedule): (p-1)(tF+tB-tW)/(m(tF+tB+tW))";
    } else {
        formula = (p - 1.0) / m;
        why = "GPipe and 1F1B, the backward tB + tW: (p-1)/m";
    }
    printf("step %.6g s; bubble %.4f = (step - busy_max) / busy_max; idle %.4f (the mean of the "
           "ranks); imbalance %.4f = busy_max / busy_min - 1\n", step, bubble, idle, imbalance);
    printf("# formula %s = %.4f: equal stages, no message time (the mean stage above when they differ)\n",
           why, formula);
    printf("# simulated / formula = %.4f%s\n", formula > 0 ? bubble / formula : 0,
           kind == SCHED_ZB_H1 ? " (ZB-H1's formula holds for tW <= min(tF, tB); a longer W"
                                 " outgrows the idle time it is moved into)" : "");
    printf("RESULT sim schedule=%s p=%d m=%d v=%d step=%.6g bubble=%.6f idle=%.6f imbalance=%.6f "
           "formula=%.6f\n", sched, p, m, v, step, bubble, idle, imbalance, formula);
    if (gantt) {
        FILE *f = fopen(gantt, "w");
        CHECK(f, "cannot write %s", gantt);
        fprintf(f, "# rank lane(0 compute, 1 communication, 2 waiting) t0_ms t1_ms name "
                   "(simulated by pp_sim: %s p=%d m=%d v=%d)\n", sched, p, m, v);
        for (int s = 0; s < p; s++)
            for (int lane = 0; lane <= 2; lane += 2)
                for (size_t i = 0; i < nsp; i++)
                    if (sp[i].rank == s && sp[i].lane == lane)
                        fprintf(f, "%d %d %.4f %.4f \"%s\"\n", s, lane, sp[i].t0 * 1e3,
                                sp[i].t1 * 1e3, sp[i].name);
        CHECK(fclose(f) == 0, "cannot write %s", gantt);
    }
    free(tf); free(tb); free(tw); free(act_at); free(grad_at); free(sp);
    sched_free(S);
    return 0;
}
