// The persistent Hopper kernel's walk (wgmma.cu includes it): which tile a cluster rank takes,
// a consumer's rows out through its C tile to TMA stores, and the split last wave's halves.
#pragma once
#include "mma_epilogue.cuh"
#include "tma.cuh"
#include "wgmma_plan.h"
#include "wgmma_ptx.cuh"

namespace bankops {
namespace {  // this header's one includer is wgmma.cu

// Cluster tile t of the persistent kernel's walk over (batch, m, n), for cluster rank `rank`
// of CLUSTER: batch after batch, each batch's cluster tiles (CLUSTER m tiles by one n tile,
// wgmma_plan.h's wgmma_finish) in the grouped order of the one-tile kernel's grid (mma_raster).
// Rank r takes m tile r of its cluster tile, which may lie past C's last rows (its loads then
// read zeros, and its stores write nothing).
struct WgmmaTileAt {
  int64_t bz, m0, n0;
};
template <class C, int CLUSTER>
__device__ __forceinline__ WgmmaTileAt wgmma_tile_at(int64_t t, int64_t rows, int64_t tiles_n, int rank) {
  const int64_t per_batch = rows * tiles_n, p = t % per_batch;
  const MmaTileIndex idx = mma_raster(p % tiles_n, p / tiles_n, tiles_n, rows);
  return WgmmaTileAt{t / per_batch, (idx.tm * CLUSTER + rank) * C::kBM, idx.tn * C::kBN};
}

// Consumer warpgroup w's 64 rows of the tile at `at` out through its C tile at `cbuf`
// (WgmmaCStage), one box of columns a pass, each warp on its own 16 rows (wgmma's fragments:
// warp i of a warpgroup holds rows 16 i..): the accumulator pairs plus the bias, rounded to T,
// into the pass's slot of the tile, then a TMA store of the slot's 16 rows, issued by the
// warp's first lane (rows and columns past C's edges are not written). A pass waits until the
// store that last read its slot has (kSlots passes back, maybe the previous tile's), so
// stores overlap the next pass. Warps, not the warpgroup, synchronize.
template <class C, class T>
__device__ __forceinline__ void store_tile(const float (&acc)[1][C::kBN / 8][4], const GemmArgs& g,
                                           const CUtensorMap& map_c, uint32_t cbuf, int w, int ct, WgmmaTileAt at) {
  using CS = WgmmaCStage<C>;
  using Frags = WgmmaFrags<C>;
  const bool lead = ct % 32 == 0;
  const int row0 = ct % 128 / 32 * kWgmmaWarpRows;  // the warp's rows of the warpgroup's 64
#pragma unroll
  for (int p = 0; p < CS::kPasses; ++p) {
    // The slot's first byte: whole blocks, so a column's offset within the slot adds to it.
    const uint32_t at_slot = cbuf + CS::Tile::offset(0, CS::kBoxCols * (p % CS::kSlots)) * 2;
    if (lead) bulk_wait_read<CS::kSlots - 1>();
    __syncwarp();
#pragma unroll
    for (int j = 0; j < CS::kBoxCols / 8; ++j) {
      const int f = p * (CS::kBoxCols / 8) + j;  // the n8 tile
      const TileCoord c0 = mma_acc<Frags>(ct, 0, f, 0);
      const float b0 = g.bias != nullptr ? bias_at<T>(g, at.n0 + c0.c) : 0.f;
      const float b1 = g.bias != nullptr ? bias_at<T>(g, at.n0 + c0.c + 1) : 0.f;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const TileCoord c = mma_acc<Frags>(ct, 0, f, h);
        sts32(at_slot + CS::Tile::offset(c.r - 64 * w, c.c - p * CS::kBoxCols) * 2,
              pack2<T>(acc[0][f][2 * h] + b0, acc[0][f][2 * h + 1] + b1));
      }
    }
    fence_async_shared();
    __syncwarp();
    if (lead) {
      tma_store(map_c, at_slot + CS::Tile::offset(row0, 0) * 2, static_cast<int>(at.n0) + p * CS::kBoxCols,
                static_cast<int>(at.m0) + 64 * w + row0, static_cast<int>(at.bz));
      bulk_commit();
    }
  }
}

// The split last wave's work for this block (wgmma_plan.h's wgmma_tail): pair p (blocks 2p and
// 2p + 1, a cluster) takes the p-th of the `tail` tiles past the `walked` cluster tiles, and
// block h of the pair k-tiles [kt0, kt0 + nk), half of them (split_k_begin). Pairs that share
// B elsewhere (CLUSTER 2) still hand each stage back to both producers: the halves' k-tile
// counts differ by one at most, well within the ring, so neither waits on a stage the other
// never releases.
struct WgmmaHalf {
  bool on;
  WgmmaTileAt at;
  int kt0, nk;
};
template <class C, int CLUSTER>
__device__ __forceinline__ WgmmaHalf wgmma_half(int64_t walked, int tail, int64_t rows, int64_t tiles_n, int nk) {
  const int p = static_cast<int>(blockIdx.x / 2), h = static_cast<int>(blockIdx.x % 2);
  if (p >= tail) return WgmmaHalf{false, WgmmaTileAt{0, 0, 0}, 0, 0};
  const int kt0 = static_cast<int>(split_k_begin(nk, 2, h));
  return WgmmaHalf{true, wgmma_tile_at<C, CLUSTER>(walked + p / CLUSTER, rows, tiles_n, p % CLUSTER), kt0,
                   static_cast<int>(split_k_begin(nk, 2, h + 1)) - kt0};
}

// A split tile's two halves of k summed: consumer warpgroup w of pair rank h keeps its rows
// where w == h (returns true: it stores them), and the other warpgroup sends its partial of the
// peer's rows into the peer's ring by distributed shared-memory stores (as slow as the peer's
// loads of it would be: bench/design_notes.md), quad j of thread t at (128 j + t) * 16
// bytes, the layout the peer's warpgroup reads back (conflict-free). A cluster barrier before
// (both rings read to the end) and after (every quad landed).
template <class C>
__device__ __forceinline__ bool add_halves(float (&acc)[1][C::kBN / 8][4], uint32_t ring, int w) {
  const int h = static_cast<int>(blockIdx.x % 2);
  const uint32_t at = ring + (threadIdx.x % 128) * 16;
  cluster_barrier();
  if (w != h) {
    const uint32_t peer = cluster_map(at, h ^ 1);
#pragma unroll
    for (int j = 0; j < C::kBN / 8; ++j)
      asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(peer + j * 2048), "f"(acc[0][j][0]),
                   "f"(acc[0][j][1]), "f"(acc[0][j][2]), "f"(acc[0][j][3])
                   : "memory");
  }
  cluster_barrier();
  if (w == h) {
#pragma unroll
    for (int j = 0; j < C::kBN / 8; ++j) {
      float4 v;
      asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                   : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
                   : "r"(at + j * 2048));
      acc[0][j][0] += v.x, acc[0][j][1] += v.y, acc[0][j][2] += v.z, acc[0][j][3] += v.w;
    }
  }
  return w == h;
}

}  // namespace
}  // namespace bankops
