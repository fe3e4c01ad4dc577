// What the few-rows kernels share (rows.cu includes it): 16 bytes as floats, the warp's halving
// sums, a block's tile and cluster rank, the window copies of x, a block's start (the weight
// prefetched ahead of the wait on the kernel before) and the ring of windows.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "../async_copy.cuh"
#include "pdl.cuh"
#include "rows_plan.h"
#include "split_k.cuh"

namespace bankops {
namespace {  // this header's one includer is rows.cu

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

template <class T>
constexpr DType dtype_of() {
  return std::is_same<T, float>::value ? DType::F32 : std::is_same<T, __half>::value ? DType::F16 : DType::BF16;
}

// The first COUNT of v summed across the warp's lanes by exchanges over lane bit O, then O / 2,
// ..: each exchange halves the values a lane keeps (the lane with bit O set keeps the upper
// half) and adds its partner's copy of them, so N sums take about N shuffles rather than 5N
// (rows_sum_index says where each sum ends up). Past one value, a plain butterfly. LAST: the
// last lane bit exchanged (1: across the whole warp).
template <int COUNT, int O, int LAST = 1, int N>
__device__ __forceinline__ void rows_warp_sums(float (&v)[N], int lane) {
  if constexpr (O >= LAST) {
    if constexpr (COUNT > 1) {
      constexpr int kHalf = COUNT / 2;
      const bool up = (lane & O) != 0;
#pragma unroll
      for (int i = 0; i < kHalf; ++i) {
        const float send = up ? v[i] : v[i + kHalf], keep = up ? v[i + kHalf] : v[i];
        v[i] = keep + __shfl_xor_sync(0xffffffffu, send, O);
      }
      rows_warp_sums<kHalf, O / 2, LAST>(v, lane);
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], O);
      rows_warp_sums<1, O / 2, LAST>(v, lane);
    }
  }
}

// Block blockIdx.x's rank in its cluster (split-K's) and its tile's corner (m0, n0): the m
// tiles over one stretch of the weight are neighbours in the grid, so they run together and
// the weight comes from memory once. rows_corner: tile t's corner within its batch, in that order.
struct RowsTile {
  int rank;
  int64_t m0, n0;
};
template <int TM, int BN>
__device__ __forceinline__ RowsTile rows_corner(const GemmArgs& g, int64_t t, int rank = 0) {
  const int64_t tiles_m = ceil_div(g.m, int64_t(TM));
  return RowsTile{rank, t % tiles_m * TM, t / tiles_m * BN};
}
template <int TM, int BN>
__device__ __forceinline__ RowsTile rows_tile(const GemmArgs& g, int splits) {
  return rows_corner<TM, BN>(g, blockIdx.x / splits, static_cast<int>(blockIdx.x % splits));
}

// A window of A's rows m0.. (a points at row m0; Tile: TM x window elements) into shared memory
// by cp.async, 16 bytes a thread at a time; rows past m and k past K are zeros (K is whole
// 16-byte vectors).
template <class Tile, class T, int TM>
__device__ __forceinline__ void rows_stage_a(uint32_t dst, const T* a, const GemmArgs& g, int64_t m0, int64_t k0) {
  constexpr int V = 16 / sizeof(T), kWin = Tile::kCols, kChunks = TM * kWin / V;
#pragma unroll
  for (int c = threadIdx.x; c < kChunks; c += kRowsThreads) {
    const int t = c / (kWin / V), kk = c % (kWin / V) * V;
    const int64_t k = k0 + kk;
    const bool in = m0 + t < g.m && k < g.k;
    cp_async16(dst + Tile::offset(t, kk) * sizeof(T), in ? a + t * g.a_sm + k : a, in ? 16 : 0);
  }
}

// A block's start, launched early (pdl.cuh): up to `prefetch` bytes of its weight slice (columns
// n0..n0 + bn over k0..k1, within k) asked of L2 while the kernel ahead may still run, then the
// wait on that kernel, and only then the next one's launch: one kernel waits ahead at most, so
// what it prefetched is read soon after, not evicted by a chain of them.
template <class T, bool KN>
__device__ __forceinline__ void rows_start(const GemmArgs& g, const T* b, int64_t n0, int bn, int64_t k0, int64_t k1,
                                           int64_t prefetch) {
  prefetch_slice_l2<T, KN>(b, g.b_sn, g.b_sk, n0, min(int64_t(bn), g.n - n0), k0, min(k1, g.k), prefetch,
                           kRowsThreads);
  pdl_wait_previous();
  pdl_launch_next();
}

// A ring of S stages over windows [w0, w1) (stage(win) issues window win's copies into its
// stage): the first S - 1 windows in flight, a cp.async group each.
template <int S, class Stage>
__device__ __forceinline__ void rows_ring_fill(int64_t w0, int64_t w1, const Stage& stage) {
#pragma unroll
  for (int s = 0; s < S - 1; ++s) {
    if (w0 + s < w1) stage(w0 + s);
    cp_async_commit();
  }
}
// Before window win is read: it is staged, every warp is done with window win - 1's stage, and
// window win + S - 1 goes into that stage.
template <int S, class Stage>
__device__ __forceinline__ void rows_ring_next(int64_t win, int64_t w1, const Stage& stage) {
  cp_async_wait<S - 2>();
  __syncthreads();
  if (win + S - 1 < w1) stage(win + S - 1);
  cp_async_commit();
}

}  // namespace
}  // namespace bankops
