// Split-K across a thread-block cluster (compute capability 9.0), for products whose tiles
// leave SMs idle: a few rows against a weight (decode; rows.cu, mma.cu, wgmma.cu), a weight
// gradient's few tiles over a long k (wgmma.cu). The
// S blocks of a cluster take consecutive k ranges of one block tile; each leaves its float32
// partial tile in its own shared memory, and after a cluster barrier block r sums the rows
// split_rows(r) of all S partials through distributed shared memory, in rank order (the same
// bits every run), adds the bias, rounds once and stores them. No partial sum goes through
// global memory and no flag or zeroed scratch is needed, so the launch stays one kernel.
#pragma once
#include <cooperative_groups.h>
#include <cuda_runtime_api.h>

#include <utility>

#include "../async_copy.cuh"
#include "../numeric.cuh"
#include "args.h"
#include "pdl.cuh"
#include "split_k.h"

namespace bankops {

__device__ __forceinline__ void cluster_barrier() {
#if __CUDA_ARCH__ >= 900
  cooperative_groups::this_cluster().sync();
#else
  __syncthreads();  // plans split only on compute capability 9.0: below it a cluster is a block
#endif
}

// The shared-memory address `addr` (of this block) in the block of cluster rank `rank`.
__device__ __forceinline__ uint32_t cluster_map(uint32_t addr, int rank) {
#if __CUDA_ARCH__ >= 900
  uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(addr), "r"(rank));
  return out;
#else
  return addr;
#endif
}

// 16 bytes at a cluster shared-memory address (cluster_map). Volatile: never hoisted above the
// cluster barrier, and the loads still overlap in flight.
__device__ __forceinline__ float4 ld_cluster_f4(uint32_t addr) {
  float4 v;
#if __CUDA_ARCH__ >= 900
  asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];\n"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "r"(addr));
#else
  asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(addr));
#endif
  return v;
}

// Block tile (m0, n0) of c (m x n, the batch's C) from the partial tiles P (SplitTile, at
// `part` in every block of the cluster): this block's rows, 4 columns at a time summed over the
// ranks in order, plus the bias, rounded to T. t: the thread's index among the THREADS that sum
// (the rest of the block may have exited: the cluster barrier waits for live threads only).
// Each thread takes kSplitQuads quads THREADS apart a round, loading a round's last quad again
// where the rows run out (not stored). The caller has written its own P; on return every rank
// is done reading every P.
template <class T, int BM, int BN, class PTile, int THREADS>
__device__ __forceinline__ void split_k_store(const float* part, const GemmArgs& g, T* c, int64_t m0, int64_t n0,
                                              int splits, int rank, int t) {
  static_assert(BN % 4 == 0 && PTile::kCols == BN, "whole quads");
  cluster_barrier();  // every partial tile written
  const SplitRows rows = split_rows(BM, splits, rank);
  const int quads = (rows.end - rows.begin) * (BN / 4);
  uint32_t peer[kMaxSplit];
#pragma unroll
  for (int q = 0; q < kMaxSplit; ++q) peer[q] = cluster_map(smem_u32(part), q < splits ? q : 0);
  for (int e0 = t; e0 < quads; e0 += kSplitQuads * THREADS) {
    float4 s[kSplitQuads];
    uint32_t at[kSplitQuads];
#pragma unroll
    for (int u = 0; u < kSplitQuads; ++u) {
      const TileCoord q = split_quad<PTile>(rows, min(e0 + u * THREADS, quads - 1));
      at[u] = PTile::offset(q.r, q.c) * 4;
      s[u] = ld_cluster_f4(peer[0] + at[u]);
    }
#pragma unroll
    for (int q = 1; q < kMaxSplit; ++q) {
      if (q >= splits) break;
      float4 v[kSplitQuads];
#pragma unroll
      for (int u = 0; u < kSplitQuads; ++u) v[u] = ld_cluster_f4(peer[q] + at[u]);
#pragma unroll
      for (int u = 0; u < kSplitQuads; ++u)
        s[u] = make_float4(s[u].x + v[u].x, s[u].y + v[u].y, s[u].z + v[u].z, s[u].w + v[u].w);
    }
#pragma unroll
    for (int u = 0; u < kSplitQuads; ++u) {
      const int e = e0 + u * THREADS;
      const TileCoord q = split_quad<PTile>(rows, e);
      const int64_t m = m0 + q.r, n = n0 + q.c;
      if (e >= quads || m >= g.m) continue;
      const float sum[4] = {s[u].x, s[u].y, s[u].z, s[u].w};
      T* out = c + m * g.n + n;
#pragma unroll
      for (int i = 0; i < 4; ++i)
        if (n + i < g.n)
          out[i] = from_acc<T>(sum[i] + (g.bias != nullptr ? to_acc<float>(static_cast<const T*>(g.bias)[n + i]) : 0.f));
    }
  }
  cluster_barrier();  // no block leaves (or reuses its P) while a peer reads it
}

// kernel<<<grid, threads, smem, stream>>>(args...), its blocks in clusters of `cluster` along x.
template <class... Params, class... Args>
cudaError_t launch_clustered(void (*kernel)(Params...), dim3 grid, int threads, int smem, int cluster,
                             cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr[1] = {cluster_attr(cluster)};
  return launch_with(kernel, grid, dim3(threads), smem, stream, attr, cluster > 1 ? 1 : 0,
                     std::forward<Args>(args)...);
}

}  // namespace bankops
