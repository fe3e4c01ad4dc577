// The gemm kernel (tiling in gemm.h; gemm_trace.h replays its shared-memory accesses).
//
// Per k tile of BK: every thread stages kLoads 16-byte vectors of each operand (register
// modes load it while earlier tiles are computed and store it after; cp.async writes
// straight to shared memory, kStages - 1 tiles ahead, a vector at a time or, for misaligned
// rows, an element at a time), then reads BK rows of its A and B
// fragments as LDS.128 (one row ahead of the FMAs) and does QM*QN*VEC*VEC FMAs per row.
// The kernel is issue-bound: every instruction that is not an FMA costs time, so whole tiles
// (all but the edges of the matrices) take a staging path without bounds or zero-fill, and
// the inner loop's shared addresses are a register plus immediates in every layout.
#include <cuda_runtime.h>

#include <climits>
#include <type_traits>

#include "gemm_strip.cuh"
#include "gemm_work.h"
#include "launch.h"
#include "numeric.cuh"

namespace bankops {
namespace {

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

// The stage ring, sized per configuration at launch.
extern __shared__ float4 gemm_smem[];

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
// measured, not reasoned: the kernels that copy B element by element (misaligned rows) ran
// 3% faster with the call (4095x4097x4093, 8191x8193x8189), the others 3% slower (4096^3,
// 4095x4096x4093; H100, 2026-11-26): the inlined loads change the main loop's registers.
template <class S>
__device__ __noinline__ void gemm_add_partials_apart(float (&acc)[S::kTM][S::kTN], const float* partials,
                                                     const int* flags, int c_lo, int c_hi) {
  gemm_add_partials<S>(acc, partials, flags, c_lo, c_hi);
}

// ldc: C's row stride. Wide kernels run a one-dimensional grid that w maps to work
// (gemm_work.h): strip blocks for C's `strip` columns past g.n (gemm_strip_rows, in shared
// memory laid out as TileS), stream-K blocks (partial sums in `partials`, one tile of
// accumulators and one of `flags` per block) and a block per tile. The other configurations
// take a block per tile of a (n, m, batch) grid.
template <class S, class TileA, class TileB, class TileS, class T, class Acc, int MODE_A, int MODE_B>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks)
    gemm_kernel(const GemmArgs g, const GemmStage mode_a, const GemmStage mode_b, const int64_t ldc, const int strip,
                const GemmWork w, Acc* const partials, int* const flags) {
  constexpr int V = S::kVec, kStages = S::kStages, kStageA = TileA::kSize, kStageB = TileB::kSize;
  static_assert(kStageA % V == 0 && kStageB % V == 0, "stages start on 16-byte boundaries");
  constexpr bool kWide = std::is_same<S, GemmWide>::value && std::is_same<T, float>::value;
  Acc* const sa0 = reinterpret_cast<Acc*>(gemm_smem);
  Acc* const sb0 = sa0 + kStages * kStageA;
  using StA = Stager<typename S::OpA, TileA, T, Acc, MODE_A>;
  using StB = Stager<typename S::OpB, TileB, T, Acc, MODE_B>;
  const int t = threadIdx.x;
  // A partial last tile moves back to end on the matrix's edge, where the matrix has a whole
  // tile and the move keeps the tile's 16-byte vectors aligned: it recomputes some rows or
  // columns of the tile before it (to the same values, stored again) and needs no bounds.
  const auto edge = [](int64_t origin, int64_t extent, int tile, bool x_vectors) {
    const bool move = origin + tile > extent && extent >= tile && (!x_vectors || extent % V == 0);
    return move ? extent - tile : origin;
  };
  const int tiles_k = static_cast<int>(ceil_div(g.k, S::kBK));  // launch_gemm keeps it below 2^31
  const int full_k = static_cast<int>(g.k / S::kBK);             // k tiles of BK rows
  // Rows of k tile kt inside the operands.
  const auto k_rows = [&](int kt) {
    const int64_t left = g.k - int64_t(kt) * S::kBK;
    return static_cast<int>(left < S::kBK ? left : S::kBK);
  };
  // The fragments' tile origins; row kk of quadrant q is a constant step from them
  // (gemm_frags_affine), or else the whole offset is computed per read.
  constexpr bool kAffine = gemm_frags_affine<S, TileA, TileB>();
  const int am = gemm_frag_m<S>(t, 0), bn = gemm_frag_n<S>(t, 0);
  const int a0 = TileA::offset(0, am), b0 = TileB::offset(0, bn);
  const auto frag_at = [&](auto tile, int origin, int x, int kk, int q) {
    using Tile = decltype(tile);
    return kAffine ? origin + Tile::offset(kk, q * S::kQuad) : Tile::offset(kk, x + q * S::kQuad);
  };

  // One piece of work (GemmPiece).
  const auto tile = [&](const GemmPiece& pc) {
    const int64_t bz = pc.bz, tm = pc.tm, tn = pc.tn;
    const bool fixed = pc.fixed;
    const int kb = pc.kb, ke = pc.ke;
    const int64_t m0 = fixed ? tm * S::kBM : edge(tm * S::kBM, g.m, S::kBM, StA::x_vectors(mode_a));
    const int64_t n0 = fixed ? tn * S::kBN : edge(tn * S::kBN, g.n, S::kBN, StB::x_vectors(mode_b));
    const bool whole_a = g.m - m0 >= S::kBM, whole_b = g.n - n0 >= S::kBN;
    const int64_t k0 = int64_t(kb) * S::kBK;
    StA sa(static_cast<const T*>(g.a) + bz * g.a_sb + m0 * g.a_sm + k0 * g.a_sk, g.a_sk, g.a_sm, g.m - m0, mode_a);
    StB sb(static_cast<const T*>(g.b) + bz * g.b_sb + n0 * g.b_sn + k0 * g.b_sk, g.b_sk, g.b_sn, g.n - n0, mode_b);
    Acc acc[S::kTM][S::kTN];
#pragma unroll
    for (int i = 0; i < S::kTM; ++i)
#pragma unroll
      for (int j = 0; j < S::kTN; ++j) acc[i][j] = Acc(0);

    // Prologue: tiles kb .. kb+kStages-2 in flight, one cp.async group each. Register-staged
    // tiles are stored one tile after their loads (see k_tile), so the last one stays in
    // registers.
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s > 0 && kb + s - 1 < ke) {
        sa.store(sa0 + (s - 1) * kStageA);
        sb.store(sb0 + (s - 1) * kStageB);
      }
      if (kb + s < ke) {
        sa.issue(sa0 + s * kStageA, g.a, k_rows(kb + s), whole_a && kb + s < full_k);
        sb.issue(sb0 + s * kStageB, g.b, k_rows(kb + s), whole_b && kb + s < full_k);
      }
      cp_async_commit();
    }

    // Fragments of row kk of the current tile, double-buffered: row kk + 1 is read while
    // row kk's FMAs run.
    Frag<Acc> fa[2][S::kQM], fb[2][S::kQN];
    constexpr int kFrags = S::kQM + S::kQN;
    // Fragment f (A's quadrants, then B's) of row kk into buffer buf.
    const auto load_frag = [&](int f, int buf, const Acc* as, const Acc* bs, int kk) {
      if (f < S::kQM)
        fa[buf][f] = lds16(as + frag_at(TileA{}, a0, am, kk, f));
      else
        fb[buf][f - S::kQM] = lds16(bs + frag_at(TileB{}, b0, bn, kk, f - S::kQM));
    };
    // FMAs of micro-tile rows [i0, i1) from buffer buf. Row kk+1's fragment reads go between
    // them (spread over the first two thirds of the rows), not in one burst: back-to-back
    // LDS.128s wait on one another, FMAs between them keep the scheduler issuing.
    // load(f): read fragment f (a no-op when there is nothing to read).
    const auto fma_rows = [&](int buf, int i0, int i1, auto&& load) {
#pragma unroll
      for (int i = i0; i < i1; ++i) {
#pragma unroll
        for (int j = 0; j < S::kTN; ++j)
          acc[i][j] = fma(fa[buf][i / V].v[i % V], fb[buf][j / V].v[j % V], acc[i][j]);
#pragma unroll
        for (int f = 0; f < kFrags; ++f)
          if (f * 2 * (i1 - i0) / (3 * kFrags) == i - i0) load(f);
      }
    };

    int read = 0;  // the stage of tile kt; tile kt + kStages - 1 goes to the one before it
    cp_async_wait<kStages - 2>();
    __syncthreads();
    if (kb < ke) {
#pragma unroll
      for (int f = 0; f < kFrags; ++f) load_frag(f, 0, sa0, sb0, 0);
    }
    // One k tile. STEADY: tile kt + kStages - 1 exists and both operands' tiles are whole
    // (no bounds to check), so has tile kt + 1.
    const auto k_tile = [&](int kt, auto steady) {
      constexpr bool kSteady = decltype(steady)::value;
      // Tile kt + kStages - 1 goes to the stage before `read`; tile kt + kStages - 2, loaded
      // into registers one tile ago (a whole tile of FMAs to hide the global latency), to
      // the stage before that, which tile kt - 2 used: every warp has left it.
      const int write = read == 0 ? kStages - 1 : read - 1;
      const int prev = write == 0 ? kStages - 1 : write - 1;
      const int next = kt + kStages - 1;
      if (kSteady || next - 1 < ke) {
        sa.store(sa0 + prev * kStageA);
        sb.store(sb0 + prev * kStageB);
      }
      // Element copies of more than one vector a thread go between the first BK - 1 rows'
      // FMAs (Stager::kSpread): issued in one burst they fill the MIO queue, and the
      // fragment reads wait behind them (ncu, 4095x4097x4093).
      constexpr bool kSpreadA = kSteady && StA::kSpread, kSpreadB = kSteady && StB::kSpread;
      if (kSteady || next < ke) {
        const int rows = kSteady ? S::kBK : k_rows(next);
        if constexpr (!kSpreadA) sa.issue(sa0 + write * kStageA, g.a, rows, kSteady || (whole_a && next < full_k));
        if constexpr (!kSpreadB) sb.issue(sb0 + write * kStageB, g.b, rows, kSteady || (whole_b && next < full_k));
      }
      if constexpr (!kSpreadA && !kSpreadB) cp_async_commit();
      // Copies [kk * n / (BK - 1), (kk + 1) * n / (BK - 1)) of n during row kk.
      const auto spread = [&](auto& st, Acc* dst, int kk) {
        constexpr int n = std::remove_reference_t<decltype(st)>::kCopies;
#pragma unroll
        for (int j = kk * n / (S::kBK - 1); j < (kk + 1) * n / (S::kBK - 1); ++j) st.copy_whole(dst, j);
      };

      const Acc* as = sa0 + read * kStageA;
      const Acc* bs = sb0 + read * kStageB;
#pragma unroll
      for (int kk = 0; kk < S::kBK - 1; ++kk) {
        if constexpr (kSpreadA) spread(sa, sa0 + write * kStageA, kk);
        if constexpr (kSpreadB) spread(sb, sb0 + write * kStageB, kk);
        fma_rows(kk % 2, 0, S::kTM, [&](int f) { load_frag(f, (kk + 1) % 2, as, bs, kk + 1); });
      }
      if constexpr (kSpreadA) sa.advance();
      if constexpr (kSpreadB) sb.advance();
      if constexpr (kSpreadA || kSpreadB) cp_async_commit();
      // The last row: a quarter of its FMAs, then the tile is read out: wait for tile
      // kt + 1 and read its first row between the rest.
      constexpr int kLast = (S::kBK - 1) % 2, kSplit = S::kTM / 4;
      fma_rows(kLast, 0, kSplit, [](int) {});
      cp_async_wait<kStages - 2>();
      __syncthreads();
      read = read == kStages - 1 ? 0 : read + 1;
      const bool again = kSteady || kt + 1 < ke;
      fma_rows(kLast, kSplit, S::kTM, [&](int f) {
        if (again) load_frag(f, kLast ^ 1, sa0 + read * kStageA, sb0 + read * kStageB, 0);
      });
    };
    const int steady = whole_a && whole_b ? (ke < full_k ? ke : full_k) - (kStages - 1) : kb;
    int kt = kb;
    for (; kt < steady; ++kt) k_tile(kt, std::true_type{});
    for (; kt < ke; ++kt) k_tile(kt, std::false_type{});
    cp_async_wait<0>();
    __syncthreads();  // the next tile's prologue overwrites the stages

    if constexpr (kWide) {
      const int slot = pc.slot;
      if (slot >= 0) {
        Acc* const p = partials + int64_t(slot) * S::kBM * S::kBN;
#pragma unroll
        for (int i = 0; i < S::kTM; ++i)
#pragma unroll
          for (int q = 0; q < S::kQN; ++q)
            __stcg(reinterpret_cast<float4*>(p + gemm_partial_at<S>(i, q, t)),
                   make_float4(acc[i][q * V], acc[i][q * V + 1], acc[i][q * V + 2], acc[i][q * V + 3]));
        __syncthreads();
        if (t == 0) flag_release(flags + slot);
        return;
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
    }

    // Each row of the micro-tile: QN vectors of VEC columns (one STG.128 each when aligned).
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
      if (whole_a && whole_b && vec_out) {
#pragma unroll
        for (int i = 0; i < S::kTM; ++i) {
          T* dst = row + ((i / V) * S::kQuad + i % V) * ldc;
#pragma unroll
          for (int q = 0; q < S::kQN; ++q) out_vec(i, q, dst + q * S::kQuad);
        }
        return;
      }
    }
#pragma unroll
    for (int i = 0; i < S::kTM; ++i) {
      const int dm = (i / V) * S::kQuad + i % V;
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
  };

  if constexpr (!kWide) {
    const int64_t tiles_m = ceil_div(g.m, S::kBM);
    for (int64_t bz = blockIdx.z; bz < g.batch; bz += gridDim.z)
      for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y)
        tile(GemmPiece{bz, tm, blockIdx.x, 0, tiles_k, false, -1, 0, 0});
  } else {
    const int64_t u = blockIdx.x;
    if (u < w.strip_blocks) {
      static_assert(TileS::kSize <= S::kStages * (kStageA + kStageB), "the strip's tile fits the stages");
      const int64_t rows = u / kStripBlocks, bz = rows / w.tiles_m;
      const int64_t m0 = rows % w.tiles_m * S::kBM + u % kStripBlocks * kStripRows, n1 = g.n;
      if (m0 < g.m)
        gemm_strip_rows<TileS>(static_cast<const float*>(g.a) + bz * g.a_sb + m0 * g.a_sm, g.a_sm, g.a_sk,
                               static_cast<const float*>(g.b) + bz * g.b_sb + n1 * g.b_sn, g.b_sk, g.b_sn,
                               static_cast<float*>(g.c) + (bz * g.m + m0) * ldc + n1, ldc,
                               g.m - m0 < kStripRows ? g.m - m0 : kStripRows, g.k, strip, sa0);
      return;
    }
#pragma unroll 1
    for (int p = 0; p < 2; ++p) {
      const GemmPiece pc = gemm_piece(w, u, p);
      if (pc.kb < pc.ke) tile(pc);
    }
  }
}

constexpr int kKVec = int(GemmStage::KVec), kXAsync = int(GemmStage::XAsync);

// SPECIALIZE: also build kernels with the aligned row-major / transposed operands' staging
// fixed at compile time (fewer registers and branches); other layouts read it at run time.
// ASYNC4: and the GemmStaging::Async4 pairs (unit_a / unit_b: gemm_unit_scalar).
// Configurations that copy k-major operands (gemm_copies_k) specialize aligned ones to kKUnit,
// as Async4 does misaligned ones, instead of loading 16-byte vectors into registers.
// ldc: C's row stride (g.n, or more with a strip). Wide only: strip, C's columns past g.n;
// w, its blocks' work (gemm_work.h), with gemm_work_bytes(w) of workspace.
template <class S, Layout L, class T, class Acc, bool SPECIALIZE, bool ASYNC4 = false>
cudaError_t run(const GemmArgs& g, int64_t ldc, GemmStage ma, GemmStage mb, cudaStream_t stream, bool unit_a = false,
                bool unit_b = false, int strip = 0, const GemmWork& w = {}, void* workspace = nullptr) {
  const auto clamp = [](int64_t v) { return static_cast<unsigned>(v < 65535 ? v : 65535); };
  constexpr bool kWide = std::is_same<S, GemmWide>::value;
  if (kWide && w.blocks() > INT_MAX) return cudaErrorInvalidValue;  // C would hold 2^31 tiles: not in memory
  const dim3 grid = kWide ? dim3(static_cast<unsigned>(w.blocks()))
                          : dim3(static_cast<unsigned>(ceil_div(g.n, S::kBN)), clamp(ceil_div(g.m, S::kBM)), clamp(g.batch));
  using TA = GemmTileOf<L, typename S::OpA>;
  using TB = GemmTileOf<L, typename S::OpB>;
  using TS = StripTile<L>;
  auto* kernel = gemm_kernel<S, TA, TB, TS, T, Acc, kAnyMode, kAnyMode>;
  if constexpr (SPECIALIZE && sizeof(T) == sizeof(Acc)) {
    constexpr int kK = gemm_copies_k<S>() ? kKUnit : kKVec;
    if (ma == GemmStage::KVec && mb == GemmStage::XAsync) kernel = gemm_kernel<S, TA, TB, TS, T, Acc, kK, kXAsync>;
    if (ma == GemmStage::XAsync && mb == GemmStage::XAsync) kernel = gemm_kernel<S, TA, TB, TS, T, Acc, kXAsync, kXAsync>;
    if (ma == GemmStage::KVec && mb == GemmStage::KVec) kernel = gemm_kernel<S, TA, TB, TS, T, Acc, kK, kK>;
    if (ma == GemmStage::XAsync && mb == GemmStage::KVec) kernel = gemm_kernel<S, TA, TB, TS, T, Acc, kXAsync, kK>;
    if constexpr (ASYNC4) {
      if (gemm_staging(ma, unit_a, mb, unit_b) == GemmStaging::Async4) {
        const bool ka = ma == GemmStage::KScalar, xb = mb == GemmStage::XScalar;  // the unit-scalar ones
        if (ka && xb) kernel = gemm_kernel<S, TA, TB, TS, T, Acc, kKUnit, kXUnit>;
        if (ka && !xb) kernel = gemm_kernel<S, TA, TB, TS, T, Acc, kKUnit, kXAsync>;
        if (!ka && xb) kernel = gemm_kernel<S, TA, TB, TS, T, Acc, kK, kXUnit>;
      }
    }
  }
  constexpr int kSmem = S::kStages * (TA::kSize + TB::kSize) * int(sizeof(Acc));
  // Past 48 KB the launch would need cudaFuncSetAttribute first (once per device, as
  // gemm_mma.cu does it); no configuration comes near.
  static_assert(kSmem <= 48 * 1024, "a configuration's stages exceed the default dynamic shared memory");
  // The workspace: the stream-K blocks' partial sums, then their flags, which start clear.
  Acc* const partials = static_cast<Acc*>(workspace);
  int* const flags = reinterpret_cast<int*>(partials + int64_t(w.sk_blocks) * S::kBM * S::kBN);
  if (w.sk_blocks > 0) {
    const cudaError_t err = cudaMemsetAsync(flags, 0, sizeof(int) * w.sk_blocks, stream);
    if (err != cudaSuccess) return err;
  }
  kernel<<<grid, S::kThreads, kSmem, stream>>>(g, ma, mb, ldc, strip, w, partials, flags);
  return cudaGetLastError();
}

int num_sms() {
  static const int n = [] {
    int dev = 0, v = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      return 132;
    return v;
  }();
  return n;
}

// A float32 or float64 call's kernel and how it runs (the same answer for launch_gemm and
// gemm_workspace_bytes). stream_k: Wide may share k tiles (gemm_work.h).
struct Plan {
  GemmStage ma, mb;
  bool ua, ub;
  GemmStaging staging;
  GemmConfig config;
  int strip;      // Wide: C's columns past the tiles, for the strip blocks
  GemmWork work;  // Wide: its blocks' work
};
Plan plan(const GemmArgs& g, int eb, int ab, bool stream_k) {
  Plan p{};
  p.ma = gemm_stage_mode(g.a, eb, ab, g.batch, g.a_sb, g.k, g.a_sk, g.m, g.a_sm);
  p.mb = gemm_stage_mode(g.b, eb, ab, g.batch, g.b_sb, g.k, g.b_sk, g.n, g.b_sn);
  p.ua = eb == ab && gemm_unit_scalar(p.ma, g.a, eb, g.a_sk, g.a_sm);
  p.ub = eb == ab && gemm_unit_scalar(p.mb, g.b, eb, g.b_sk, g.b_sn);
  p.staging = gemm_staging(p.ma, p.ua, p.mb, p.ub);
  p.config = gemm_config(ab, g.batch, g.m, g.n, g.k, num_sms(), p.staging, stream_k);
  if (p.config == GemmConfig::Wide) {
    p.strip = gemm_strip_cols(ab, g.batch, g.m, g.n, num_sms(), p.staging);
    p.work = gemm_work(g.batch, g.m, g.n - p.strip, g.k, p.strip, num_sms(), stream_k);
  }
  return p;
}

template <Layout L, class T, class Acc>
cudaError_t dispatch(const GemmArgs& g, void* workspace, cudaStream_t stream) {
  const Plan p = plan(g, sizeof(T), sizeof(Acc), workspace != nullptr);
  if constexpr (sizeof(Acc) == 8) {
    return run<GemmBig<8>, L, T, Acc, true>(g, g.n, p.ma, p.mb, stream);
  } else {
    switch (p.config) {
      case GemmConfig::Wide: {
        GemmArgs main = g;
        main.n -= p.strip;
        return run<GemmWide, L, T, Acc, true, true>(main, g.n, p.ma, p.mb, stream, p.ua, p.ub, p.strip, p.work,
                                                    workspace);
      }
      case GemmConfig::Big: return run<GemmBig<4>, L, T, Acc, true, true>(g, g.n, p.ma, p.mb, stream, p.ua, p.ub);
      case GemmConfig::BigScalar: return run<GemmBigScalar, L, T, Acc, false>(g, g.n, p.ma, p.mb, stream);
      case GemmConfig::Small:
      default: return run<GemmSmall, L, T, Acc, true>(g, g.n, p.ma, p.mb, stream);
    }
  }
}

}  // namespace

int64_t gemm_workspace_bytes(DType dtype, const GemmArgs& g) {
  if (dtype != DType::F32 || g.batch == 0 || g.m == 0 || g.n == 0 || ceil_div(g.k, kGemmBK) > INT_MAX) return 0;
  const Plan p = plan(g, 4, 4, true);
  return p.config == GemmConfig::Wide ? gemm_work_bytes(p.work) : 0;
}

cudaError_t launch_gemm(Layout layout, DType dtype, const GemmArgs& g, void* workspace, cudaStream_t stream) {
  if (g.batch == 0 || g.m == 0 || g.n == 0) return cudaSuccess;
  // k tiles are counted in int: K up to 2^34 (no tensor that fits a GPU comes near it).
  if (ceil_div(g.k, kGemmBK) > INT_MAX) return cudaErrorInvalidValue;
  return with_layout(layout, [&](auto tag) {
    constexpr Layout L = decltype(tag)::value;
    switch (dtype) {
      case DType::F64: return dispatch<L, double, double>(g, nullptr, stream);
      case DType::F32: return dispatch<L, float, float>(g, workspace, stream);
      default: return cudaErrorNotSupported;  // float16/bfloat16 run on the tensor cores (launch_gemm_mma)
    }
  });
}

}  // namespace bankops
