// The strip: C's last few columns (n - n0 <= kGemmStripCols, ffma_plan.h's ffma_strip_cols), which
// the 128x256 kernel computes in kStripBlocks more blocks per 128 rows (matrix-vector products,
// first in its grid: ffma_work.h) instead of a column of 128x256 tiles that would cost a whole
// wave for a column or a few (4097 = 16 x 256 + 1).
//
// A strip block takes kStripRows rows, 4 rows a warp; lanes split k (lane l: k = l mod 32) and
// the warp sums its lanes at the end. B's strip goes through shared memory, kStripK rows of k
// at a time, one tile row per column: every lane reads the same column at consecutive k and
// the copy stores consecutive k, so no layout has a conflict here (the tile still follows the
// call's layout).
#pragma once
#include "ffma.h"

namespace bankops {

constexpr int kGemmStripCols = 16;  // at most this many columns past the last whole 256-column tile

constexpr int kStripThreads = 256, kStripRowsPerWarp = 4;
constexpr int kStripRows = kStripThreads / 32 * kStripRowsPerWarp;  // rows of C per pass
constexpr int kStripK = kStripThreads;                              // a thread copies one k row
// Strip blocks per 128 rows: one pass of kStripRows rows each. A strip block's time is what
// the SM that runs it starts its tiles late by, so they are short.
constexpr int kStripBlocks = 4;
static_assert(GemmWide::kThreads == kStripThreads && GemmWide::kBM == kStripBlocks * kStripRows,
              "strip blocks are Wide blocks, a pass of rows each");

template <Layout L>
using StripTile = TileLayout<L, kGemmStripCols, kStripK, 4>;  // (strip columns, kStripK) floats

}  // namespace bankops
