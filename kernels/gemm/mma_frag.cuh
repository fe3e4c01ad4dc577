// The mma.sync kernel's fragments (mma.cu includes it): ldmatrix into registers, m16n8k16
// products, and each thread's ldmatrix offsets computed once per kernel.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "mma.h"

namespace bankops {
namespace {  // its includers: mma.cu, and rows.cu for Mma

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

template <class T>
struct Mma;
template <>
struct Mma<__half> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <>
struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// A thread's ldmatrix byte offsets inside one stage, computed once per kernel: the swizzle
// of a step that the thread's own coordinates leave clear is one XOR (layout.cuh, join), so
// the k loop only adds the stage base and compile-time row offsets. Along a tile's rows the
// steps join, down them they add: A joins its k16 steps s (As[BM][BK], i adds rows) or its
// m16 tiles i (As[BK][BM], s adds rows); B joins its n16 pairs j (Bs[BK][BN], s adds rows)
// or its k16 steps s (Bs[BN][BK], j adds rows).
template <Layout L, class C, bool KM, bool KN>
struct LdsmOffsets {
  using ATile = MmaATile<L, C, KM>;
  using BTile = MmaBTile<L, C, KN>;
  static constexpr int kA = KM ? C::kFragM : C::kSteps, kB = KN ? C::kFragN / 2 : C::kSteps;
  static_assert(16 % ATile::kRowPeriod == 0 && 16 % BTile::kRowPeriod == 0, "16-row steps are adds");
  uint32_t a[kA], b[kB];
  __device__ __forceinline__ LdsmOffsets() {
    const TileCoord ca = mma_ldsm_a<C>(threadIdx.x, 0, 0, KM), cb = mma_ldsm_b<C>(threadIdx.x, 0, 0, KN);
    const int oa = ATile::offset(ca.r, ca.c), ob = BTile::offset(cb.r, cb.c);
#pragma unroll
    for (int x = 0; x < kA; ++x) a[x] = ATile::join(oa, ATile::offset(0, 16 * x)) * 2;
#pragma unroll
    for (int x = 0; x < kB; ++x) b[x] = BTile::join(ob, BTile::offset(0, 16 * x)) * 2;
  }
  // ldmatrix addresses: A (m16 tile i, k16 step s), B (n8 pair j, k16 step s).
  __device__ __forceinline__ uint32_t a_addr(uint32_t base, int i, int s) const {
    return KM ? base + a[i] + ATile::offset(16 * s, 0) * 2 : base + a[s] + ATile::offset(16 * i, 0) * 2;
  }
  __device__ __forceinline__ uint32_t b_addr(uint32_t base, int j, int s) const {
    return KN ? base + b[j] + BTile::offset(16 * s, 0) * 2 : base + b[s] + BTile::offset(16 * j, 0) * 2;
  }
};

// The B fragments of k16 step s: n8 tiles 2j, 2j+1 from ldmatrix.x4 j.
template <Layout L, class C, bool KM, bool KN>
__device__ __forceinline__ void load_b_frags(uint32_t (&bf)[C::kFragN / 2][4], const LdsmOffsets<L, C, KM, KN>& lo,
                                             uint32_t b_base, int s) {
#pragma unroll
  for (int j = 0; j < C::kFragN / 2; ++j) {
    if (KN) ldsm_x4_trans(bf[j], lo.b_addr(b_base, j, s));
    else ldsm_x4(bf[j], lo.b_addr(b_base, j, s));
  }
}
// The A fragment of m16 tile i, k16 step s.
template <Layout L, class C, bool KM, bool KN>
__device__ __forceinline__ void load_a_frag(uint32_t (&af)[4], const LdsmOffsets<L, C, KM, KN>& lo, uint32_t a_base,
                                            int i, int s) {
  if (KM) ldsm_x4_trans(af, lo.a_addr(a_base, i, s));
  else ldsm_x4(af, lo.a_addr(a_base, i, s));
}
// Half H of a k16 step: m16 tiles 2H and 2H+1 against every n8 tile of the warp.
template <class T, Layout L, class C, bool KM, bool KN, int H>
__device__ __forceinline__ void mma_half(float (&acc)[C::kFragM][C::kFragN][4], const uint32_t (&bf)[C::kFragN / 2][4],
                                         const LdsmOffsets<L, C, KM, KN>& lo, uint32_t a_base, int s) {
  constexpr int kI = C::kFragM / 2;
  uint32_t af[kI][4];
#pragma unroll
  for (int i = 0; i < kI; ++i) load_a_frag<L, C, KM, KN>(af[i], lo, a_base, H * kI + i, s);
#pragma unroll
  for (int i = 0; i < kI; ++i)
#pragma unroll
    for (int j = 0; j < C::kFragN; ++j)
      Mma<T>::run(acc[H * kI + i][j], af[i], bf[j / 2][j % 2 * 2], bf[j / 2][j % 2 * 2 + 1]);
}

// Every fragment of one k16 step (A: all m16 tiles, B: all n8 pairs), for the cp.async
// path's double buffer: the next step's ldmatrix latency hides behind this step's mma.
template <class C>
struct MmaFrags {
  uint32_t a[C::kFragM][4], b[C::kFragN / 2][4];
};
template <Layout L, class C, bool KM, bool KN>
__device__ __forceinline__ void load_frags(MmaFrags<C>& fr, const LdsmOffsets<L, C, KM, KN>& lo, uint32_t a_base,
                                           uint32_t b_base, int s) {
  load_b_frags<L, C, KM, KN>(fr.b, lo, b_base, s);
#pragma unroll
  for (int i = 0; i < C::kFragM; ++i) load_a_frag<L, C, KM, KN>(fr.a[i], lo, a_base, i, s);
}
template <class T, class C>
__device__ __forceinline__ void mma_step(float (&acc)[C::kFragM][C::kFragN][4], const MmaFrags<C>& fr) {
#pragma unroll
  for (int i = 0; i < C::kFragM; ++i)
#pragma unroll
    for (int j = 0; j < C::kFragN; ++j)
      Mma<T>::run(acc[i][j], fr.a[i], fr.b[j / 2][j % 2 * 2], fr.b[j / 2][j % 2 * 2 + 1]);
}

}  // namespace
}  // namespace bankops
