// The tensor-core kernels' epilogue (mma.cu, wgmma.cu): float32 accumulators ->
// 16-bit C tile in shared memory (pairs of columns) -> whole 16-byte chunks of C rows in
// global memory. Both kernels hold their accumulators as m16 x n8 fragments (mma_acc), so one
// routine serves both.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "../numeric.cuh"
#include "mma.h"

namespace bankops {

// The bias of C's column n (0 past C's edge or without one), in float.
template <class T>
__device__ __forceinline__ float bias_at(const GemmArgs& g, int64_t n) {
  return n < g.n ? to_acc<float>(static_cast<const T*>(g.bias)[n]) : 0.f;
}

template <class T>
__device__ __forceinline__ uint32_t pack2(float x, float y);
template <>
__device__ __forceinline__ uint32_t pack2<__half>(float x, float y) {
  const __half2 h = __floats2half2_rn(x, y);
  return *reinterpret_cast<const uint32_t*>(&h);
}
template <>
__device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float x, float y) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(x, y);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// C: the fragment arrangement (kThreads, kFragM, kFragN, kBN, kOutChunks, read by mma_acc and
// mma_chunk); t: the thread's index in it; sync(): a barrier over those threads; the bias, if
// any, is added to the accumulators as they are rounded to T. `smem` must
// be free on entry (the caller's barrier); on return the C tile has been read out, but the
// caller must sync before reusing it. c: the batch's C, g.m x g.n; out_vec: C's rows are
// 16-byte aligned, and written in 16-byte chunks; otherwise (odd N) element by element, the
// lanes of a warp on 32 consecutive elements of a row (mma_out_elem): one element of each of
// 32 chunks per store would put 16 partial 32-byte sector writes on L2 where this puts 2 or 3.
// Offsets
// as in the main loops: rows step by multiples of the layout's period (adds), n8 tiles join
// the thread's column.
template <class C, class CTile, class T, class Sync>
__device__ __forceinline__ void mma_epilogue(uint16_t* smem, const float (&acc)[C::kFragM][C::kFragN][4], int t,
                                             uint16_t* c, const GemmArgs& g, int64_t m0, int64_t n0, bool out_vec,
                                             Sync sync) {
  constexpr int kOutRowStep = C::kThreads / (C::kBN / kMmaChunk);
  static_assert(8 % CTile::kRowPeriod == 0 && kOutRowStep % CTile::kRowPeriod == 0, "C tile steps are adds");
  {
    const TileCoord t0 = mma_acc<C>(t, 0, 0, 0);
    const int o0 = CTile::offset(t0.r, t0.c);
#pragma unroll
    for (int j = 0; j < C::kFragN; ++j) {
      uint16_t* col = smem + CTile::join(o0, CTile::offset(0, j * 8));
      float b0 = 0.f, b1 = 0.f;
      if (g.bias != nullptr) {
        const int64_t n = n0 + t0.c + j * 8;
        b0 = bias_at<T>(g, n);
        b1 = bias_at<T>(g, n + 1);
      }
#pragma unroll
      for (int i = 0; i < C::kFragM; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          *reinterpret_cast<uint32_t*>(col + CTile::offset(i * 16 + h * 8, 0)) =
              pack2<T>(acc[i][j][2 * h] + b0, acc[i][j][2 * h + 1] + b1);
    }
  }
  sync();
  if (!out_vec) {
#pragma unroll 4
    for (int e = 0; e < C::kOutChunks * kMmaChunk; ++e) {
      const TileCoord at = mma_out_elem<C>(t, e);
      const int64_t m = m0 + at.r, n = n0 + at.c;
      if (m < g.m && n < g.n) c[m * g.n + n] = smem[CTile::offset(at.r, at.c)];
    }
    return;
  }
  const TileCoord t0 = mma_chunk<C>(t, 0, C::kBN);
  const uint16_t* src = smem + CTile::offset(t0.r, t0.c);
  const int64_t n = n0 + t0.c;
#pragma unroll 4
  for (int e = 0; e < C::kOutChunks; ++e) {
    const int64_t m = m0 + t0.r + e * kOutRowStep;
    if (m >= g.m || n >= g.n) continue;
    *reinterpret_cast<uint4*>(c + m * g.n + n) =
        *reinterpret_cast<const uint4*>(src + CTile::offset(e * kOutRowStep, 0));
  }
}

// Split-K: the float32 accumulators (fragments as in mma_epilogue; t the thread's index among
// C::kThreads) as pairs of the block's partial tile PTile at `part`, for split_k_store (whose
// first cluster barrier publishes them).
template <class C, class PTile>
__device__ __forceinline__ void mma_store_partial(float* part, const float (&acc)[C::kFragM][C::kFragN][4], int t) {
#pragma unroll
  for (int i = 0; i < C::kFragM; ++i)
#pragma unroll
    for (int j = 0; j < C::kFragN; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const TileCoord at = mma_acc<C>(t, i, j, h);
        *reinterpret_cast<float2*>(part + PTile::offset(at.r, at.c)) =
            make_float2(acc[i][j][2 * h], acc[i][j][2 * h + 1]);
      }
}

}  // namespace bankops
