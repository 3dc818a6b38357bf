// zigzag.c — which tokens each context-parallel rank holds.
//
// Causal attention's work is uneven along the sequence: query i sees i+1 keys. Cut
// into cp contiguous chunks, rank r's queries see about (2r+1)/2 chunks of keys
// each, so the last rank does 2cp-1 times the first's work and every ring step waits
// for it. Zigzag (Brandon et al., Striped/Zigzag ring attention; Llama 3's CP) cuts
// the sequence into 2cp chunks and gives rank r chunks r and 2cp-1-r: an early chunk
// and a late one, (r + 1/2) + (2cp - r - 1/2) = 2cp chunk-widths of keys for every rank.
#include "cp.h"

int cp_runs(int T, int cp, int rank, int zigzag, CpRuns *out) {
    if (cp < 1 || rank < 0 || rank >= cp || T % (zigzag ? 2 * cp : cp) != 0) return -1;
    if (!zigzag) {
        *out = (CpRuns){1, {rank * (T / cp), 0}, {T / cp, 0}};
        return 0;
    }
    int c = T / (2 * cp);
    *out = (CpRuns){2, {rank * c, (2 * cp - 1 - rank) * c}, {c, c}};
    return 0;
}
