// Realigning 16-byte vectors: a row that starts off a 16-byte boundary is read as the aligned
// chunks that hold it, and each of its vectors is cut out of two neighbouring chunks.
#pragma once
#include <cstdint>
#include <vector_types.h>

#include "async_copy.cuh"

namespace bankops {

// Bytes [s, s + 16) of the 32 bytes lo:hi, for E-byte elements (only s mod 16, a multiple of
// E, counts: callers may keep other data in the higher bits). The word offset goes in two
// select stages (by 2 words, then by 1) instead of picking each word out of four candidates:
// the realigning kernels run this once or twice per vector, so its selects are most of their
// ALU work.
template <int E>
__device__ __forceinline__ uint4 shift_bytes(const uint4& lo, const uint4& hi, int s) {
  s &= 16 - E;
  const uint32_t x[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  const bool by2 = s & 8, by1 = s & 4;
  uint32_t z[6], y[5];
#pragma unroll
  for (int k = 0; k < 6; ++k) z[k] = by2 ? x[k + 2] : x[k];
#pragma unroll
  for (int k = 0; k < 5; ++k) y[k] = by1 ? z[k + 1] : z[k];
  if constexpr (E >= 4) return uint4{y[0], y[1], y[2], y[3]};
  const uint32_t bits = (s & 3) * 8;
  return uint4{__funnelshift_r(y[0], y[1], bits), __funnelshift_r(y[1], y[2], bits), __funnelshift_r(y[2], y[3], bits),
               __funnelshift_r(y[3], y[4], bits)};
}

// 16 global bytes at a 16-byte aligned address; and the part of them inside [lo, hi) (a
// row's bytes, at even addresses), zeros elsewhere: the granules at a row's or a matrix's
// ends, read element by element so that nothing outside is touched.
__device__ __forceinline__ uint4 ldg128(const char* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ uint4 ldg128_within(const char* p, uintptr_t lo, uintptr_t hi) {
  if (addr_of(p) >= lo && addr_of(p) + 16 <= hi) return ldg128(p);
  uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
  for (int q = 0; q < 8; ++q) {
    const uintptr_t at = addr_of(p) + 2 * q;
    if (at >= lo && at < hi) w[q / 2] |= uint32_t(__ldg(reinterpret_cast<const uint16_t*>(at))) << (q % 2 * 16);
  }
  return uint4{w[0], w[1], w[2], w[3]};
}

}  // namespace bankops
