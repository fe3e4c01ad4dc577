// gemm: C[b] = A[b] @ B[b] with a shared-memory tiled FMA kernel (float32, float64, and
// float16/bfloat16 with float accumulation). A is staged transposed (k x m) and B as is
// (k x n), so the inner loop reads one tile row of each.
#pragma once
#include <cstdint>

#include "dtype.h"
#include "layout.cuh"

namespace bankops {

constexpr int kGemmBM = 64, kGemmBN = 64, kGemmBK = 32;
constexpr int kGemmThreads = 256;  // 16 x 16 threads, each computing a 4 x 4 micro-tile
constexpr int kGemmMicro = 4;

// A and B tiles share one shape: kGemmBK rows of kGemmBM (== kGemmBN) accumulators.
template <Layout L, int ACC_BYTES>
using GemmTile = TileLayout<L, kGemmBK, kGemmBM, ACC_BYTES>;

struct GemmArgs {
  int64_t batch, m, n, k;
  const void* a;
  int64_t a_sb, a_sm, a_sk;  // element strides of A (batch, m, k); any values, views included
  const void* b;
  int64_t b_sb, b_sk, b_sn;
  void* c;                   // contiguous (batch, m, n)
};


}  // namespace bankops
