// The vector transpose's register-level pieces (transpose.cu includes it): 16-byte vectors as
// words, partial loads and stores at row ends, and the V x V micro-tile transposed in
// registers.
#pragma once
#include <cstdint>

#include "bytes.cuh"
#include "shift.cuh"

namespace bankops {
namespace {  // this header's one includer is transpose.cu

// A 16-byte vector as four 32-bit words (the register transposes work on words).
union Vec16 {
  uint4 v;
  uint32_t w[4];
};

// Element type of E bytes, for the element-wise edges of the vector kernel.
template <int E> struct ElemOf;
template <> struct ElemOf<1> { using type = uint8_t; };
template <> struct ElemOf<2> { using type = uint16_t; };
template <> struct ElemOf<4> { using type = uint32_t; };
template <> struct ElemOf<8> { using type = uint64_t; };
template <> struct ElemOf<16> { using type = uint4; };

// The first n (< V) elements at p (E-aligned), the rest of the vector zero: a row's partial
// last vector. The caller never writes the zeros out; only valid elements are read.
template <int E>
__device__ __forceinline__ Vec16 load_partial(const char* p, int64_t n) {
  using T = typename ElemOf<E>::type;
  union {
    Vec16 vec;
    T e[16 / E];
  } u;
  u.vec.v = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int c = 0; c < 16 / E; ++c)
    if (c < n) u.e[c] = reinterpret_cast<const T*>(p)[c];
  return u.vec;
}

// Writes elements [first, last) of vec to p: a chunk that holds both ends of a short output
// row (its other bytes belong to the neighbouring rows).
template <int E>
__device__ __forceinline__ void store_elems(char* p, const Vec16& vec, int first, int last) {
  using T = typename ElemOf<E>::type;
  union {
    Vec16 vec;
    T e[16 / E];
  } u;
  u.vec = vec;
#pragma unroll
  for (int c = 0; c < 16 / E; ++c)
    if (c >= first && c < last) reinterpret_cast<T*>(p)[c] = u.e[c];
}

// Vector of the lane `delta` lanes below, within groups of `width` lanes (all lanes must call
// it; delta may differ between lanes, 0 gives a lane its own).
__device__ __forceinline__ Vec16 shfl_up(const Vec16& v, unsigned delta, int width) {
  Vec16 r;
#pragma unroll
  for (int w = 0; w < 4; ++w) r.w[w] = __shfl_up_sync(0xffffffffu, v.w[w], delta, width);
  return r;
}

// The partial chunks at an output row's ends (their other bytes are the neighbouring row's,
// written by another block) go out in at most one aligned piece of each size (8/4/2/1
// bytes), each taken from fixed words of the vector with a select or a funnel shift; a
// general byte shift per piece would cost as much as the realignment itself.
template <int E, int SIZE>
__device__ __forceinline__ void store_piece(char* p, uint32_t lo, uint32_t hi) {
  if constexpr (SIZE == 8) *reinterpret_cast<uint2*>(p) = make_uint2(lo, hi);
  if constexpr (SIZE == 4) *reinterpret_cast<uint32_t*>(p) = lo;
  if constexpr (SIZE == 2) *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(lo);
  if constexpr (SIZE == 1) *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(lo);
}

// Bytes [0, n) of chunk (0 < n < 16, a multiple of E) to p, 16-byte aligned: the tail of an
// output row. Piece sizes descend, so piece SIZE starts at n & (16 - 2 SIZE) (the bits of n
// above it): 8 bytes at 0, 4 at 0 or 8, 2 and 1 in word (n >> 2) & 3.
template <int E>
__device__ __forceinline__ void store_prefix(char* p, const Vec16& chunk, int n) {
  n &= 16 - E;
  if (n & 8) store_piece<E, 8>(p, chunk.w[0], chunk.w[1]);
  if constexpr (E <= 4)
    if (n & 4) store_piece<E, 4>(p + (n & 8), (n & 8) ? chunk.w[2] : chunk.w[0], 0);
  if constexpr (E <= 2) {
    const uint32_t w01 = (n & 4) ? chunk.w[1] : chunk.w[0], w23 = (n & 4) ? chunk.w[3] : chunk.w[2];
    const uint32_t w = (n & 8) ? w23 : w01;
    if (n & 2) store_piece<E, 2>(p + (n & 12), w, 0);
    if constexpr (E == 1)
      if (n & 1) store_piece<E, 1>(p + (n & 14), w >> ((n & 2) * 8), 0);
  }
}

// Bytes [0, n) of vec to p, where p + n is 16-byte aligned (0 < n < 16, a multiple of E):
// the head of an output row. Piece sizes ascend, so piece SIZE is vec bytes [n & (SIZE - 1), +SIZE).
template <int E>
__device__ __forceinline__ void store_suffix(char* p, const Vec16& vec, int n) {
  n &= 16 - E;
  if constexpr (E == 1)
    if (n & 1) store_piece<E, 1>(p, vec.w[0], 0);
  if constexpr (E <= 2)
    if (n & 2) store_piece<E, 2>(p + (n & 1), vec.w[0] >> ((n & 1) * 8), 0);
  if constexpr (E <= 4)
    if (n & 4) store_piece<E, 4>(p + (n & 3), E >= 4 ? vec.w[0] : __funnelshift_r(vec.w[0], vec.w[1], (n & 3) * 8), 0);
  if (n & 8) {
    const int off = n & 7;
    uint32_t a = vec.w[0], b = vec.w[1], c = vec.w[2];
    if (off & 4) a = vec.w[1], b = vec.w[2], c = vec.w[3];
    if constexpr (E <= 2) {
      const uint32_t bits = (off & 3) * 8;
      a = __funnelshift_r(a, b, bits), b = __funnelshift_r(b, c, bits);
    }
    store_piece<E, 8>(p + off, a, b);
  }
}

// Word n out of byte n of a, b, c, d (four rows): a 4x4 byte block transposed, in two rounds
// of prmt (interleave pairs of rows, then pairs of pairs).
__device__ __forceinline__ void transpose_4x4_bytes(uint32_t a, uint32_t b, uint32_t c, uint32_t d, uint32_t& w0,
                                                    uint32_t& w1, uint32_t& w2, uint32_t& w3) {
  const uint32_t ab01 = __byte_perm(a, b, 0x5140), ab23 = __byte_perm(a, b, 0x7362);
  const uint32_t cd01 = __byte_perm(c, d, 0x5140), cd23 = __byte_perm(c, d, 0x7362);
  w0 = __byte_perm(ab01, cd01, 0x5410);
  w1 = __byte_perm(ab01, cd01, 0x7632);
  w2 = __byte_perm(ab23, cd23, 0x5410);
  w3 = __byte_perm(ab23, cd23, 0x7632);
}

// w[c] holds element c of every v[k] (k < V): the V x V micro-tile transposed.
template <int E>
__device__ __forceinline__ void transpose_regs(const Vec16 (&v)[16 / E], Vec16 (&w)[16 / E]) {
  constexpr int V = 16 / E;
  if constexpr (E >= 4) {
    constexpr int W = E / 4;  // words per element: a pure renaming of registers
#pragma unroll
    for (int c = 0; c < V; ++c)
#pragma unroll
      for (int k = 0; k < V; ++k)
#pragma unroll
        for (int h = 0; h < W; ++h) w[c].w[k * W + h] = v[k].w[c * W + h];
  } else if constexpr (E == 2) {
    // Word m of w[c] packs element c of rows 2m and 2m+1: the matching halves of two words.
#pragma unroll
    for (int c = 0; c < V; ++c)
#pragma unroll
      for (int m = 0; m < 4; ++m)
        w[c].w[m] = __byte_perm(v[2 * m].w[c / 2], v[2 * m + 1].w[c / 2], (c & 1) ? 0x7632 : 0x5410);
  } else {
    // 4x4 byte blocks: byte n of word q of rows 4m..4m+3 becomes word m of w[4q + n].
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        transpose_4x4_bytes(v[4 * m].w[q], v[4 * m + 1].w[q], v[4 * m + 2].w[q], v[4 * m + 3].w[q], w[4 * q].w[m],
                            w[4 * q + 1].w[m], w[4 * q + 2].w[m], w[4 * q + 3].w[m]);
  }
}

// The first n bytes (0 < n < 4, a multiple of E) of the aligned word at p, the rest zero.
template <int E>
__device__ __forceinline__ uint32_t load_word_head(const uint32_t* p, int n) {
  if constexpr (E == 2) return __ldg(reinterpret_cast<const uint16_t*>(p));
  const uint8_t* q = reinterpret_cast<const uint8_t*>(p);
  uint32_t r = __ldg(q);
  if (n > 1) r |= uint32_t(__ldg(q + 1)) << 8;
  if (n > 2) r |= uint32_t(__ldg(q + 2)) << 16;
  return r;
}

}  // namespace
}  // namespace bankops
