// cp.async, 16-byte shared-memory accesses and the shared-memory window's addresses, for the
// tensor-core gemm kernels (gemm/mma.cu, gemm/wgmma.cu), and the one-time dynamic
// shared-memory limit of a kernel.
#pragma once
#include <cstdint>

#include <atomic>

#include <cuda_runtime_api.h>
#include <vector_types.h>

namespace bankops {

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// smem_u32's inverse, for the cuda::ptx functions that take generic pointers: they convert
// back to the shared address the instruction takes, and the two conversions fold away.
template <class T = void>
__device__ __forceinline__ T* smem_ptr(uint32_t addr) {
  return static_cast<T*>(__cvta_shared_to_generic(addr));
}

__device__ __forceinline__ uintptr_t addr_of(const void* p) { return reinterpret_cast<uintptr_t>(p); }

// 16 bytes global -> shared; bytes past src_bytes (0..16) are zero-filled, none read.
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void sts32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ void sts128(uint32_t addr, const uint4& v) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// A kernel's dynamic shared memory past 48 KB needs its attribute raised. The attribute is
// per device and sticks: set it once per device, not on every call (a 1024^3 gemm is short
// enough for host time per call to show). The kernel is a template argument: one flag set
// per kernel (kernels of one signature share a function type).
template <auto Kernel>
cudaError_t raise_smem_once(int bytes) {
  static std::atomic<uint64_t> attr_set{0};
  int dev = 0;
  cudaError_t err = cudaGetDevice(&dev);
  if (err != cudaSuccess) return err;
  const uint64_t bit = dev < 64 ? uint64_t(1) << dev : 0;
  if (!(attr_set.load(std::memory_order_relaxed) & bit)) {
    err = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (err != cudaSuccess) return err;
    attr_set.fetch_or(bit, std::memory_order_relaxed);
  }
  return cudaSuccess;
}

}  // namespace bankops
