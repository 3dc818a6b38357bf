// exercises/zigzag.c — YOUR placement of a sequence's tokens on the context-parallel
// ranks.
//   make grade-4 PART=cp_zigzag
// Stuck? make hint-4 PART=cp_zigzag   (tier 1 a nudge; TIER=2, 3 more)
//
// Read the lesson's §3b. Causal attention's query i sees i+1 keys, so a rank holding
// the sequence's last chunk does far more work than one holding its first, and every
// ring step waits for the slowest. Zigzag cuts the sequence into 2cp equal chunks and
// gives rank r chunks r and 2cp-1-r: one early, one late.
//
// THE CONTRACT (cp.h)
//   cp_runs(T, cp, rank, zigzag, out): the tokens rank `rank` of cp holds, as runs of
//   consecutive positions in ascending order of position:
//     contiguous (zigzag 0): one run, chunk `rank` of cp chunks of T/cp;
//     zigzag (1):            two runs of T/(2cp), chunks rank and 2cp-1-rank of 2cp.
//   Returns 0; or -1, filling nothing, when T is not a multiple of cp (contiguous) or of
//   2cp (zigzag), or cp < 1, or rank is not in 0..cp-1: such a layout is refused, never
//   padded or truncated silently.
//   Over the ranks, every position 0..T-1 must be held exactly once.
//
// What the grader checks (tests/test_cp.c and tests/stage04.sh, cp.*): every T from 1
// to 48 and cp from 1 to 6, both placements (each token exactly once, refused exactly
// when it must be); zigzag's balance (every rank the same causal work); ring attention
// and Ulysses at cp = 2, 3, 4 and the GPT trained with them against one process.
#include "cp.h"

int cp_runs(int T, int cp, int rank, int zigzag, CpRuns *out) {
    (void)T; (void)cp; (void)rank; (void)zigzag; (void)out;
    return -1;  // TODO(exercise): the checks, then the run (or the two runs).
}
