// Split-K's plan (split_k.cuh runs it): how many blocks share a tile's k tiles, which k tiles
// and which rows of the sum each takes, and the partial tile's layout. Host and device alike.
#pragma once
#include <cstdint>
#include <type_traits>

#include "../layout.cuh"

namespace bankops {

// A cluster of at most 8 blocks (the portable cluster size), each at least kSplitMinK k tiles
// (a shorter run fills its pipeline for too little work).
constexpr int kMaxSplit = 8, kSplitMinK = 4;

// The splits for a grid of `tiles` block tiles, nk k tiles deep, on `slots` resident blocks:
// the fewest (powers of two) whose blocks fill 9/10 of their waves' slots, else the ones that
// fill the most; 1 where the grid already does, splits of fewer than kSplitMinK k tiles never.
BANKOPS_HD int split_k_count(int64_t tiles, int64_t nk, int64_t slots) {
  int best = 1;
  int64_t best_blocks = 0, best_room = 1;  // the best fill so far: best_blocks / best_room
  for (int s = 1; s <= kMaxSplit && (s == 1 || nk >= s * kSplitMinK); s *= 2) {
    const int64_t blocks = tiles * s, room = ceil_div(blocks, slots) * slots;
    if (10 * blocks >= 9 * room) return s;
    if (blocks * best_room > best_blocks * room) best = s, best_blocks = blocks, best_room = room;
  }
  return best;
}

// Rank r's k tiles [split_k_begin(r), split_k_begin(r + 1)) of nk.
BANKOPS_HD int64_t split_k_begin(int64_t nk, int splits, int r) { return nk * r / splits; }

// The rows [begin, end) of the tile's sum that rank r adds up and stores.
struct SplitRows {
  int begin, end;
};
BANKOPS_HD SplitRows split_rows(int bm, int splits, int r) { return SplitRows{bm * r / splits, bm * (r + 1) / splits}; }

// The partial tile: (BM, BN) floats. A half-warp stores accumulator pairs on 4 rows x 32
// bytes: `pad` moves each row 32 bytes on, `swizzle` XORs row bits 0-1 into the 32-byte group
// (both conflict-free; `none` puts the 4 rows on the same banks). The sums read along rows.
template <Layout L, int BM, int BN>
using SplitTile = std::conditional_t<L == Layout::Swizzle, Swizzled<BM, BN, Swizzle<2, 3, log2_exact(BN) - 3>>,
                                     TileLayout<L, BM, BN, 4, 32>>;

}  // namespace bankops
