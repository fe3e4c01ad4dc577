#include "numeric.cuh"
#include "launch.h"
#include "warp.cuh"

namespace bankops {
namespace {

template <class T> struct OutOf { using type = int64_t; };  // integers and bool sum to int64
template <> struct OutOf<__half> { using type = __half; };
template <> struct OutOf<__nv_bfloat16> { using type = __nv_bfloat16; };
template <> struct OutOf<float> { using type = float; };
template <> struct OutOf<double> { using type = double; };

// One block sums x[row][begin:end) for one (row, split) and writes out[row * splits + split].
template <class Tile, class In, class Acc, class Out>
__global__ void __launch_bounds__(kReduceThreads)
reduce_rows_kernel(const In* __restrict__ x, Out* __restrict__ out, int64_t outer, int64_t len,
                   int64_t chunk, int64_t splits) {
  constexpr int T = kReduceThreads;
  __shared__ Acc tree[Tile::kSize];
  const auto at = [](int i) { return tree_slot<Tile>(i); };
  const int tid = threadIdx.x;
  const int64_t split = blockIdx.x;
  const int64_t begin = split * chunk;
  const int64_t end = begin + chunk < len ? begin + chunk : len;

  for (int64_t row = blockIdx.y; row < outer; row += gridDim.y) {
    const In* xr = x + row * len;
    // Four independent sums keep four loads in flight per thread.
    Acc a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int64_t k = begin + tid;
    for (; k + 3 * T < end; k += 4 * T) {
      a0 += to_acc<Acc>(xr[k]);
      a1 += to_acc<Acc>(xr[k + T]);
      a2 += to_acc<Acc>(xr[k + 2 * T]);
      a3 += to_acc<Acc>(xr[k + 3 * T]);
    }
    for (; k < end; k += T) a0 += to_acc<Acc>(xr[k]);
    tree[at(tid)] = (a0 + a1) + (a2 + a3);
    __syncthreads();
    // Interleaved tree (seed 004), until 32 values remain.
    for (int s = 1; s < kTreeStride; s *= 2) {
      if (tid < tree_pairs(s)) tree[at(tree_dst(tid, s))] += tree[at(tree_dst(tid, s) + s)];
      __syncthreads();
    }
    if (tid < 32) {
      const Acc v = warp_sum(tree[at(tid * kTreeStride)]);
      if (tid == 0) out[row * splits + split] = from_acc<Out>(v);
    }
    __syncthreads();  // the tree is reused by the next row
  }
}

// A (32 x 8) block sums columns [c0, c0+32) of x[o][begin:end)[:] and writes
// out[(o * splits + split) * inner + c].
template <class Tile, class In, class Acc, class Out>
__global__ void __launch_bounds__(kReduceCols * kReduceRowGroups)
reduce_cols_kernel(const In* __restrict__ x, Out* __restrict__ out, int64_t outer, int64_t len,
                   int64_t inner, int64_t chunk, int64_t splits) {
  __shared__ Acc tile[Tile::kSize];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c0 = int64_t(blockIdx.x) * kReduceCols;
  const int64_t split = blockIdx.z;
  const int64_t begin = split * chunk;
  const int64_t end = begin + chunk < len ? begin + chunk : len;
  // After the transpose, warp ty sums tile rows 4ty..4ty+3, one per group of 8 lanes.
  constexpr int kGroup = kReduceRowGroups;
  const TileCoord st = cols_store(tx, ty), ld = cols_load(tx, ty);
  const int tr = ld.r;

  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    Acc acc = 0;
    if (c0 + tx < inner) {
      const In* xc = x + o * len * inner + c0 + tx;
      for (int64_t r = begin + ty; r < end; r += kReduceRowGroups) acc += to_acc<Acc>(xc[r * inner]);
    }
    tile[Tile::offset(st.r, st.c)] = acc;
    __syncthreads();
    const Acc v = warp_sum<kGroup>(tile[Tile::offset(ld.r, ld.c)]);
    if (ld.c == 0 && c0 + tr < inner) out[(o * splits + split) * inner + c0 + tr] = from_acc<Out>(v);
    __syncthreads();
  }
}

template <Layout L, class In, class Acc, class Out>
cudaError_t run_pass(const void* x, void* out, ReduceShape s, int64_t chunk, int64_t splits, bool columns,
                     cudaStream_t stream) {
  const unsigned ys = static_cast<unsigned>(s.outer < 65535 ? s.outer : 65535);
  if (columns) {
    using Tile = ReduceColsTile<L, sizeof(Acc)>;
    const dim3 grid(static_cast<unsigned>(ceil_div(s.inner, kReduceCols)), ys, static_cast<unsigned>(splits));
    reduce_cols_kernel<Tile, In, Acc, Out><<<grid, dim3(kReduceCols, kReduceRowGroups), 0, stream>>>(
        static_cast<const In*>(x), static_cast<Out*>(out), s.outer, s.len, s.inner, chunk, splits);
  } else {
    using Tile = ReduceTreeTile<L, sizeof(Acc)>;
    const dim3 grid(static_cast<unsigned>(splits), ys);
    reduce_rows_kernel<Tile, In, Acc, Out><<<grid, kReduceThreads, 0, stream>>>(
        static_cast<const In*>(x), static_cast<Out*>(out), s.outer, s.len, chunk, splits);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_reduce_sum(Layout layout, DType dtype, const void* x, void* out, void* workspace,
                              ReduceShape shape, const ReducePlan& plan, cudaStream_t stream) {
  if (shape.outer == 0 || shape.inner == 0) return cudaSuccess;
  return with_layout(layout, [&](auto tag) {
    constexpr Layout L = decltype(tag)::value;
    return with_dtype(dtype, [&](auto v) {
      using In = decltype(v);
      using Acc = acc_t<In>;
      using Out = typename OutOf<In>::type;
      if (plan.splits == 1) return run_pass<L, In, Acc, Out>(x, out, shape, plan.chunk, 1, plan.columns, stream);
      cudaError_t err = run_pass<L, In, Acc, Acc>(x, workspace, shape, plan.chunk, plan.splits, plan.columns, stream);
      if (err != cudaSuccess) return err;
      const ReduceShape partials{shape.outer, plan.splits, shape.inner};
      return run_pass<L, Acc, Acc, Out>(workspace, out, partials, plan.splits, 1, plan.columns, stream);
    });
  });
}

}  // namespace bankops
