// plan.c — who owns what: units of layer groups, and the two ways to cut the flat
// buffers into shards.
//
// ZeRO (DeepSpeed) cuts the whole flat buffer once: rank r owns elements
// [r*S, (r+1)*S), S = ceil(Ψ/N), the last ranks padded to S. A bucket or a unit is
// then a range that overlaps one or two ranks' shards and none of the others':
// its blocks are uneven, and reduce-scatter_v / all_gather_v move them.
//
// FSDP (PyTorch) cuts every unit evenly instead: rank r owns 1/N of each unit,
// padded to ceil(|u|/N). Every gather of a unit is then a balanced all-gather, at
// the price of padding once per unit: Σu ceil(|u|/N) >= ceil(Ψ/N) elements.
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sharded.h"

void plan_build(ShardPlan *P, const GPT *g, const ShardConfig *cfg, int p, int r) {
    memset(P, 0, sizeof *P);
    int G = g->cfg.n_layer + 2;
    P->groups = G;
    P->p = p;
    P->r = r;
    P->per_unit = cfg->kind == SH_FSDP || cfg->kind == SH_HSDP;
    int k = P->per_unit ? cfg->unit_layers : 1;  // zero3 gathers group by group
    CHECK(k >= 1, "units of %d layer groups", k);
    P->n_units = (G + k - 1) / k;
    P->unit_of = calloc((size_t)G, sizeof *P->unit_of);
    P->unit_lo = calloc((size_t)P->n_units, sizeof *P->unit_lo);
    P->unit_hi = calloc((size_t)P->n_units, sizeof *P->unit_hi);
    P->unit_base = calloc((size_t)P->n_units, sizeof *P->unit_base);
    CHECK(P->unit_of && P->unit_lo && P->unit_hi && P->unit_base, "out of host memory");
    for (int grp = 0; grp < G; grp++) P->unit_of[grp] = grp / k;
    for (int u = 0; u < P->n_units; u++) {
        int first = u * k, last = first + k < G ? first + k : G;
        P->unit_lo[u] = g->group_offset[first];
        P->unit_hi[u] = g->group_offset[last];
    }
    if (P->per_unit) {
        size_t base = 0;
        for (int u = 0; u < P->n_units; u++) {
            P->unit_base[u] = base;
            base += ceil_div(P->unit_hi[u] - P->unit_lo[u], (size_t)p);
        }
        P->shard_elems = base;
    } else {
        P->S = ceil_div(g->n_params, (size_t)p);
        P->shard_elems = P->S;
    }
}

void plan_free(ShardPlan *P) {
    free(P->unit_of);
    free(P->unit_lo);
    free(P->unit_hi);
    free(P->unit_base);
    memset(P, 0, sizeof *P);
}

void plan_blocks(const ShardPlan *P, size_t lo, size_t hi, Blocks *b, size_t *mine) {
    b->count = hi - lo;
    if (P->per_unit) {
        int u = 0;
        while (u < P->n_units && P->unit_lo[u] != lo) u++;
        CHECK(u < P->n_units && P->unit_hi[u] == hi, "FSDP shards units, not ranges: [%zu, %zu) "
              "is not a unit", lo, hi);
        blocks_even(b, hi - lo, P->p);
        if (mine) *mine = P->unit_base[u];
        return;
    }
    // ZeRO: member i owns [i*S, (i+1)*S) of the whole buffer; here, its intersection
    // with [lo, hi), empty for most members.
    for (int i = 0; i < P->p; i++) {
        size_t a = (size_t)i * P->S, z = a + P->S;
        a = a < lo ? lo : a > hi ? hi : a;
        z = z < lo ? lo : z > hi ? hi : z;
        b->lo[i] = a - lo;
        b->hi[i] = z - lo;
    }
    if (mine) {
        size_t a = (size_t)P->r * P->S;
        *mine = (lo > a ? lo : a) - a;  // from the start of this rank's shard
    }
}
