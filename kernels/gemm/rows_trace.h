// The shared-memory instructions of the few-rows kernel (rows.cu) for a plan, replayed on the
// host (smem_trace.h).
#pragma once
#include <type_traits>

#include "../smem_trace.h"
#include "rows_plan.h"
#include "split_k_trace.h"

namespace bankops {

// The few-rows kernel (rows.cu) for TM rows of A: each window's cp.async of the rows of A
// into shared memory (16 bytes a thread, row after row) and the warps' 16-byte reads of them:
// FFMA along k (float32, and 16-bit of a few rows), a lane its own 16 bytes of each row (a warp
// reads 512 contiguous bytes, conflict-free on a dense window), the weight straight into
// registers; mma.sync (16-bit), lane (g, t) 16 bytes at k 8t.. of each chunk of rows g and g + 8
// (the layout's RowsXTile), after the weight's window (RowsWTile: a warp copies 512 bytes of a
// row, lane (g, t) reads row g's 16 bytes at k 8t..; stored (K, N), KN: RowsWTileKn, a warp
// copies 128 bytes of four rows k, lane l of warp w gives ldmatrix.trans row l's 16 bytes at
// column 8w); FFMA through the ring (RING, float32: the
// weight along n, KN, or along k), the weight's window (RowsRingWTile: KN, lane (q, c) copies
// and reads 16 bytes of four rows; along k, a warp copies 512 bytes of a row and lane (q, c)
// reads 16 bytes at k 4q.. of rows c, c + 8, ..), and lane (q, c) reads 16 bytes at k 4q.. of
// each row of x. Then the warps' sums into the partial tile (FFMA along k: each lane stores the
// sums the exchanges leave it; the ring: into the warps' sums first, added in warp order;
// mma.sync: accumulator pairs), and split-K's loads.
template <Layout L, int TM, bool MMA, DType kType, bool RING = false, bool KN = false>
inline void trace_rows_as(const GemmCall& c, const RowsPlan& p, SmemTrace& trace) {
  constexpr int e = rows_elem_bytes(kType), V = 16 / e, kWin = rows_window(kType, MMA), BN = rows_bn(MMA);
  using XTile = std::conditional_t<MMA, RowsXTile<L, TM>, RowMajor<TM, kWin>>;
  using PTile = SplitTile<L, TM, BN>;
  const GemmArgs& g = c.args;
  const int64_t tiles = g.batch * ceil_div(g.m, TM) * ceil_div(g.n, BN);
  const int64_t windows = tiles * ceil_div(g.k, kWin);  // every rank's
  const auto x_at = [](int row, int col) { return int64_t(XTile::offset(row, col)) * e; };
  const auto pt = [](int row, int col) { return int64_t(PTile::offset(row, col)) * 4; };
  constexpr int kChunks = TM * kWin / V, kPerRow = kWin / V;
  if constexpr (MMA && KN) {
    // RowsKnCopier: thread t chunk t % 8 of rows t / 8 + 32 i, at rows_kn_row; lane l of warp w
    // the address of chunk row l, its 8 columns, for each ldmatrix.trans.
    using WTile = RowsWTileKn<L>;
    constexpr int kRowChunks = BN / V, kStep = kRowsThreads / kRowChunks;
    const auto w_at = [](int row, int col) { return int64_t(WTile::offset(row, col)) * e; };
    SmemInstr& cw = trace.instr("gemm_rows", "ldgsts w window <- 128 bytes of n of a weight row k", SmemOp::Ldgsts,
                                16, windows);
    cw.zero_fill = false;  // as the x window's, below
    for (int i = 0; i < kWin / kStep; ++i)
      add_block(
          cw, kRowsThreads, [&](int t) { return w_at(rows_kn_row(t / kRowChunks + kStep * i), t % kRowChunks * V); },
          [&](int t) { return ((t / kRowChunks + kStep * i) * g.b_sk + t % kRowChunks * V) * e; });
    SmemInstr& lw = trace.instr("gemm_rows", "ldmatrix.x4.trans w window -> lane l: its warp's 8 columns of row l",
                                SmemOp::Ldsm, 16, windows);
    for (int c = 0; c < kRowsMmaChunks; ++c)
      add_block(lw, kRowsThreads, [&](int t) { return w_at(32 * c + t % 32, t / 32 * 8); });
  } else if constexpr (MMA) {
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
    SmemInstr& st = trace.instr("gemm_rows", "st.shared.v2 P <- accumulator pairs", SmemOp::St, 8, tiles * p.split);
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
                                tiles * p.split);
    for (int row = 0; row < TM; ++row)
      add_block(st, kRowsThreads,
                [&](int t) { return ws(t / 32 * TM + row, rows_ring_col(KN, t % 8, t % 32 / 8)); });
    SmemInstr& add = trace.instr("gemm_rows", "ld.shared sums -> the eight warps' sums of an element", SmemOp::Ld, 4,
                                 tiles * p.split);
    SmemInstr& sp = trace.instr("gemm_rows", "st.shared P <- the warps' sums added", SmemOp::St, 4, tiles * p.split);
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
                                tiles * p.split);
    for (int i = 0; i < rows_sum_count(kSums); ++i)
      add_block(st, kRowsThreads, [&](int t) {
        const RowsSum at = rows_sum_at(TM, rows_sum_index(kSums, t % 32, i));
        return rows_sum_stores(kSums, t % 32) ? pt(at.t, t / 32 * R + at.r) : int64_t(-1);
      });
  }
  trace_split_loads<PTile>("gemm_rows", kRowsThreads, tiles, p.split, trace);
}

inline void trace_rows(const GemmCall& c, const RowsPlan& p, SmemTrace& trace) {
  with_layout(c.layout, [&](auto tag) {
    with_rows_tm(p.tm, [&](auto tm) {
      constexpr Layout L = decltype(tag)::value;
      constexpr int TM = decltype(tm)::value;
      if (c.dtype == DType::F32 && p.b_kn) trace_rows_as<L, TM, false, DType::F32, true, true>(c, p, trace);
      else if (c.dtype == DType::F32 && p.ring) trace_rows_as<L, TM, false, DType::F32, true>(c, p, trace);
      else if (c.dtype == DType::F32) trace_rows_as<L, TM, false, DType::F32>(c, p, trace);
      else if (!p.mma) trace_rows_as<L, TM, false, DType::BF16>(c, p, trace);
      else if constexpr (TM >= 8 && TM <= kRowsMmaMaxM) {
        if (p.b_kn) trace_rows_as<L, TM, true, DType::BF16, false, true>(c, p, trace);
        else trace_rows_as<L, TM, true, DType::BF16>(c, p, trace);
      }
    });
  });
}

}  // namespace bankops
