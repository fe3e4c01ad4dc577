// The Hopper gemm kernel (tiling in wgmma.h) and its launcher, which runs what the route says.
// One block tile per block: the producer warpgroups (the first kProducers) stream k-tiles into
// the stage ring, TMA (tma_producer) or realigning (wgmma_realign.cuh); consumer warpgroup w
// multiplies rows 64 w.. of the block tile into float accumulators (consume), then the
// consumers write the tile out (mma_epilogue.cuh). A split tile (route.h: grids that leave the
// last wave of SMs idle) takes a cluster of blocks, each a share of k, summed in rank order
// through distributed shared memory (split_k.cuh).
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

// The TMA producer (one thread): a stage's boxes, A's, then B's. Coordinates past the
// operand's edges read as zeros. A batch stride of 0 (a broadcast operand) is a map of one
// batch.
template <class C, bool KM, bool KN>
__device__ __forceinline__ void tma_producer(const GemmArgs& g, const CUtensorMap& tma_a, const CUtensorMap& tma_b,
                                             const Ring<C::kStages>& ring, uint32_t base, int64_t bz, int64_t m0,
                                             int64_t n0, int kt0, int nk) {
  using Smem = WgmmaSmem<C, KM, KN>;
  const int za = g.a_sb != 0 ? static_cast<int>(bz) : 0, zb = g.b_sb != 0 ? static_cast<int>(bz) : 0;
  const int tm = static_cast<int>(m0), tn = static_cast<int>(n0);
  for (int kt = 0; kt < nk; ++kt) {
    const auto pos = RingPos<C::kStages>::at(kt);
    const int k0 = (kt0 + kt) * C::kBK;
    ring.wait_empty(pos, kt);
    const uint32_t stage = base + pos.stage * Smem::kStage, bar = ring.full(pos.stage);
    mbar_expect_tx(bar, Smem::kStage);
    tma_tile<WgmmaATile<C, KM>, KM>(stage, tma_a, k0, tm, za, bar);
    tma_tile<WgmmaBTile<C, KN>, KN>(stage + Smem::kA, tma_b, k0, tn, zb, bar);
  }
}

// A consumer warpgroup's k loop: rows a_row.. of the block tile into d (its accumulators).
template <class C, class T, bool KM, bool KN>
__device__ __forceinline__ void consume(float (&d)[C::kAcc], const Ring<C::kStages>& ring, uint32_t base, int a_row,
                                        int nk, bool arrives) {
  using ATile = WgmmaATile<C, KM>;  // (BM, BK) or (BK, BM) halves, 128-byte swizzled rows
  using BTile = WgmmaBTile<C, KN>;  // (BK, BN) or (BN, BK) halves, likewise
  using Smem = WgmmaSmem<C, KM, KN>;
  constexpr uint64_t kDescA = wgmma_desc_fields<ATile, !KM>(), kDescB = wgmma_desc_fields<BTile, !KN>();
  for (int kt = 0; kt < nk; ++kt) {
    const auto pos = RingPos<C::kStages>::at(kt);
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
    if (kt > 0 && arrives) mbar_arrive(ring.empty(RingPos<C::kStages>::at(kt - 1).stage));
  }
  wgmma_wait<0>();
  fence_acc(d);
}

template <class C, class T, bool KM, bool KN, WgmmaLoad LOAD>
__global__ void __launch_bounds__(C::kThreads, 1)
    wgmma_kernel(const GemmArgs g, const bool out_vec, const int splits, const __grid_constant__ CUtensorMap tma_a,
                 const __grid_constant__ CUtensorMap tma_b) {
#if defined(BANKOPS_WGMMA_BODY)
  using Smem = WgmmaSmem<C, KM, KN>;
  using Frags = WgmmaFrags<C>;
  constexpr int kStages = C::kStages;
  // Registers: the launch gives each thread 65536 / threads in steps of 8 (168 for 384); the
  // realigning producer keeps 152 (its register slots), and the rest go to the consumers'
  // accumulators (128 a thread for 128 x 256). With 512 threads (two producers) everyone
  // keeps the launch's 128.
  constexpr int kLaunchRegs = 65536 / C::kThreads / 8 * 8;
  constexpr int kProducerRegs = kLaunchRegs < 152 ? kLaunchRegs : 152;
  constexpr int kConsumerRegs =
      (kLaunchRegs * C::kThreads - C::kProducerThreads * kProducerRegs) / (C::kThreads - C::kProducerThreads) / 8 * 8;
  static_assert(kConsumerRegs >= kLaunchRegs && kConsumerRegs <= 256, "setmaxnreg's range");
  __shared__ __align__(8) uint64_t bars[2 * kStages];
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023) & ~uint32_t(1023);
  const Ring<kStages> ring{smem_u32(bars), smem_u32(bars) + 8 * kStages};
  if (threadIdx.x == 0) {
    // The maps are parameters, not the earlier kernel's output: fetch them while it runs.
    if constexpr (LOAD == WgmmaLoad::Tma) {
      tma_prefetch(tma_a);
      tma_prefetch(tma_b);
    }
    for (int s = 0; s < kStages; ++s) {
      mbar_init(ring.full(s), LOAD == WgmmaLoad::Tma ? 1 : C::kProducerThreads);
      mbar_init(ring.empty(s), 4 * C::kConsumers);
    }
    mbar_init_fence();
  }
  pdl_launch_next();
  __syncthreads();
  pdl_wait_previous();

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
    if constexpr (kProducerRegs < kLaunchRegs)
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
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
      tma_producer<C, KM, KN>(g, tma_a, tma_b, ring, base, bz, m0, n0, kt0, nk);
    }
    return;  // a split tile's sum waits on the consumers alone (split_k_store)
  }

  if constexpr (kConsumerRegs > kLaunchRegs)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
  const int ct = threadIdx.x - C::kProducerThreads;  // consumer thread
  float acc[1][C::kBN / 8][4] = {};
  consume<C, T, KM, KN>(reinterpret_cast<float(&)[C::kAcc]>(acc), ring, base, (wg - C::kProducers) * 64, nk,
                        ct % 32 == 0);
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

template <class C, bool KM, bool KN>
cudaError_t tma_maps(const GemmArgs& g, CUtensorMap& a, CUtensorMap& b) {
  const cudaError_t err = tma_operand<KM>(a, g.a, g.m, g.a_sm, g.k, g.a_sk, g.a_sb, g.batch, C::kBM, C::kBK);
  if (err != cudaSuccess) return err;
  return tma_operand<KN>(b, g.b, g.n, g.b_sn, g.k, g.b_sk, g.b_sb, g.batch, C::kBN, C::kBK);
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

// The route's producer as a template argument: the realigning producer takes B as Bs[BK][BN]
// only, on WgmmaLarge and WgmmaMediumRealign only, unsplit (route.h's wgmma_plan); TMA takes
// one producer thread.
template <class C, class T, bool KM, bool KN>
cudaError_t run_fill(const GemmRoute& r, cudaStream_t stream, bool tma) {
  constexpr bool kRealign = KN && (std::is_same_v<C, WgmmaLarge> || std::is_same_v<C, WgmmaMediumRealign>);
  if (r.ops.fill == MmaFill::Realign) {
    if (r.split > 1) return cudaErrorInvalidValue;  // the realigning producers read all of k
    if constexpr (kRealign) return run<C, T, KM, KN, WgmmaLoad::Realign>(r, stream, tma);
    return cudaErrorInvalidValue;
  }
  if constexpr (C::kProducers > 1) return cudaErrorInvalidValue;
  else return run<C, T, KM, KN, WgmmaLoad::Tma>(r, stream, tma);
}

template <class C>
cudaError_t run_dtype(const GemmRoute& r, cudaStream_t stream, bool tma) {
  return with_operand_majors(r.ops, [&](auto km, auto kn) {
    constexpr bool KM = decltype(km)::value, KN = decltype(kn)::value;
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
