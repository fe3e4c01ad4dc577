// Split-K across a thread-block cluster (compute capability 9.0), for products whose tiles
// leave SMs idle: a few rows against a weight (decode; rows.cu and mma.cu). The
// S blocks of a cluster take consecutive k ranges of one block tile; each leaves its float32
// partial tile in its own shared memory, and after a cluster barrier block r sums the rows
// split_rows(r) of all S partials through distributed shared memory, in rank order (the same
// bits every run), adds the bias, rounds once and stores them. No partial sum goes through
// global memory and no flag or zeroed scratch is needed, so the launch stays one kernel.
#pragma once
#include <cooperative_groups.h>
#include <cuda_runtime_api.h>

#include <utility>

#include "../numeric.cuh"
#include "args.h"
#include "pdl.cuh"
#include "split_k.h"

namespace bankops {

__device__ __forceinline__ void cluster_barrier() {
#if __CUDA_ARCH__ >= 900
  cooperative_groups::this_cluster().sync();
#else
  __syncthreads();  // route.h splits only on compute capability 9.0: below it a cluster is a block
#endif
}

// The same shared-memory offset in the block of cluster rank `rank`.
__device__ __forceinline__ const float* cluster_peer(const float* p, int rank) {
#if __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().map_shared_rank(const_cast<float*>(p), rank);
#else
  return p;
#endif
}

// Block tile (m0, n0) of c (m x n, the batch's C) from the partial tiles P (SplitTile, at
// `part` in every block of the cluster): this block's rows, each column pair summed over the
// ranks in order, plus the bias, rounded to T (C is small: a few rows, stored element by element).
// The caller has written its own P; on return every rank is done reading every P.
template <class T, int BM, int BN, class PTile, int THREADS>
__device__ __forceinline__ void split_k_store(const float* part, const GemmArgs& g, T* c, int64_t m0, int64_t n0,
                                              int splits, int rank) {
  cluster_barrier();  // every partial tile written
  const SplitRows rows = split_rows(BM, splits, rank);
  const int pairs = (rows.end - rows.begin) * (BN / 2);
  for (int e = threadIdx.x; e < pairs; e += THREADS) {
    const int r = rows.begin + e / (BN / 2), col = e % (BN / 2) * 2;
    const int64_t m = m0 + r, n = n0 + col;
    if (m >= g.m || n >= g.n) continue;
    const int o = PTile::offset(r, col);
    float2 s = *reinterpret_cast<const float2*>(cluster_peer(part, 0) + o);
    for (int q = 1; q < splits; ++q) {
      const float2 v = *reinterpret_cast<const float2*>(cluster_peer(part, q) + o);
      s.x += v.x;
      s.y += v.y;
    }
    T* out = c + m * g.n + n;
    if (g.bias != nullptr) {
      s.x += to_acc<float>(static_cast<const T*>(g.bias)[n]);
      if (n + 1 < g.n) s.y += to_acc<float>(static_cast<const T*>(g.bias)[n + 1]);
    }
    out[0] = from_acc<T>(s.x);
    if (n + 1 < g.n) out[1] = from_acc<T>(s.y);
  }
  cluster_barrier();  // no block leaves (or reuses its P) while a peer reads it
}

// kernel<<<grid, threads, smem, stream>>>(args...), its blocks in clusters of `cluster` along x.
template <class... Params, class... Args>
cudaError_t launch_clustered(void (*kernel)(Params...), dim3 grid, int threads, int smem, int cluster,
                             cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = cluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  return launch_with(kernel, grid, dim3(threads), smem, stream, attr, cluster > 1 ? 1 : 0,
                     std::forward<Args>(args)...);
}

}  // namespace bankops
