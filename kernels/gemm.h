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

constexpr int kGemmSide = kGemmBM / kGemmMicro;  // 16 x 16 threads
constexpr int kGemmStageLoads = kGemmBM * kGemmBK / kGemmThreads;

// Staging: element e of thread t of a kGemmBK x 64 tile. Lanes walk k when k is the
// source's contiguous dim (the global reads coalesce and the tile store walks a column),
// the other dim otherwise.
BANKOPS_HD TileCoord gemm_stage(int t, int e, bool k_fast) {
  const int idx = t + e * kGemmThreads;
  return k_fast ? TileCoord{idx % kGemmBK, idx / kGemmBK} : TileCoord{idx / kGemmBM, idx % kGemmBM};
}
// Inner loop: thread t owns rows ty + 16i of C (A tile columns) and columns tx + 16j (B
// tile columns), so a warp reads two A values (broadcast) and 16 consecutive B values.
BANKOPS_HD int gemm_row(int t, int i) { return t / kGemmSide + kGemmSide * i; }
BANKOPS_HD int gemm_col(int t, int j) { return t % kGemmSide + kGemmSide * j; }

struct GemmArgs {
  int64_t batch, m, n, k;
  const void* a;
  int64_t a_sb, a_sm, a_sk;  // element strides of A (batch, m, k); any values, views included
  const void* b;
  int64_t b_sb, b_sk, b_sn;
  void* c;                   // contiguous (batch, m, n)
};


}  // namespace bankops
