#include "probe_launch.h"

namespace bankops {
namespace {

// One shared-memory access of W bytes per lane, written in PTX (asm volatile) so that it
// stays exactly one instruction of that width: neither merged with another nor dropped.
template <int W>
__device__ __forceinline__ uint32_t probe_load(uint32_t s) {
  uint32_t a = 0, b = 0, c = 0, d = 0;
  if constexpr (W == 1) asm volatile("ld.shared.u8 %0, [%1];" : "=r"(a) : "r"(s) : "memory");
  if constexpr (W == 2) asm volatile("ld.shared.u16 %0, [%1];" : "=r"(a) : "r"(s) : "memory");
  if constexpr (W == 4) asm volatile("ld.shared.u32 %0, [%1];" : "=r"(a) : "r"(s) : "memory");
  if constexpr (W == 8) asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];" : "=r"(a), "=r"(b) : "r"(s) : "memory");
  if constexpr (W == 16)
    asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(a), "=r"(b), "=r"(c), "=r"(d) : "r"(s) : "memory");
  return a ^ b ^ c ^ d;
}

template <int W>
__device__ __forceinline__ void probe_store(uint32_t s, uint32_t v) {
  if constexpr (W == 1) asm volatile("st.shared.u8 [%0], %1;" ::"r"(s), "r"(v) : "memory");
  if constexpr (W == 2) asm volatile("st.shared.u16 [%0], %1;" ::"r"(s), "r"(v) : "memory");
  if constexpr (W == 4) asm volatile("st.shared.u32 [%0], %1;" ::"r"(s), "r"(v) : "memory");
  if constexpr (W == 8) asm volatile("st.shared.v2.u32 [%0], {%1, %1};" ::"r"(s), "r"(v) : "memory");
  if constexpr (W == 16) asm volatile("st.shared.v4.u32 [%0], {%1, %1, %1, %1};" ::"r"(s), "r"(v) : "memory");
}

// cp.async of W bytes (4, 8 or 16): .cg for 16 bytes as the gemm kernels use it; smaller
// copies exist only as .ca.
// src_size >= 0: the zero-filling form, its source size in a register as kernels with
// predicated tails issue it.
template <int W>
__device__ __forceinline__ void probe_cp_async(uint32_t s, const void* g, int src_size) {
  if (src_size >= 0) {
    if constexpr (W == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(g), "r"(src_size) : "memory");
    if constexpr (W == 8) asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(s), "l"(g), "r"(src_size) : "memory");
    if constexpr (W == 4) asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(s), "l"(g), "r"(src_size) : "memory");
    return;
  }
  if constexpr (W == 16) asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(g) : "memory");
  if constexpr (W == 8) asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(s), "l"(g) : "memory");
  if constexpr (W == 4) asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(s), "l"(g) : "memory");
}

template <int W>
__global__ void __launch_bounds__(32) smem_probe_kernel(const int64_t* __restrict__ addr, const int64_t* __restrict__ src,
                                                        const uint32_t* __restrict__ global,
                                                        uint32_t* __restrict__ out, bool store, int src_size) {
  extern __shared__ __align__(16) uint32_t smem[];
  const int lane = threadIdx.x;
  const int64_t a = addr[lane];
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  uint32_t seen = 0;
  if (src != nullptr) {
    if constexpr (W >= 4) {
      if (a >= 0) probe_cp_async<W>(base + static_cast<uint32_t>(a), global + src[lane] / 4, src_size);
      asm volatile("cp.async.wait_all;" ::: "memory");
      __syncwarp();
      if (a >= 0) seen = smem[a / 4];
    }
  } else if (store) {
    if (a >= 0) probe_store<W>(base + static_cast<uint32_t>(a), seen = 0x1000u + lane);
  } else {
    for (int i = lane; i < kProbeSharedBytes / 4; i += 32) smem[i] = i;
    __syncwarp();
    if (a >= 0) seen = probe_load<W>(base + static_cast<uint32_t>(a));
  }
  out[lane] = seen;
}

}  // namespace

cudaError_t launch_smem_probe(const int64_t* addr, const int64_t* src, const uint32_t* global, uint32_t* out, int width,
                              bool store, bool zfill, cudaStream_t stream) {
  const auto go = [&](auto kernel) {
    kernel<<<1, 32, kProbeSharedBytes, stream>>>(addr, src, global, out, store, zfill ? width : -1);
    return cudaGetLastError();
  };
  switch (width) {
    case 1: return go(smem_probe_kernel<1>);
    case 2: return go(smem_probe_kernel<2>);
    case 4: return go(smem_probe_kernel<4>);
    case 8: return go(smem_probe_kernel<8>);
    case 16:
    default: return go(smem_probe_kernel<16>);  // ops/ admits only these widths
  }
}

}  // namespace bankops
