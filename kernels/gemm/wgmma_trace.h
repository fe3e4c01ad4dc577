// The shared-memory instructions of the Hopper kernel (wgmma.cu) for a plan, replayed on the host
// (smem_trace.h).
#pragma once
#include <string>

#include "../smem_trace.h"
#include "mma_trace.h"
#include "wgmma_plan.h"

namespace bankops {

// The persistent Hopper kernel's epilogue (wgmma.cu's store_tile): each consumer warpgroup's
// accumulator pairs into its own C tile (WgmmaCStage), which TMA stores read, not the warps.
template <class C>
inline void trace_wgmma_store(const char* kernel, int64_t tiles, SmemTrace& trace) {
  using CS = WgmmaCStage<C>;
  using Frags = WgmmaFrags<C>;
  SmemInstr& st = trace.instr(kernel, "sts C tile <- accumulator pairs, for TMA stores", SmemOp::St, 4, tiles);
  for (int f = 0; f < C::kBN / 8; ++f)
    for (int h = 0; h < 2; ++h)
      add_block(st, Frags::kThreads, [&](int t) {
        const TileCoord c = mma_acc<Frags>(t, 0, f, h);
        return int64_t(c.r / 64) * CS::kBytes + int64_t(CS::Tile::offset(c.r % 64, c.c % CS::kCols)) * 2;
      });
}

// The persistent kernel's split last wave (wgmma_plan.h's wgmma_tail; wgmma.cu's add_halves): of each
// split tile's two blocks, one consumer warpgroup stores its half-k partial into the other
// block's shared memory (distributed shared memory, the owning block's banks), quad j of thread t
// at (128 j + t) * 16 bytes, and that block's matching warpgroup reads it back.
template <class C>
inline void trace_wgmma_halves(const char* kernel, int64_t tail, SmemTrace& trace) {
  SmemInstr& st = trace.instr(kernel, "st.shared::cluster half-k partial -> peer (split last wave)", SmemOp::St, 16,
                              2 * tail);
  st.peer = true;
  SmemInstr& ld = trace.instr(kernel, "lds peer's half-k partial", SmemOp::Ld, 16, 2 * tail);
  for (int j = 0; j < C::kBN / 8; ++j) {
    add_block(st, 128, [&](int t) { return int64_t(128 * j + t) * 16; });
    add_block(ld, 128, [&](int t) { return int64_t(128 * j + t) * 16; });
  }
}

// One call of the Hopper kernel on block tile C: for rows off 16-byte boundaries, the
// realigning producer's stores of the chunks it cut in registers (lanes at wgmma_chunk, tile
// offsets as the layout's); then the shared epilogue, or the persistent kernel's. TMA's copies
// into the tiles and wgmma's reads of them go through the Tensor Memory Accelerator and the
// tensor cores, not the warps' load/store pipe: they are no shared-memory instructions (Nsight
// Compute counts none for them). A split tile's blocks store their partial tiles and sum them
// (split-K, as mma.sync's).
// The kernel's name says the producer: gemm_wgmma (TMA), gemm_wgmma/realign,
// gemm_wgmma/repacked (TMA on copies of the operands, whose copy kernel uses no shared memory).
template <class C>
inline void trace_wgmma_tile(const GemmCall& c, const WgmmaPlan& p, SmemTrace& trace) {
  const GemmArgs& g = c.args;
  const char* kernel = p.repack.jobs > 0              ? "gemm_wgmma/repacked"
                       : p.ops.fill == MmaFill::Async ? "gemm_wgmma"
                                                      : "gemm_wgmma/realign";
  const int64_t tiles = g.batch * ceil_div(g.m, C::kBM) * ceil_div(g.n, C::kBN);
  const int64_t steps = tiles * ceil_div(g.k, C::kBK);
  const auto realigned = [&](const char* name, auto tile) {
    using Tile = decltype(tile);
    const int chunks = Tile::kRows * Tile::kCols / (C::kProducerThreads * kMmaChunk);
    SmemInstr& row = trace.instr(kernel, std::string("sts ") + name + " (realigned)", SmemOp::St, 16, steps);
    for (int e = 0; e < chunks; ++e)
      add_block(row, C::kProducerThreads, [&](int t) {
        const TileCoord c = wgmma_chunk<C, Tile>(t, e);
        return int64_t(Tile::offset(c.r, c.c)) * 2;
      });
  };
  if (p.ops.fill != MmaFill::Async) {
    if (p.ops.a_km) realigned("As[k][m] <- A", WgmmaATile<C, true>{});
    else realigned("As[m][k] <- A", WgmmaATile<C, false>{});
    if (p.ops.b_kn) realigned("Bs[k][n] <- B", WgmmaBTile<C, true>{});
    else realigned("Bs[n][k] <- B", WgmmaBTile<C, false>{});
  }
  if constexpr (!C::kPersistentOnly) {  // 128 x 192 and 128 x 144 have no block-a-tile or split epilogue
    if (p.split > 1) return trace_split_k<WgmmaFrags<C>, WgmmaPartTile<C>>(kernel, tiles, p.split, trace);
    if (!p.persistent)
      return trace_mma_epilogue<WgmmaFrags<C>, WgmmaCTile<C>>(kernel, g.batch, g.m, g.n, p.out_vec, trace);
  }
  trace_wgmma_store<C>(kernel, wgmma_walked_tiles(c, p), trace);
  if (p.tail > 0) trace_wgmma_halves<C>(kernel, p.tail, trace);
}

inline void trace_wgmma(const GemmCall& c, const WgmmaPlan& p, SmemTrace& trace) {
  with_wgmma_config(p, [&](auto config) { trace_wgmma_tile<decltype(config)>(c, p, trace); });
}

}  // namespace bankops
