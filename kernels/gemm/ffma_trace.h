// The shared-memory instructions of the FFMA kernel (ffma.cu) for a plan, replayed on the host
// (smem_trace.h).
#pragma once
#include "../smem_trace.h"
#include "ffma_plan.h"
#include "ffma_strip.h"
#include "split_k_trace.h"

namespace bankops {

namespace gemm_detail {

// pitch_a / pitch_b: bytes between an operand's rows in global memory, k rows in x-major
// staging and x rows in k-major (what cp.async reads; tile corners are taken as 128-byte
// aligned). Configurations that copy a k-major A beside an x-major B (gemm_copies_a_k) do it
// element by element with cp.async instead of the register-staged transposed store.
template <class S, class TileA, class TileB>
void trace_shape(const char* kernel, GemmStage mode_a, GemmStage mode_b, int64_t pitch_a, int64_t pitch_b,
                 int64_t iterations, SmemTrace& trace) {
  constexpr int V = S::kVec, E = S::kAccBytes;
  const auto byte_in = [](auto tile, int r, int c) { return int64_t(decltype(tile)::offset(r, c)) * E; };
  // One k tile's staging of an operand (Op, its tile): what Stager::store / issue put in shared memory.
  const auto stage = [&](auto op, auto tile, const char* what, GemmStage mode, int64_t pitch, bool copy_k) {
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
  stage(typename S::OpA{}, TileA{}, "As", mode_a, pitch_a, gemm_copies_a_k<S>(mode_b));
  stage(typename S::OpB{}, TileB{}, "Bs", mode_b, pitch_b, false);
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

// The strip blocks over `cols` columns (ffma_strip.cuh): per chunk of kStripK k rows, each
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

// The route's configuration, with its strip. Operands are replayed as staged by the vector modes
// along their contiguous dim (KVec / XAsync; the scalar modes stage the same tile positions),
// rows as far apart as the operands' strides and tile corners on 128-byte lines.
inline void trace_ffma_tiles(const GemmCall& c, const FfmaPlan& p, SmemTrace& trace_out) {
  const GemmArgs& g = c.args;
  const int elem_bytes = c.dtype == DType::F64 ? 8 : 4;
  const bool a_k = gemm_k_major(p.mode_a), b_k = gemm_k_major(p.mode_b);
  const auto mode = [](bool k_major) { return k_major ? GemmStage::KVec : GemmStage::XAsync; };
  // Bytes between an operand's rows: of k elements when k is its staged dim, else of m (A) or n (B).
  const int64_t pitch_a = (a_k ? g.a_sm : g.a_sk) * elem_bytes, pitch_b = (b_k ? g.b_sn : g.b_sk) * elem_bytes;
  const int64_t n = g.n - p.strip;
  with_ffma_config(c.dtype, p, [&](auto shape) {
    using S = decltype(shape);
    // The kernel's name in the report: gemm/BMxBN, and the threads where two share a tile.
    std::string kernel = "gemm/" + std::to_string(S::kBM) + "x" + std::to_string(S::kBN);
    if (std::is_same<S, GemmBigScalar>::value) kernel += "/" + std::to_string(S::kThreads);
    const int64_t iterations = g.batch * ceil_div(g.m, S::kBM) * ceil_div(n, S::kBN) * ceil_div(g.k, S::kBK);
    gemm_detail::trace_layout<S>(c.layout, kernel.c_str(), mode(a_k), mode(b_k), pitch_a, pitch_b, iterations,
                                 trace_out);
    // Wide: kStripBlocks strip blocks per 128 rows for the last few columns of C, a chunk per
    // kStripK k rows each.
    if (std::is_same<S, GemmWide>::value && p.strip > 0)
      with_layout(c.layout, [&](auto tag) {
        const int64_t passes = g.batch * ceil_div(g.m, GemmWide::kBM) * kStripBlocks;
        gemm_detail::trace_strip<StripTile<decltype(tag)::value>>(kernel.c_str(), p.strip,
                                                                  passes * ceil_div(g.k, kStripK), trace_out);
      });
  });
}

// Split-K (float32, the configurations that split: ffma_splits): every block's 16-byte stores
// of its accumulator rows into the partial tile, where ffma_store_c puts them in C, then the
// sums' loads.
inline void trace_ffma_split(const GemmCall& c, const FfmaPlan& p, SmemTrace& trace) {
  const GemmArgs& g = c.args;
  with_ffma_config(c.dtype, p, [&](auto shape) {
    using S = decltype(shape);
    if constexpr (ffma_splits<S>()) {
      const std::string kernel = "gemm/" + std::to_string(S::kBM) + "x" + std::to_string(S::kBN);
      const int64_t tiles = g.batch * ceil_div(g.m, S::kBM) * ceil_div(g.n, S::kBN);
      with_layout(c.layout, [&](auto tag) {
        using PTile = FfmaSplitTile<decltype(tag)::value, S::kBM, S::kBN>;
        SmemInstr& st = trace.instr(kernel, "st.shared.v4 P <- a thread's accumulator rows (split-K partial)",
                                    SmemOp::St, 16, tiles * p.split);
        for (int i = 0; i < S::kTM; ++i)
          for (int q = 0; q < S::kQN; ++q)
            add_block(st, S::kThreads, [&](int t) {
              const int row = gemm_frag_m<S>(t, 0) + gemm_frag_row<S>(i);
              return int64_t(PTile::offset(row, gemm_frag_n<S>(t, 0) + q * S::kQuad)) * 4;
            });
        trace_split_loads<PTile>(kernel.c_str(), S::kThreads, tiles, p.split, trace);
      });
    }
  });
}

// The plan's tiles and strip, then its split-K partial and sums where it splits.
inline void trace_ffma(const GemmCall& c, const FfmaPlan& p, SmemTrace& trace) {
  trace_ffma_tiles(c, p, trace);
  if (p.split > 1) trace_ffma_split(c, p, trace);
}

}  // namespace bankops
