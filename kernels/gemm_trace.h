// The shared-memory instructions of gemm_kernel, replayed on the host (smem_trace.h).
#pragma once
#include "gemm.h"
#include "gemm_strip.h"
#include "smem_trace.h"

namespace bankops {

namespace gemm_detail {

// pitch_a / pitch_b: bytes between an operand's rows in global memory, k rows in x-major
// staging and x rows in k-major (what cp.async reads; tile corners are taken as 128-byte
// aligned). Configurations that copy k-major operands (gemm_copies_k) do it element by element
// with cp.async instead of the register-staged transposed store.
template <class S, class TileA, class TileB>
void trace_shape(const char* kernel, GemmStage mode_a, GemmStage mode_b, int64_t pitch_a, int64_t pitch_b,
                 int64_t iterations, SmemTrace& trace) {
  constexpr int V = S::kVec, E = S::kAccBytes;
  constexpr bool copy_k = gemm_copies_k<S>();
  const auto byte_in = [](auto tile, int r, int c) { return int64_t(decltype(tile)::offset(r, c)) * E; };
  // One k tile's staging of an operand (Op, its tile): what Stager::store / issue put in shared memory.
  const auto stage = [&](auto op, auto tile, const char* what, GemmStage mode, int64_t pitch) {
    using Op = decltype(op);
    const auto byte = [&](int r, int c) { return byte_in(tile, r, c); };
    const std::string name(what);
    if (gemm_k_major(mode)) {
      for (int e = 0; e < V; ++e) {
        const std::string at = name + "[k+" + std::to_string(e) + "][x]";
        SmemInstr& row = copy_k ? trace.instr(kernel, "cp.async " + at + " (transposed, one element)", SmemOp::Ldgsts,
                                              E, iterations)
                                : trace.instr(kernel, "sts " + at + " (transposed store)", SmemOp::St, E, iterations);
        row.zero_fill = false;  // whole tiles copy in the plain form
        for (int l = 0; l < Op::kLoads; ++l) {
          const auto smem = [&](int t) {
            const TileCoord c = gemm_stage_k<Op>(t, l);
            return byte(c.r + e, c.c);
          };
          if (copy_k)
            add_block(row, S::kThreads, smem, [&](int t) {
              const TileCoord c = gemm_stage_k<Op>(t, l);
              return c.c * pitch + int64_t(c.r + e) * E;
            });
          else
            add_block(row, S::kThreads, smem);
        }
      }
      return;
    }
    const bool async = mode == GemmStage::XAsync;
    SmemInstr& row = trace.instr(kernel, (async ? "cp.async " : "sts ") + name + "[k][x..x+" + std::to_string(V - 1) + "]",
                                 async ? SmemOp::Ldgsts : SmemOp::St, kGemmVecBytes, iterations);
    // A whole tile (every one but the matrices' edges) copies in the plain form; only edge
    // tiles pass each copy's source size (the zero-filling form).
    row.zero_fill = false;
    for (int l = 0; l < Op::kLoads; ++l)
      add_block(
          row, S::kThreads,
          [&](int t) {
            const TileCoord c = gemm_stage_x<Op>(t, l);
            return byte(c.r, c.c);
          },
          [&](int t) {
            const TileCoord c = gemm_stage_x<Op>(t, l);
            return c.r * pitch + int64_t(c.c) * E;
          });
  };
  stage(typename S::OpA{}, TileA{}, "As", mode_a, pitch_a);
  stage(typename S::OpB{}, TileB{}, "Bs", mode_b, pitch_b);
  SmemInstr& a = trace.instr(kernel, "lds.128 As[kk][m..] (inner loop)", SmemOp::Ld, kGemmVecBytes, iterations);
  SmemInstr& b = trace.instr(kernel, "lds.128 Bs[kk][n..] (inner loop)", SmemOp::Ld, kGemmVecBytes, iterations);
  for (int kk = 0; kk < S::kBK; ++kk) {
    for (int q = 0; q < S::kQM; ++q)
      add_block(a, S::kThreads, [&](int t) { return byte_in(TileA{}, kk, gemm_frag_m<S>(t, q)); });
    for (int q = 0; q < S::kQN; ++q)
      add_block(b, S::kThreads, [&](int t) { return byte_in(TileB{}, kk, gemm_frag_n<S>(t, q)); });
  }
}

template <class S>
void trace_layout(Layout layout, const char* kernel, GemmStage mode_a, GemmStage mode_b, int64_t pitch_a,
                  int64_t pitch_b, int64_t iterations, SmemTrace& trace) {
  with_layout(layout, [&](auto tag) {
    constexpr Layout L = decltype(tag)::value;
    trace_shape<S, GemmTileOf<L, typename S::OpA>, GemmTileOf<L, typename S::OpB>>(kernel, mode_a, mode_b, pitch_a,
                                                                                  pitch_b, iterations, trace);
  });
}

// The strip blocks over `cols` columns (gemm_strip.cuh): per chunk of kStripK k rows, each
// column's copy (a thread a k row) and the warps' reads (lane l at k rows l + 32u) of one tile row.
template <class Tile>
void trace_strip(const char* kernel, int cols, int64_t iterations, SmemTrace& trace) {
  SmemInstr& st = trace.instr(kernel, "sts Bs[j][k] (strip copy)", SmemOp::St, 4, iterations);
  SmemInstr& ld = trace.instr(kernel, "lds Bs[j][k..k+31] (strip)", SmemOp::Ld, 4, iterations);
  for (int j = 0; j < cols; ++j) {
    add_block(st, kStripThreads, [&](int t) { return int64_t(Tile::offset(j, t)) * 4; });
    for (int u = 0; u < kStripK / 32; ++u)
      add_block(ld, kStripThreads, [&](int t) { return int64_t(Tile::offset(j, t % 32 + 32 * u)) * 4; });
  }
}

}  // namespace gemm_detail

// C[batch] (m x n) = A (m x k) @ B (k x n) of float32 (elem_bytes 4) or float64 (8); a_k_fast
// / b_k_fast say whether k is A's / B's contiguous dim (A row-major: true; B row-major:
// false). Operands are taken as 16-byte aligned with aligned strides (the vector modes). The
// block configuration follows launch_gemm's choice for num_sms SMs (stream_k: with its
// workspace, as torch.ops.bankops._set_stream_k leaves it).
inline void trace_gemm(Layout layout, int elem_bytes, int64_t batch, int64_t m, int64_t n, int64_t k, bool a_k_fast,
                       bool b_k_fast, int num_sms, bool stream_k, SmemTrace& trace_out) {
  const auto mode = [](bool k_fast) { return k_fast ? GemmStage::KVec : GemmStage::XAsync; };
  // Contiguous operands: rows of k elements when k is the fast dim, else of m (A) or n (B).
  const int64_t pitch_a = (a_k_fast ? k : m) * elem_bytes, pitch_b = (b_k_fast ? k : n) * elem_bytes;
  const auto iterations = [&](int bm, int bn, int bk) {
    return batch * ceil_div(m, bm) * ceil_div(n, bn) * ceil_div(k, bk);
  };
  const auto trace = [&](auto shape, const char* kernel) {
    using S = decltype(shape);
    gemm_detail::trace_layout<S>(layout, kernel, mode(a_k_fast), mode(b_k_fast), pitch_a, pitch_b,
                                 iterations(S::kBM, S::kBN, S::kBK), trace_out);
  };
  if (elem_bytes == 8) return trace(GemmBig<8>{}, "gemm/64x64");
  switch (gemm_config(elem_bytes, batch, m, n, k, num_sms, GemmStaging::Vector, stream_k)) {
    case GemmConfig::Wide: {
      // Whole 256-column tiles, and kStripBlocks strip blocks per 128 rows for the last few
      // columns of C (gemm_strip_cols): per strip block, a chunk per kStripK k rows.
      const int strip = gemm_strip_cols(elem_bytes, batch, m, n, num_sms, GemmStaging::Vector);
      n -= strip;
      trace(GemmWide{}, "gemm/128x256");
      if (strip > 0)
        with_layout(layout, [&](auto tag) {
          const int64_t passes = batch * ceil_div(m, GemmWide::kBM) * kStripBlocks;
          gemm_detail::trace_strip<StripTile<decltype(tag)::value>>("gemm/128x256", strip,
                                                                    passes * ceil_div(k, kStripK), trace_out);
        });
      return;
    }
    case GemmConfig::Big: return trace(GemmBig<4>{}, "gemm/128x128");
    case GemmConfig::BigScalar: return trace(GemmBigScalar{}, "gemm/128x128/256");
    case GemmConfig::Small:
    default: return trace(GemmSmall{}, "gemm/64x64");
  }
}

}  // namespace bankops
