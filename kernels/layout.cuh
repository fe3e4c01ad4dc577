// Shared-memory tile layouts: the only place where a tile's address math lives.
//
// A tile is ROWS x COLS elements. A layout maps a logical (row, col) to an element offset
// in the tile's storage. The functions are __host__ __device__ so that host code (tests,
// the bank model) runs exactly what the kernels run.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define BANKOPS_HD __host__ __device__ __forceinline__
#else
#define BANKOPS_HD inline
#endif

namespace bankops {

enum class Layout : int { None = 0, Pad = 1, Swizzle = 2 };
// Their names, indexed by the enum: the C++ side's one spelling (ops/common.cpp parses them).
constexpr const char* kLayoutNames[] = {"none", "pad", "swizzle"};
constexpr int kLayouts = 3;

constexpr int log2_exact(int v) { return v <= 1 ? 0 : 1 + log2_exact(v / 2); }
constexpr bool is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }
constexpr int max_int(int a, int b) { return a > b ? a : b; }
BANKOPS_HD constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A logical tile coordinate.
struct TileCoord {
  int r, c;
};

// CuTe's Swizzle<B, M, S>: 2^M elements form an unbreakable unit, and B bits of the
// offset taken S bits above the unit index are XORed into the unit index.
template <int B, int M, int S>
struct Swizzle {
  static_assert(B >= 0 && M >= 0 && S >= B, "Swizzle<B,M,S> needs S >= B so source and target bits do not overlap");
  static constexpr int kBits = B, kBase = M, kShift = S;
  static constexpr int kYMask = ((1 << B) - 1) << (M + S);
  BANKOPS_HD constexpr int operator()(int o) const { return o ^ ((o & kYMask) >> S); }
};

// Every layout also lets a kernel compute a thread's offset once and reach the tile
// positions it visits at compile-time steps without redoing the address math (CuTe's
// swizzle.hpp: a swizzle is linear over XOR):
//   offset(r + dr, c)         == offset(r, c) + offset(dr, 0)           if dr % kRowPeriod == 0
//   offset(r | dr, c | dc)    == join(offset(r, c), offset(dr, dc))     if (r & dr) == 0 and (c & dc) == 0
// The first folds into an instruction's immediate offset; the second costs one XOR (swizzle)
// or one add (dense, padded) per distinct step, which a kernel can hoist out of its loops.
template <int ROWS, int COLS>
struct RowMajor {
  static constexpr int kRows = ROWS, kCols = COLS, kSize = ROWS * COLS, kRowPeriod = 1;
  BANKOPS_HD static constexpr int offset(int r, int c) { return r * COLS + c; }
  BANKOPS_HD static constexpr int join(int base, int step) { return base + step; }
};

// Every row padded by PAD elements, so that consecutive rows start on different banks.
template <int ROWS, int COLS, int PAD>
struct Padded {
  static constexpr int kRows = ROWS, kCols = COLS, kPad = PAD, kStride = COLS + PAD;
  static constexpr int kSize = ROWS * kStride, kRowPeriod = 1;
  BANKOPS_HD static constexpr int offset(int r, int c) { return r * kStride + c; }
  BANKOPS_HD static constexpr int join(int base, int step) { return base + step; }
};

// Dense tile with the swizzle applied to the row-major offset: no extra memory.
template <int ROWS, int COLS, class Swz>
struct Swizzled {
  static_assert(is_pow2(COLS), "a swizzled tile needs a power-of-two row length");
  static_assert((1 << (Swz::kBase + Swz::kBits)) <= COLS, "the swizzle must permute units inside one row");
  static constexpr int kRows = ROWS, kCols = COLS, kSize = ROWS * COLS;
  // Rows past the top source bit leave the XOR pattern unchanged: the pattern repeats.
  static constexpr int kRowPeriod = max_int(1, (1 << (Swz::kBits + Swz::kBase + Swz::kShift)) / COLS);
  using swizzle_type = Swz;
  BANKOPS_HD static constexpr int offset(int r, int c) { return Swz{}(r * COLS + c); }
  // Disjoint bits add as XOR, and Swz(x ^ y) == Swz(x) ^ Swz(y).
  BANKOPS_HD static constexpr int join(int base, int step) { return base ^ step; }
};

// A tile stored as blocks of Inner::kCols columns, one block after another: the form wgmma
// reads its operands in (gemm/wgmma.h). The block index adds, so a step of whole blocks is
// an add, and row steps keep Inner's period.
template <class Inner, int COLS>
struct Blocked {
  static_assert(COLS % Inner::kCols == 0, "whole blocks");
  static constexpr int kRows = Inner::kRows, kCols = COLS, kBlockCols = Inner::kCols;
  static constexpr int kSize = COLS / kBlockCols * Inner::kSize, kRowPeriod = Inner::kRowPeriod;
  BANKOPS_HD static constexpr int offset(int r, int c) {
    return c / kBlockCols * Inner::kSize + Inner::offset(r, c % kBlockCols);
  }
};

// The swizzle that makes both row walks and column walks of a tile conflict-free when
// the warp accesses UNIT_BYTES at a time (an element, a 4-byte word of narrow elements,
// or a 16-byte vector): units are never split (M), every unit index bit of a row is
// XORed (B) with the row bits that do not already move to other banks, i.e. the bits
// above one 128-byte bank line (S).
template <int COLS, int ELEM_BYTES, int UNIT_BYTES>
struct BankSwizzle {
  static_assert(is_pow2(ELEM_BYTES) && is_pow2(UNIT_BYTES) && UNIT_BYTES >= ELEM_BYTES, "bad unit");
  static constexpr int M = log2_exact(UNIT_BYTES / ELEM_BYTES);
  static constexpr int B = log2_exact(COLS * ELEM_BYTES / UNIT_BYTES);
  static constexpr int S = log2_exact(max_int(COLS, 128 / ELEM_BYTES)) - M;
  using type = Swizzle<B, M, S>;
};

// Scalar accesses are at least one 4-byte bank word wide: narrower elements share a word.
constexpr int scalar_unit(int elem_bytes) { return elem_bytes < 4 ? 4 : elem_bytes; }

// The tile a kernel declares for a layout strategy: `pad` adds one access unit per row,
// `swizzle` applies BankSwizzle, `none` is dense.
template <Layout L, int ROWS, int COLS, int ELEM_BYTES, int UNIT_BYTES = scalar_unit(ELEM_BYTES)>
struct TileSelect;
template <int R, int C, int E, int U>
struct TileSelect<Layout::None, R, C, E, U> { using type = RowMajor<R, C>; };
template <int R, int C, int E, int U>
struct TileSelect<Layout::Pad, R, C, E, U> { using type = Padded<R, C, U / E>; };
template <int R, int C, int E, int U>
struct TileSelect<Layout::Swizzle, R, C, E, U> {
  using type = Swizzled<R, C, typename BankSwizzle<C, E, U>::type>;
};
template <Layout L, int ROWS, int COLS, int ELEM_BYTES, int UNIT_BYTES = scalar_unit(ELEM_BYTES)>
using TileLayout = typename TileSelect<L, ROWS, COLS, ELEM_BYTES, UNIT_BYTES>::type;

template <Layout L>
struct LayoutTag { static constexpr Layout value = L; };

// The one switch from the run-time enum to a compile-time layout: every launcher calls
// f(LayoutTag<L>{}) through here.
template <class F>
decltype(auto) with_layout(Layout layout, F&& f) {
  switch (layout) {
    case Layout::None: return f(LayoutTag<Layout::None>{});
    case Layout::Pad: return f(LayoutTag<Layout::Pad>{});
    case Layout::Swizzle:
    default: return f(LayoutTag<Layout::Swizzle>{});  // ops/ only passes valid values
  }
}

}  // namespace bankops
