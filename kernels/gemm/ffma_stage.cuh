// The FFMA kernel's staging of operand tiles into shared memory (ffma.cu includes it): 16-byte
// vector loads and stores, cp.async of vectors and of single elements, and Stager, one
// thread's stream of an operand's k tiles.
#pragma once
#include <cuda_runtime.h>

#include <type_traits>

#include "../numeric.cuh"
#include "ffma.h"

namespace bankops {
namespace {  // this header's one includer is ffma.cu

// Native 16-byte vector types, so that vector accesses stay single LDS/STS/LDG/STG.128
// instructions whatever the compiler can prove about the address.
template <class E> struct Vec16Of;
template <> struct Vec16Of<float> { using type = float4; };
template <> struct Vec16Of<double> { using type = double2; };

template <class E>
struct Frag {  // one 16-byte vector of accumulators in registers
  E v[16 / sizeof(E)];
};

__device__ __forceinline__ Frag<float> unpack(const float4 v) { return Frag<float>{{v.x, v.y, v.z, v.w}}; }
__device__ __forceinline__ Frag<double> unpack(const double2 v) { return Frag<double>{{v.x, v.y}}; }
__device__ __forceinline__ float4 pack(const float (&r)[4]) { return make_float4(r[0], r[1], r[2], r[3]); }
__device__ __forceinline__ double2 pack(const double (&r)[2]) { return make_double2(r[0], r[1]); }

template <class E>
__device__ __forceinline__ Frag<E> lds16(const E* p) {
  return unpack(*reinterpret_cast<const typename Vec16Of<E>::type*>(p));
}
template <class E>
__device__ __forceinline__ void st16(E* p, const E (&r)[16 / sizeof(E)]) {
  *reinterpret_cast<typename Vec16Of<E>::type*>(p) = pack(r);
}
// LDG.128 through the read-only path.
template <class E>
__device__ __forceinline__ Frag<E> ldg16(const E* p) {
  return unpack(__ldg(reinterpret_cast<const typename Vec16Of<E>::type*>(p)));
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  // Bytes past src_bytes are zero-filled and not read: tails never read past an operand.
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(src_bytes) : "memory");
}
// The plain form, for whole vectors: the zero-filling one costs twice the shared-memory
// wavefronts (bank_model.h, measured).
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem) : "memory");
}
// One element (4 or 8 bytes; cp.async.cg copies 16 only, so through L1): the copies of one
// vector's elements read one sector, the first from L2, the others from L1. The
// zero-filling form for edge tiles, the plain one for whole tiles.
template <int BYTES>
__device__ __forceinline__ void cp_async_elem(void* smem, const void* gmem, int src_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(gmem), "n"(BYTES), "r"(src_bytes)
               : "memory");
}
template <int BYTES>
__device__ __forceinline__ void cp_async_elem(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(s), "l"(gmem), "n"(BYTES) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// A staging mode fixed at compile time, or kAnyMode: read from the kernel argument. kKUnit /
// kXUnit: KScalar / XScalar with a unit fast stride, copied element by element with cp.async
// (GemmStaging::Async4).
constexpr int kAnyMode = -1, kKUnit = 4, kXUnit = 5;

// Where vector l of every thread lies from the thread's vector 0: the same tile step for all
// threads (gemm_stage_k / gemm_stage_x), so one pointer and one tile position per thread do.
template <class Op>
BANKOPS_HD constexpr TileCoord gemm_stage_step(bool k_major, int l) {
  return k_major ? gemm_stage_k<Op>(0, l) : gemm_stage_x<Op>(0, l);
}
template <class Op>
BANKOPS_HD constexpr bool gemm_stage_uniform() {
  for (int t = 0; t < Op::kThreads; ++t)
    for (int l = 0; l < Op::kLoads; ++l)
      for (int k = 0; k < 2; ++k) {
        const TileCoord a = k ? gemm_stage_k<Op>(t, l) : gemm_stage_x<Op>(t, l);
        const TileCoord b = k ? gemm_stage_k<Op>(t, 0) : gemm_stage_x<Op>(t, 0);
        const TileCoord d = gemm_stage_step<Op>(k, l);
        if (a.r != b.r + d.r || a.c != b.c + d.c) return false;
      }
  return true;
}

// Whether a thread's staged elements (vector l, element e along k for k-major) sit at the
// tile offset of its vector 0 plus a constant, for every thread: then one offset per tile
// serves all of them, the rest are immediates.
template <class Op, class Tile>
BANKOPS_HD constexpr bool gemm_stage_affine(bool k_major) {
  for (int t = 0; t < Op::kThreads; ++t)
    for (int l = 0; l < Op::kLoads; ++l)
      for (int e = 0; e < (k_major ? Op::kVec : 1); ++e) {
        const TileCoord c = k_major ? gemm_stage_k<Op>(t, 0) : gemm_stage_x<Op>(t, 0);
        const TileCoord d = gemm_stage_step<Op>(k_major, l);
        if (Tile::offset(c.r + d.r + e, c.c + d.c) != Tile::offset(c.r, c.c) + Tile::offset(d.r + e, d.c)) return false;
      }
  return true;
}

// One operand tile stream of one thread: its kLoads vectors of the next k tile, the first at
// tile row kr, column xc, starting at p; the others gemm_stage_step further. Element e of a
// vector is e strides further along k (k-major modes) or x. State is kept small: the
// accumulators take most registers.
template <class Op, class Tile, class T, class Acc, int MODE>
struct Stager {
  static constexpr int V = Op::kVec, L = Op::kLoads;
  static constexpr bool kVector = sizeof(T) == sizeof(Acc);  // 16-bit inputs widen in registers
  static_assert(kVector || MODE == kAnyMode || !(MODE == int(GemmStage::KVec) || MODE == int(GemmStage::XAsync)),
                "vector modes need elements that are their own accumulators");
  static constexpr bool kAsyncElems = MODE == kKUnit || MODE == kXUnit;
  static_assert(kVector || !kAsyncElems, "cp.async copies elements that are their own accumulators");

  const T* p;
  int64_t sk, sx;  // k and x strides
  int64_t x_left;  // columns from xc to the operand's end
  int kr, xc;      // tile row and column of the first vector
  GemmStage run_mode;
  Acc r[L][V];

  __device__ __forceinline__ GemmStage mode() const {
    return MODE == kAnyMode ? run_mode
           : MODE == kKUnit ? GemmStage::KScalar
           : MODE == kXUnit ? GemmStage::XScalar
                            : GemmStage(MODE);
  }
  __device__ __forceinline__ bool k_major() const { return gemm_k_major(mode()); }
  // Whether the mode reads 16-byte vectors along x (a tile moved along x must keep them aligned).
  __device__ __forceinline__ static bool x_vectors(GemmStage run) {
    return MODE == kAnyMode ? run == GemmStage::XAsync : MODE == int(GemmStage::XAsync);
  }
  static_assert(gemm_stage_uniform<Op>(), "a thread's vectors sit at the same steps for every thread");
  // Tile row of vector l.
  __device__ __forceinline__ int row(int l) const { return kr + gemm_stage_step<Op>(k_major(), l).r; }
  __device__ __forceinline__ const T* at(int l) const {
    const TileCoord d = gemm_stage_step<Op>(k_major(), l);
    return p + d.r * sk + d.c * sx;
  }
  // Tile offset of element e (along k for k-major, else 0) of vector l.
  __device__ __forceinline__ int at_tile(int l, int e) const {
    const TileCoord d = gemm_stage_step<Op>(k_major(), l);
    const bool affine = k_major() ? gemm_stage_affine<Op, Tile>(true) : gemm_stage_affine<Op, Tile>(false);
    return affine ? Tile::offset(kr, xc) + Tile::offset(d.r + e, d.c) : Tile::offset(kr + d.r + e, xc + d.c);
  }
  // Valid elements of vector l along x (0..V; a k-major vector lies in one column: 0 or V).
  __device__ __forceinline__ int x_rest(int l) const {
    const int64_t xl = x_left - gemm_stage_step<Op>(k_major(), l).c;
    return xl <= 0 ? 0 : k_major() || xl >= V ? V : static_cast<int>(xl);
  }

  // base: the operand at (k 0, x 0) of the block; x_end: its columns from there.
  __device__ __forceinline__ Stager(const T* base, int64_t k_stride, int64_t x_stride, int64_t x_end, GemmStage m)
      : sk(k_stride), sx(x_stride), run_mode(m) {
    const TileCoord c = k_major() ? gemm_stage_k<Op>(threadIdx.x, 0) : gemm_stage_x<Op>(threadIdx.x, 0);
    kr = c.r;
    xc = c.c;
    p = base + kr * k_stride + xc * x_stride;
    x_left = x_end - xc;
  }

  // Issues the global reads of the next k tile, whose first k_rows rows are inside the operand
  // (cp.async goes straight to `dst`; `safe` is an address cp.async may name for no bytes).
  // whole: all BK rows and the block's kCols columns are inside the operand.
  __device__ __forceinline__ void issue(Acc* dst, const void* safe, int k_rows, bool whole) {
    if constexpr (kAsyncElems)
      issue_elems(dst, safe, k_rows, whole);
    else
      issue_vectors(dst, safe, k_rows, whole);
    advance();
  }

  // Async4: one cp.async per element. Element e of a vector is e elements further in global
  // memory (the unit stride) and e tile rows further (k-major) or e columns further inside its
  // 16-byte unit (x-major).
  __device__ __forceinline__ int elem_tile(int l, int e) const { return k_major() ? at_tile(l, e) : at_tile(l, 0) + e; }
  __device__ __forceinline__ void issue_elems(Acc* dst, const void* safe, int k_rows, bool whole) {
    if (whole) {
#pragma unroll
      for (int j = 0; j < kCopies; ++j) copy_whole(dst, j);
      return;
    }
#pragma unroll
    for (int l = 0; l < L; ++l) {
      const int k_rest = k_rows - row(l), xr = x_rest(l);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        const bool in = k_major() ? xr > 0 && e < k_rest : k_rest > 0 && e < xr;
        cp_async_elem<sizeof(T)>(dst + elem_tile(l, e), in ? static_cast<const void*>(at(l) + e) : safe,
                                 in ? static_cast<int>(sizeof(T)) : 0);
      }
    }
  }

  // Copy j of a whole tile's kCopies element copies (Async4 modes): the kernel spreads them
  // between its FMAs when a thread has more than one vector's worth (kSpread), then calls
  // advance() for the tile after.
  static constexpr int kCopies = L * V;
  static constexpr bool kSpread = kAsyncElems && L > 1;
  __device__ __forceinline__ void copy_whole(Acc* dst, int j) const {
    const int l = j / V, e = j % V;
    cp_async_elem<sizeof(T)>(dst + elem_tile(l, e), at(l) + e);
  }
  __device__ __forceinline__ void advance() { p += Op::kBK * sk; }

  // The other modes: 16-byte vectors (cp.async, or loads to registers), or elements to registers.
  __device__ __forceinline__ void issue_vectors(Acc* dst, const void* safe, int k_rows, bool whole) {
    // Kernels that read the mode at run time mostly stage element by element: they skip it.
    if constexpr (kVector && MODE != kAnyMode) {
      if (whole && gemm_vector(mode())) {
#pragma unroll
        for (int l = 0; l < L; ++l) {
          if (mode() == GemmStage::KVec) {
            const Frag<T> v = ldg16(at(l));
#pragma unroll
            for (int e = 0; e < V; ++e) r[l][e] = v.v[e];
          } else {
            cp_async16(dst + at_tile(l, 0), at(l));
          }
        }
        return;
      }
    }
#pragma unroll
    for (int l = 0; l < L; ++l) {
      const int k_rest = k_rows - row(l), xr = x_rest(l);
      const T* q = at(l);
      if constexpr (kVector) {
        if (mode() == GemmStage::KVec) {
          // Partial vectors at the k tail fall back to predicated scalar reads.
          if (xr > 0 && k_rest >= V) {
            const Frag<T> v = ldg16(q);
#pragma unroll
            for (int e = 0; e < V; ++e) r[l][e] = v.v[e];
          } else {
#pragma unroll
            for (int e = 0; e < V; ++e) r[l][e] = xr > 0 && e < k_rest ? q[e] : T(0);
          }
          continue;
        }
        if (mode() == GemmStage::XAsync) {
          const int n = k_rest > 0 ? xr : 0;
          cp_async16(dst + at_tile(l, 0), n > 0 ? static_cast<const void*>(q) : safe,
                     n * static_cast<int>(sizeof(T)));
          continue;
        }
      }
      if (k_major()) {
#pragma unroll
        for (int e = 0; e < V; ++e) r[l][e] = xr > 0 && e < k_rest ? to_acc<Acc>(q[e * sk]) : Acc(0);
      } else {
#pragma unroll
        for (int e = 0; e < V; ++e) r[l][e] = k_rest > 0 && e < xr ? to_acc<Acc>(q[e * sx]) : Acc(0);
      }
    }
  }

  // Stores what issue() loaded into registers (nothing for cp.async).
  __device__ __forceinline__ void store(Acc* dst) const {
    if constexpr (!kAsyncElems) {
      if (kVector && mode() == GemmStage::XAsync) return;
#pragma unroll
      for (int l = 0; l < L; ++l) {
        if (k_major()) {
          // The transposed store: VEC tile rows of one column.
#pragma unroll
          for (int e = 0; e < V; ++e) dst[at_tile(l, e)] = r[l][e];
        } else {
          st16(dst + at_tile(l, 0), r[l]);
        }
      }
    }
  }
};

}  // namespace
}  // namespace bankops
