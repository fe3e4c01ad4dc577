#include "launch.h"
#include "numeric.cuh"

namespace bankops {
namespace {

static_assert(kGemmBM == kGemmBN, "A and B tiles share GemmTile");
static_assert(kGemmBM * kGemmBK % kGemmThreads == 0, "whole tile loads per thread");

// Stage a kGemmBK x 64 tile of `src` (rows k, columns x, element strides sk and sx) into
// `dst` at tile(k, x). Lanes walk whichever of k and x is contiguous in memory, so the
// global reads coalesce; when that is k, the shared-memory store walks a tile column.
template <class Tile, class T, class Acc>
__device__ __forceinline__ void stage(Acc* dst, const T* __restrict__ src, int64_t sk, int64_t sx, bool k_fast,
                                      int64_t k0, int64_t kmax, int64_t x0, int64_t xmax) {
#pragma unroll
  for (int e = 0; e < kGemmStageLoads; ++e) {
    const TileCoord t = gemm_stage(threadIdx.x, e, k_fast);
    const int64_t k = k0 + t.r, x = x0 + t.c;
    dst[Tile::offset(t.r, t.c)] = (k < kmax && x < xmax) ? to_acc<Acc>(src[k * sk + x * sx]) : Acc(0);
  }
}

template <class Tile, class T, class Acc>
__global__ void __launch_bounds__(kGemmThreads) gemm_kernel(const GemmArgs g) {
  __shared__ Acc as[Tile::kSize];
  __shared__ Acc bs[Tile::kSize];
  const bool a_k_fast = g.a_sk <= g.a_sm, b_k_fast = g.b_sk < g.b_sn;
  const int64_t n0 = int64_t(blockIdx.x) * kGemmBN;
  const int64_t tiles_m = (g.m + kGemmBM - 1) / kGemmBM;

  for (int64_t bz = blockIdx.z; bz < g.batch; bz += gridDim.z) {
    const T* a = static_cast<const T*>(g.a) + bz * g.a_sb;
    const T* b = static_cast<const T*>(g.b) + bz * g.b_sb;
    T* c = static_cast<T*>(g.c) + bz * g.m * g.n;
    for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y) {
      const int64_t m0 = tm * kGemmBM;
      Acc acc[kGemmMicro][kGemmMicro] = {};
      for (int64_t k0 = 0; k0 < g.k; k0 += kGemmBK) {
        stage<Tile>(as, a + m0 * g.a_sm, g.a_sk, g.a_sm, a_k_fast, k0, g.k, 0, g.m - m0);
        stage<Tile>(bs, b + n0 * g.b_sn, g.b_sk, g.b_sn, b_k_fast, k0, g.k, 0, g.n - n0);
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < kGemmBK; ++kk) {
          Acc av[kGemmMicro], bv[kGemmMicro];
#pragma unroll
          for (int i = 0; i < kGemmMicro; ++i) av[i] = as[Tile::offset(kk, gemm_row(threadIdx.x, i))];
#pragma unroll
          for (int j = 0; j < kGemmMicro; ++j) bv[j] = bs[Tile::offset(kk, gemm_col(threadIdx.x, j))];
#pragma unroll
          for (int i = 0; i < kGemmMicro; ++i)
#pragma unroll
            for (int j = 0; j < kGemmMicro; ++j) acc[i][j] += av[i] * bv[j];
        }
        __syncthreads();
      }
#pragma unroll
      for (int i = 0; i < kGemmMicro; ++i) {
        const int64_t m = m0 + gemm_row(threadIdx.x, i);
#pragma unroll
        for (int j = 0; j < kGemmMicro; ++j) {
          const int64_t n = n0 + gemm_col(threadIdx.x, j);
          if (m < g.m && n < g.n) c[m * g.n + n] = from_acc<T>(acc[i][j]);
        }
      }
    }
  }
}

template <Layout L, class T, class Acc>
cudaError_t run(const GemmArgs& g, cudaStream_t stream) {
  const auto clamp = [](int64_t v) { return static_cast<unsigned>(v < 65535 ? v : 65535); };
  const dim3 grid(static_cast<unsigned>((g.n + kGemmBN - 1) / kGemmBN), clamp((g.m + kGemmBM - 1) / kGemmBM),
                  clamp(g.batch));
  gemm_kernel<GemmTile<L, sizeof(Acc)>, T, Acc><<<grid, kGemmThreads, 0, stream>>>(g);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_gemm(Layout layout, DType dtype, const GemmArgs& g, cudaStream_t stream) {
  if (g.batch == 0 || g.m == 0 || g.n == 0) return cudaSuccess;
  return with_layout(layout, [&](auto tag) {
    constexpr Layout L = decltype(tag)::value;
    switch (dtype) {
      case DType::F16: return run<L, __half, float>(g, stream);
      case DType::BF16: return run<L, __nv_bfloat16, float>(g, stream);
      case DType::F64: return run<L, double, double>(g, stream);
      case DType::F32:
      default: return run<L, float, float>(g, stream);  // ops/ admits only these four
    }
  });
}

}  // namespace bankops
