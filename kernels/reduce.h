// reduce_sum: shapes, launch plan, shared-memory tiles and the lane -> tile coordinates
// the kernels (reduce.cu) and their trace (reduce_trace.h) share.
//
// Every reduction is seen as x[outer][len][inner] (contiguous) summed over len.
// inner == 1 ("rows", which includes the full reduction): each row is read with 16-byte
// loads by a group of threads (a warp for short rows, the whole block for long ones) and
// the group's partial sums meet in an interleaved tree in shared memory.
// inner > 1 ("columns"): each thread sums 16-byte vectors of adjacent columns down the rows
// of its row group, and the row groups' partials are transposed through a shared-memory
// tile so that each thread sums one column.
// Long reductions with too few blocks to fill the GPU are split along len; a second pass
// sums the partials in a fixed order, so results are bitwise reproducible (no atomics).
#pragma once
#include <cstdint>

#include "dtype.h"
#include "layout.cuh"

namespace bankops {

constexpr int kReduceThreads = 256;
constexpr int kReduceWarp = 32;
// 16-byte loads in flight per thread before any of them is added: rows kernels run 4
// blocks per SM, columns kernels (often fewer blocks than 4 per SM) 2 with twice the loads.
constexpr int kReduceUnroll = 8, kReduceColsUnroll = 16;
// Columns kernel: a warp covers 32 vectors of adjacent columns; the 8 warps are row groups.
constexpr int kReduceRowGroups = kReduceThreads / kReduceWarp;
constexpr int kLoadBytes = 16;

// The interleaved tree (the "strided index" step: at stride s a thread adds the value s places
// on, s doubling) runs over kReduceThreads values laid out as rows of one 128-byte bank line each.
template <Layout L, int ACC_BYTES>
using ReduceTreeTile = TileLayout<L, kReduceThreads * ACC_BYTES / 128, 128 / ACC_BYTES, ACC_BYTES>;
// Partial column sums, stored transposed: tile row = column (component-major: row
// j * 32 + lane holds component j of lane's vector), tile column = row group.
template <Layout L, int ACC_BYTES, int VEC>
using ReduceColsTileOf = TileLayout<L, kReduceWarp * VEC, kReduceRowGroups, ACC_BYTES>;
// The columns tile of a 16-byte-load pass over accumulator-typed input (float32, float64).
template <Layout L, int ACC_BYTES>
using ReduceColsTile = ReduceColsTileOf<L, ACC_BYTES, 16 / ACC_BYTES>;

// ---- rows: the tree -------------------------------------------------------------------
// Groups of G threads (G = 32 or 256) each sum one row; thread t's partial is value t of
// the tree, at slot tree_slot(t). At stride s (1, 2, 4, ... below G / 32), thread
// t < tree_pairs(s) adds value tree_dst(t, s) + s into value tree_dst(t, s) (the pairs stay
// inside each group); then warp w reads the 32 values tree_final(t, G) of group w.
template <class Tile>
BANKOPS_HD int tree_slot(int i) { return Tile::offset(i / Tile::kCols, i % Tile::kCols); }
BANKOPS_HD constexpr int tree_pairs(int s) { return kReduceThreads / (2 * s); }
BANKOPS_HD constexpr int tree_dst(int t, int s) { return 2 * s * t; }
BANKOPS_HD constexpr int tree_final(int t, int group) {
  return (t / kReduceWarp) * group + (t % kReduceWarp) * (group / kReduceWarp);
}

// ---- columns: the transposed tile -----------------------------------------------------
// Thread (lane, g) stores component j of its column vector at tile (j * 32 + lane, g): the
// lanes of a warp walk a tile column, the transposing store.
BANKOPS_HD TileCoord cols_store(int lane, int g, int j) { return {j * kReduceWarp + lane, g}; }
// Thread t sums tile rows t, t + 256, ... (below 32 * VEC), reading row group gg of each:
// the lanes walk a tile column again, one row each.
BANKOPS_HD TileCoord cols_load(int row, int gg) { return {row, gg}; }
// The column (from the block's first) whose sum tile row `row` holds.
BANKOPS_HD constexpr int cols_column(int row, int vec) { return (row % kReduceWarp) * vec + row / kReduceWarp; }

struct ReduceShape {
  int64_t outer, len, inner;
};

// One kernel launch: sums x[outer][len][inner] (elements of elem_bytes) over len in
// `splits` chunks of `chunk`, writing [outer][splits][inner].
struct ReducePass {
  ReduceShape shape;
  int elem_bytes;
  int vec;         // elements per load: 16 / elem_bytes, or 1 (columns whose rows are not 16-byte aligned)
  int group;       // rows: threads per row, 32 or 256
  int64_t chunk;
  int64_t splits;
  int64_t blocks;  // block-iterations of the pass (its grid, before any grid-stride loop)
};

struct ReducePlan {
  bool columns;      // inner > 1
  int passes;        // 1, or 2 when the first writes partials
  ReducePass pass[2];
  int64_t workspace; // accumulator elements of partials (outer * splits * inner), 0 if none
};

// Bytes of one accumulator: float for floating types up to 32 bits, double for float64,
// int64 for integers and bool.
inline int acc_bytes(DType t) { return t == DType::F16 || t == DType::BF16 || t == DType::F32 ? 4 : 8; }
inline int elem_bytes(DType t) {
  switch (t) {
    case DType::Bool: case DType::U8: case DType::I8: return 1;
    case DType::I16: case DType::F16: case DType::BF16: return 2;
    case DType::I32: case DType::F32: return 4;
    default: return 8;
  }
}

namespace detail {

// Rows shorter than this are summed by one warp each, longer ones by a whole block.
constexpr int64_t kWarpRowMax = 8192;

inline ReducePass make_pass(ReduceShape s, int elem, bool aligned, int num_sms) {
  ReducePass p{s, elem, kLoadBytes / elem, 256, s.len, 1, 0};
  if (s.inner > 1) {
    // A column vector needs every row 16-byte aligned; otherwise one column per lane.
    if (!aligned || (s.inner * elem) % kLoadBytes != 0) p.vec = 1;
    const int64_t cols_per_block = int64_t(kReduceWarp) * p.vec;
    p.blocks = s.outer * ceil_div(s.inner, cols_per_block);
    // Split only when the blocks cannot occupy every SM; each split keeps >= 256 rows.
    const int64_t min_chunk = 256;
    if (p.blocks < num_sms && s.len > min_chunk) {
      int64_t splits = ceil_div(4LL * num_sms, p.blocks);
      if (splits > ceil_div(s.len, min_chunk)) splits = ceil_div(s.len, min_chunk);
      if (splits > 65535) splits = 65535;
      p.chunk = ceil_div(s.len, splits);
      p.splits = ceil_div(s.len, p.chunk);
    }
    p.blocks *= p.splits;
    return p;
  }
  p.group = s.len <= kWarpRowMax ? 32 : 256;
  const int64_t rows_per_block = kReduceThreads / p.group;
  p.blocks = ceil_div(s.outer, rows_per_block);
  // Block-wide rows: split when there are too few to keep every SM busy; a split is a
  // multiple of 4096 elements, so its start keeps the row's 16-byte alignment.
  const int64_t min_chunk = 16384, granule = 4096;
  if (p.group == 256 && p.blocks < 2LL * num_sms && s.len > min_chunk) {
    int64_t splits = ceil_div(4LL * num_sms, p.blocks);
    if (splits > ceil_div(s.len, min_chunk)) splits = ceil_div(s.len, min_chunk);
    p.chunk = ceil_div(ceil_div(s.len, splits), granule) * granule;
    p.splits = ceil_div(s.len, p.chunk);
  }
  p.blocks *= p.splits;
  return p;
}

}  // namespace detail

// A deterministic function of the shape, the element size, whether x's rows are 16-byte
// aligned (columns) and the SM count: the same input reduces in the same order every time.
inline ReducePlan plan_reduce(ReduceShape s, DType dtype, int num_sms, bool aligned = true) {
  ReducePlan plan{s.inner > 1, 1, {}, 0};
  plan.pass[0] = detail::make_pass(s, elem_bytes(dtype), aligned, num_sms);
  const int64_t splits = plan.pass[0].splits;
  if (splits > 1) {
    // The partials: [outer][splits][inner] accumulators in a fresh (aligned) workspace.
    plan.passes = 2;
    plan.workspace = s.outer * splits * s.inner;
    plan.pass[1] = detail::make_pass(ReduceShape{s.outer, splits, s.inner}, acc_bytes(dtype), true, num_sms);
    plan.pass[1].splits = 1;  // a second split would need a third pass: sum each column whole
    plan.pass[1].chunk = splits;
    plan.pass[1].blocks = plan.columns ? s.outer * ceil_div(s.inner, int64_t(kReduceWarp) * plan.pass[1].vec)
                                       : ceil_div(s.outer, int64_t(kReduceThreads / plan.pass[1].group));
  }
  return plan;
}

}  // namespace bankops
