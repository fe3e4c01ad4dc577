// The shared-memory instructions a gemm route issues, for bankops.explain: the same route the
// launcher runs (route.h), replayed on the host.
#pragma once
#include <type_traits>

#include "route.h"
#include "trace_ffma.h"
#include "trace_mma.h"

namespace bankops {

// The few-rows kernel (rows.cu) for TM rows of A: each window's cp.async of the rows of A
// into shared memory (16 bytes a thread, row after row) and the warps' 16-byte reads of them:
// FFMA along k (float32, and 16-bit of a few rows), a lane its own 16 bytes of each row (a warp
// reads 512 contiguous bytes, conflict-free on a dense window), the weight straight into
// registers; mma.sync (16-bit), lane (g, t) 16 bytes at k 8t.. of each chunk of rows g and g + 8
// (the layout's RowsXTile), after the weight's window (RowsWTile: a warp copies 512 bytes of a
// row, lane (g, t) reads row g's 16 bytes at k 8t..); FFMA through the ring (RING, float32: the
// weight along n, KN, or along k), the weight's window (RowsRingWTile: KN, lane (q, c) copies
// and reads 16 bytes of four rows; along k, a warp copies 512 bytes of a row and lane (q, c)
// reads 16 bytes at k 4q.. of rows c, c + 8, ..), and lane (q, c) reads 16 bytes at k 4q.. of
// each row of x. Then the warps' sums into the partial tile (FFMA along k: each lane stores the
// sums the exchanges leave it; the ring: into the warps' sums first, added in warp order;
// mma.sync: accumulator pairs), and split-K's loads.
template <Layout L, int TM, bool MMA, DType kType, bool RING = false, bool KN = false>
inline void trace_rows_as(const GemmRoute& r, SmemTrace& trace) {
  constexpr int e = rows_elem_bytes(kType), V = 16 / e, kWin = rows_window(kType, MMA), BN = rows_bn(MMA);
  using XTile = std::conditional_t<MMA, RowsXTile<L, TM>, RowMajor<TM, kWin>>;
  using PTile = SplitTile<L, TM, BN>;
  const GemmArgs& g = r.args;
  const int64_t tiles = g.batch * ceil_div(g.m, TM) * ceil_div(g.n, BN);
  const int64_t windows = tiles * ceil_div(g.k, kWin);  // every rank's
  const auto x_at = [](int row, int col) { return int64_t(XTile::offset(row, col)) * e; };
  const auto pt = [](int row, int col) { return int64_t(PTile::offset(row, col)) * 4; };
  constexpr int kChunks = TM * kWin / V, kPerRow = kWin / V;
  if constexpr (MMA) {
    using WTile = RowsWTile<L>;
    const auto w_at = [](int row, int col) { return int64_t(WTile::offset(row, col)) * e; };
    SmemInstr& cw =
        trace.instr("gemm_rows", "ldgsts w window <- 512 bytes of a weight row", SmemOp::Ldgsts, 16, windows);
    cw.zero_fill = false;  // as the x window's, below
    for (int c0 = 0; c0 < BN * kPerRow; c0 += kRowsThreads)
      add_block(
          cw, kRowsThreads, [&](int t) { return w_at((c0 + t) / kPerRow, (c0 + t) % kPerRow * V); },
          [&](int t) { return ((c0 + t) / kPerRow * g.b_sn + (c0 + t) % kPerRow * V) * e; });
    SmemInstr& lw = trace.instr("gemm_rows", "lds.128 w window -> lane (g, t)'s 16 bytes of row g", SmemOp::Ld, 16,
                                windows);
    for (int c = 0; c < kRowsMmaChunks; ++c)
      add_block(lw, kRowsThreads, [&](int t) { return w_at(t / 32 * 8 + t % 32 / 4, 32 * c + 8 * (t % 4)); });
  } else if constexpr (RING) {
    // Lane (q, c) of warp w reads k 4q + 16w + 128j + i.
    using WTile = RowsRingWTile<L, KN>;
    constexpr int kStep = kRowsRingStep;
    const auto k_of = [](int t, int j) { return j * kStep + t % 32 / 8 * kRowsRingK + t / 32 * 16; };
    const auto w_at = [](int row, int col) { return int64_t(WTile::offset(row, col)) * 4; };
    SmemInstr& cw = trace.instr("gemm_rows", KN ? "ldgsts w window <- 16 bytes of a weight row a lane"
                                                : "ldgsts w window <- 512 bytes of a weight row",
                                SmemOp::Ldgsts, 16, windows);
    cw.zero_fill = false;  // as the x window's, below
    SmemInstr& lw = trace.instr("gemm_rows", KN ? "lds.128 w window -> the lane's 16 bytes of a weight row"
                                                : "lds.128 w window -> 16 bytes at k 4q.. of rows c + 8i",
                                SmemOp::Ld, 16, windows);
    if constexpr (KN) {
      for (int j = 0; j < kWin / kStep; ++j)
        for (int i = 0; i < kRowsRingK; ++i)
          add_block(
              cw, kRowsThreads, [&](int t) { return w_at(k_of(t, j) + i, t % 8 * 4); },
              [&](int t) { return ((k_of(t, j) + i) * g.b_sk + t % 8 * 4) * 4; });
    } else {
      for (int e0 = 0; e0 < BN * kPerRow; e0 += kRowsThreads)
        add_block(
            cw, kRowsThreads, [&](int t) { return w_at((e0 + t) / kPerRow, (e0 + t) % kPerRow * V); },
            [&](int t) { return ((e0 + t) / kPerRow * g.b_sn + (e0 + t) % kPerRow * V) * 4; });
    }
    for (int j = 0; j < kWin / kStep; ++j)
      for (int u = 0; u < 4; ++u)
        add_block(lw, kRowsThreads, [&](int t) {
          return KN ? w_at(k_of(t, j) + u, t % 8 * 4) : w_at(rows_ring_col(false, t % 8, u), k_of(t, j));
        });
  }
  SmemInstr& cp = trace.instr("gemm_rows", "ldgsts x window <- rows of A", SmemOp::Ldgsts, 16, windows);
  // Not the zero-filling form's cost: the kernel's source size is 16 or 0, which Nsight Compute
  // measures at the plain form's wavefronts.
  cp.zero_fill = false;
  for (int c0 = 0; c0 < kChunks; c0 += kRowsThreads)
    add_block(
        cp, kRowsThreads, [&](int t) { return c0 + t < kChunks ? x_at((c0 + t) / kPerRow, (c0 + t) % kPerRow * V) : -1; },
        [&](int t) { return ((c0 + t) / kPerRow * g.a_sm + (c0 + t) % kPerRow * V) * e; });
  SmemInstr& ld = trace.instr("gemm_rows", "lds.128 x window -> a lane's 16 bytes of each row", SmemOp::Ld, 16, windows);
  if constexpr (MMA) {
    for (int c = 0; c < kRowsMmaChunks; ++c)
      for (int row = 0; row < TM; row += 8)  // rows g + 16i, then g + 16i + 8
        add_block(ld, kRowsThreads, [&](int t) { return x_at(row + t % 32 / 4, 32 * c + 8 * (t % 4)); });
    SmemInstr& st = trace.instr("gemm_rows", "st.shared.v2 P <- accumulator pairs", SmemOp::St, 8, tiles * r.split);
    for (int row = 0; row < TM; row += 8)
      add_block(st, kRowsThreads, [&](int t) { return pt(row + t % 32 / 4, t / 32 * 8 + 2 * (t % 4)); });
  } else if constexpr (RING) {
    // Lane (q, c) of warp w reads x's 16 bytes at k 4q + 16w + 128j of each row, in round j.
    constexpr int kStep = kRowsRingStep;
    for (int j = 0; j < kWin / kStep; ++j)
      for (int row = 0; row < TM; ++row)
        add_block(ld, kRowsThreads, [&](int t) { return x_at(row, j * kStep + t % 32 / 8 * 4 + t / 32 * 16); });
    using WSums = RowsWarpSums<TM>;
    const auto ws = [](int row, int col) { return int64_t(WSums::offset(row, col)) * 4; };
    SmemInstr& st = trace.instr("gemm_rows", "st.shared sums <- lane (q, c)'s column of each row", SmemOp::St, 4,
                                tiles * r.split);
    for (int row = 0; row < TM; ++row)
      add_block(st, kRowsThreads,
                [&](int t) { return ws(t / 32 * TM + row, rows_ring_col(KN, t % 8, t % 32 / 8)); });
    SmemInstr& add = trace.instr("gemm_rows", "ld.shared sums -> the eight warps' sums of an element", SmemOp::Ld, 4,
                                 tiles * r.split);
    SmemInstr& sp = trace.instr("gemm_rows", "st.shared P <- the warps' sums added", SmemOp::St, 4, tiles * r.split);
    for (int e0 = 0; e0 < TM * BN; e0 += kRowsThreads) {
      const auto in = [&](int t) { return e0 + t < TM * BN; };
      for (int w = 0; w < kRowsWarps; ++w)
        add_block(add, kRowsThreads, [&](int t) { return in(t) ? ws(w * TM + (e0 + t) / BN, (e0 + t) % BN) : -1; });
      add_block(sp, kRowsThreads, [&](int t) { return in(t) ? pt((e0 + t) / BN, (e0 + t) % BN) : -1; });
    }
  } else {
    for (int u = 0; u < kRowsUnroll; ++u)
      for (int row = 0; row < TM; ++row)
        add_block(ld, kRowsThreads, [&](int t) { return x_at(row, (u * 32 + t % 32) * V); });
    // rows_warp_sums: lane l's i-th sum is rows_sum_at(rows_sum_index(.., l, i))
    constexpr int R = kRowsPerWarp, kSums = R * TM;
    SmemInstr& st = trace.instr("gemm_rows", "st.shared P <- the warp's sums, each lane its own", SmemOp::St, 4,
                                tiles * r.split);
    for (int i = 0; i < rows_sum_count(kSums); ++i)
      add_block(st, kRowsThreads, [&](int t) {
        const RowsSum at = rows_sum_at(TM, rows_sum_index(kSums, t % 32, i));
        return rows_sum_stores(kSums, t % 32) ? pt(at.t, t / 32 * R + at.r) : int64_t(-1);
      });
  }
  trace_split_loads<PTile>("gemm_rows", kRowsThreads, tiles, r.split, trace);
}

inline void trace_rows(const GemmRoute& r, SmemTrace& trace) {
  with_layout(r.layout, [&](auto tag) {
    with_rows_tm(r.rows_tm, [&](auto tm) {
      constexpr Layout L = decltype(tag)::value;
      constexpr int TM = decltype(tm)::value;
      if (r.dtype == DType::F32 && r.ops.b_kn) trace_rows_as<L, TM, false, DType::F32, true, true>(r, trace);
      else if (r.dtype == DType::F32 && r.rows_ring) trace_rows_as<L, TM, false, DType::F32, true>(r, trace);
      else if (r.dtype == DType::F32) trace_rows_as<L, TM, false, DType::F32>(r, trace);
      else if (!r.rows_mma) trace_rows_as<L, TM, false, DType::BF16>(r, trace);
      else if constexpr (TM >= 8 && TM <= kRowsMmaMaxM) trace_rows_as<L, TM, true, DType::BF16>(r, trace);
    });
  });
}

// Small's or Mid's split-K (float32): every block's 16-byte stores of its accumulator rows into
// the partial tile, where ffma_store_c puts them in C, then the sums' loads.
inline void trace_ffma_split(const GemmRoute& r, SmemTrace& trace) {
  const GemmArgs& g = r.args;
  with_ffma_config(r, [&](auto shape) {
    using S = decltype(shape);
    if constexpr (ffma_splits<S>()) {
      const std::string kernel = "gemm/" + std::to_string(S::kBM) + "x" + std::to_string(S::kBN);
      const int64_t tiles = g.batch * ceil_div(g.m, S::kBM) * ceil_div(g.n, S::kBN);
      with_layout(r.layout, [&](auto tag) {
        using PTile = FfmaSplitTile<decltype(tag)::value, S::kBN>;
        SmemInstr& st = trace.instr(kernel, "st.shared.v4 P <- a thread's accumulator rows (split-K partial)",
                                    SmemOp::St, 16, tiles * r.split);
        for (int i = 0; i < S::kTM; ++i)
          for (int q = 0; q < S::kQN; ++q)
            add_block(st, S::kThreads, [&](int t) {
              const int row = gemm_frag_m<S>(t, 0) + gemm_frag_row<S>(i);
              return int64_t(PTile::offset(row, gemm_frag_n<S>(t, 0) + q * S::kQuad)) * 4;
            });
        trace_split_loads<PTile>(kernel.c_str(), S::kThreads, tiles, r.split, trace);
      });
    }
  });
}

inline void trace_gemm(const GemmRoute& r, SmemTrace& trace) {
  if (r.family == GemmFamily::Ffma) {
    trace_ffma(r, trace);
    if (r.split > 1) trace_ffma_split(r, trace);
  } else if (r.family == GemmFamily::Rows) {
    trace_rows(r, trace);
  } else {
    trace_tensor_core(r, trace);
  }
}

}  // namespace bankops
