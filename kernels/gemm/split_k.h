// Split-K's plan (split_k.cuh runs it): how many blocks share a tile's k tiles, which k tiles
// and which rows of the sum each takes, and the partial tile's layout. Host and device alike.
#pragma once
#include <cstdint>
#include <type_traits>

#include "../layout.cuh"
#include "args.h"

namespace bankops {

// A cluster of at most 8 blocks (the portable cluster size), each at least kSplitMinK k tiles
// (a shorter run fills its pipeline for too little work).
constexpr int kMaxSplit = 8, kSplitMinK = 4;

// Whether s blocks may share a tile's nk k tiles on `device` (kernels of blocks_per_sm blocks an
// SM): every rank keeps min_k k tiles or more (one block always may), and one cluster fits.
inline bool split_k_fits(int s, int64_t nk, const DeviceInfo& device, int blocks_per_sm, int min_k = kSplitMinK) {
  return (s == 1 || nk >= int64_t(s) * min_k) && cluster_room(device, s, blocks_per_sm) >= s;
}

// The splits for a grid of `tiles` block tiles, nk k tiles deep, of a kernel of blocks_per_sm
// blocks an SM on `device`: the count s whose waves of resident clusters (cluster_room) end
// soonest, waves(s) * nk / s; a larger count only where it saves a tenth (each rank adds to
// the reduction), never one that leaves a rank fewer than min_k k tiles.
inline int split_k_count(int64_t tiles, int64_t nk, const DeviceInfo& device, int blocks_per_sm,
                         int min_k = kSplitMinK) {
  int best = 1;
  double best_time = 0;
  for (int s = 1; s <= kMaxSplit; ++s) {
    if (!split_k_fits(s, nk, device, blocks_per_sm, min_k)) continue;
    const double time = double(ceil_div(tiles * s, cluster_room(device, s, blocks_per_sm))) / s;
    if (s == 1 || 10 * time < 9 * best_time) best = s, best_time = time;
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

// The quads (4 columns) a summing thread loads at once from each rank: distributed shared memory
// answers in hundreds of cycles, so each thread keeps kSplitQuads loads in flight.
constexpr int kSplitQuads = 4;

// Quad e (4 columns) of the rows `rows` of a partial tile: its (row, first column).
template <class PTile>
BANKOPS_HD TileCoord split_quad(SplitRows rows, int e) {
  return TileCoord{rows.begin + e / (PTile::kCols / 4), e % (PTile::kCols / 4) * 4};
}

// The partial tile: (BM, BN) floats. A half-warp stores accumulator pairs on 4 rows x 32
// bytes: `pad` moves each row 32 bytes on, `swizzle` XORs row bits 0-1 into the 32-byte group
// (both conflict-free; `none` puts the 4 rows on the same banks). The sums read along rows.
template <Layout L, int BM, int BN>
using SplitTile = std::conditional_t<L == Layout::Swizzle, Swizzled<BM, BN, Swizzle<2, 3, log2_exact(BN) - 3>>,
                                     TileLayout<L, BM, BN, 4, 32>>;

}  // namespace bankops
