// The Hopper gemm kernel (tiling in wgmma.h) and its launcher, which runs what the plan says.
// The producer warpgroups (the first kProducers) stream k-tiles into the stage ring, TMA
// (tma_producer) or realigning (wgmma_realign.cuh); consumer warpgroup w multiplies rows 64 w..
// of the block tile into float accumulators (consume), then the consumers write the tile out.
// Two forms:
// - wgmma_persistent_kernel (wgmma_plan.h's wgmma_finish: TMA, unsplit, C's rows 16-byte
//   aligned): one block an SM walks the tiles; the ring runs on from tile to tile, and each
//   consumer writes its rows to a C tile of its own, which TMA stores (store_tile);
// - wgmma_kernel, a block a tile, its epilogue through the ring (mma_epilogue.cuh); a split
//   tile (wgmma_plan.h: grids that leave the last wave of SMs idle) takes a cluster of blocks, each
//   a share of k, summed in rank order through distributed shared memory (split_k.cuh).
//   full[s]:  completes when stage s has landed: TMA's bytes (one arrival that expects them),
//             or the realigning producers' stores (an arrival from each thread);
//   empty[s]: completes when every consumer warp is done reading stage s (a warp arrives once
//             its wgmma on the next k-tile is issued and the previous one has finished, so
//             one k-tile of tensor work is always queued).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "launch.h"
#include "wgmma_plan.h"

#if defined(BANKOPS_WGMMA)
#include "mma_epilogue.cuh"
#include "pdl.cuh"
#include "split_k.cuh"
#include "tma.cuh"
#include "wgmma_ptx.cuh"
#include "wgmma_realign.cuh"
#include "wgmma_ring.cuh"
#include "wgmma_walk.cuh"

// Code for sm_90a only: wgmma and setmaxnreg do not exist elsewhere. A build for several
// architectures compiles the kernel's body for the 9.0a pass alone; any other pass traps.
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define BANKOPS_WGMMA_BODY 1
#endif

namespace bankops {
namespace {

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

// The persistent form (wgmma_plan.h's wgmma_finish: TMA, unsplit, C rows 16-byte aligned, more
// tiles than SMs): one block an SM; clusters of CLUSTER blocks walk cluster tiles c,
// c + clusters, ... (wgmma_tile_at), each block loading A's tile and its share of the B tile
// they all read. The producer runs on into the next tile while the consumers write one out,
// and the consumers hand C to TMA stores from tiles of their own, so the tensor cores wait
// neither for a new block's ring to fill nor for C's writes. tail > 0 (wgmma_plan.h's wgmma_tail; the
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
      int it = 0;  // k-tiles through the ring so far (wgmma_plan.h keeps a block's total in int)
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
cudaError_t run(const GemmCall& c, const WgmmaPlan& p, cudaStream_t stream, bool tma) {
  constexpr auto kernel = wgmma_kernel<C, T, KM, KN, LOAD>;
  constexpr int kSmem = WgmmaSmem<C, KM, KN>::kBytes;
  static_assert(kSmem <= kWgmmaSmemBytes, "the stage ring exceeds a block's shared memory");
  const GemmArgs& g = wgmma_args(c, p);
  CUtensorMap map_a{}, map_b{};  // unused by the realigning producer
  if constexpr (LOAD == WgmmaLoad::Tma) {
    // Encoded before anything is launched: a refusal leaves the stream untouched.
    if (!tma || tma_maps<C, KM, KN>(g, map_a, map_b) != cudaSuccess) return cudaErrorNotSupported;
  }
  cudaError_t err = raise_smem_once<kernel>(kSmem);
  if (err == cudaSuccess && p.repack.jobs > 0) err = launch_repack(p.repack.job, p.repack.jobs, c.device.num_sms, stream);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(ceil_div(g.n, C::kBN) * p.split), static_cast<unsigned>(ceil_div(g.m, C::kBM)),
                  static_cast<unsigned>(g.batch));
  return launch_pdl(kernel, grid, dim3(C::kThreads), kSmem, p.split, stream, g, p.out_vec, p.split, map_a, map_b);
}

// The persistent kernel (p.persistent) on the plan's blocks (wgmma_blocks), in clusters of
// p.multicast, with a third map: C as (n, m, batch) in boxes of a consumer warp's 16 rows by one
// block of the C tile, or by the dense C tile's columns (WgmmaCStage).
template <class C, class T, bool KM, bool KN, int CLUSTER>
cudaError_t run_persistent(const GemmCall& c, const WgmmaPlan& p, cudaStream_t stream, bool tma) {
  if (p.tail > 0 && !C::kHalves) return cudaErrorInvalidValue;  // wgmma_tail never asks
  constexpr auto kernel = wgmma_persistent_kernel<C, T, KM, KN, CLUSTER>;
  constexpr int kSmem = WgmmaSmem<C, KM, KN, true>::kBytes;
  static_assert(kSmem <= kWgmmaSmemBytes, "the stage ring and the C tiles exceed a block's shared memory");
  const GemmArgs& g = wgmma_args(c, p);
  CUtensorMap map_a{}, map_b{}, map_c{};
  if (!tma || tma_maps<C, KM, KN, CLUSTER>(g, map_a, map_b) != cudaSuccess ||
      tma_map_16bit(&map_c, g.c, {g.n, g.m, g.batch}, {g.n, g.m * g.n}, kWgmmaWarpRows, WgmmaCStage<C>::kBoxCols,
                    WgmmaCStage<C>::kSwizzleBytes) != cudaSuccess)
    return cudaErrorNotSupported;
  cudaError_t err = raise_smem_once<kernel>(kSmem);
  if (err == cudaSuccess && p.repack.jobs > 0) err = launch_repack(p.repack.job, p.repack.jobs, c.device.num_sms, stream);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(wgmma_blocks(c, p)));
  return launch_pdl(kernel, grid, dim3(C::kThreads), kSmem, p.tail > 0 ? 2 : CLUSTER, stream, g, map_a, map_b, map_c,
                    static_cast<int>(p.tail));
}

// The plan's producer as a template argument: the realigning producer takes B as Bs[BK][BN]
// only, on WgmmaLarge and WgmmaMediumRealign only, unsplit (wgmma_plan.h's wgmma_plans); TMA takes
// one producer thread; 128 x 192, 128 x 144, 192 x 96 and 192 x 192 tiles run persistent blocks only, the
// thin tile (64 x 128) a block a tile only, A k-major. Pairs share B's tile where it halves
// (wgmma_pairs_share_b, which wgmma_finish asks too).
template <class C, class T, bool KM, bool KN>
cudaError_t run_fill(const GemmCall& c, const WgmmaPlan& p, cudaStream_t stream, bool tma) {
  constexpr bool kRealign = KN && (std::is_same_v<C, WgmmaLarge> || std::is_same_v<C, WgmmaMediumRealign>);
  if (p.ops.fill == MmaFill::Realign) {
    if (p.split > 1) return cudaErrorInvalidValue;  // the realigning producers read all of k
    if constexpr (kRealign) return run<C, T, KM, KN, WgmmaLoad::Realign>(c, p, stream, tma);
    return cudaErrorInvalidValue;
  }
  if constexpr (C::kProducers > 1) {
    return cudaErrorInvalidValue;
  } else if (!p.persistent) {
    if constexpr (C::kPersistentOnly) return cudaErrorInvalidValue;
    else return run<C, T, KM, KN, WgmmaLoad::Tma>(c, p, stream, tma);
  } else if constexpr (C::kFewRows) {
    return cudaErrorInvalidValue;
  } else if (p.multicast == 1) {
    return run_persistent<C, T, KM, KN, 1>(c, p, stream, tma);
  } else if constexpr (wgmma_pairs_share_b<C, KN>()) {
    return p.multicast == 2 ? run_persistent<C, T, KM, KN, 2>(c, p, stream, tma) : cudaErrorInvalidValue;
  } else {
    return cudaErrorInvalidValue;
  }
}

template <class C>
cudaError_t run_dtype(const GemmCall& c, const WgmmaPlan& p, cudaStream_t stream, bool tma) {
  return with_operand_majors(p.ops, [&](auto km, auto kn) {
    constexpr bool KM = decltype(km)::value, KN = decltype(kn)::value;
    if constexpr ((C::kKMajorOnly && (KM || KN)) || (C::kFewRows && KM))
      return cudaErrorInvalidValue;  // the plan never takes it there
    else
      return c.dtype == DType::F16 ? run_fill<C, __half, KM, KN>(c, p, stream, tma)
                                   : run_fill<C, __nv_bfloat16, KM, KN>(c, p, stream, tma);
  });
}

}  // namespace

bool gemm_wgmma_built() { return true; }

cudaError_t launch_wgmma(const GemmCall& c, const WgmmaPlan& p, cudaStream_t stream, bool tma) {
  if (p.shape == WgmmaShape::None) return cudaErrorInvalidValue;
  return with_wgmma_config(p, [&](auto config) { return run_dtype<decltype(config)>(c, p, stream, tma); });
}

}  // namespace bankops

#else

namespace bankops {

bool gemm_wgmma_built() { return false; }

cudaError_t launch_wgmma(const GemmCall&, const WgmmaPlan&, cudaStream_t, bool) { return cudaErrorNotSupported; }

}  // namespace bankops

#endif
