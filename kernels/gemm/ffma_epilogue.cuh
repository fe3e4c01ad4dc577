// The FFMA kernel's way out of a tile (ffma.cu includes it): stream-K's partial sums through
// the workspace with their flags, C's stores and split-K's partial tile.
#pragma once
#include <cuda_runtime.h>

#include "ffma_stage.cuh"
#include "ffma_work.h"

namespace bankops {
namespace {  // this header's one includer is ffma.cu

// A stream-K block's flag: set (release) once its partial sum is in the workspace, read
// (acquire) by the block that ends the tile. One thread of each block does either; the
// block's barrier orders the other threads' stores before the release and their loads after
// the acquire.
__device__ __forceinline__ void flag_release(int* f) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;\n" ::"l"(f), "r"(1) : "memory");
}
__device__ __forceinline__ int flag_acquire(const int* f) {
  int v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(f) : "memory");
  return v;
}

// Where a thread's accumulators (row i, vector q) lie in a stream-K partial sum, in floats:
// the block's threads interleaved, so that a warp's access is 512 contiguous bytes.
template <class S>
__device__ __forceinline__ int gemm_partial_at(int i, int q, int t) {
  return ((i * S::kQN + q) * S::kThreads + t) * 4;
}

// Adds the partial sums of blocks [c_lo, c_hi) to a thread's accumulators, the latest k tiles
// first (the sum's order is fixed by the shape), each once its block's flag is set.
template <class S>
__device__ __forceinline__ void gemm_add_partials(float (&acc)[S::kTM][S::kTN], const float* partials, const int* flags,
                                                  int c_lo, int c_hi) {
  const int t = threadIdx.x;
  for (int c = c_hi - 1; c >= c_lo; --c) {
    if (t == 0)
      while (flag_acquire(flags + c) == 0) __nanosleep(256);
    __syncthreads();
    const float* const p = partials + int64_t(c) * S::kBM * S::kBN;
#pragma unroll
    for (int i = 0; i < S::kTM; ++i)
#pragma unroll
      for (int q = 0; q < S::kQN; ++q) {
        const float4 v = __ldcg(reinterpret_cast<const float4*>(p + gemm_partial_at<S>(i, q, t)));
        acc[i][q * 4] += v.x;
        acc[i][q * 4 + 1] += v.y;
        acc[i][q * 4 + 2] += v.z;
        acc[i][q * 4 + 3] += v.w;
      }
  }
}
// The same as a call, on a copy of the accumulators. Which of the two a kernel takes is
// measured, not reasoned (bench/design_notes.md): the inlined loads change the main
// loop's registers, for better or worse.
template <class S>
__device__ __noinline__ void gemm_add_partials_apart(float (&acc)[S::kTM][S::kTN], const float* partials,
                                                     const int* flags, int c_lo, int c_hi) {
  gemm_add_partials<S>(acc, partials, flags, c_lo, c_hi);
}

// A stream-K piece's end (pc): a partial sum (slot >= 0) goes to the workspace and its flag is
// set, and the piece is done (true); a piece that ends a shared tile first adds the earlier
// blocks' partial sums (false: C is still to be stored).
template <class S, int MODE_B>
__device__ __forceinline__ bool ffma_share(float (&acc)[S::kTM][S::kTN], const GemmPiece& pc, float* partials,
                                           int* flags) {
  constexpr int V = S::kVec;
  const int t = threadIdx.x;
  if (pc.slot >= 0) {
    float* const p = partials + int64_t(pc.slot) * S::kBM * S::kBN;
#pragma unroll
    for (int i = 0; i < S::kTM; ++i)
#pragma unroll
      for (int q = 0; q < S::kQN; ++q)
        __stcg(reinterpret_cast<float4*>(p + gemm_partial_at<S>(i, q, t)),
               make_float4(acc[i][q * V], acc[i][q * V + 1], acc[i][q * V + 2], acc[i][q * V + 3]));
    __syncthreads();
    if (t == 0) flag_release(flags + pc.slot);
    return true;
  }
  if (pc.c_hi > pc.c_lo) {
    if constexpr (MODE_B == kXUnit) {
      // B copied element by element: the sums are added by a call (gemm_add_partials_apart).
      float sums[S::kTM][S::kTN];
#pragma unroll
      for (int i = 0; i < S::kTM; ++i)
#pragma unroll
        for (int j = 0; j < S::kTN; ++j) sums[i][j] = acc[i][j];
      gemm_add_partials_apart<S>(sums, partials, flags, pc.c_lo, pc.c_hi);
#pragma unroll
      for (int i = 0; i < S::kTM; ++i)
#pragma unroll
        for (int j = 0; j < S::kTN; ++j) acc[i][j] = sums[i][j];
    } else {
      gemm_add_partials<S>(acc, partials, flags, pc.c_lo, pc.c_hi);
    }
  }
  return false;
}

// A thread's micro-tile into C (ldc apart) at the block tile's corner (m0, n0) of batch bz;
// am / bn: the thread's first row and column in the tile. Each row: QN vectors of VEC
// columns, one STG.128 each where aligned; whole: the tile lies inside C.
template <class S, class T, class Acc>
__device__ __forceinline__ void ffma_store_c(const Acc (&acc)[S::kTM][S::kTN], const GemmArgs& g, int64_t ldc,
                                             int64_t bz, int64_t m0, int64_t n0, int am, int bn, bool whole) {
  constexpr int V = S::kVec;
  const bool vec_out = sizeof(T) == sizeof(Acc) && ldc % V == 0 && n0 % V == 0;
  const int64_t n_first = n0 + bn;
  T* row = static_cast<T*>(g.c) + (bz * g.m + m0 + am) * ldc + n_first;
  // Vector q of micro-tile row i.
  const auto out_vec = [&](int i, int q, T* dst) {
    Acc v[V];
#pragma unroll
    for (int e = 0; e < V; ++e) v[e] = acc[i][q * V + e];
    st16(dst, v);
  };
  if constexpr (sizeof(T) == sizeof(Acc)) {
    // A whole block tile: no bounds, and no branches, so every row's address is its own
    // register (stores read theirs late: a reused one waits for the store before).
    if (whole && vec_out) {
#pragma unroll
      for (int i = 0; i < S::kTM; ++i) {
        T* dst = row + gemm_frag_row<S>(i) * ldc;
#pragma unroll
        for (int q = 0; q < S::kQN; ++q) out_vec(i, q, dst + q * S::kQuad);
      }
      return;
    }
  }
#pragma unroll
  for (int i = 0; i < S::kTM; ++i) {
    const int dm = gemm_frag_row<S>(i);
    if (m0 + am + dm < g.m) {
#pragma unroll
      for (int q = 0; q < S::kQN; ++q) {
        T* dst = row + dm * ldc + q * S::kQuad;
        const int64_t left = g.n - n_first - q * S::kQuad;
        if constexpr (sizeof(T) == sizeof(Acc)) {
          if (vec_out && left >= V) {
            out_vec(i, q, dst);
            continue;
          }
        }
#pragma unroll
        for (int e = 0; e < V; ++e)
          if (e < left) dst[e] = from_acc<T>(acc[i][q * V + e]);
      }
    }
  }
}

// Adds the bias (if any) of each of a thread's columns to its accumulators: n_first, its first
// column in C. Only the piece that stores C adds it (stream-K's partial sums go without).
template <class S, class T, class Acc>
__device__ __forceinline__ void ffma_add_bias(Acc (&acc)[S::kTM][S::kTN], const GemmArgs& g, int64_t n_first) {
  if (g.bias == nullptr) return;
  constexpr int V = S::kVec;
#pragma unroll
  for (int q = 0; q < S::kQN; ++q)
#pragma unroll
    for (int e = 0; e < V; ++e) {
      const int64_t n = n_first + q * S::kQuad + e;
      const Acc b = n < g.n ? to_acc<Acc>(static_cast<const T*>(g.bias)[n]) : Acc(0);
#pragma unroll
      for (int i = 0; i < S::kTM; ++i) acc[i][q * V + e] += b;
    }
}

// A thread's accumulators into its configuration's split-K partial tile (PTile: BM x BN floats at
// `part`): row i of the micro-tile, QN 16-byte vectors, where ffma_store_c puts them in C.
template <class S, class PTile>
__device__ __forceinline__ void ffma_store_partial(const float (&acc)[S::kTM][S::kTN], float* part, int am, int bn) {
  constexpr int V = S::kVec;
  static_assert(V == 4, "float32 accumulators");
#pragma unroll
  for (int i = 0; i < S::kTM; ++i)
#pragma unroll
    for (int q = 0; q < S::kQN; ++q) {
      const float v[V] = {acc[i][q * V], acc[i][q * V + 1], acc[i][q * V + 2], acc[i][q * V + 3]};
      st16(part + PTile::offset(am + gemm_frag_row<S>(i), bn + q * S::kQuad), v);
    }
}

}  // namespace
}  // namespace bankops
