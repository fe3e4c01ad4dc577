// The Tensor Memory Accelerator (compute capability 9.0), for the Hopper gemm kernel
// (wgmma.cu): a tensor map describes an operand (or C) in global memory (the host encodes it,
// the kernel takes it as a __grid_constant__ parameter), and one thread copies a whole box of
// it into shared memory with one instruction, 128-byte swizzled on the way (the swizzle
// layout's own tiles: CuTe's Swizzle<3,4,3> on bytes, anchored to 1024-byte boundaries),
// zero-filling the parts of the box outside the operand; the copy completes on an mbarrier as
// a count of bytes. The driver's encoder is looked up through the runtime, so the build links
// no libcuda. The stores, bulk groups and proxy fence call CCCL's cuda::ptx; the loads and
// prefetch.tensormap stay PTX here (why: bench/design_notes.md, "CCCL cuda::ptx").
#pragma once
#include <cstdint>

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda/ptx>
#include <cuda_runtime_api.h>

#include "../async_copy.cuh"

namespace bankops {

// A 3-D map of 16-bit elements: dims[0] contiguous, dims[1] and dims[2] `strides` elements
// apart; boxes of cols x rows x 1, their rows swizzled by `swizzle` bytes (128: 64 columns, 64:
// 32 columns) or not (0). Strides of dimensions of size 1 are never used: they are given valid
// values.
inline cudaError_t tma_map_16bit(CUtensorMap* map, const void* base, const int64_t (&dims)[3],
                                 const int64_t (&strides)[2], int rows, int cols = 64, int swizzle = 128) {
  static const auto encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    const cudaError_t err =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found);
    return err == cudaSuccess && found == cudaDriverEntryPointSuccess
               ? reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn)
               : nullptr;
  }();
  if (encode == nullptr) return cudaErrorNotSupported;
  cuuint64_t size[3], stride[2];
  uint64_t dense = 2;
  for (int i = 0; i < 3; ++i) {
    size[i] = static_cast<cuuint64_t>(dims[i] > 0 ? dims[i] : 1);
    dense *= size[i];
    if (i < 2) stride[i] = dims[i + 1] > 1 ? static_cast<cuuint64_t>(strides[i]) * 2 : (dense + 15) / 16 * 16;
  }
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(cols), static_cast<cuuint32_t>(rows), 1};
  const cuuint32_t step[3] = {1, 1, 1};
  const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, const_cast<void*>(base), size, stride, box, step,
                            CU_TENSOR_MAP_INTERLEAVE_NONE,
                            swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                            : swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                                            : CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorInvalidValue;
}

// The box at element coordinates (c0, c1, c2) of `map` into shared memory at `dst` (1024-byte
// aligned); its bytes count towards the transaction of the mbarrier at `bar`.
// Hand-written, as tma_load_multicast: cuda::ptx::cp_async_bulk_tensor takes the map as a
// pointer operand, and with it the compiler places the map's address differently in the
// producer loop (the persistent kernels' SASS changes: bench/design_notes.md, "CCCL cuda::ptx").
__device__ __forceinline__ void tma_load(uint32_t dst, const CUtensorMap& map, int c0, int c1, int c2, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
}
// As tma_load, into the same shared-memory offset `dst` of each block of the cluster in
// `cta_mask` (bit r: rank r), completing on the mbarrier at offset `bar` in each.
__device__ __forceinline__ void tma_load_multicast(uint32_t dst, const CUtensorMap& map, int c0, int c1, int c2,
                                                   uint32_t bar, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], "
      "[%1, {%2, %3, %4}], [%5], %6;\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(&map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(cta_mask)
      : "memory");
}

// The box at (c0, c1, c2) of `map` from shared memory at `src` (in the map's swizzle from a
// 1024-byte boundary, or dense from a 128-byte one), as one bulk store; parts of the box
// outside the tensor are not written. The stores a thread issued complete as a group:
// bulk_commit() closes one, bulk_wait_read() waits until every group (or all but the PENDING
// newest) has read its shared memory (the tile is free again), bulk_wait() until every write
// is done.
__device__ __forceinline__ void tma_store(const CUtensorMap& map, uint32_t src, int c0, int c1, int c2) {
  const int32_t at[3] = {c0, c1, c2};
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_global, cuda::ptx::space_shared, &map, at, smem_ptr(src));
}
__device__ __forceinline__ void bulk_commit() { cuda::ptx::cp_async_bulk_commit_group(); }
template <int PENDING = 0>  // groups, the newest, that may still be reading
__device__ __forceinline__ void bulk_wait_read() {
  cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<PENDING>{});
}
__device__ __forceinline__ void bulk_wait() { cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<0>{}); }
// Orders this thread's ordinary shared-memory stores before later bulk copies (the async
// proxy) read them.
__device__ __forceinline__ void fence_async_shared() { cuda::ptx::fence_proxy_async(cuda::ptx::space_shared); }
__device__ __forceinline__ void tma_prefetch(const CUtensorMap& map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(&map)) : "memory");
}

}  // namespace bankops
