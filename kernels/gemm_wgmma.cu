#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "async_copy.cuh"
#include "gemm_wgmma.h"
#include "launch.h"
#include "mma_epilogue.cuh"

namespace bankops {
namespace {

#if defined(BANKOPS_WGMMA)
// Code for sm_90a only: wgmma and setmaxnreg do not exist elsewhere. A build for several
// architectures compiles the kernel's body for the 9.0a pass alone (the launcher takes this
// path only on compute capability 9.0).
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define BANKOPS_WGMMA_BODY 1
#endif

__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar) : "memory");
}
// Returns once the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}
// One arrival on `bar` once every cp.async this thread issued so far has landed (counted in
// the barrier's expected arrivals: .noinc).
__device__ __forceinline__ void cp_async_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// Consumer threads only (the producer may have left): named barrier 1.
template <int THREADS>
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(THREADS) : "memory");
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// The accumulators are written by the asynchronous wgmma: keep the compiler from moving
// their reads above the wait.
template <int N>
__device__ __forceinline__ void fence_acc(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define BANKOPS_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define BANKOPS_F16(i) BANKOPS_F4(i), BANKOPS_F4(i + 4), BANKOPS_F4(i + 8), BANKOPS_F4(i + 12)
#define BANKOPS_F64(i) BANKOPS_F16(i), BANKOPS_F16(i + 16), BANKOPS_F16(i + 32), BANKOPS_F16(i + 48)
#define BANKOPS_WGMMA_N256(TYPE)                                                                        \
  asm volatile(                                                                                         \
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"                                                     \
      "wgmma.mma_async.sync.aligned.m64n256k16.f32." TYPE "." TYPE " {"                                 \
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                        \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "              \
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "              \
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "              \
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "              \
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "              \
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "  \
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, "\
      "%128, %129, p, 1, 1, 0, %131;\n}\n"                                                              \
      : BANKOPS_F64(0), BANKOPS_F64(64)                                                                 \
      : "l"(da), "l"(db), "r"(1), "n"(TRANS_B))
// D (64 x 256, float32) += A (64 x 16, shared, k-major) * B (16 x 256, shared; TRANS_B: n-major).
template <class T, int TRANS_B>
__device__ __forceinline__ void wgmma_n256(float (&d)[128], uint64_t da, uint64_t db) {
  if constexpr (std::is_same_v<T, __half>) BANKOPS_WGMMA_N256("f16");
  else BANKOPS_WGMMA_N256("bf16");
}
#undef BANKOPS_WGMMA_N256
#undef BANKOPS_F64
#undef BANKOPS_F16
#undef BANKOPS_F4

// The producer's copies of one operand tile: chunk (b, r) of thread t is its wgmma_chunk
// moved r * 16 rows (a multiple of the swizzle's 8-row period) and b 64-column blocks, so its
// tile offset is the thread's first plus a constant. `p`: the operand at the tile's corner; rows
// and cols what is left of it from there. Whole tiles take each chunk's source offset from
// `off` (computed once: the producer's loop is the kernel's critical path, so its copies
// carry no address arithmetic beyond one add); edge tiles zero-fill the chunks past the rows
// or the columns (cp.async's source size), reading nothing outside the operand.
template <class C, class Tile>
struct WgmmaFill {
  static constexpr int kRowStep = C::kProducerThreads / 8;
  static constexpr int kBlocks = Tile::kCols / kWgmmaRowCols, kPerBlock = Tile::kRows / kRowStep;
  static constexpr int kChunks = kBlocks * kPerBlock;
  static_assert(Tile::kRows % kRowStep == 0 && kRowStep % Tile::kRowPeriod == 0, "row steps are adds");
  BANKOPS_HD static constexpr int at(int e) {
    return Tile::offset(e % kPerBlock * kRowStep, e / kPerBlock * kWgmmaRowCols) * 2;
  }
  uint32_t dst;          // the thread's first chunk in stage 0
  TileCoord first;       // its tile coordinates
  int64_t off[kChunks];  // chunk e's source, in bytes from the tile's corner
  __device__ __forceinline__ WgmmaFill(uint32_t tile, int64_t s_row) {
    first = wgmma_chunk<C, Tile>(threadIdx.x, 0);
    dst = tile + Tile::offset(first.r, first.c) * 2;
#pragma unroll
    for (int e = 0; e < kChunks; ++e)
      off[e] = ((first.r + e % kPerBlock * kRowStep) * s_row + first.c + e / kPerBlock * kWgmmaRowCols) * 2;
  }
  __device__ __forceinline__ void whole(uint32_t stage, const uint16_t* p) const {
#pragma unroll
    for (int e = 0; e < kChunks; ++e) cp_async16(dst + stage + at(e), reinterpret_cast<const char*>(p) + off[e], 16);
  }
  __device__ __forceinline__ void edge(uint32_t stage, const uint16_t* p, int64_t rows, int64_t cols) const {
#pragma unroll
    for (int e = 0; e < kChunks; ++e) {
      const int64_t left = cols - (first.c + e / kPerBlock * kWgmmaRowCols);
      const bool in = first.r + e % kPerBlock * kRowStep < rows && left > 0;
      const void* src = in ? static_cast<const void*>(reinterpret_cast<const char*>(p) + off[e]) : p;
      cp_async16(dst + stage + at(e), src, in ? static_cast<int>(left < kMmaChunk ? left : kMmaChunk) * 2 : 0);
    }
  }
};

// One block tile per block: a producer warpgroup (warps 0-3) streams k-tiles into the stage
// ring; consumer warpgroup w (1, 2) multiplies rows (w - 1) * 64.. of the block tile into
// 128 float accumulators a thread, then the consumers write the tile out.
//   full[s]:  completes when the producer's 128 threads' copies into stage s have landed;
//   empty[s]: completes when every consumer warp is done reading stage s (a warp arrives once
//             its wgmma on the next k-tile is issued and the previous one has finished, so
//             one k-tile of tensor work is always queued).
template <class C, class T, bool KN>
__global__ void __launch_bounds__(C::kThreads, 1) gemm_wgmma_kernel(const GemmArgs g, const bool out_vec) {
#if defined(BANKOPS_WGMMA_BODY)
  using ATile = WgmmaATile<C>;
  using BTile = WgmmaBTile<C, KN>;
  using Smem = WgmmaSmem<C, KN>;
  using Frags = WgmmaFrags<C>;
  constexpr int kStages = C::kStages, kBK = C::kBK;
  // Registers: the launch gives each thread 65536 / threads in steps of 8 (168 for 384); the
  // producer, which keeps two per chunk for its source offsets, hands the rest to the
  // consumers' 128 accumulators.
  constexpr int kLaunchRegs = 65536 / C::kThreads / 8 * 8, kProducerRegs = 152;
  constexpr int kConsumerRegs =
      (kLaunchRegs * C::kThreads - C::kProducerThreads * kProducerRegs) / (C::kThreads - C::kProducerThreads) / 8 * 8;
  static_assert(kConsumerRegs >= kLaunchRegs && kConsumerRegs <= 256, "setmaxnreg's range");
  __shared__ __align__(8) uint64_t bars[2 * kStages];
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023) & ~uint32_t(1023);
  const uint32_t full0 = smem_u32(bars), empty0 = full0 + 8 * kStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full0 + 8 * s, C::kProducerThreads);
      mbar_init(empty0 + 8 * s, 4 * C::kConsumers);
    }
  }
  __syncthreads();

  const int64_t bz = blockIdx.z;
  const MmaTileIndex idx = mma_raster(blockIdx.x, blockIdx.y, gridDim.x, gridDim.y);
  const int64_t m0 = idx.tm * C::kBM, n0 = idx.tn * C::kBN;
  const uint16_t* a = static_cast<const uint16_t*>(g.a) + bz * g.a_sb + m0 * g.a_sm;
  const uint16_t* b = static_cast<const uint16_t*>(g.b) + bz * g.b_sb + n0 * g.b_sn;
  const int nk = static_cast<int>(ceil_div(g.k, kBK));
  const int wg = threadIdx.x / 128;

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    const WgmmaFill<C, ATile> fa(base, g.a_sm);
    const WgmmaFill<C, BTile> fb(base + Smem::kA, KN ? g.b_sk : g.b_sn);
    // k-tiles [0, nk_whole) lie inside K; with the m (n) edge inside too, a tile is whole.
    const int nk_whole = static_cast<int>(g.k / kBK);
    const bool inner = C::kBM <= g.m - m0 && C::kBN <= g.n - n0;
    const int64_t b_kstep = KN ? kBK * g.b_sk : kBK;
    for (int kt = 0; kt < nk; ++kt) {
      const int s = kt % kStages;
      if (kt >= kStages) mbar_wait(empty0 + 8 * s, (kt / kStages - 1) & 1);
      const uint32_t stage = s * Smem::kStage;
      const int64_t k0 = int64_t(kt) * kBK;
      if (inner && kt < nk_whole) {
        fa.whole(stage, a + k0);
        fb.whole(stage, b + kt * b_kstep);
      } else {
        fa.edge(stage, a + k0, g.m - m0, g.k - k0);
        if (KN) fb.edge(stage, b + kt * b_kstep, g.k - k0, g.n - n0);
        else fb.edge(stage, b + kt * b_kstep, g.n - n0, g.k - k0);
      }
      cp_async_arrive(full0 + 8 * s);
    }
    cp_async_wait<0>();
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
  const int ct = threadIdx.x - C::kProducerThreads;  // consumer thread
  float acc[1][C::kBN / 8][4] = {};
  float(&d)[C::kAcc] = reinterpret_cast<float(&)[C::kAcc]>(acc);
  constexpr uint64_t kDescA = wgmma_desc_fields<ATile, true>(), kDescB = wgmma_desc_fields<BTile, !KN>();
  const int a_row = (wg - 1) * 64;
  for (int kt = 0; kt < nk; ++kt) {
    const int s = kt % kStages;
    const uint32_t stage = base + s * Smem::kStage;
    mbar_wait(full0 + 8 * s, (kt / kStages) & 1);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < C::kSteps; ++k) {
      const uint64_t da = wgmma_desc(kDescA, stage + wgmma_a_at<ATile>(a_row, k) * 2);
      const uint64_t db = wgmma_desc(kDescB, stage + Smem::kA + wgmma_b_at<BTile, KN>(k) * 2);
      wgmma_n256<T, KN ? 1 : 0>(d, da, db);
    }
    wgmma_commit();
    wgmma_wait<1>();
    if (kt > 0 && ct % 32 == 0) mbar_arrive(empty0 + 8 * ((kt - 1) % kStages));
  }
  wgmma_wait<0>();
  fence_acc(d);
  consumer_sync<Frags::kThreads>();  // every consumer is done reading the ring
  uint16_t* smem = reinterpret_cast<uint16_t*>(smem_raw + (base - smem_u32(smem_raw)));
  uint16_t* c = static_cast<uint16_t*>(g.c) + bz * g.m * g.n;
  mma_epilogue<Frags, WgmmaCTile<C>, T>(smem, acc, ct, c, g, m0, n0, out_vec, [] { consumer_sync<Frags::kThreads>(); });
#endif
}

template <class C, class T, bool KN>
cudaError_t run(const GemmArgs& g, bool out_vec, cudaStream_t stream) {
  constexpr auto kernel = gemm_wgmma_kernel<C, T, KN>;
  constexpr int kSmem = WgmmaSmem<C, KN>::kBytes;
  static_assert(kSmem <= 227 * 1024, "the stage ring exceeds a block's shared memory");
  const cudaError_t err = raise_smem_once<kernel>(kSmem);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(ceil_div(g.n, C::kBN)), static_cast<unsigned>(ceil_div(g.m, C::kBM)),
                  static_cast<unsigned>(g.batch));
  kernel<<<grid, C::kThreads, kSmem, stream>>>(g, out_vec);
  return cudaGetLastError();
}

}  // namespace

bool gemm_wgmma_built() { return true; }

cudaError_t launch_gemm_wgmma(DType dtype, const GemmArgs& g, bool b_kn, cudaStream_t stream) {
  const bool out_vec = reinterpret_cast<uintptr_t>(g.c) % 16 == 0 && g.n % kMmaChunk == 0;
  using C = WgmmaLarge;
  if (dtype == DType::F16)
    return b_kn ? run<C, __half, true>(g, out_vec, stream) : run<C, __half, false>(g, out_vec, stream);
  return b_kn ? run<C, __nv_bfloat16, true>(g, out_vec, stream) : run<C, __nv_bfloat16, false>(g, out_vec, stream);
}

#else

}  // namespace

bool gemm_wgmma_built() { return false; }

cudaError_t launch_gemm_wgmma(DType, const GemmArgs&, bool, cudaStream_t) { return cudaErrorNotSupported; }

#endif

}  // namespace bankops
