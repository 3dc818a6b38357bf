// flash_tiles.h — the tile arithmetic of causal flash attention, shared by the CPU's
// version (ops_cpu_flash.c) and a GPU kernel's (compiled by nvcc as __host__
// __device__), so that both walk the same tiles in the same order and the CPU's
// tests prove the index math a kernel uses.
//
// Queries come in tiles of FLASH_BR rows, keys in tiles of FLASH_BC. Causal: query
// i sees keys 0..i, so a query tile starting at i0 needs the key tiles up to its
// last row, and a key tile starting at j0 is seen by the query tiles from the one
// holding row j0 on.
#pragma once

#ifdef __CUDACC__
#define FLASH_HD __host__ __device__ static inline
#else
#define FLASH_HD static inline
#endif

#define FLASH_BR 64  // query rows a tile
#define FLASH_BC 64  // keys a tile

// Rows of the query tile starting at i0 (the last tile may be short).
FLASH_HD int flash_tile_rows(int i0, int T) { return T - i0 < FLASH_BR ? T - i0 : FLASH_BR; }
// Keys of the key tile starting at j0.
FLASH_HD int flash_tile_cols(int j0, int T) { return T - j0 < FLASH_BC ? T - j0 : FLASH_BC; }
// One past the last key the query tile at i0 sees: key tiles start below it.
FLASH_HD int flash_key_end(int i0, int T) {
    int last = i0 + flash_tile_rows(i0, T);
    return last < T ? last : T;
}
// How many of the key tile's keys j0..j0+cols-1 query i sees (0..cols): a prefix.
FLASH_HD int flash_keys_seen(int i, int j0, int cols) {
    int n = i - j0 + 1;
    return n < 0 ? 0 : n > cols ? cols : n;
}
// The first query tile that sees key tile j0: the one holding row j0.
FLASH_HD int flash_query_start(int j0) { return j0 / FLASH_BR * FLASH_BR; }
