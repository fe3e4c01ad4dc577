// Programmatic dependent launch (compute capability 9.0), for the Hopper gemm kernel and the
// copy before it, and the few-rows kernel: a kernel launched with launch_pdl may be scheduled
// while the kernel before it in the stream still runs, once that one's blocks have all called
// pdl_launch_next; its blocks then take SMs as the earlier ones leave, with no launch gap
// between. Every read and write of global memory must come after pdl_wait_previous, which
// returns once the earlier kernel has finished and its writes are visible; only an L2 prefetch
// (prefetch_l2) may come before: the few-rows kernel asks for its weight's first bytes while
// the kernel ahead ends.
//
// (launch_with, the cudaLaunchKernelEx call under it, serves split_k.cuh's cluster launches too.)
//
// It pays where a block fills an SM (the Hopper kernel's 200+ KB of shared memory); the
// mma.sync kernel, two blocks an SM, measured slower launched this way.
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>
#include <utility>

namespace bankops {

// No-ops below compute capability 9.0, where no launch is programmatic (builds for sm_80 take
// the same kernels).
__device__ __forceinline__ void pdl_launch_next() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_wait_previous() {
#if __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// [p, p + bytes)'s whole 16-byte chunks into L2, a hint that brings nothing into the SM: safe
// before pdl_wait_previous, since every SM's writes land in L2 (a no-op below 9.0).
__device__ __forceinline__ void prefetch_l2(const void* p, int64_t bytes) {
#if __CUDA_ARCH__ >= 900
  const uint64_t from = (reinterpret_cast<uint64_t>(p) + 15) & ~uint64_t(15);
  const uint64_t to = (reinterpret_cast<uint64_t>(p) + uint64_t(bytes)) & ~uint64_t(15);
  if (to > from)
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;\n" ::"l"(from), "r"(uint32_t(to - from)) : "memory");
#endif
}

// A weight slice's first bytes asked of L2 by a block's `threads` threads, before the wait on the
// kernel ahead: of columns n0..n0 + cols over k0..k1 of b (column stride s_n, k stride s_k), at
// most `bytes`; KN (the weight stored (K, N)): whole rows k0.. of those columns, else the first
// bytes of each column's k run.
template <class T, bool KN>
__device__ __forceinline__ void prefetch_slice_l2(const T* b, int64_t s_n, int64_t s_k, int64_t n0, int64_t cols,
                                                  int64_t k0, int64_t k1, int64_t bytes, int threads) {
  const int64_t lines = KN ? k1 - k0 : cols, line_bytes = (KN ? cols : k1 - k0) * int64_t(sizeof(T));
  if (bytes <= 0 || lines <= 0 || line_bytes <= 0) return;
  const int count = static_cast<int>(KN ? min(lines, bytes / line_bytes) : lines);
  const int64_t each = KN ? line_bytes : min(line_bytes, bytes / lines);
  for (int i = threadIdx.x; i < count; i += threads)
    prefetch_l2(KN ? b + (k0 + i) * s_k + n0 * s_n : b + (n0 + i) * s_n + k0 * s_k, each);
}

// kernel<<<grid, block, smem, stream>>>(args...) with `attrs` (nattrs of them, 0 for none).
template <class... Params, class... Args>
cudaError_t launch_with(void (*kernel)(Params...), dim3 grid, dim3 block, int smem, cudaStream_t stream,
                        cudaLaunchAttribute* attrs, int nattrs, Args&&... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attrs;
  cfg.numAttrs = nattrs;
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

// The launch attribute that groups a grid's blocks in clusters of `cluster` along x.
inline cudaLaunchAttribute cluster_attr(int cluster) {
  cudaLaunchAttribute a;
  a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim.x = cluster;
  a.val.clusterDim.y = 1;
  a.val.clusterDim.z = 1;
  return a;
}

// kernel<<<grid, block, smem, stream>>>(args...) as a programmatic dependent launch, its blocks
// in clusters of `cluster` along x (1: no cluster).
template <class... Params, class... Args>
cudaError_t launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, int smem, int cluster, cudaStream_t stream,
                       Args&&... args) {
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  attr[1] = cluster_attr(cluster);
  return launch_with(kernel, grid, block, smem, stream, attr, cluster > 1 ? 2 : 1, std::forward<Args>(args)...);
}

}  // namespace bankops
