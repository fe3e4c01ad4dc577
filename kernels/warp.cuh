#pragma once

namespace bankops {

// Sum over the lanes of groups of WIDTH lanes; the first lane of each group holds it.
template <int WIDTH = 32, class T>
__device__ __forceinline__ T warp_sum(T v) {
#pragma unroll
  for (int o = WIDTH / 2; o > 0; o /= 2) v += __shfl_down_sync(0xffffffffu, v, o, WIDTH);
  return v;
}

}  // namespace bankops
