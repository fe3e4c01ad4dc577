// The shared-memory instructions of the mma.sync kernel (mma.cu) for a plan, replayed on the host
// (smem_trace.h); its epilogue and split-K partial are the Hopper kernel's too (wgmma_trace.h).
#pragma once
#include <numeric>
#include <string>

#include "../smem_trace.h"
#include "mma_plan.h"
#include "split_k_trace.h"

namespace bankops {

// The shared epilogue (mma_epilogue.cuh) of the block tiles of C (m x n, `batch` of them): C:
// the fragment arrangement; out_vec: C's rows 16-byte aligned (N % 8 == 0: the output is a
// fresh tensor). Every tile stores all its accumulators; the reads skip what lies past C's
// edges, so tiles on the last row or column of tiles (the rows and columns they hold of C: a
// class) are one more instruction, counted per launch (an iteration: the launch).
template <class C, class CTile>
inline void trace_mma_epilogue(const char* kernel, int64_t batch, int64_t m, int64_t n, bool out_vec,
                               SmemTrace& trace) {
  const auto ct = [](TileCoord c) { return int64_t(CTile::offset(c.r, c.c)) * 2; };
  const int64_t whole_m = m / CTile::kRows, whole_n = n / CTile::kCols;
  const int rows_left = static_cast<int>(m % CTile::kRows), cols_left = static_cast<int>(n % CTile::kCols);
  const int64_t tiles = batch * ceil_div(m, CTile::kRows) * ceil_div(n, CTile::kCols);
  SmemInstr& cs = trace.instr(kernel, "sts C tile <- accumulator pairs", SmemOp::St, 4, tiles);
  for (int i = 0; i < C::kFragM; ++i)
    for (int j = 0; j < C::kFragN; ++j)
      for (int h = 0; h < 2; ++h) add_block(cs, C::kThreads, [&](int t) { return ct(mma_acc<C>(t, i, j, h)); });
  const std::string what = out_vec ? "lds C tile -> 16-byte rows of C" : "lds C tile -> elements of C (rows off 16 bytes)";
  const int width = out_vec ? 16 : 2, reads = out_vec ? C::kOutChunks : C::kOutChunks * kMmaChunk;
  const auto read = [&](int t, int e) { return out_vec ? mma_chunk<C>(t, e, C::kBN) : mma_out_elem<C>(t, e); };
  SmemInstr& whole = trace.instr(kernel, what, SmemOp::Ld, width, batch * whole_m * whole_n);
  for (int e = 0; e < reads; ++e) add_block(whole, C::kThreads, [&](int t) { return ct(read(t, e)); });
  if (rows_left == 0 && cols_left == 0) return;
  SmemInstr& edge = trace.instr(kernel, what + ", edge tiles (reads past C skipped)", SmemOp::Ld, width, 1);
  const struct { int rows, cols; int64_t count; } classes[3] = {
      {rows_left, CTile::kCols, rows_left ? batch * whole_n : 0},
      {CTile::kRows, cols_left, cols_left ? batch * whole_m : 0},
      {rows_left, cols_left, rows_left && cols_left ? batch : 0}};
  for (const auto& k : classes)
    for (int e = 0; k.count > 0 && e < reads; ++e)
      add_block(
          edge, C::kThreads,
          [&](int t) {
            const TileCoord c = read(t, e);
            return c.r < k.rows && c.c < k.cols ? ct(c) : int64_t(-1);
          },
          [](int) { return int64_t(0); }, k.count);
}

// Split-K's partial tile (mma.sync's or the Hopper kernel's consumers, as fragments C): every
// block's stores of its accumulator pairs, then the sums' loads.
template <class C, class PTile>
inline void trace_split_k(const char* kernel, int64_t tiles, int splits, SmemTrace& trace) {
  const auto pt = [](TileCoord c) { return int64_t(PTile::offset(c.r, c.c)) * 4; };
  SmemInstr& st = trace.instr(kernel, "st.shared.v2 P <- accumulator pairs (split-K partial)", SmemOp::St, 8,
                              tiles * splits);
  for (int i = 0; i < C::kFragM; ++i)
    for (int j = 0; j < C::kFragN; ++j)
      for (int h = 0; h < 2; ++h) add_block(st, C::kThreads, [&](int t) { return pt(mma_acc<C>(t, i, j, h)); });
  trace_split_loads<PTile>(kernel, C::kThreads, tiles, splits, trace);
}

// One operand of the realigning fill, as its block tiles see it: rows x cols (unit-stride
// columns, rows s_row elements apart) with k down the rows (k_rows: B as Bs[BK][BN], whose
// tiles step along the columns) or along them (tiles step down the rows); `tiles` tiles of
// `tile` rows or columns, each feeding `times` block tiles; `extent` elements from the
// matrix's first to past its last; batches batch_stride elements apart.
struct RawOperand {
  int64_t s_row, rows, cols, tile, tiles, times, extent, batch, batch_stride;
  bool k_rows;
};

// The realigning fill's raw copies of one operand (StagedFill::fill, mma_fill.cuh), k-tile by k-tile of
// every block tile, for 16-byte aligned data: whole k-tiles copy every raw chunk (one
// pattern: tile rows `pitch` bytes apart, corners taken as line-aligned); the others are
// replayed lane by lane through MmaRaw::whole and ::chunk, on the batches' real offsets mod
// 16 bytes: cp.async of the part before a row's valid end (the zero-filling form), and sts of
// zeros past it or of element loads at the matrix's ends (each a warp instruction where any
// lane takes it).
template <class C, class Raw>
inline void trace_raw_fill(SmemTrace& trace, const char* kernel, const std::string& name, int64_t raw, int64_t nk,
                           int64_t pitch, const RawOperand& o) {
  constexpr int kFills = (Raw::kChunks + C::kThreads - 1) / C::kThreads;
  const auto slot_at = [&](int s) { return s < Raw::kChunks ? raw + int64_t(Raw::slot_pos(s)) * 16 : int64_t(-1); };
  SmemInstr& whole = trace.instr(kernel, "ldgsts " + name + " (raw chunks)", SmemOp::Ldgsts, 16, 0);
  for (int i = 0; i < kFills; ++i)
    add_block(
        whole, C::kThreads, [&](int t) { return slot_at(t + i * C::kThreads); },
        [&](int t) {
          const TileCoord rq = Raw::slot(t + i * C::kThreads);
          return rq.r * pitch / 16 * 16 + rq.c * 16;
        });
  SmemInstr *copies = nullptr, *stores = nullptr;
  // Batch bz starts bz * batch_stride * 2 bytes past the first: its fill depends on that mod 16.
  const int64_t period = (o.batch_stride * 2) % 16 == 0 ? 1 : 16 / std::gcd<int64_t>((o.batch_stride * 2) % 16, 16);
  for (int64_t bz = 0; bz < period && bz < o.batch; ++bz) {
    const int64_t batches = (o.batch - bz + period - 1) / period;
    const uintptr_t lo = (uintptr_t(1) << 40) + uintptr_t(bz * o.batch_stride * 2 % 16), hi = lo + uintptr_t(2 * o.extent);
    for (int64_t ti = 0; ti < o.tiles; ++ti) {
      const uintptr_t corner = lo + uintptr_t(2 * ti * o.tile * (o.k_rows ? 1 : o.s_row));
      const int64_t rows = o.k_rows ? o.rows : o.rows - ti * o.tile;
      const int64_t cols = o.k_rows ? o.cols - ti * o.tile : o.cols;
      for (int64_t x = 0; x < nk; ++x) {
        const int64_t r0 = o.k_rows ? x * C::kBK : 0, c0 = o.k_rows ? 0 : x * C::kBK;
        const RawKTile k{corner + uintptr_t(2 * (r0 * o.s_row + c0)), 2 * o.s_row, rows - r0,
                         cols - c0 < Raw::kTileChunks * kMmaChunk ? cols - c0 : Raw::kTileChunks * kMmaChunk, lo, hi};
        const int64_t times = batches * o.times;
        if (Raw::whole(k)) {
          whole.iterations += times;
          continue;
        }
        if (copies == nullptr) {
          copies = &trace.instr(kernel, "ldgsts " + name + " (raw chunks, edge k-tiles)", SmemOp::Ldgsts, 16, 1);
          copies->zero_fill = true;
          stores = &trace.instr(kernel, "sts " + name + " (raw chunks, edge k-tiles: zeros, element loads)",
                                SmemOp::St, 16, 1);
        }
        for (int i = 0; i < kFills; ++i)
          for (int w = 0; w * kWarpLanes < C::kThreads; ++w) {
            const auto lanes = [&](RawCopy how) {
              return [&, how](int t) {
                const int s = t + i * C::kThreads;
                return s < Raw::kChunks && Raw::chunk(s, k).how == how ? slot_at(s) : int64_t(-1);
              };
            };
            const auto src = [&](int t) { return int64_t(Raw::chunk(t + i * C::kThreads, k).src - lo); };
            add_warp(*copies, w, lanes(RawCopy::Copy), src, times);
            add_warp(*stores, w, lanes(RawCopy::Zero), src, times);
            add_warp(*stores, w, lanes(RawCopy::Elements), src, times);
          }
      }
    }
  }
}

// One call of the mma.sync kernel on block tile C: the route's fill (cp.async, realigned
// 16-byte chunks or the register path) and tile orientations.
template <class C>
inline void trace_mma_tile(const GemmCall& c, const MmaPlan& p, SmemTrace& trace) {
  const GemmArgs& g = c.args;
  const MmaOperands& plan = p.ops;
  const Layout layout = c.layout;
  const int64_t tiles = g.batch * ceil_div(g.m, C::kBM) * ceil_div(g.n, C::kBN), blocks = tiles * p.split;
  const int64_t steps = tiles * ceil_div(g.k, C::kBK);
  const bool async = plan.fill == MmaFill::Async, realign = plan.fill == MmaFill::Realign;
  const char* kernel = async ? "gemm_mma/cp.async" : realign ? "gemm_mma/realign" : "gemm_mma/registers";
  with_layout(layout, [&](auto tag) {
    constexpr Layout L = decltype(tag)::value;
    with_operand_majors(plan, [&](auto km, auto kn) {
      constexpr bool KM = decltype(km)::value, KN = decltype(kn)::value;
      using ATile = MmaATile<L, C, KM>;
      using BTile = MmaBTile<L, C, KN>;
      using CTile = MmaCTile<L, C>;
      const auto at = [](TileCoord c) { return int64_t(ATile::offset(c.r, c.c)) * 2; };
      const auto bt = [](TileCoord c) { return int64_t(BTile::offset(c.r, c.c)) * 2; };
      // pitch: bytes between the tile's rows in global memory (cp.async reads whole 128-byte
      // lines or not, which costs wavefronts too; tile corners are taken as line-aligned).
      const auto fill = [&](const char* name, auto tile, auto byte, int64_t pitch, int64_t raw, const RawOperand& ro) {
        using Tile = decltype(tile);
        const int elems = Tile::kRows * Tile::kCols / C::kThreads;
        if (async) {
          SmemInstr& row = trace.instr(kernel, std::string("ldgsts ") + name, SmemOp::Ldgsts, 16, steps);
          for (int e = 0; e < elems / kMmaChunk; ++e)
            add_block(
                row, C::kThreads, [&](int t) { return byte(mma_chunk<C>(t, e, Tile::kCols)); },
                [&](int t) {
                  const TileCoord c = mma_chunk<C>(t, e, Tile::kCols);
                  return c.r * pitch + c.c * 2;
                });
        } else if (realign) {
          // cp.async of the aligned chunks under the tile's rows into the raw stage (lanes on
          // consecutive positions), then per tile chunk two lds of the raw chunks under it and
          // one sts where cp.async would put the chunk (its lanes).
          using Raw = MmaRaw<Tile::kRows, Tile::kCols>;
          trace_raw_fill<C, Raw>(trace, kernel, name, raw, ceil_div(g.k, C::kBK), pitch, ro);
          SmemInstr& ld = trace.instr(kernel, std::string("lds ") + name + " (raw chunks j, j + 1)", SmemOp::Ld, 16, steps);
          for (int e = 0; e < elems / kMmaChunk; ++e)
            for (int half = 0; half < 2; ++half)
              add_block(ld, C::kThreads, [&](int t) {
                const TileCoord c = mma_chunk<C>(t, e, Tile::kCols);
                return raw + int64_t(Raw::pos(c.r, c.c / kMmaChunk + half)) * 16;
              });
          SmemInstr& row = trace.instr(kernel, std::string("sts ") + name + " (realigned)", SmemOp::St, 16, steps);
          for (int e = 0; e < elems / kMmaChunk; ++e)
            add_block(row, C::kThreads, [&](int t) { return byte(mma_chunk<C>(t, e, Tile::kCols)); });
        } else {
          SmemInstr& row = trace.instr(kernel, std::string("sts ") + name + " (elements)", SmemOp::St, 2, steps);
          for (int e = 0; e < elems; ++e)
            add_block(row, C::kThreads, [&](int t) { return byte(mma_elem<C>(t, e, Tile::kCols)); });
        }
      };
      // The realigning path's raw stage 0 follows its two tile buffers: A's raw chunks, then B's.
      const int64_t raw = 2 * 2 * (ATile::kSize + BTile::kSize);
      const int64_t tiles_m = ceil_div(g.m, C::kBM), tiles_n = ceil_div(g.n, C::kBN);
      const int64_t a_extent = (g.m - 1) * g.a_sm + (g.k - 1) * g.a_sk + 1;
      const int64_t b_extent = (g.k - 1) * g.b_sk + (g.n - 1) * g.b_sn + 1;
      const RawOperand ra =
          KM ? RawOperand{g.a_sk, g.k, g.m, C::kBM, tiles_m, tiles_n, a_extent, g.batch, g.a_sb, true}
             : RawOperand{g.a_sm, g.m, g.k, C::kBM, tiles_m, tiles_n, a_extent, g.batch, g.a_sb, false};
      const RawOperand rb = KN ? RawOperand{g.b_sk, g.k, g.n, C::kBN, tiles_n, tiles_m, b_extent, g.batch, g.b_sb, true}
                               : RawOperand{g.b_sn, g.n, g.k, C::kBN, tiles_n, tiles_m, b_extent, g.batch, g.b_sb, false};
      fill(KM ? "As[k][m] <- A" : "As[m][k] <- A", ATile{}, at, (KM ? g.a_sk : g.a_sm) * 2, raw, ra);
      fill(KN ? "Bs[k][n] <- B" : "Bs[n][k] <- B", BTile{}, bt, (KN ? g.b_sk : g.b_sn) * 2,
           raw + MmaRawA<C, KM>::kBytes, rb);
      // The k16 steps' fragments of one k tile (steps); the cp.async loop also loads each block
      // tile's first step once more, one step ahead (the last time from a stale, unused stage).
      const auto fragments = [&](const std::string& what, int64_t iterations, int first, int last) {
        SmemInstr& la = trace.instr(kernel, (KM ? "ldmatrix.x4.trans A fragments" : "ldmatrix.x4 A fragments") + what,
                                    SmemOp::Ldsm, 16, iterations);
        SmemInstr& lb = trace.instr(kernel, (KN ? "ldmatrix.x4.trans B fragments" : "ldmatrix.x4 B fragments") + what,
                                    SmemOp::Ldsm, 16, iterations);
        for (int s = first; s < last; ++s) {
          for (int i = 0; i < C::kFragM; ++i)
            add_block(la, C::kThreads, [&](int t) { return at(mma_ldsm_a<C>(t, i, s, KM)); });
          for (int j = 0; j < C::kFragN / 2; ++j)
            add_block(lb, C::kThreads, [&](int t) { return bt(mma_ldsm_b<C>(t, j, s, KN)); });
        }
      };
      fragments("", steps, 0, C::kSteps);
      if (async) fragments(" (step 0 ahead, per block)", blocks, 0, 1);
      if (p.split > 1) trace_split_k<C, SplitTile<L, C::kBM, C::kBN>>(kernel, tiles, p.split, trace);
      else trace_mma_epilogue<C, CTile>(kernel, g.batch, g.m, g.n, p.out_vec, trace);
    });
  });
}

inline void trace_mma(const GemmCall& c, const MmaPlan& p, SmemTrace& trace) {
  with_mma_config(p, [&](auto config) { trace_mma_tile<decltype(config)>(c, p, trace); });
}

}  // namespace bankops
