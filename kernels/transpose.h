// transpose: argument blocks, shared-memory tile and launchers.
//
// ops/ reduces any N-d transpose to one of two launches:
// - a tiled transpose over a plane in[i][j] -> out[j][i], where j is the input's
//   contiguous dim and i the output's, batched over up to kTransposeBatchDims more dims;
// - a gather (a strided copy) when the input and the output share their contiguous dim,
//   so no element changes place inside a row and a tile would only add a detour.
#pragma once
#include <cstdint>

#include "layout.cuh"

namespace bankops {

constexpr int kTransposeTile = 32;      // the tile is 32 x 32 elements
constexpr int kTransposeRowGroups = 8;  // a (32 x 8) block, 4 tile rows per thread
constexpr int kTransposeBatchDims = 6;
constexpr int kGatherDims = 8;

template <Layout L, int ELEM_BYTES>
using TransposeTile = TileLayout<L, kTransposeTile, kTransposeTile, ELEM_BYTES>;

// The tile element thread (tx, ty) handles in its k-th step: on the way in it stores a row
// of the input plane (lanes walk tile columns), on the way out it reads a tile column
// (lanes walk tile rows). The kernel and its trace both call these.
BANKOPS_HD TileCoord transpose_in(int tx, int ty, int k) { return {ty + k * kTransposeRowGroups, tx}; }
BANKOPS_HD TileCoord transpose_out(int tx, int ty, int k) { return {tx, ty + k * kTransposeRowGroups}; }

struct TransposeArgs {
  const void* in;
  void* out;
  int elem_bytes;                 // 1, 2, 4, 8 or 16
  int64_t n_i, n_j;               // plane size
  int64_t in_si, in_sj;           // input strides of i and j (in elements)
  int64_t out_si, out_sj;         // output strides of i and j
  int batch_dims;
  int64_t batch;                  // product of batch_size
  int64_t batch_size[kTransposeBatchDims], in_batch_stride[kTransposeBatchDims],
      out_batch_stride[kTransposeBatchDims];
};

struct GatherArgs {
  const void* in;
  void* out;                      // contiguous in the order of size[]
  int elem_bytes;
  int ndim;
  int64_t numel;
  int64_t size[kGatherDims], in_stride[kGatherDims];
};


}  // namespace bankops
