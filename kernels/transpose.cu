#include "bytes.cuh"
#include "launch.h"

namespace bankops {
namespace {

constexpr int kPerThread = kTransposeTile / kTransposeRowGroups;

template <class Tile, class E>
__global__ void __launch_bounds__(kTransposeTile * kTransposeRowGroups) transpose_kernel(const TransposeArgs a) {
  __shared__ E tile[Tile::kSize];
  const E* __restrict__ in = static_cast<const E*>(a.in);
  E* __restrict__ out = static_cast<E*>(a.out);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t tiles_i = (a.n_i + kTransposeTile - 1) / kTransposeTile;
  const int64_t j0 = int64_t(blockIdx.x) * kTransposeTile;

  for (int64_t b = blockIdx.z; b < a.batch; b += gridDim.z) {
    int64_t rem = b, in_base = 0, out_base = 0;
#pragma unroll
    for (int d = kTransposeBatchDims - 1; d >= 0; --d) {
      if (d < a.batch_dims) {
        const int64_t q = rem / a.batch_size[d], r = rem - q * a.batch_size[d];
        in_base += r * a.in_batch_stride[d];
        out_base += r * a.out_batch_stride[d];
        rem = q;
      }
    }
    for (int64_t ti = blockIdx.y; ti < tiles_i; ti += gridDim.y) {
      const int64_t i0 = ti * kTransposeTile;
      // Read rows of the input plane: lanes walk j, the input's contiguous dim.
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        const TileCoord t = transpose_in(tx, ty, k);
        const int64_t i = i0 + t.r, j = j0 + t.c;
        if (i < a.n_i && j < a.n_j) tile[Tile::offset(t.r, t.c)] = in[in_base + i * a.in_si + j * a.in_sj];
      }
      __syncthreads();
      // Write rows of the output plane: lanes walk i, reading a column of the tile.
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        const TileCoord t = transpose_out(tx, ty, k);
        const int64_t i = i0 + t.r, j = j0 + t.c;
        if (i < a.n_i && j < a.n_j) out[out_base + j * a.out_sj + i * a.out_si] = tile[Tile::offset(t.r, t.c)];
      }
      __syncthreads();
    }
  }
}

template <class E>
__global__ void __launch_bounds__(256) gather_kernel(const GatherArgs a) {
  const E* __restrict__ in = static_cast<const E*>(a.in);
  E* __restrict__ out = static_cast<E*>(a.out);
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < a.numel;
       idx += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = idx, off = 0;
#pragma unroll
    for (int d = kGatherDims - 1; d >= 0; --d) {
      if (d < a.ndim) {
        const int64_t q = rem / a.size[d];
        off += (rem - q * a.size[d]) * a.in_stride[d];
        rem = q;
      }
    }
    out[idx] = in[off];
  }
}

unsigned clamp_grid(int64_t v) { return static_cast<unsigned>(v < 65535 ? v : 65535); }

}  // namespace

cudaError_t launch_transpose(Layout layout, const TransposeArgs& a, cudaStream_t stream) {
  if (a.n_i == 0 || a.n_j == 0 || a.batch == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((a.n_j + kTransposeTile - 1) / kTransposeTile),
                  clamp_grid((a.n_i + kTransposeTile - 1) / kTransposeTile), clamp_grid(a.batch));
  const dim3 block(kTransposeTile, kTransposeRowGroups);
  return with_layout(layout, [&](auto tag) {
    return with_bytes(a.elem_bytes, [&](auto e) {
      using E = decltype(e);
      transpose_kernel<TransposeTile<decltype(tag)::value, sizeof(E)>, E><<<grid, block, 0, stream>>>(a);
      return cudaGetLastError();
    });
  });
}

cudaError_t launch_gather(const GatherArgs& a, cudaStream_t stream) {
  if (a.numel == 0) return cudaSuccess;
  const int64_t blocks = (a.numel + 255) / 256;
  return with_bytes(a.elem_bytes, [&](auto e) {
    gather_kernel<decltype(e)><<<static_cast<unsigned>(blocks < (1 << 20) ? blocks : (1 << 20)), 256, 0, stream>>>(a);
    return cudaGetLastError();
  });
}

}  // namespace bankops
