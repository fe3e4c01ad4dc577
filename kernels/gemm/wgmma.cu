// The Hopper gemm kernel (tiling in wgmma.h) and its launcher, which runs what the route says.
// The producer warpgroups (the first kProducers) stream k-tiles into the stage ring, TMA
// (tma_producer) or realigning (wgmma_realign.cuh); consumer warpgroup w multiplies rows 64 w..
// of the block tile into float accumulators (consume), then the consumers write the tile out.
// Two forms:
// - wgmma_persistent_kernel (route.h's wgmma_persists: TMA, unsplit, C's rows 16-byte
//   aligned): one block an SM walks the tiles; the ring runs on from tile to tile, and each
//   consumer writes its rows to a C tile of its own, which TMA stores (store_tile);
// - wgmma_kernel, a block a tile, its epilogue through the ring (mma_epilogue.cuh); a split
//   tile (route.h: grids that leave the last wave of SMs idle) takes a cluster of blocks, each
//   a share of k, summed in rank order through distributed shared memory (split_k.cuh).
//   full[s]:  completes when stage s has landed: TMA's bytes (one arrival that expects them),
//             or the realigning producers' stores (an arrival from each thread);
//   empty[s]: completes when every consumer warp is done reading stage s (a warp arrives once
//             its wgmma on the next k-tile is issued and the previous one has finished, so
//             one k-tile of tensor work is always queued).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "launch.h"

#if defined(BANKOPS_WGMMA)
#include "mma_epilogue.cuh"
#include "pdl.cuh"
#include "split_k.cuh"
#include "tma.cuh"
#include "wgmma_ptx.cuh"
#include "wgmma_realign.cuh"

// Code for sm_90a only: wgmma and setmaxnreg do not exist elsewhere. A build for several
// architectures compiles the kernel's body for the 9.0a pass alone; any other pass traps.
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define BANKOPS_WGMMA_BODY 1
#endif

namespace bankops {
namespace {

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

template <class C, class T, bool KM, bool KN, WgmmaLoad LOAD>
__global__ void __launch_bounds__(C::kThreads, 1)
    wgmma_kernel(const GemmArgs g, const bool out_vec, const int splits, const __grid_constant__ CUtensorMap tma_a,
                 const __grid_constant__ CUtensorMap tma_b) {
#if defined(BANKOPS_WGMMA_BODY)
  using Smem = WgmmaSmem<C, KM, KN>;
  using Frags = WgmmaFrags<C>;
  constexpr int kStages = C::kStages;
  __shared__ __align__(8) uint64_t bars[2 * kStages];
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023) & ~uint32_t(1023);
  const Ring<kStages> ring{smem_u32(bars), smem_u32(bars) + 8 * kStages};
  // The maps are parameters, not the earlier kernel's output: fetch them while it runs.
  if (LOAD == WgmmaLoad::Tma && threadIdx.x == 0) {
    tma_prefetch(tma_a);
    tma_prefetch(tma_b);
  }
  ring_start<C>(ring, LOAD == WgmmaLoad::Tma ? 1 : C::kProducerThreads);

  // A split tile's cluster: consecutive blocks in x, rank r taking k tiles [kt0, kt0 + nk). An
  // unsplit block skips the divisions: they sit before its first load.
  const int64_t bz = blockIdx.z;
  const bool split = splits > 1;
  const int rank = split ? static_cast<int>(blockIdx.x % splits) : 0;
  const MmaTileIndex idx = split ? mma_raster(blockIdx.x / splits, blockIdx.y, gridDim.x / splits, gridDim.y)
                                 : mma_raster(blockIdx.x, blockIdx.y, gridDim.x, gridDim.y);
  const int64_t m0 = idx.tm * C::kBM, n0 = idx.tn * C::kBN;
  const int nk_all = static_cast<int>(ceil_div(g.k, C::kBK));
  const int kt0 = split ? static_cast<int>(split_k_begin(nk_all, splits, rank)) : 0;
  const int nk = split ? static_cast<int>(split_k_begin(nk_all, splits, rank + 1)) - kt0 : nk_all;
  const int wg = threadIdx.x / 128;

  if (wg < C::kProducers) {
    WgmmaRegs<C>::producer();
    if constexpr (LOAD == WgmmaLoad::Realign) {
      // The matrices' bytes (this batch's): nothing outside them is read.
      const uint16_t* am = static_cast<const uint16_t*>(g.a) + bz * g.a_sb;
      const uint16_t* bm = static_cast<const uint16_t*>(g.b) + bz * g.b_sb;
      const uintptr_t a_hi = addr_of(am + (g.m - 1) * g.a_sm + (g.k - 1) * g.a_sk + 1);
      const uintptr_t b_hi = addr_of(bm + (g.k - 1) * g.b_sk + (g.n - 1) * g.b_sn + 1);
      const WgmmaShiftFill<C, WgmmaATile<C, KM>, KM> fa(am + m0 * g.a_sm, KM ? g.a_sk : g.a_sm, g.k, addr_of(am), a_hi,
                                                        base);
      const WgmmaShiftFill<C, WgmmaBTile<C, KN>, KN> fb(bm + n0 * g.b_sn, KN ? g.b_sk : g.b_sn, g.k, addr_of(bm), b_hi,
                                                       base + Smem::kA);
      realign_producer<C, decltype(fa), decltype(fb), Smem::kStage>(fa, fb, nk, ring);
    } else if (threadIdx.x == 0) {
      tma_producer<C, KM, KN>(g, tma_a, tma_b, ring, base, bz, m0, n0, kt0, nk, 0);
    }
    return;  // a split tile's sum waits on the consumers alone (split_k_store)
  }

  WgmmaRegs<C>::consumer();
  const int ct = threadIdx.x - C::kProducerThreads;  // consumer thread
  float acc[1][C::kBN / 8][4] = {};
  consume<C, T, KM, KN>(reinterpret_cast<float(&)[C::kAcc]>(acc), ring, base, (wg - C::kProducers) * 64, nk,
                        ct % 32 == 0, 0);
  consumer_sync<Frags::kThreads>();  // every consumer is done reading the ring
  unsigned char* free_ring = smem_raw + (base - smem_u32(smem_raw));
  uint16_t* c = static_cast<uint16_t*>(g.c) + bz * g.m * g.n;
  if (!split) {
    mma_epilogue<Frags, WgmmaCTile<C>, T>(reinterpret_cast<uint16_t*>(free_ring), acc, ct, c, g, m0, n0, out_vec,
                                          [] { consumer_sync<Frags::kThreads>(); });
  } else {
    using PTile = WgmmaPartTile<C>;
    float* part = reinterpret_cast<float*>(free_ring);
    mma_store_partial<Frags, PTile>(part, acc, ct);
    split_k_store<T, C::kBM, C::kBN, PTile, Frags::kThreads>(part, g, reinterpret_cast<T*>(c), m0, n0, splits, rank,
                                                             ct);
  }
#else
  __trap();  // not sm_90a: the host never routes here (gemm_wgmma_built), and C must not stay unwritten
#endif
}

// Cluster tile t of the persistent kernel's walk over (batch, m, n), for cluster rank `rank`
// of CLUSTER: batch after batch, each batch's cluster tiles (CLUSTER m tiles by one n tile,
// route.h's wgmma_clusters) in the grouped order of the one-tile kernel's grid (mma_raster).
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

// The split last wave's work for this block (route.h's wgmma_tail): pair p (blocks 2p and
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
// peer's rows into the peer's ring by distributed shared-memory stores (about 20 GB/s an SM,
// as the peer's loads of it were: bench/RESULTS.md), quad j of thread t at (128 j + t) * 16
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

// The persistent form (route.h's wgmma_persists: TMA, unsplit, C rows 16-byte aligned, more
// tiles than SMs): one block an SM; clusters of CLUSTER blocks walk cluster tiles c,
// c + clusters, ... (wgmma_tile_at), each block loading A's tile and its share of the B tile
// they all read. The producer runs on into the next tile while the consumers write one out,
// and the consumers hand C to TMA stores from tiles of their own, so the tensor cores wait
// neither for a new block's ring to fill nor for C's writes. tail > 0 (route.h's wgmma_tail; the
// launch then pairs the blocks in clusters of 2 whatever CLUSTER is): the walk stops after its
// whole waves, and each of the last wave's `tail` tiles runs on a pair of blocks, half its k
// tiles each (wgmma_half), their partials summed through distributed shared memory (add_halves).
template <class C, class T, bool KM, bool KN, int CLUSTER>
__global__ void __launch_bounds__(C::kThreads, 1)
    wgmma_persistent_kernel(const GemmArgs g, const __grid_constant__ CUtensorMap tma_a,
                            const __grid_constant__ CUtensorMap tma_b, const __grid_constant__ CUtensorMap tma_c,
                            const int tail) {
#if defined(BANKOPS_WGMMA_BODY)
  static_assert(C::kProducers == 1, "one TMA producer thread");
  using Smem = WgmmaSmem<C, KM, KN, true>;
  __shared__ __align__(8) uint64_t bars[2 * C::kStages];
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023) & ~uint32_t(1023);
  const Ring<C::kStages> ring{smem_u32(bars), smem_u32(bars) + 8 * C::kStages};
  if (threadIdx.x == 0) {
    tma_prefetch(tma_a);
    tma_prefetch(tma_b);
    tma_prefetch(tma_c);
  }
  ring_start<C, CLUSTER>(ring, 1);
  const int64_t rows = ceil_div(ceil_div(g.m, C::kBM), CLUSTER), tiles_n = ceil_div(g.n, C::kBN);
  const int64_t tiles = g.batch * rows * tiles_n;  // cluster tiles
  const int64_t walked = tiles - tail / CLUSTER;     // those walked whole, by one block (or cluster) each
  const int64_t cluster = blockIdx.x / CLUSTER, clusters = gridDim.x / CLUSTER;
  const int rank = static_cast<int>(blockIdx.x % CLUSTER);
  const int nk = static_cast<int>(ceil_div(g.k, C::kBK));
  const int wg = threadIdx.x / 128;
  if (wg == 0) {
    WgmmaRegs<C, true>::producer();
    if (threadIdx.x == 0) {
      int it = 0;  // k-tiles through the ring so far (route.h keeps a block's total in int)
      const WgmmaHalf half = wgmma_half<C, CLUSTER>(walked, tail, rows, tiles_n, nk);
      for (int64_t t = cluster; t < walked || half.on; t += clusters, it += nk) {
        const bool whole = t < walked;
        const WgmmaTileAt at = whole ? wgmma_tile_at<C, CLUSTER>(t, rows, tiles_n, rank) : half.at;
        tma_producer<C, KM, KN, CLUSTER>(g, tma_a, tma_b, ring, base, at.bz, at.m0, at.n0, whole ? 0 : half.kt0,
                                         whole ? nk : half.nk, it, rank, !whole);
        if (!whole) break;
      }
    }
    return;
  }
  WgmmaRegs<C, true>::consumer();
  const int ct = threadIdx.x - C::kProducerThreads, w = wg - 1;
  const uint32_t cbuf = base + Smem::kRing + w * WgmmaCStage<C>::kBytes;
  int it = 0;
  // The walk's tiles, then this block's half of a split tile (one loop: one copy of the k loop
  // and the epilogue in the code, whose accumulators fill the registers).
  const WgmmaHalf half = wgmma_half<C, CLUSTER>(walked, tail, rows, tiles_n, nk);
  for (int64_t t = cluster; t < walked || half.on; t += clusters, it += nk) {
    const bool whole = t < walked;
    float acc[1][C::kBN / 8][4] = {};
    consume<C, T, KM, KN, CLUSTER>(reinterpret_cast<float(&)[C::kAcc]>(acc), ring, base, w * 64,
                                   whole ? nk : half.nk, ct % 32 == 0, it, rank);
    if (whole || add_halves<C>(acc, base, w))
      store_tile<C, T>(acc, g, tma_c, cbuf, w, ct, whole ? wgmma_tile_at<C, CLUSTER>(t, rows, tiles_n, rank) : half.at);
    if (!whole) break;
  }
  if (ct % 32 == 0) bulk_wait();  // C's last writes are done before the block's shared memory goes
  // A peer's consumers still arrive on this block's barriers, or read its partial, until they
  // finish: no block of the cluster leaves before all are done.
  if (CLUSTER > 1 || tail > 0) cluster_barrier();
#else
  __trap();
#endif
}

// One operand's tensor map: (x, k, batch) with boxes of 64 x BK (MN-major: K_ROWS), else
// (k, x, batch) with boxes of 64 x `rows` (the block tile's m or n). A batch stride of 0 maps
// one batch.
template <bool K_ROWS>
cudaError_t tma_operand(CUtensorMap& map, const void* p, int64_t x, int64_t s_x, int64_t k, int64_t s_k,
                        int64_t s_batch, int64_t batch, int rows, int bk) {
  const int64_t n_batch = s_batch != 0 ? batch : 1;
  if (K_ROWS) return tma_map_16bit(&map, p, {x, k, n_batch}, {s_k, s_batch}, bk);
  return tma_map_16bit(&map, p, {k, x, n_batch}, {s_x, s_batch}, rows);
}

// The operands' maps; B's boxes are a cluster rank's share of its tile (tma_share).
template <class C, bool KM, bool KN, int CLUSTER = 1>
cudaError_t tma_maps(const GemmArgs& g, CUtensorMap& a, CUtensorMap& b) {
  const cudaError_t err = tma_operand<KM>(a, g.a, g.m, g.a_sm, g.k, g.a_sk, g.a_sb, g.batch, C::kBM, C::kBK);
  if (err != cudaSuccess) return err;
  return tma_operand<KN>(b, g.b, g.n, g.b_sn, g.k, g.b_sk, g.b_sb, g.batch, C::kBN / CLUSTER, C::kBK);
}

template <class C, class T, bool KM, bool KN, WgmmaLoad LOAD>
cudaError_t run(const GemmRoute& r, cudaStream_t stream, bool tma) {
  constexpr auto kernel = wgmma_kernel<C, T, KM, KN, LOAD>;
  constexpr int kSmem = WgmmaSmem<C, KM, KN>::kBytes;
  static_assert(kSmem <= 227 * 1024, "the stage ring exceeds a block's shared memory");
  const GemmArgs& g = r.args;
  CUtensorMap map_a{}, map_b{};  // unused by the realigning producer
  if constexpr (LOAD == WgmmaLoad::Tma) {
    // Encoded before anything is launched: a refusal leaves the stream untouched.
    if (!tma || tma_maps<C, KM, KN>(g, map_a, map_b) != cudaSuccess) return cudaErrorNotSupported;
  }
  cudaError_t err = raise_smem_once<kernel>(kSmem);
  if (err == cudaSuccess && r.jobs > 0) err = launch_repack(r.job, r.jobs, r.device.num_sms, stream);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(ceil_div(g.n, C::kBN) * r.split), static_cast<unsigned>(ceil_div(g.m, C::kBM)),
                  static_cast<unsigned>(g.batch));
  return launch_pdl(kernel, grid, dim3(C::kThreads), kSmem, r.split, stream, g, r.out_vec, r.split, map_a, map_b);
}

// The persistent kernel (route.h: r.persistent) on the route's blocks (gemm_route_blocks), in
// clusters of r.multicast, with a third map: C as (n, m, batch) in boxes of a consumer warp's 16
// rows by one block of the C tile, or by the dense C tile's columns (WgmmaCStage).
template <class C, class T, bool KM, bool KN, int CLUSTER>
cudaError_t run_persistent(const GemmRoute& r, cudaStream_t stream, bool tma) {
  if (r.tail > 0 && !C::kHalves) return cudaErrorInvalidValue;  // route.h's wgmma_tail never asks
  constexpr auto kernel = wgmma_persistent_kernel<C, T, KM, KN, CLUSTER>;
  constexpr int kSmem = WgmmaSmem<C, KM, KN, true>::kBytes;
  static_assert(kSmem <= 227 * 1024, "the stage ring and the C tiles exceed a block's shared memory");
  const GemmArgs& g = r.args;
  CUtensorMap map_a{}, map_b{}, map_c{};
  if (!tma || tma_maps<C, KM, KN, CLUSTER>(g, map_a, map_b) != cudaSuccess ||
      tma_map_16bit(&map_c, g.c, {g.n, g.m, g.batch}, {g.n, g.m * g.n}, kWgmmaWarpRows, WgmmaCStage<C>::kBoxCols,
                    WgmmaCStage<C>::kSwizzleBytes) != cudaSuccess)
    return cudaErrorNotSupported;
  cudaError_t err = raise_smem_once<kernel>(kSmem);
  if (err == cudaSuccess && r.jobs > 0) err = launch_repack(r.job, r.jobs, r.device.num_sms, stream);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(gemm_route_blocks(r)));
  return launch_pdl(kernel, grid, dim3(C::kThreads), kSmem, r.tail > 0 ? 2 : CLUSTER, stream, g, map_a, map_b, map_c,
                    static_cast<int>(r.tail));
}

// The route's producer as a template argument: the realigning producer takes B as Bs[BK][BN]
// only, on WgmmaLarge and WgmmaMediumRealign only, unsplit (route.h's wgmma_plan); TMA takes
// one producer thread; 128 x 192, 128 x 144 and 192 x 96 tiles run persistent blocks only, the
// thin tile (64 x 128) a block a tile only, A k-major. Pairs share B's tile where it halves
// (wgmma_pairs_share_b, which route.h's wgmma_clusters asks too).
template <class C, class T, bool KM, bool KN>
cudaError_t run_fill(const GemmRoute& r, cudaStream_t stream, bool tma) {
  constexpr bool kRealign = KN && (std::is_same_v<C, WgmmaLarge> || std::is_same_v<C, WgmmaMediumRealign>);
  if (r.ops.fill == MmaFill::Realign) {
    if (r.split > 1) return cudaErrorInvalidValue;  // the realigning producers read all of k
    if constexpr (kRealign) return run<C, T, KM, KN, WgmmaLoad::Realign>(r, stream, tma);
    return cudaErrorInvalidValue;
  }
  if constexpr (C::kProducers > 1) {
    return cudaErrorInvalidValue;
  } else if (!r.persistent) {
    if constexpr (C::kPersistentOnly) return cudaErrorInvalidValue;
    else return run<C, T, KM, KN, WgmmaLoad::Tma>(r, stream, tma);
  } else if constexpr (C::kFewRows) {
    return cudaErrorInvalidValue;
  } else if (r.multicast == 1) {
    return run_persistent<C, T, KM, KN, 1>(r, stream, tma);
  } else if constexpr (wgmma_pairs_share_b<C, KN>()) {
    return r.multicast == 2 ? run_persistent<C, T, KM, KN, 2>(r, stream, tma) : cudaErrorInvalidValue;
  } else {
    return cudaErrorInvalidValue;
  }
}

template <class C>
cudaError_t run_dtype(const GemmRoute& r, cudaStream_t stream, bool tma) {
  return with_operand_majors(r.ops, [&](auto km, auto kn) {
    constexpr bool KM = decltype(km)::value, KN = decltype(kn)::value;
    if constexpr ((C::kKMajorOnly && (KM || KN)) || (C::kFewRows && KM))
      return cudaErrorInvalidValue;  // the route never takes it there
    else
      return r.dtype == DType::F16 ? run_fill<C, __half, KM, KN>(r, stream, tma)
                                   : run_fill<C, __nv_bfloat16, KM, KN>(r, stream, tma);
  });
}

}  // namespace

bool gemm_wgmma_built() { return true; }

cudaError_t launch_wgmma(const GemmRoute& r, cudaStream_t stream, bool tma) {
  if (r.wgmma == WgmmaShape::None) return cudaErrorInvalidValue;
  return with_wgmma_config(r, [&](auto config) { return run_dtype<decltype(config)>(r, stream, tma); });
}

}  // namespace bankops

#else

namespace bankops {

bool gemm_wgmma_built() { return false; }

cudaError_t launch_wgmma(const GemmRoute&, cudaStream_t, bool) { return cudaErrorNotSupported; }

}  // namespace bankops

#endif
