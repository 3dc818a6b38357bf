// exercises/softmax_merge.c — YOUR merge of two partial softmaxes (context parallelism).
//   make grade-4 PART=softmax_merge
// Stuck? make hint-4 PART=softmax_merge   (tier 1 a nudge; TIER=2, 3 more)
//
// Read the lesson's §3b. Ring attention computes each query's softmax-weighted output
// one block of keys at a time, on whichever rank holds the block; this function joins
// two such partial results of the same rows into the result over both blocks' keys.
//
// THE CONTRACT (cp.h)
//   out (n rows, stride ld_out) and lse (n): each row an output of hs floats, the
//     softmax-weighted mean of some keys' values (weights normalised over those keys),
//     and lse = log of the sum of exp(score) over those keys; a row that has seen no key
//     yet holds zeros and lse = -INFINITY.
//   out_b, lse_b (stride ld_b): the same rows over another, disjoint set of keys.
//   Afterwards out and lse hold the rows over both sets: exactly what one softmax over
//   all those keys gives, to fp32's rounding; lse = log(exp(lse) + exp(lse_b)).
//   It must hold for any finite scores (lse of +-1e4 included: exp of it overflows),
//   when either part saw no key (its weight is then 0), and when neither did (the row
//   stays zeros and -INFINITY: a NaN here would spread through every later merge).
//
// What the grader checks (tests/test_cp.c and tests/stage04.sh, cp.*): the merge
// alone against a float64 softmax on rows that stress it; ring attention, which merges
// every block it computes, against one process's attention at cp = 2, 3, 4; and the
// GPT trained with it against one process (cp.equiv.ring.*).
//
// Pitfalls: exp(lse) overflows long before attention's scores get large; -INFINITY
// minus -INFINITY is NaN; each part's output was normalised by its own sum, not the
// total's.
#include <math.h>

#include "cp.h"

void softmax_merge(float *out, float *lse, int ld_out, const float *out_b, const float *lse_b,
                   int ld_b, int n, int hs) {
    (void)out; (void)lse; (void)ld_out; (void)out_b; (void)lse_b; (void)ld_b; (void)n; (void)hs;
    // TODO(exercise): per row, the two weights, the merged output, the merged lse.
}
