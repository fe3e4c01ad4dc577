// The Hopper kernel's ring (wgmma.cu includes it): the TMA producer's boxes into a stage, a
// consumer warpgroup's k loop over the stages, the stages' barriers and the register shares
// of the roles.
#pragma once
#include "tma.cuh"
#include "wgmma_plan.h"
#include "wgmma_ptx.cuh"

namespace bankops {
namespace {  // this header's one includer is wgmma.cu

// One operand's boxes of k-tile k0 into its tile at `dst`: an MN-major tile (K_ROWS) takes a
// box per 64-column block (coordinates (x0 + 64 j, k0)), a k-major one a single box (k0, x0).
template <class Tile, bool K_ROWS>
__device__ __forceinline__ void tma_tile(uint32_t dst, const CUtensorMap& map, int k0, int x0, int z, uint32_t bar) {
  if constexpr (K_ROWS) {
#pragma unroll
    for (int j = 0; j < Tile::kCols / kWgmmaRowCols; ++j)
      tma_load(dst + Tile::offset(0, j * kWgmmaRowCols) * 2, map, x0 + j * kWgmmaRowCols, k0, z, bar);
  } else {
    tma_load(dst, map, k0, x0, z, bar);
  }
}

// Share q of CLUSTER of B's k-tile k0 (one B tile, CLUSTER m tiles) into the tile at `dst`: its
// part of the tile's 64-column blocks (MN-major: K_ROWS) or of its rows (k-major; the map's
// boxes are that many rows), by TMA multicast into every block of the cluster (`mask`), or into
// this block's tile alone (mask 0).
template <class Tile, bool K_ROWS, int CLUSTER>
__device__ __forceinline__ void tma_share(uint32_t dst, const CUtensorMap& map, int k0, int x0, int z, uint32_t bar,
                                          int q, uint16_t mask) {
  const auto load = [&](uint32_t at, int x, int y) {
    if (mask != 0) tma_load_multicast(at, map, x, y, z, bar, mask);
    else tma_load(at, map, x, y, z, bar);
  };
  if constexpr (K_ROWS) {
    constexpr int kPer = Tile::kCols / kWgmmaRowCols / CLUSTER;
    static_assert(kPer * CLUSTER * kWgmmaRowCols == Tile::kCols, "whole 64-column blocks a rank");
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const int j = q * kPer + i;
      load(dst + Tile::offset(0, j * kWgmmaRowCols) * 2, x0 + j * kWgmmaRowCols, k0);
    }
  } else {
    constexpr int kRows = Tile::kRows / CLUSTER;
    load(dst + Tile::offset(q * kRows, 0) * 2, k0, x0 + q * kRows);
  }
}

// The TMA producer (one thread): a stage's boxes, A's, then B's, for k-tiles kt0.. of one
// block tile; it0: the k-tiles that went through the ring before them (the persistent
// kernel's earlier tiles). In a cluster of CLUSTER blocks that share B's tile (rank: this
// block's), B comes as every rank's share (tma_share), or, for a tile this block does not
// share (`whole`: a split last-wave tile), as all the shares into this block alone.
// Coordinates past the operand's edges read as zeros. A batch stride of 0 (a broadcast
// operand) is a map of one batch.
template <class C, bool KM, bool KN, int CLUSTER = 1>
__device__ __forceinline__ void tma_producer(const GemmArgs& g, const CUtensorMap& tma_a, const CUtensorMap& tma_b,
                                             const Ring<C::kStages>& ring, uint32_t base, int64_t bz, int64_t m0,
                                             int64_t n0, int kt0, int nk, int it0, int rank = 0, bool whole = false) {
  using BTile = WgmmaBTile<C, KN>;
  constexpr uint16_t kAll = (1u << CLUSTER) - 1;
  using Smem = WgmmaSmem<C, KM, KN>;
  const int za = g.a_sb != 0 ? static_cast<int>(bz) : 0, zb = g.b_sb != 0 ? static_cast<int>(bz) : 0;
  const int tm = static_cast<int>(m0), tn = static_cast<int>(n0);
  for (int kt = 0; kt < nk; ++kt) {
    const auto pos = RingPos<C::kStages>::at(it0 + kt);
    const int k0 = (kt0 + kt) * C::kBK;
    ring.wait_empty(pos, it0 + kt);
    const uint32_t stage = base + pos.stage * Smem::kStage, bar = ring.full(pos.stage);
    mbar_expect_tx(bar, Smem::kStage);
    tma_tile<WgmmaATile<C, KM>, KM>(stage, tma_a, k0, tm, za, bar);
    if constexpr (CLUSTER == 1) {
      tma_tile<BTile, KN>(stage + Smem::kA, tma_b, k0, tn, zb, bar);
    } else if (whole) {
#pragma unroll
      for (int q = 0; q < CLUSTER; ++q) tma_share<BTile, KN, CLUSTER>(stage + Smem::kA, tma_b, k0, tn, zb, bar, q, 0);
    } else {
      tma_share<BTile, KN, CLUSTER>(stage + Smem::kA, tma_b, k0, tn, zb, bar, rank, kAll);
    }
  }
}

// Stage s back to the producers: an arrival on empty[s] of every block of the cluster (each
// block's producer writes its share of B into stage s of them all).
template <int CLUSTER, int STAGES>
__device__ __forceinline__ void release_stage(const Ring<STAGES>& ring, int s, int rank) {
  mbar_arrive(ring.empty(s));
#pragma unroll
  for (int q = 1; q < CLUSTER; ++q) mbar_arrive_cluster(cluster_map(ring.empty(s), (rank + q) % CLUSTER));
}

// A consumer warpgroup's k loop: rows a_row.. of the block tile into d (its accumulators),
// from ring positions it0.. (as tma_producer's). Each stage goes back to the producers
// (release_stage) once the wgmma reading it has finished, the last one after the final wait.
template <class C, class T, bool KM, bool KN, int CLUSTER = 1>
__device__ __forceinline__ void consume(float (&d)[C::kAcc], const Ring<C::kStages>& ring, uint32_t base, int a_row,
                                        int nk, bool arrives, int it0, int rank = 0) {
  using ATile = WgmmaATile<C, KM>;  // (BM, BK) or (BK, BM) halves, 128-byte swizzled rows
  using BTile = WgmmaBTile<C, KN>;  // (BK, BN) or (BN, BK) halves, likewise
  using Smem = WgmmaSmem<C, KM, KN>;
  constexpr uint64_t kDescA = wgmma_desc_fields<ATile, !KM>(), kDescB = wgmma_desc_fields<BTile, !KN>();
  for (int kt = 0; kt < nk; ++kt) {
    const auto pos = RingPos<C::kStages>::at(it0 + kt);
    const uint32_t stage = base + pos.stage * Smem::kStage;
    ring.wait_full(pos);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < C::kSteps; ++k) {
      const uint64_t da = wgmma_desc(kDescA, stage + wgmma_a_at<ATile, KM>(a_row, k) * 2);
      const uint64_t db = wgmma_desc(kDescB, stage + Smem::kA + wgmma_b_at<BTile, KN>(k) * 2);
      wgmma_mma<T, C::kBN, KM ? 1 : 0, KN ? 1 : 0>(d, da, db);
    }
    wgmma_commit();
    wgmma_wait<1>();
    if (kt > 0 && arrives) release_stage<CLUSTER>(ring, RingPos<C::kStages>::at(it0 + kt - 1).stage, rank);
  }
  wgmma_wait<0>();
  fence_acc(d);
  if (nk > 0 && arrives) release_stage<CLUSTER>(ring, RingPos<C::kStages>::at(it0 + nk - 1).stage, rank);
}

// Registers (setmaxnreg): the launch gives each thread 65536 / threads in steps of 8 (168 for
// 384); the realigning producer keeps 152 (its register slots), a TMA-only kernel's producer
// (TMA: one thread issuing boxes) 40, and the rest go to the consumers' accumulators (128 a
// thread for 128 x 256). With 512 threads and two realigning producers everyone keeps the
// launch's 128; with three consumers (192 x 96) they take 152. The thin tile's one consumer
// needs no more than the launch's 256 (64 accumulators a thread): nobody moves.
template <class C, bool TMA = false>
struct WgmmaRegs {
  static constexpr int kLaunch = 65536 / C::kThreads / 8 * 8;
  static constexpr int kProducer = C::kFewRows ? kLaunch : TMA ? 40 : kLaunch < 152 ? kLaunch : 152;
  static constexpr int kConsumer = C::kFewRows ? kLaunch
                                               : (kLaunch * C::kThreads - C::kProducerThreads * kProducer) /
                                                     (C::kThreads - C::kProducerThreads) / 8 * 8;
  static_assert(kConsumer >= kLaunch && kConsumer <= 256, "setmaxnreg's range");
  __device__ __forceinline__ static void producer() {
    if constexpr (kProducer < kLaunch) asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducer));
  }
  __device__ __forceinline__ static void consumer() {
    if constexpr (kConsumer > kLaunch) asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumer));
  }
};

// The block's start: thread 0 sets up the ring's barriers (full: `fills` arrivals, empty: one
// per consumer warp of each block of the cluster that shares B), then the block lets the next
// kernel launch and waits for the one before (every global access comes after this). In a
// cluster, no block's loads or arrivals reach a peer before the peer's barriers are set up.
template <class C, int CLUSTER = 1>
__device__ __forceinline__ void ring_start(const Ring<C::kStages>& ring, int fills) {
  if (threadIdx.x == 0) {
    for (int s = 0; s < C::kStages; ++s) {
      mbar_init(ring.full(s), fills);
      mbar_init(ring.empty(s), 4 * C::kConsumers * CLUSTER);
    }
    mbar_init_fence();
  }
  pdl_launch_next();
  if constexpr (CLUSTER > 1) cluster_barrier();
  else __syncthreads();
  pdl_wait_previous();
}

}  // namespace
}  // namespace bankops
