// The few-rows kernel (rows.h) and its launcher.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../async_copy.cuh"
#include "launch.h"
#include "split_k.cuh"

namespace bankops {
namespace {

// The 16 bytes of elements in v as floats.
template <class T>
__device__ __forceinline__ void to_floats(const uint4& v, float (&f)[16 / sizeof(T)]) {
  const uint32_t* w = reinterpret_cast<const uint32_t*>(&v);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (std::is_same<T, float>::value) {
      f[i] = __uint_as_float(w[i]);
    } else {
      const float2 p = std::is_same<T, __half>::value
                           ? __half22float2(*reinterpret_cast<const __half2*>(w + i))
                           : __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(w + i));
      f[2 * i] = p.x;
      f[2 * i + 1] = p.y;
    }
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// A window of A's rows (TM x kWin elements, rows of 512 or 1024 bytes) into shared memory by
// cp.async, 16 bytes a thread at a time; rows past m and k past K are zeros.
template <class T, int TM>
__device__ __forceinline__ void rows_stage_a(uint32_t dst, const T* a, const GemmArgs& g, int64_t k0) {
  constexpr int V = 16 / sizeof(T), kWin = rows_window(sizeof(T)), kChunks = TM * kWin / V;
#pragma unroll
  for (int c = threadIdx.x; c < kChunks; c += kRowsThreads) {
    const int t = c / (kWin / V);
    const int64_t k = k0 + c % (kWin / V) * V;
    const bool in = t < g.m && k < g.k;
    cp_async16(dst + c * 16, in ? a + t * g.a_sm + k : a, in ? 16 : 0);
  }
}

// One block: kRowsBN weight rows (columns n0.. of C) over its rank's windows of k, for TM rows
// of A. Window w + 1 of A stages while window w's weight loads fly and its sums run; each
// lane reads its own 16 bytes of every row of A (512 contiguous bytes a warp: any layout is
// conflict-free there, so the layout shows in the partial tile). Lanes hold sums over their
// own k; the shuffles add them in a fixed order and split_k_store adds the ranks in order:
// the same bits every run.
// (Held to the residency the route plans for: a register or two more per thread than 128
// would halve the blocks an SM takes, and measured a third slower.)
template <Layout L, class T, int TM>
__global__ void __launch_bounds__(kRowsThreads, rows_blocks_per_sm(TM))
    rows_kernel(const GemmArgs g, const int splits) {
  constexpr int V = 16 / sizeof(T), kWin = rows_window(sizeof(T)), R = kRowsPerWarp;
  constexpr int kWinBytes = TM * kWin * sizeof(T);
  using PTile = SplitTile<L, TM, kRowsBN>;
  static_assert(PTile::kSize * 4 <= 2 * kWinBytes, "the partial tile reuses the staged windows");
  extern __shared__ __align__(16) unsigned char smem[];  // two windows of A, then the partial tile
  const uint32_t base = smem_u32(smem);
  const int lane = threadIdx.x % 32, row0 = threadIdx.x / 32 * R;
  const int rank = static_cast<int>(blockIdx.x % splits);
  const int64_t n0 = int64_t(blockIdx.x / splits) * kRowsBN, windows = ceil_div(g.k, kWin);
  const int64_t w0 = split_k_begin(windows, splits, rank), w1 = split_k_begin(windows, splits, rank + 1);
  for (int64_t bz = blockIdx.z; bz < g.batch; bz += gridDim.z) {
    const T* a = static_cast<const T*>(g.a) + bz * g.a_sb;
    const T* w[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t n = n0 + row0 + r;
      w[r] = n < g.n ? static_cast<const T*>(g.b) + bz * g.b_sb + n * g.b_sn : nullptr;
    }
    float acc[R][TM] = {};
    if (w0 < w1) rows_stage_a<T, TM>(base, a, g, w0 * kWin);
    cp_async_commit();
    for (int64_t win = w0; win < w1; ++win) {
      const uint32_t buf = base + (win - w0) % 2 * kWinBytes;
      if (win + 1 < w1) rows_stage_a<T, TM>(base + (win + 1 - w0) % 2 * kWinBytes, a, g, (win + 1) * kWin);
      cp_async_commit();
      uint4 wv[kRowsUnroll][R];
#pragma unroll
      for (int u = 0; u < kRowsUnroll; ++u) {
        const int64_t k = win * kWin + (u * 32 + lane) * V;
#pragma unroll
        for (int r = 0; r < R; ++r)
          wv[u][r] = w[r] != nullptr && k < g.k ? __ldcs(reinterpret_cast<const uint4*>(w[r] + k))
                                                : make_uint4(0, 0, 0, 0);
      }
      cp_async_wait<1>();
      __syncthreads();  // window win of A staged
#pragma unroll
      for (int u = 0; u < kRowsUnroll; ++u) {
        float wf[R][V], xf[V];  // each weight element converted once, used for every row of A
#pragma unroll
        for (int r = 0; r < R; ++r) to_floats<T>(wv[u][r], wf[r]);
#pragma unroll
        for (int t = 0; t < TM; ++t) {
          to_floats<T>(lds128(buf + (t * kWin + (u * 32 + lane) * V) * sizeof(T)), xf);
#pragma unroll
          for (int r = 0; r < R; ++r)
#pragma unroll
            for (int i = 0; i < V; ++i) acc[r][t] = fmaf(wf[r][i], xf[i], acc[r][t]);
        }
      }
      __syncthreads();  // every warp is done with this buffer before window win + 2 fills it
    }
    cp_async_wait<0>();
    // The warp's sums, each now on every lane: lane l stores those of index l mod 32.
    float* part = reinterpret_cast<float*>(smem);
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
      for (int t = 0; t < TM; ++t) {
        const float s = warp_sum(acc[r][t]);
        if ((r * TM + t) % 32 == lane) part[PTile::offset(t, row0 + r)] = s;
      }
    __syncthreads();
    split_k_store<T, TM, kRowsBN, PTile, kRowsThreads>(part, g, static_cast<T*>(g.c) + bz * g.m * g.n, 0, n0, splits,
                                                       rank);
  }
}

template <Layout L, class T>
cudaError_t run(const GemmRoute& r, cudaStream_t stream) {
  const GemmArgs& g = r.args;
  return with_rows_tm(r.rows_tm, [&](auto tm) {
    constexpr int TM = decltype(tm)::value;
    if constexpr (TM > rows_max_m(std::is_same<T, float>::value ? DType::F32 : DType::BF16)) {
      return cudaErrorNotSupported;
    } else {
      constexpr auto kernel = rows_kernel<L, T, TM>;
      constexpr int kSmem = 2 * TM * rows_window(sizeof(T)) * sizeof(T);
      const cudaError_t err = raise_smem_once<kernel>(kSmem);
      if (err != cudaSuccess) return err;
      const dim3 grid(static_cast<unsigned>(ceil_div(g.n, kRowsBN) * r.split), 1,
                      static_cast<unsigned>(g.batch < 65535 ? g.batch : 65535));
      return launch_clustered(kernel, grid, kRowsThreads, kSmem, r.split, stream, g, r.split);
    }
  });
}

}  // namespace

cudaError_t launch_rows(const GemmRoute& r, cudaStream_t stream) {
  if (!rows_supports(r.dtype, r.args) || rows_tm(r.args.m, r.dtype) != r.rows_tm) return cudaErrorNotSupported;
  if (r.args.batch == 0 || r.args.n == 0) return cudaSuccess;
  return with_layout(r.layout, [&](auto tag) {
    constexpr Layout L = decltype(tag)::value;
    switch (r.dtype) {
      case DType::F32: return run<L, float>(r, stream);
      case DType::F16: return run<L, __half>(r, stream);
      default: return run<L, __nv_bfloat16>(r, stream);
    }
  });
}

}  // namespace bankops
