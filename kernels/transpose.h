// transpose: argument blocks, shared-memory tiles and launchers.
//
// ops/ reduces any N-d transpose to one of two launches:
// - a tiled transpose over a plane in[i][j] -> out[j][i], where j is the input's
//   contiguous dim and i the output's, batched over up to kTransposeBatchDims more dims;
// - a gather (a strided copy) when the input and the output share their contiguous dim,
//   so no element changes place inside a row and a tile would only add a detour.
//
// The tiled transpose has two kernels. The vector kernel (TransposeVec below) stores 16
// bytes per global store; it runs whenever j is contiguous in the input and i in the output:
// as is (16-byte loads too) when every vector it touches starts 16-byte aligned
// (transpose_vec_ok), else reading rows from the aligned words under each vector and
// realigning them in registers (transpose_vec_realign_ok). Otherwise (strided inner dims,
// 16-byte elements on an 8-byte boundary) the scalar kernel (one element per access) does
// the work.
#pragma once
#include <cstdint>

#include "layout.cuh"

namespace bankops {

// ---- the scalar kernel: any strides, any alignment ----

constexpr int kTransposeTile = 32;      // tile columns (j) and the rows of one tile column
constexpr int kTransposeRowGroups = 8;  // a (32 x 8) block, 4 tile rows per thread and 32 rows
constexpr int kTransposeBatchDims = 6;
constexpr int kGatherDims = 8;

// Tile rows (i) of the scalar kernel: 32 x 32 elements of 8 bytes or more; for narrower
// elements 2 or 4 stripes of 32 rows (8 KB for 4- and 2-byte elements, 4 KB for bytes:
// 16 loads a thread stay within 64 registers), so that an SM keeps more bytes in flight
// (a 1 KB int8 tile left the kernel at a quarter of copy).
constexpr int transpose_tile_rows(int elem_bytes) {
  return elem_bytes >= 8 ? kTransposeTile : elem_bytes == 4 ? 2 * kTransposeTile : 4 * kTransposeTile;
}

template <Layout L, int ELEM_BYTES>
using TransposeTile = TileLayout<L, transpose_tile_rows(ELEM_BYTES), kTransposeTile, ELEM_BYTES>;

// The tile element thread (tx, ty) handles in its k-th step (k < rows / 8): on the way in
// it stores a row of the input plane (lanes walk tile columns), on the way out it reads 32
// consecutive rows of a tile column (lanes walk tile rows; stripe k / 4, column ty + 8 (k % 4)).
// The kernel and its trace both call these.
BANKOPS_HD TileCoord transpose_in(int tx, int ty, int k) { return {ty + k * kTransposeRowGroups, tx}; }
BANKOPS_HD TileCoord transpose_out(int tx, int ty, int k) {
  constexpr int kSteps = kTransposeTile / kTransposeRowGroups;
  return {tx + (k / kSteps) * kTransposeTile, ty + (k % kSteps) * kTransposeRowGroups};
}

// ---- the vector kernel: 16-byte global accesses in both directions ----
//
// A thread owns V x V micro-tiles of E-byte elements (V = 16 / E: 4x4 float32, 8x8
// 16-bit, 16x16 bytes, 2x2 8-byte, 1x1 16-byte). Load phase: lanes read 16-byte vectors
// along input rows (256 contiguous bytes per 16 lanes) and store them unchanged into the
// tile, one 16-byte unit per lane. Store phase: a thread reads the V rows of its
// micro-tile (V 16-byte loads of one unit column), transposes them in registers (register
// renaming for E >= 4, prmt for 2- and 1-byte elements) and writes V output vectors;
// lanes walk i, so kIGroups lanes write 16 * kIGroups contiguous output bytes.
//
// The tile is kRows (i) x kCols (j) elements, rows of 16 units (256 bytes). Its rows hold
// plane rows in the order transpose_vec_row gives: row k of every micro-tile is adjacent,
// so the 8 lanes of one 16-byte phase of a store-phase load (8 neighbouring micro-tiles)
// read 8 consecutive tile rows, which pad (16 bytes per row) and BankSwizzle (unit ^= row)
// spread over the 8 bank groups, and which `none` piles onto one (8 wavefronts a phase).
// R: the realigning kernel's form (rows that start anywhere; see transpose_vec_kernel).
template <int E, bool R>
struct TransposeVec {
  static_assert(E == 1 || E == 2 || E == 4 || E == 8 || E == 16, "element size");
  static constexpr int kVec = 16 / E;                 // elements per 16-byte vector
  static constexpr int kUnits = 16;                   // 16-byte units per tile row
  // Micro-tiles along i: 16, or 8 for bytes and the realigning kernel's 2-byte elements,
  // whose 16x16 and 8x8 micro-tiles take 80-128 registers a thread (smaller blocks, more of
  // them per SM; design notes, "transpose: micro-tile groups").
  static constexpr int kIGroups = E == 1 || (E == 2 && R) ? 8 : 16;
  static constexpr int kThreads = kIGroups * kUnits;  // one micro-tile per thread
  static constexpr int kRows = kIGroups * kVec;       // tile rows: plane rows i
  static constexpr int kCols = kUnits * kVec;         // tile columns: elements along j
};
// Blocks per SM the register budget must allow: with the load phase of several blocks in
// flight, an SM keeps 64 KB or more of reads outstanding. The realigning kernel's 2-byte
// elements and bytes fit five (six would split their loads in two batches or spill); aligned
// 2-byte elements two blocks of 256 (design notes, "transpose: blocks an SM").
template <int E, bool R>
BANKOPS_HD constexpr int transpose_vec_min_blocks() {
  return E == 2 ? (R ? 5 : 2) : E == 1 && R ? 5 : 4;
}

template <Layout L, int E, bool R>
using TransposeVecTile = TileLayout<L, TransposeVec<E, R>::kRows, TransposeVec<E, R>::kCols, E, 16>;

// Tile row holding tile-local plane row i.
template <int E, bool R>
BANKOPS_HD int transpose_vec_row(int i) {
  using P = TransposeVec<E, R>;
  return (i % P::kVec) * P::kIGroups + i / P::kVec;
}
// Load phase, thread t's k-th vector (k < kVec): tile-local plane (i, first j).
template <int E, bool R>
BANKOPS_HD TileCoord transpose_vec_load(int t, int k) {
  using P = TransposeVec<E, R>;
  return {t / P::kUnits + k * P::kIGroups, (t % P::kUnits) * P::kVec};
}
// Store phase, thread t's micro-tile: plane (i, first j) of its k-th row; its output
// vectors are out[j + c][i - k .. i - k + V) for c < V.
template <int E, bool R>
BANKOPS_HD TileCoord transpose_vec_read(int t, int k) {
  using P = TransposeVec<E, R>;
  return {(t % P::kIGroups) * P::kVec + k, (t / P::kIGroups) * P::kVec};
}

// The realigning kernel's store phase for bytes reads its 16 x 16 micro-tile in four passes,
// one 4-byte word of each row per pass: thread t's word (of 4 in the row's 16 bytes) in pass
// q. The lanes of a warp cover four unit columns u and take word (q + u) mod 4, so that each
// lds.32 of a warp spreads over all four banks of a 16-byte unit (the same word for every
// lane would leave three in four banks idle, four lanes to a bank); the groups of one unit
// column (the lanes whose output chunks meet) read the same word, i.e. serve the same four
// output rows, in a pass.
BANKOPS_HD int transpose_vec_byte_word(int t, int q) {
  return (q + transpose_vec_read<1, true>(t, 0).c / TransposeVec<1, true>::kVec) & 3;
}

// Rows between consecutive tiles along i, and the tiles. The realigning kernel's tiles
// overlap by two groups of V rows, one 32-byte sector of an output row (see
// transpose_vec_kernel): tile ti covers rows [ti S - 2V, ti S + S), S = kRows - 2V, and owns
// the output sectors that start in (ti S - 2V, ti S + S - 2V], as 16-byte chunks.
template <int E, bool R>
BANKOPS_HD constexpr int transpose_vec_overlap() {
  return R ? 2 * TransposeVec<E, R>::kVec : 0;
}
template <int E, bool R>
BANKOPS_HD constexpr int transpose_vec_step() {
  return TransposeVec<E, R>::kRows - transpose_vec_overlap<E, R>();
}
template <int E, bool R>
BANKOPS_HD int64_t transpose_vec_tiles_i(int64_t n_i) {
  constexpr int overlap = transpose_vec_overlap<E, R>();
  return ceil_div(n_i + (overlap > 0 ? overlap - 1 : 0), transpose_vec_step<E, R>());
}

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

// Whether the strides let every vector of the vector kernel start 16-byte aligned (given
// 16-byte aligned base pointers): j is contiguous in the input and i in the output (or an
// element is a vector), rows and batch steps are multiples of 16 bytes, and output rows
// hold whole vectors (n_i a multiple of 16 / elem_bytes; always so for a contiguous output
// whose rows are aligned).
inline bool transpose_vec_strides_ok(const TransposeArgs& a) {
  const int64_t e = a.elem_bytes;
  const auto aligned = [&](int64_t stride) { return (stride * e) % 16 == 0; };
  if (e != 16 && (a.in_sj != 1 || a.out_si != 1)) return false;
  if (!aligned(a.n_i)) return false;
  if (!aligned(a.in_si) || !aligned(a.out_sj)) return false;
  for (int d = 0; d < a.batch_dims; ++d)
    if (!aligned(a.in_batch_stride[d]) || !aligned(a.out_batch_stride[d])) return false;
  return true;
}

// Whether the realigning vector kernel can run: j is contiguous in the input and i in the
// output, rows may start anywhere (16-byte elements are vectors: aligned or scalar).
inline bool transpose_vec_realign_ok(const TransposeArgs& a) {
  return a.elem_bytes < 16 && a.in_sj == 1 && a.out_si == 1;
}

inline bool transpose_vec_ok(const TransposeArgs& a) {
  return reinterpret_cast<uintptr_t>(a.in) % 16 == 0 && reinterpret_cast<uintptr_t>(a.out) % 16 == 0 &&
         transpose_vec_strides_ok(a);
}

}  // namespace bankops
