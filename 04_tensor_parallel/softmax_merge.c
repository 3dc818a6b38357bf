// softmax_merge.c — two partial attention results merged by their log-sum-exps.
//
// Over keys A a query's output is O_A = sum_j exp(s_j - L_A) v_j with
// L_A = log sum_j exp(s_j); over keys B likewise. Over both, L = log(exp(L_A) +
// exp(L_B)) and O = exp(L_A - L) O_A + exp(L_B - L) O_B: each part's weights were
// normalised by its own sum, and are renormalised by the whole. Computed from
// M = max(L_A, L_B), L = M + log(exp(L_A - M) + exp(L_B - M)): both exponents are
// <= 0, so nothing overflows, whatever the scores. A part that saw no key (L = -inf)
// gets weight exp(-inf) = 0, and a row neither part saw stays zeros and -inf (a NaN
// from -inf - -inf would spread through every later merge).
//
// Ring attention merges the block it just computed into what it holds, once per ring
// step; flash attention (common/ops_cpu_flash.c) does the same inside one rank, per
// tile, on unnormalised sums.
#include <math.h>

#include "cp.h"

void softmax_merge(float *out, float *lse, int ld_out, const float *out_b, const float *lse_b,
                   int ld_b, int n, int hs) {
    for (int i = 0; i < n; i++) {
        float la = lse[i], lb = lse_b[i], m = la > lb ? la : lb;
        if (m == -INFINITY) continue;  // neither part saw a key
        float wa = expf(la - m), wb = expf(lb - m), sum = wa + wb;
        float *o = out + (size_t)i * ld_out;
        const float *ob = out_b + (size_t)i * ld_b;
        wa /= sum, wb /= sum;
        for (int d = 0; d < hs; d++) o[d] = wa * o[d] + wb * ob[d];
        lse[i] = m + logf(sum);
    }
}
