// The shared-memory instructions of gemm_kernel, replayed on the host (smem_trace.h).
#pragma once
#include "gemm.h"
#include "smem_trace.h"

namespace bankops {

// C[batch] (m x n) = A (m x k) @ B (k x n) with accumulators of acc_bytes; a_k_fast / b_k_fast
// say whether k is A's / B's contiguous dim (A row-major: true; B row-major: false).
inline void trace_gemm(Layout layout, int acc_bytes, int64_t batch, int64_t m, int64_t n, int64_t k, bool a_k_fast,
                       bool b_k_fast, SmemTrace& trace) {
  const int64_t steps = batch * ceil_div(m, kGemmBM) * ceil_div(n, kGemmBN) * ceil_div(k, kGemmBK);
  with_layout(layout, [&](auto tag) {
    with_elem_bytes(acc_bytes, [&](auto e) {
      using Tile = GemmTile<decltype(tag)::value, decltype(e)::value>;
      const auto byte = [&](int r, int c) { return int64_t(Tile::offset(r, c)) * e.value; };
      const auto stage = [&](const char* name, bool k_fast) {
        SmemInstr& row = trace.instr("gemm", name, SmemOp::St, e.value, steps);
        for (int s = 0; s < kGemmStageLoads; ++s)
          add_block(row, kGemmThreads, [&](int t) {
            const TileCoord c = gemm_stage(t, s, k_fast);
            return byte(c.r, c.c);
          });
      };
      stage("sts As[k][m] <- A", a_k_fast);
      stage("sts Bs[k][n] <- B", b_k_fast);
      SmemInstr& a = trace.instr("gemm", "lds As[kk][row] (inner loop)", SmemOp::Ld, e.value, steps);
      SmemInstr& b = trace.instr("gemm", "lds Bs[kk][col] (inner loop)", SmemOp::Ld, e.value, steps);
      for (int kk = 0; kk < kGemmBK; ++kk)
        for (int i = 0; i < kGemmMicro; ++i) {
          add_block(a, kGemmThreads, [&](int t) { return byte(kk, gemm_row(t, i)); });
          add_block(b, kGemmThreads, [&](int t) { return byte(kk, gemm_col(t, i)); });
        }
    });
  });
}

}  // namespace bankops
