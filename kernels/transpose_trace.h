// The shared-memory instructions of transpose_kernel, replayed on the host (smem_trace.h).
#pragma once
#include "smem_trace.h"
#include "transpose.h"

namespace bankops {

// A batch of n_i x n_j planes (the input's contiguous dim is j) of elem_bytes elements.
inline void trace_transpose(Layout layout, int elem_bytes, int64_t batch, int64_t n_i, int64_t n_j, SmemTrace& trace) {
  const int64_t tiles = batch * ceil_div(n_i, kTransposeTile) * ceil_div(n_j, kTransposeTile);
  constexpr int kThreads = kTransposeTile * kTransposeRowGroups;
  with_layout(layout, [&](auto tag) {
    with_elem_bytes(elem_bytes, [&](auto e) {
      using Tile = TransposeTile<decltype(tag)::value, decltype(e)::value>;
      const auto trace_step = [&](const char* name, SmemOp op, TileCoord (*coord)(int, int, int)) {
        SmemInstr& row = trace.instr("transpose", name, op, e.value, tiles);
        for (int k = 0; k < kTransposeTile / kTransposeRowGroups; ++k)
          add_block(row, kThreads, [&](int t) {
            const TileCoord c = coord(t % kTransposeTile, t / kTransposeTile, k);
            return int64_t(Tile::offset(c.r, c.c)) * e.value;
          });
      };
      trace_step("sts tile[row][lane] <- input rows", SmemOp::St, transpose_in);
      trace_step("lds tile[lane][col] -> output rows", SmemOp::Ld, transpose_out);
    });
  });
}

}  // namespace bankops
