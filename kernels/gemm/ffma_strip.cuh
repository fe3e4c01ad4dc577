// The strip blocks' work (ffma_strip.h), called by ffma.cu's kernel.
#pragma once
#include "../warp.cuh"
#include "ffma_strip.h"

namespace bankops {

// C[i][j] = sum_k A[i][k] B[k][j] (+ bias[j]) for rows i < rows (<= kStripRows) and columns
// j < cols (<= kGemmStripCols): a, b, c and bias (or null) point at row 0 / column 0 of the
// strip; bs holds
// Tile::kSize floats. Not inlined: inlined, it changed the tile path's register allocation
// and halved the swizzle kernel's speed.
template <class Tile>
__device__ __noinline__ void gemm_strip_rows(const float* a, int64_t a_sm, int64_t a_sk, const float* b, int64_t b_sk,
                                             int64_t b_sn, float* c, int64_t ldc, const float* bias, int64_t rows,
                                             int64_t k, int cols, float* bs) {
  const int t = threadIdx.x, lane = t % 32, row0 = t / 32 * kStripRowsPerWarp;
  float acc[kStripRowsPerWarp][kGemmStripCols] = {};
  for (int64_t k0 = 0; k0 < k; k0 += kStripK) {
    __syncthreads();  // every warp has read the chunk before
    for (int j = 0; j < cols; ++j) bs[Tile::offset(j, t)] = k0 + t < k ? b[(k0 + t) * b_sk + j * b_sn] : 0.f;
    __syncthreads();
#pragma unroll
    for (int u = 0; u < kStripK / 32; ++u) {
      const int kk = lane + 32 * u;
      float av[kStripRowsPerWarp];
#pragma unroll
      for (int r = 0; r < kStripRowsPerWarp; ++r)
        av[r] = k0 + kk < k && row0 + r < rows ? a[(row0 + r) * a_sm + (k0 + kk) * a_sk] : 0.f;
#pragma unroll
      for (int j = 0; j < kGemmStripCols; ++j) {
        if (j < cols) {
          const float bv = bs[Tile::offset(j, kk)];
#pragma unroll
          for (int r = 0; r < kStripRowsPerWarp; ++r) acc[r][j] = fmaf(av[r], bv, acc[r][j]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kStripRowsPerWarp; ++r)
#pragma unroll
    for (int j = 0; j < kGemmStripCols; ++j) {
      if (j < cols) {
        const float v = warp_sum(acc[r][j]) + (bias != nullptr ? bias[j] : 0.f);
        if (lane == 0 && row0 + r < rows) c[(row0 + r) * ldc + j] = v;
      }
    }
  __syncthreads();  // the block's next work reuses shared memory
}

}  // namespace bankops
