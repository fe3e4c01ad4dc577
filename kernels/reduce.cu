#include <type_traits>

#include "numeric.cuh"
#include "reduce_launch.h"
#include "warp.cuh"

namespace bankops {
namespace {

template <class T> struct OutOf { using type = int64_t; };  // integers and bool sum to int64
template <> struct OutOf<__half> { using type = __half; };
template <> struct OutOf<__nv_bfloat16> { using type = __nv_bfloat16; };
template <> struct OutOf<float> { using type = float; };
template <> struct OutOf<double> { using type = double; };

// Streaming 16-byte load: read once, so it skips L1 and asks L2 for whole 256-byte lines.
__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// VEC elements of one load, as loaded.
template <class In, int VEC>
struct Vec {
  In e[VEC];
};
template <class In, int VEC>
__device__ __forceinline__ Vec<In, VEC> load_vec(const In* p) {
  if constexpr (VEC * sizeof(In) == kLoadBytes) {
    const uint4 raw = load_stream(p);
    Vec<In, VEC> v;
    memcpy(&v, &raw, sizeof(v));
    return v;
  } else {
    static_assert(VEC == 1, "a vector load is 16 bytes or one element");
    return Vec<In, VEC>{{__ldg(p)}};
  }
}
// The sum of one loaded vector. Narrow integers add up in int32 first (16 bytes of them
// cannot overflow it); floats in a fixed pairwise order.
template <class Acc, class In, int N>
__device__ __forceinline__ Acc sum_elems(const In* e) {
  if constexpr (N == 1) {
    return to_acc<Acc>(e[0]);
  } else {
    return sum_elems<Acc, In, N / 2>(e) + sum_elems<Acc, In, N / 2>(e + N / 2);
  }
}
template <class Acc, class In, int VEC>
__device__ __forceinline__ Acc vec_sum(const Vec<In, VEC>& v) {
  if constexpr (std::is_integral_v<In> && sizeof(In) <= 2 && VEC > 1) {
    return static_cast<Acc>(sum_elems<int32_t, In, VEC>(v.e));
  } else {
    return sum_elems<Acc, In, VEC>(v.e);
  }
}

// Thread `lane` of a group of G threads: its share of p[begin, end), read as 16-byte
// vectors from the first 16-byte boundary on, with the unaligned head and the tail
// element by element. The order depends only on (begin, end, alignment), never on timing.
template <int G, class In, class Acc>
__device__ __forceinline__ Acc group_share(const In* __restrict__ p, int64_t begin, int64_t end, int lane) {
  constexpr int VEC = kLoadBytes / sizeof(In), U = kReduceUnroll;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p + begin);
  int64_t head = static_cast<int64_t>((kLoadBytes - addr % kLoadBytes) % kLoadBytes / sizeof(In));
  if (head > end - begin) head = end - begin;
  const int64_t vbegin = begin + head;
  const int64_t nv = (end - vbegin) / VEC;
  const int64_t vend = vbegin + nv * VEC;
  const In* pv = p + vbegin;
  Acc acc[U];
#pragma unroll
  for (int u = 0; u < U; ++u) acc[u] = 0;
  int64_t k = lane;
  for (; k + (U - 1) * G < nv; k += U * G) {
    Vec<In, VEC> v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = load_vec<In, VEC>(pv + (k + u * G) * VEC);
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] += vec_sum<Acc>(v[u]);
  }
  for (; k < nv; k += G) acc[0] += vec_sum<Acc>(load_vec<In, VEC>(pv + k * VEC));
  if (lane < head) acc[1] += to_acc<Acc>(p[begin + lane]);
  if (lane < end - vend) acc[2] += to_acc<Acc>(p[vend + lane]);
#pragma unroll
  for (int w = U / 2; w > 0; w /= 2)
#pragma unroll
    for (int u = 0; u < w; ++u) acc[u] += acc[u + w];
  return acc[0];
}

// Rows: groups of G threads (G = 32: a warp per row; G = 256: the block per row) sum
// x[row][begin:end) for one split; out[row * splits + split] gets the row's partial.
template <class Tile, int G, class In, class Acc, class Out>
__global__ void __launch_bounds__(kReduceThreads, 4)
reduce_rows_kernel(const In* __restrict__ x, Out* __restrict__ out, int64_t outer, int64_t len, int64_t chunk,
                   int64_t splits) {
  constexpr int R = kReduceThreads / G;  // rows per block-iteration
  __shared__ __align__(16) Acc tree[Tile::kSize];
  const auto at = [](int i) { return tree_slot<Tile>(i); };
  const int tid = threadIdx.x;
  const int64_t split = blockIdx.x;
  const int64_t begin = split * chunk;
  const int64_t end = begin + chunk < len ? begin + chunk : len;

  for (int64_t first = int64_t(blockIdx.y) * R; first < outer; first += int64_t(gridDim.y) * R) {
    const int64_t row = first + tid / G;
    Acc v = 0;
    if (row < outer) v = group_share<G, In, Acc>(x + row * len, begin, end, tid % G);
    tree[at(tid)] = v;
    if constexpr (G == kReduceWarp) __syncwarp(); else __syncthreads();
    // Interleaved tree (strided index), until 32 values per group remain.
#pragma unroll
    for (int s = 1; s < G / kReduceWarp; s *= 2) {
      if (tid < tree_pairs(s)) tree[at(tree_dst(tid, s))] += tree[at(tree_dst(tid, s) + s)];
      __syncthreads();
    }
    if (tid < R * kReduceWarp) {
      const Acc sum = warp_sum(tree[at(tree_final(tid, G))]);
      const int64_t r = first + tid / kReduceWarp;
      if (tid % kReduceWarp == 0 && r < outer) out[r * splits + split] = from_acc<Out>(sum);
    }
    // The tree is reused by the next rows.
    if constexpr (G == kReduceWarp) __syncwarp(); else __syncthreads();
  }
}

// Columns: block (cb, o, split) sums columns [c0, c0 + 32 * VEC) of x[o][begin:end)[:];
// thread (lane, g) owns the VEC adjacent columns c0 + lane * VEC + j and rows g, g + 8, ...
// out[(o * splits + split) * inner + c] gets each column's partial.
template <class Tile, int VEC, class In, class Acc, class Out>
__global__ void __launch_bounds__(kReduceThreads, 2)
reduce_cols_kernel(const In* __restrict__ x, Out* __restrict__ out, int64_t outer, int64_t len, int64_t inner,
                   int64_t chunk, int64_t splits) {
  constexpr int U = kReduceColsUnroll, RG = kReduceRowGroups, ROWS = kReduceWarp * VEC;
  __shared__ __align__(16) Acc tile[Tile::kSize];
  const int tid = threadIdx.x, lane = tid % kReduceWarp, g = tid / kReduceWarp;
  const int64_t c0 = int64_t(blockIdx.x) * ROWS;
  const int64_t split = blockIdx.z;
  const int64_t begin = split * chunk;
  const int64_t end = begin + chunk < len ? begin + chunk : len;
  // inner is a multiple of VEC (ops/ picks VEC so), so a vector is all in or all out.
  const bool active = c0 + lane * VEC < inner;

  for (int64_t o = blockIdx.y; o < outer; o += gridDim.y) {
    Acc acc[VEC];
#pragma unroll
    for (int j = 0; j < VEC; ++j) acc[j] = 0;
    if (active) {
      const In* xc = x + o * len * inner + c0 + lane * VEC;
      int64_t r = begin + g;
      for (; r + (U - 1) * RG < end; r += U * RG) {
        Vec<In, VEC> v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = load_vec<In, VEC>(xc + (r + u * RG) * inner);
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
          for (int j = 0; j < VEC; ++j) acc[j] += to_acc<Acc>(v[u].e[j]);
      }
      for (; r < end; r += RG) {
        const Vec<In, VEC> v = load_vec<In, VEC>(xc + r * inner);
#pragma unroll
        for (int j = 0; j < VEC; ++j) acc[j] += to_acc<Acc>(v.e[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < VEC; ++j) {
      const TileCoord st = cols_store(lane, g, j);
      tile[Tile::offset(st.r, st.c)] = acc[j];
    }
    __syncthreads();
    // Each thread sums whole tile rows (one column each), row groups in order.
#pragma unroll
    for (int row = tid; row < ROWS; row += kReduceThreads) {
      Acc sum = 0;
#pragma unroll
      for (int gg = 0; gg < RG; ++gg) {
        const TileCoord ld = cols_load(row, gg);
        sum += tile[Tile::offset(ld.r, ld.c)];
      }
      const int64_t c = c0 + cols_column(row, VEC);
      if (c < inner) out[(o * splits + split) * inner + c] = from_acc<Out>(sum);
    }
    __syncthreads();  // the tile is reused by the next o
  }
}

template <Layout L, class In, class Acc, class Out>
cudaError_t run_pass(const void* x, void* out, const ReducePass& p, bool columns, cudaStream_t stream) {
  const ReduceShape& s = p.shape;
  if (columns) {
    const auto go = [&](auto vec) {
      constexpr int VEC = decltype(vec)::value;
      using Tile = ReduceColsTileOf<L, sizeof(Acc), VEC>;
      const int64_t col_blocks = ceil_div(s.inner, int64_t(kReduceWarp) * VEC);
      const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(s.outer < 65535 ? s.outer : 65535),
                      static_cast<unsigned>(p.splits));
      reduce_cols_kernel<Tile, VEC, In, Acc, Out><<<grid, kReduceThreads, 0, stream>>>(
          static_cast<const In*>(x), static_cast<Out*>(out), s.outer, s.len, s.inner, p.chunk, p.splits);
    };
    if (p.vec == 1) go(std::integral_constant<int, 1>{});
    else go(std::integral_constant<int, kLoadBytes / sizeof(In)>{});
  } else {
    using Tile = ReduceTreeTile<L, sizeof(Acc)>;
    const auto go = [&](auto group) {
      constexpr int G = decltype(group)::value;
      const int64_t row_blocks = ceil_div(s.outer, int64_t(kReduceThreads / G));
      const dim3 grid(static_cast<unsigned>(p.splits), static_cast<unsigned>(row_blocks < 65535 ? row_blocks : 65535));
      reduce_rows_kernel<Tile, G, In, Acc, Out><<<grid, kReduceThreads, 0, stream>>>(
          static_cast<const In*>(x), static_cast<Out*>(out), s.outer, s.len, p.chunk, p.splits);
    };
    if (p.group == kReduceWarp) go(std::integral_constant<int, kReduceWarp>{});
    else go(std::integral_constant<int, kReduceThreads>{});
  }
  return cudaGetLastError();
}

// bool is read as its bytes (0 or 1).
template <class T> struct Stored { using type = T; };
template <> struct Stored<bool> { using type = uint8_t; };

}  // namespace

cudaError_t launch_reduce_sum(Layout layout, DType dtype, const void* x, void* out, void* workspace,
                              ReduceShape shape, const ReducePlan& plan, cudaStream_t stream) {
  if (shape.outer == 0 || shape.inner == 0) return cudaSuccess;
  return with_layout(layout, [&](auto tag) {
    constexpr Layout L = decltype(tag)::value;
    return with_dtype(dtype, [&](auto v) {
      using T = decltype(v);
      using In = typename Stored<T>::type;
      using Acc = acc_t<T>;
      using Out = typename OutOf<T>::type;
      if (plan.passes == 1) return run_pass<L, In, Acc, Out>(x, out, plan.pass[0], plan.columns, stream);
      cudaError_t err = run_pass<L, In, Acc, Acc>(x, workspace, plan.pass[0], plan.columns, stream);
      if (err != cudaSuccess) return err;
      return run_pass<L, Acc, Acc, Out>(workspace, out, plan.pass[1], plan.columns, stream);
    });
  });
}

}  // namespace bankops
