// The Hopper gemm kernel (tiling in wgmma.h) and its launcher, which runs what the route says.
// One block tile per block: the producer warpgroups (the first kProducers) stream k-tiles into
// the stage ring, TMA (tma_producer) or realigning (wgmma_realign.cuh); consumer warpgroup w
// multiplies rows 64 w.. of the block tile into float accumulators (consume), then the
// consumers write the tile out (mma_epilogue.cuh).
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

// The TMA producer (one thread): a stage's boxes, A's, then B's (one per 64-column block as
// Bs[BK][BN], one as Bs[BN][BK]). Coordinates past the operand's edges read as zeros. A batch
// stride of 0 (a broadcast operand) is a map of one batch.
template <class C, bool KN>
__device__ __forceinline__ void tma_producer(const GemmArgs& g, const CUtensorMap& tma_a, const CUtensorMap& tma_b,
                                             const Ring<C::kStages>& ring, uint32_t base, int64_t bz, int64_t m0,
                                             int64_t n0, int nk) {
  using Smem = WgmmaSmem<C, KN>;
  using BTile = WgmmaBTile<C, KN>;
  const int za = g.a_sb != 0 ? static_cast<int>(bz) : 0, zb = g.b_sb != 0 ? static_cast<int>(bz) : 0;
  const int tm = static_cast<int>(m0), tn = static_cast<int>(n0);
  for (int kt = 0; kt < nk; ++kt) {
    const auto pos = RingPos<C::kStages>::at(kt);
    const int k0 = kt * C::kBK;
    ring.wait_empty(pos, kt);
    const uint32_t stage = base + pos.stage * Smem::kStage, bar = ring.full(pos.stage);
    mbar_expect_tx(bar, Smem::kStage);
    tma_load(stage, tma_a, k0, tm, za, bar);
    if constexpr (KN) {
#pragma unroll
      for (int j = 0; j < C::kBN / kWgmmaRowCols; ++j)
        tma_load(stage + Smem::kA + BTile::offset(0, j * kWgmmaRowCols) * 2, tma_b, tn + j * kWgmmaRowCols, k0, zb,
                 bar);
    } else {
      tma_load(stage + Smem::kA, tma_b, k0, tn, zb, bar);
    }
  }
}

// A consumer warpgroup's k loop: rows a_row.. of the block tile into d (its accumulators).
template <class C, class T, bool KN>
__device__ __forceinline__ void consume(float (&d)[C::kAcc], const Ring<C::kStages>& ring, uint32_t base, int a_row,
                                        int nk, bool arrives) {
  using ATile = WgmmaATile<C>;  // (BM, BK) halves, 128-byte swizzled rows
  using BTile = WgmmaBTile<C, KN>;  // (BK, BN) or (BN, BK) halves, likewise
  using Smem = WgmmaSmem<C, KN>;
  constexpr uint64_t kDescA = wgmma_desc_fields<ATile, true>(), kDescB = wgmma_desc_fields<BTile, !KN>();
  for (int kt = 0; kt < nk; ++kt) {
    const auto pos = RingPos<C::kStages>::at(kt);
    const uint32_t stage = base + pos.stage * Smem::kStage;
    ring.wait_full(pos);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < C::kSteps; ++k) {
      const uint64_t da = wgmma_desc(kDescA, stage + wgmma_a_at<ATile>(a_row, k) * 2);
      const uint64_t db = wgmma_desc(kDescB, stage + Smem::kA + wgmma_b_at<BTile, KN>(k) * 2);
      wgmma_mma<T, C::kBN, KN ? 1 : 0>(d, da, db);
    }
    wgmma_commit();
    wgmma_wait<1>();
    if (kt > 0 && arrives) mbar_arrive(ring.empty(RingPos<C::kStages>::at(kt - 1).stage));
  }
  wgmma_wait<0>();
  fence_acc(d);
}

template <class C, class T, bool KN, WgmmaLoad LOAD>
__global__ void __launch_bounds__(C::kThreads, 1)
    wgmma_kernel(const GemmArgs g, const bool out_vec, const __grid_constant__ CUtensorMap tma_a,
                 const __grid_constant__ CUtensorMap tma_b) {
#if defined(BANKOPS_WGMMA_BODY)
  using Smem = WgmmaSmem<C, KN>;
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

  const int64_t bz = blockIdx.z;
  const MmaTileIndex idx = mma_raster(blockIdx.x, blockIdx.y, gridDim.x, gridDim.y);
  const int64_t m0 = idx.tm * C::kBM, n0 = idx.tn * C::kBN;
  const int nk = static_cast<int>(ceil_div(g.k, C::kBK));
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
      const WgmmaShiftFill<C, WgmmaATile<C>, false> fa(am + m0 * g.a_sm, g.a_sm, g.k, addr_of(am), a_hi, base);
      const WgmmaShiftFill<C, WgmmaBTile<C, KN>, KN> fb(bm + n0 * g.b_sn, KN ? g.b_sk : g.b_sn, g.k, addr_of(bm), b_hi,
                                                       base + Smem::kA);
      realign_producer<C, decltype(fa), decltype(fb), Smem::kStage>(fa, fb, nk, ring);
    } else if (threadIdx.x == 0) {
      tma_producer<C, KN>(g, tma_a, tma_b, ring, base, bz, m0, n0, nk);
    }
    return;
  }

  if constexpr (kConsumerRegs > kLaunchRegs)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
  const int ct = threadIdx.x - C::kProducerThreads;  // consumer thread
  float acc[1][C::kBN / 8][4] = {};
  consume<C, T, KN>(reinterpret_cast<float(&)[C::kAcc]>(acc), ring, base, (wg - C::kProducers) * 64, nk, ct % 32 == 0);
  consumer_sync<Frags::kThreads>();  // every consumer is done reading the ring
  uint16_t* smem = reinterpret_cast<uint16_t*>(smem_raw + (base - smem_u32(smem_raw)));
  uint16_t* c = static_cast<uint16_t*>(g.c) + bz * g.m * g.n;
  mma_epilogue<Frags, WgmmaCTile<C>, T>(smem, acc, ct, c, g, m0, n0, out_vec, [] { consumer_sync<Frags::kThreads>(); });
#else
  __trap();  // not sm_90a: the host never routes here (gemm_wgmma_built), and C must not stay unwritten
#endif
}

// The operands' tensor maps: A as (k, m, batch), B as (n, k, batch) when KN, else
// (k, n, batch); boxes of one k-tile of the block tile's rows (of a 64-column block of B when
// KN). A batch stride of 0 maps one batch.
template <class C, bool KN>
cudaError_t tma_maps(const GemmArgs& g, CUtensorMap& a, CUtensorMap& b) {
  const int64_t a_batch = g.a_sb != 0 ? g.batch : 1, b_batch = g.b_sb != 0 ? g.batch : 1;
  const cudaError_t err = tma_map_16bit(&a, g.a, {g.k, g.m, a_batch}, {g.a_sm, g.a_sb}, C::kBM);
  if (err != cudaSuccess) return err;
  if (KN) return tma_map_16bit(&b, g.b, {g.n, g.k, b_batch}, {g.b_sk, g.b_sb}, C::kBK);
  return tma_map_16bit(&b, g.b, {g.k, g.n, b_batch}, {g.b_sn, g.b_sb}, C::kBN);
}

template <class C, class T, bool KN, WgmmaLoad LOAD>
cudaError_t run(const GemmArgs& g, bool out_vec, cudaStream_t stream) {
  constexpr auto kernel = wgmma_kernel<C, T, KN, LOAD>;
  constexpr int kSmem = WgmmaSmem<C, KN>::kBytes;
  static_assert(kSmem <= 227 * 1024, "the stage ring exceeds a block's shared memory");
  cudaError_t err = raise_smem_once<kernel>(kSmem);
  if (err != cudaSuccess) return err;
  CUtensorMap map_a{}, map_b{};  // unused by the realigning producer
  if constexpr (LOAD == WgmmaLoad::Tma) {
    err = tma_maps<C, KN>(g, map_a, map_b);
    if (err != cudaSuccess) return err;
  }
  const dim3 grid(static_cast<unsigned>(ceil_div(g.n, C::kBN)), static_cast<unsigned>(ceil_div(g.m, C::kBM)),
                  static_cast<unsigned>(g.batch));
  return launch_pdl(kernel, grid, dim3(C::kThreads), kSmem, stream, g, out_vec, map_a, map_b);
}

// The route's producer and B orientation as template arguments: the realigning producer takes
// B as Bs[BK][BN] only, on WgmmaLarge and WgmmaMediumRealign only (route.h's wgmma_shape).
template <class C, class T>
cudaError_t run_fill(const GemmRoute& r, cudaStream_t stream) {
  if (r.ops.fill == MmaFill::Realign) {
    if constexpr (std::is_same_v<C, WgmmaLarge> || std::is_same_v<C, WgmmaMediumRealign>) {
      if (r.ops.b_kn) return run<C, T, true, WgmmaLoad::Realign>(r.args, r.out_vec, stream);
    }
    return cudaErrorNotSupported;
  }
  if constexpr (C::kProducers > 1) {
    return cudaErrorNotSupported;  // a realigning configuration: TMA takes one thread
  } else {
    return r.ops.b_kn ? run<C, T, true, WgmmaLoad::Tma>(r.args, r.out_vec, stream)
                      : run<C, T, false, WgmmaLoad::Tma>(r.args, r.out_vec, stream);
  }
}

template <class C>
cudaError_t run_dtype(const GemmRoute& r, cudaStream_t stream) {
  return r.dtype == DType::F16 ? run_fill<C, __half>(r, stream) : run_fill<C, __nv_bfloat16>(r, stream);
}

}  // namespace

bool gemm_wgmma_built() { return true; }

cudaError_t launch_wgmma(const GemmRoute& r, cudaStream_t stream) {
  if (r.wgmma == WgmmaShape::None) return cudaErrorNotSupported;
  return with_wgmma_config(r, [&](auto config) { return run_dtype<decltype(config)>(r, stream); });
}

}  // namespace bankops

#else

namespace bankops {

bool gemm_wgmma_built() { return false; }

cudaError_t launch_wgmma(const GemmRoute&, cudaStream_t) { return cudaErrorNotSupported; }

}  // namespace bankops

#endif
