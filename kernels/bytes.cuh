// Opaque element types for kernels that only move bytes.
#pragma once
#include <cstdint>
#include <vector_types.h>

namespace bankops {

// Calls f(E{}) with an E of elem_bytes bytes (1, 2, 4, 8 or 16; ops/ checks the size).
template <class F>
decltype(auto) with_bytes(int elem_bytes, F&& f) {
  switch (elem_bytes) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    case 8: return f(uint64_t{});
    case 16:
    default: return f(uint4{});
  }
}

}  // namespace bankops
