// reduce_sum: shapes, launch plan, shared-memory tiles and the launcher.
//
// Every reduction is seen as x[outer][len][inner] (contiguous) summed over len.
// inner == 1 ("rows", which includes the full reduction) uses a block-wide tree in shared
// memory; inner > 1 ("columns") accumulates down the columns and transposes the partial
// sums through a shared-memory tile. Long reductions are split over several blocks whose
// partials a second pass sums in a fixed order, so results are bitwise reproducible.
#pragma once
#include <cstdint>

#include "dtype.h"
#include "layout.cuh"

namespace bankops {

constexpr int kReduceThreads = 256;
// Columns kernel: a block covers 32 adjacent columns with 8 row groups.
constexpr int kReduceCols = 32, kReduceRowGroups = 8;

// The interleaved tree (seed 004's "strided index" step) runs over kReduceThreads values
// laid out as rows of one 128-byte bank line each.
template <Layout L, int ACC_BYTES>
using ReduceTreeTile = TileLayout<L, kReduceThreads * ACC_BYTES / 128, 128 / ACC_BYTES, ACC_BYTES>;
// Partial column sums, stored transposed: tile row = column, tile column = row group.
template <Layout L, int ACC_BYTES>
using ReduceColsTile = TileLayout<L, kReduceCols, kReduceRowGroups, ACC_BYTES>;

// The tree's value i lives at slot tree_slot(i), row by row through the tile. At stride s
// (1, 2, 4, ... below kReduceThreads / 32), thread t < tree_pairs(s) adds value
// tree_dst(t, s) + s into value tree_dst(t, s); then warp 0 reads every (T/32)-th value.
template <class Tile>
BANKOPS_HD int tree_slot(int i) { return Tile::offset(i / Tile::kCols, i % Tile::kCols); }
BANKOPS_HD constexpr int tree_pairs(int s) { return kReduceThreads / (2 * s); }
BANKOPS_HD constexpr int tree_dst(int t, int s) { return 2 * s * t; }
constexpr int kTreeStride = kReduceThreads / 32;

// Columns kernel, thread (tx, ty): stores its column partial at tile (tx, ty) (lanes walk
// a tile column: the transposed store), then reads tile (r, c) so that groups of
// kReduceRowGroups lanes sum one tile row (= one output column).
BANKOPS_HD TileCoord cols_store(int tx, int ty) { return {tx, ty}; }
BANKOPS_HD TileCoord cols_load(int tx, int ty) {
  return {ty * (kReduceCols / kReduceRowGroups) + tx / kReduceRowGroups, tx % kReduceRowGroups};
}

struct ReduceShape {
  int64_t outer, len, inner;
};

struct ReducePlan {
  bool columns;      // inner > 1
  int64_t splits;    // blocks along len; > 1 means a second pass over partials
  int64_t chunk;     // elements of len per split
  int64_t workspace; // accumulator elements of partials (outer * splits * inner), 0 if none
};

// A deterministic function of the shape and the SM count: the same input reduces in the
// same order every time.
inline ReducePlan plan_reduce(ReduceShape s, int num_sms) {
  ReducePlan p{s.inner > 1, 1, s.len, 0};
  if (s.len == 0) return p;
  const int64_t blocks = p.columns ? s.outer * ceil_div(s.inner, kReduceCols) : s.outer;
  const int64_t target = 4LL * num_sms;
  const int64_t min_chunk = p.columns ? 64 : 8192;
  if (blocks < target && s.len > min_chunk) {
    int64_t splits = ceil_div(target, blocks);
    if (splits > ceil_div(s.len, min_chunk)) splits = ceil_div(s.len, min_chunk);
    if (splits > 65535) splits = 65535;
    p.chunk = ceil_div(s.len, splits);
    p.splits = ceil_div(s.len, p.chunk);
  }
  if (p.splits > 1) p.workspace = s.outer * p.splits * s.inner;
  return p;
}

// Bytes of one accumulator: float for floating types up to 32 bits, double for float64,
// int64 for integers and bool.
inline int acc_bytes(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32 ? 4 : 8; }


}  // namespace bankops
