// ckpt_layout.c — a range of a rank's flat buffer as rectangles of the whole
// model's tensors (checkpoint.h), and the checksum that guards them on disk.
//
// A rank's flat layout is its slice table: tensor after tensor, each its local
// piece (rows x cols) of the whole (grows x gcols). Where the piece sits in the
// whole is stage 04's split (model.h):
//
//   SPLIT_NONE    the whole tensor
//   SPLIT_COLS    columns [r*cols, (r+1)*cols) of every row
//   SPLIT_ROWS    rows [r*rows, (r+1)*rows) (a vector: its elements)
//   SPLIT_VOCAB   the same, the last block padded past the vocabulary
//   SPLIT_QKV     within each of q, k and v (thirds of the rows): rank r's block
//
// So each local row (each block of a vector) lands in one row of the whole,
// contiguously: a segment. Consecutive segments that stack (same columns, next
// row, next local row) merge into one rectangle. A ZeRO shard that starts in
// the middle of a row gives a partial first row, a block of whole rows and a
// partial last row: three rectangles.
#include <pthread.h>
#include <stdlib.h>

#include "check.h"
#include "checkpoint.h"

typedef struct {
    CkptBox *b;
    int n, cap;
} Boxes;

// Adds the segment: global row gi, columns [gj, gj + len), at local element `at`
// of the view; merged into the last box when it stacks under it.
static void add_segment(Boxes *B, int slice, int64_t gi, int64_t gj, int64_t len, size_t at,
                        size_t row_stride) {
    if (B->n > 0) {
        CkptBox *p = &B->b[B->n - 1];
        if (p->slice == slice && p->c0 == gj && p->nc == len && p->r0 + p->nr == gi &&
            p->local + (size_t)p->nr * p->stride == at && p->stride == row_stride) {
            p->nr++;
            return;
        }
    }
    if (B->n == B->cap) {
        B->cap = B->cap ? 2 * B->cap : 16;
        B->b = realloc(B->b, (size_t)B->cap * sizeof *B->b);
        CHECK(B->b, "out of host memory");
    }
    B->b[B->n++] = (CkptBox){.slice = slice, .r0 = gi, .nr = 1, .c0 = gj, .nc = len,
                             .local = at, .stride = row_stride};
}

// Local elements [a, b) of slice s (rank `rank` of the tensor-parallel group) as
// segments; `base` is the local offset of the slice's element 0 in the view. The
// piece's runs that are contiguous in the whole tensor (gpt_slice_run), cut at the
// whole tensor's row ends: a segment lies in one row of the tensor.
static void slice_segments(Boxes *B, int si, const ParamSlice *s, int rank, size_t a, size_t b,
                           size_t base) {
    size_t gc = (size_t)s->gcols, n = (size_t)s->grows * gc, g, run;
    int vec = s->grows == 1;
    for (size_t e = a; e < b; e += run) {
        run = gpt_slice_run(s, rank, e, &g);
        if (run > b - e) run = b - e;
        if (run > gc - g % gc) run = gc - g % gc;
        if (g >= n) continue;  // the vocabulary's padding: in no box
        add_segment(B, si, (int64_t)(g / gc), (int64_t)(g % gc), (int64_t)run, base + e,
                    vec ? run : (size_t)s->cols);
    }
}

int ckpt_boxes(const GPT *g, size_t lo, size_t hi, CkptBox **out) {
    Boxes B = {0};
    for (int si = 0; si < g->n_slices; si++) {
        const ParamSlice *s = &g->slices[si];
        size_t s0 = s->offset, s1 = s->offset + s->numel;
        if (s->numel == 0 || s1 <= lo || s0 >= hi) continue;
        size_t a = (lo > s0 ? lo : s0) - s0, b = (hi < s1 ? hi : s1) - s0;
        slice_segments(&B, si, s, g->tp.size > 1 ? g->tp.rank : 0, a, b, s0 - lo);
    }
    *out = B.b;
    return B.n;
}

// CRC-32C (Castagnoli, the polynomial iSCSI, ext4 and RocksDB use), reflected,
// one table lookup per byte: about 0.5 GB/s, a small cost beside writing the
// bytes. Any single flipped bit, and any burst of up to 32, changes it. The table
// is a constant, computed once (pthread_once: the async writer may be first).
static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t crc32c(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    const unsigned char *p = data;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc_table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
    return ~crc;
}
