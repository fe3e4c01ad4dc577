// The shared-memory instructions of the transpose kernels, replayed on the host (smem_trace.h).
#pragma once
#include <type_traits>

#include "smem_trace.h"
#include "transpose.h"

namespace bankops {

// The arguments ops/ passes for a contiguous batch x n_i x n_j input whose last two dims
// are transposed (null pointers: only the strides matter here).
inline TransposeArgs contiguous_transpose_args(int elem_bytes, int64_t batch, int64_t n_i, int64_t n_j) {
  TransposeArgs a{nullptr, nullptr, elem_bytes, n_i, n_j, n_j, 1, 1, n_i, 0, batch, {}, {}, {}};
  if (batch > 1) {
    a.batch_dims = 1;
    a.batch_size[0] = batch;
    a.in_batch_stride[0] = a.out_batch_stride[0] = n_i * n_j;
  }
  return a;
}

// The vector kernel, per tile: kVec 16-byte stores of input rows into the tile, then kVec
// 16-byte loads of micro-tile rows, or for realigned bytes 4 passes of 16 4-byte loads (one
// word of each micro-tile row). Every lane issues them all, also past the plane's edges.
// R: the realigning kernel.
template <Layout L, int E, bool R>
void trace_transpose_vec(int64_t tiles, SmemTrace& trace) {
  using P = TransposeVec<E, R>;
  using Tile = TransposeVecTile<L, E, R>;
  const auto byte_of = [](TileCoord c) { return int64_t(Tile::offset(transpose_vec_row<E, R>(c.r), c.c)) * E; };
  SmemInstr& st = trace.instr("transpose", "sts tile[i][16 B at j] <- input row vectors", SmemOp::St, 16, tiles);
  for (int k = 0; k < P::kVec; ++k) add_block(st, P::kThreads, [&](int t) { return byte_of(transpose_vec_load<E, R>(t, k)); });
  if (E == 1 && R) {
    SmemInstr& ld = trace.instr("transpose", "lds tile[i + k][word of 16 B at j] -> micro-tile row k, pass q",
                                SmemOp::Ld, 4, tiles);
    for (int q = 0; q < 4; ++q)
      for (int k = 0; k < P::kVec; ++k)
        add_block(ld, P::kThreads,
                  [&](int t) { return byte_of(transpose_vec_read<E, R>(t, k)) + 4 * transpose_vec_byte_word(t, q); });
    return;
  }
  SmemInstr& ld = trace.instr("transpose", "lds tile[i + k][16 B at j] -> micro-tile row k", SmemOp::Ld, 16, tiles);
  for (int k = 0; k < P::kVec; ++k) add_block(ld, P::kThreads, [&](int t) { return byte_of(transpose_vec_read<E, R>(t, k)); });
}

// The scalar kernel, per tile: rows / 8 element stores of input rows, as many element
// loads of tile columns.
template <Layout L, int E>
void trace_transpose_scalar(int64_t tiles, SmemTrace& trace) {
  using Tile = TransposeTile<L, E>;
  constexpr int kThreads = kTransposeTile * kTransposeRowGroups;
  const auto trace_step = [&](const char* name, SmemOp op, TileCoord (*coord)(int, int, int)) {
    SmemInstr& row = trace.instr("transpose", name, op, E, tiles);
    for (int k = 0; k < Tile::kRows / kTransposeRowGroups; ++k)
      add_block(row, kThreads, [&](int t) {
        const TileCoord c = coord(t % kTransposeTile, t / kTransposeTile, k);
        return int64_t(Tile::offset(c.r, c.c)) * E;
      });
  };
  trace_step("sts tile[row][lane] <- input rows (scalar kernel)", SmemOp::St, transpose_in);
  trace_step("lds tile[lane][col] -> output rows (scalar kernel)", SmemOp::Ld, transpose_out);
}

// A batch of n_i x n_j planes (the input's contiguous dim is j) of elem_bytes elements,
// contiguous: the kernel launch_transpose picks for it (ops/ drops size-1 dims first).
inline void trace_transpose(Layout layout, int elem_bytes, int64_t batch, int64_t n_i, int64_t n_j, SmemTrace& trace) {
  // launch_transpose's choice (a contiguous input always takes the vector kernel, aligned or
  // realigning: both issue the same shared-memory instructions per tile but for bytes).
  const TransposeArgs args = contiguous_transpose_args(elem_bytes, batch, n_i, n_j);
  const bool aligned = transpose_vec_strides_ok(args), vec = aligned || transpose_vec_realign_ok(args);
  with_layout(layout, [&](auto tag) {
    with_elem_bytes(elem_bytes, [&](auto e) {
      constexpr Layout L = decltype(tag)::value;
      constexpr int E = decltype(e)::value;
      const auto vec_tiles = [&](auto realign) {
        constexpr bool R = decltype(realign)::value;
        // The realigning kernel's tiles overlap by two groups of rows: more of them.
        const int64_t tiles = batch * transpose_vec_tiles_i<E, R>(n_i) * ceil_div(n_j, TransposeVec<E, R>::kCols);
        trace_transpose_vec<L, E, R>(tiles, trace);
      };
      if (vec && aligned) {
        vec_tiles(std::false_type{});
      } else if (vec) {
        vec_tiles(std::true_type{});
      } else {
        trace_transpose_scalar<L, E>(batch * ceil_div(n_i, transpose_tile_rows(E)) * ceil_div(n_j, kTransposeTile), trace);
      }
    });
  });
}

}  // namespace bankops
