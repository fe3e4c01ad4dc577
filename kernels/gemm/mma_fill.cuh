// The mma.sync kernel's fills of its shared-memory tiles (mma.cu includes it): cp.async of
// 16-byte aligned rows (fill_async, WholeFill), the register path (stage_load, stage_store)
// and the realigning path's raw chunks (StagedFill).
#pragma once
#include <cstdint>

#include "../async_copy.cuh"
#include "../shift.cuh"
#include "mma.h"

namespace bankops {
namespace {  // this header's one includer is mma.cu

// One operand as a ROWS x COLS tile sees it: rows of the tile are `rows` long in memory
// with stride s_row, columns have stride s_col; (r0, c0) is the tile's corner.
struct Operand {
  const uint16_t* p;
  int64_t s_row, s_col, rows, cols;
};

// threadIdx.x that the compiler cannot hoist: the register path recomputes its tile
// coordinates each k step instead of keeping dozens of them live beside the accumulators.
__device__ __forceinline__ int opaque_tid() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(t));
  return t;
}

// cp.async a ROWS x COLS tile (rows 16-byte aligned, columns contiguous). Partial chunks at
// the right edge and rows past the end are zero-filled by src-size; the source address
// stays inside the operand either way. A thread's chunks share a column and step down by
// kRowStep rows, a multiple of the layout's period: one offset per thread, the steps are
// immediates.
template <class C, class Tile>
__device__ __forceinline__ void fill_async(uint32_t dst, const Operand& o, int64_t r0, int64_t c0) {
  constexpr int kPerRow = Tile::kCols / kMmaChunk, kRowStep = C::kThreads / kPerRow;
  constexpr int kChunks = Tile::kRows * kPerRow / C::kThreads;
  static_assert(C::kThreads % kPerRow == 0 && kRowStep % Tile::kRowPeriod == 0, "chunk rows step by the period");
  const TileCoord t0 = mma_chunk<C>(threadIdx.x, 0, Tile::kCols);
  const uint32_t d0 = dst + Tile::offset(t0.r, t0.c) * 2;
  // Whole tiles inside the operand (all but the edges) skip the per-chunk bounds.
  if (r0 + Tile::kRows <= o.rows && c0 + Tile::kCols <= o.cols) {
    const uint16_t* src = o.p + (r0 + t0.r) * o.s_row + c0 + t0.c;
    const int64_t step = kRowStep * o.s_row;
#pragma unroll
    for (int e = 0; e < kChunks; ++e) cp_async16(d0 + Tile::offset(e * kRowStep, 0) * 2, src + e * step, 16);
    return;
  }
#pragma unroll
  for (int e = 0; e < kChunks; ++e) {
    const int64_t r = r0 + t0.r + e * kRowStep, c = c0 + t0.c;
    const int64_t left = o.cols - c;
    const bool in = r < o.rows && left > 0;
    const int bytes = in ? static_cast<int>(left < kMmaChunk ? left : kMmaChunk) * 2 : 0;
    const uint16_t* src = in ? o.p + r * o.s_row + c : o.p;
    cp_async16(d0 + Tile::offset(e * kRowStep, 0) * 2, src, bytes);
  }
}

// The same fill for whole tiles (all but the edges), with everything but the stage and the
// k advance hoisted out of the k loop: the k loop's issue slots belong to the mma.
template <class C, class Tile>
struct WholeFill {
  static constexpr int kPerRow = Tile::kCols / kMmaChunk, kRowStep = C::kThreads / kPerRow;
  static constexpr int kChunks = Tile::kRows * kPerRow / C::kThreads;
  uint32_t dst;          // the thread's first chunk in stage 0
  const uint16_t* src;   // its source at the k-tile the next fill loads
  int64_t step;          // kRowStep rows of the operand
  __device__ __forceinline__ WholeFill(uint32_t tile, const Operand& o) {
    const TileCoord t0 = mma_chunk<C>(threadIdx.x, 0, Tile::kCols);
    dst = tile + Tile::offset(t0.r, t0.c) * 2;
    src = o.p + t0.r * o.s_row + t0.c;
    step = kRowStep * o.s_row;
  }
  __device__ __forceinline__ void operator()(uint32_t stage) const {
#pragma unroll
    for (int e = 0; e < kChunks; ++e) cp_async16(dst + stage + Tile::offset(e * kRowStep, 0) * 2, src + e * step, 16);
  }
};

// Register path, group G (8 elements) of a thread's elements: the loads are issued before
// a quarter of a k-tile's mma work and stored into the tile after it, so that only 8-16
// loaded values are live beside the accumulators. A thread's elements share a column and step
// down the rows; the lanes of a warp walk consecutive columns (the operand's faster dim:
// operands.h orients each tile so). The addresses advance from one pointer: hoisting a 64-bit
// offset per element out of the k loop would cost more registers than the accumulators leave.
template <class C, class Tile, int G>
__device__ __forceinline__ void stage_load(uint16_t (&v)[kMmaChunk], const Operand& o, int64_t r0, int64_t c0) {
  static_assert(C::kThreads % Tile::kCols == 0, "a thread's elements share a column");
  constexpr int kRowStep = C::kThreads / Tile::kCols;
  const int64_t rows_left = o.rows - r0, cols_left = o.cols - c0;
  const TileCoord t = mma_elem<C>(opaque_tid(), G * kMmaChunk, Tile::kCols);
  const bool col_in = t.c < cols_left;
  const uint16_t* p = o.p + (r0 + t.r) * o.s_row + (c0 + t.c) * o.s_col;
  const int64_t step = kRowStep * o.s_row;
#pragma unroll
  for (int e = 0; e < kMmaChunk; ++e)
    v[e] = (col_in && t.r + e * kRowStep < rows_left) ? __ldg(p + e * step) : uint16_t(0);
}

template <class C, class Tile, int G>
__device__ __forceinline__ void stage_store(uint16_t* tile, const uint16_t (&v)[kMmaChunk]) {
  const int tid = opaque_tid();
#pragma unroll
  for (int e = 0; e < kMmaChunk; ++e) {
    const TileCoord t = mma_elem<C>(tid, G * kMmaChunk + e, Tile::kCols);
    tile[Tile::offset(t.r, t.c)] = v[e];
  }
}

// One operand of the realigning path (MmaRaw): cp.async of the aligned chunks under k-tile
// x's rows into a raw stage, and the realign pass from a raw stage into a tile buffer.
// `o` is the operand as the tile sees it with the block tile's corner folded in (unit
// stride along its columns); k-tile x's corner is (x * BK, 0) (KN_ROWS: k runs down the
// rows, B in Bs[BK][BN]) or (0, x * BK). Either way a row's offset in 16 bytes is the same
// for every k-tile (x * BK columns are 64 bytes, x * BK rows 64 row strides), and a
// thread's tile chunks sit kRowStep rows apart (a multiple of 8): one offset per thread.
template <class C, class Tile, bool KN_ROWS>
struct StagedFill {
  using Raw = MmaRaw<Tile::kRows, Tile::kCols>;
  static constexpr int kPerRow = Tile::kCols / kMmaChunk, kRowStep = C::kThreads / kPerRow;
  static constexpr int kChunks = Tile::kRows * kPerRow / C::kThreads;  // tile chunks per thread
  static constexpr int kFills = (Raw::kChunks + C::kThreads - 1) / C::kThreads;  // raw chunks per thread
  static_assert(C::kThreads % kPerRow == 0 && kRowStep % Tile::kRowPeriod == 0 && kRowStep % 8 == 0,
                "a thread's tile chunks: steps of the layout's period, one offset in 16 bytes");
  static_assert(kRowStep % 2 == 0, "split raw rows: a thread's chunks keep their row parity");
  const uint16_t* p;
  int64_t s_row, rows, cols;
  uintptr_t lo, hi;       // the matrix's bytes [lo, hi): nothing outside is read
  uint32_t raw;           // the operand's raw area in raw stage 0
  uint32_t rd, wr;        // realign: the thread's first raw chunk (stage 0), its tile chunk (buffer 0)
  uint32_t shift;         // the thread's rows' offset in 16 bytes
  __device__ __forceinline__ StagedFill(const Operand& o, uintptr_t lo_, uintptr_t hi_, uint32_t tile,
                                        uint32_t raw_) {
    p = o.p;
    s_row = o.s_row;
    rows = o.rows;
    cols = o.cols;
    lo = lo_;
    hi = hi_;
    raw = raw_;
    const TileCoord t0 = mma_chunk<C>(threadIdx.x, 0, Tile::kCols);
    rd = raw + Raw::pos(t0.r, t0.c / kMmaChunk) * 16;
    wr = tile + Tile::offset(t0.r, t0.c) * 2;
    shift = static_cast<uint32_t>(addr_of(p + t0.r * s_row)) & 15;
  }
  __device__ __forceinline__ static int64_t r_of(int x) { return KN_ROWS ? int64_t(x) * C::kBK : 0; }
  __device__ __forceinline__ static int64_t c_of(int x) { return KN_ROWS ? 0 : int64_t(x) * C::kBK; }

  // Raw chunks of k-tile x -> raw stage at byte offset `stage`. A whole k-tile (every row
  // and column inside, and every covering chunk inside the matrix's bytes) copies all of
  // them; otherwise each chunk copies only what lies before the end of its row's valid
  // columns (cp.async zero-fills the rest: K tails must be zero), chunks past it or in rows
  // past the edge are zeroed, and a chunk that starts before the matrix (its first row, a
  // pointer off 16 bytes) or ends past it (its last row) is loaded element by element:
  // compute-sanitizer counts a cp.async as all 16 bytes whatever its source size. The trace
  // replays these choices through MmaRaw::whole and ::chunk (mma.h): change both.
  __device__ __forceinline__ void fill(int x, uint32_t stage) const {
    const int64_t r0 = r_of(x), c0 = c_of(x);
    const uint16_t* first = p + r0 * s_row + c0;
    const uintptr_t first_chunk = addr_of(first) & ~uintptr_t(15);
    const uintptr_t last_end = (addr_of(first + (Tile::kRows - 1) * s_row) & ~uintptr_t(15)) + Raw::kPerRow * 16;
    const bool whole = r0 + Tile::kRows <= rows && c0 + Tile::kCols <= cols && first_chunk >= lo && last_end <= hi;
    const int64_t valid = cols - c0 < Tile::kCols ? cols - c0 : Tile::kCols;
    const int t = threadIdx.x;
#pragma unroll
    for (int i = 0; i < kFills; ++i) {
      const int s = t + i * C::kThreads;
      if (Raw::kChunks % C::kThreads != 0 && i == kFills - 1 && s >= Raw::kChunks) break;
      const TileCoord rq = Raw::slot(s);
      const uint32_t dst = raw + stage + Raw::slot_pos(s) * 16;
      const uint16_t* seg = first + rq.r * s_row;
      const uintptr_t src = (addr_of(seg) & ~uintptr_t(15)) + rq.c * 16;
      if (whole) {
        cp_async16(dst, reinterpret_cast<const void*>(src), 16);
        continue;
      }
      const uintptr_t end = addr_of(seg) + 2 * valid;  // this row's valid bytes end here
      const int64_t left = r0 + rq.r < rows ? int64_t(end) - int64_t(src) : 0;
      const int bytes = left <= 0 ? 0 : left < 16 ? static_cast<int>(left) : 16;
      if (bytes == 0) {
        sts128(dst, uint4{0, 0, 0, 0});
      } else if (src >= lo && src + 16 <= hi) {
        cp_async16(dst, reinterpret_cast<const void*>(src), bytes);
      } else {
        uint16_t h[kMmaChunk];
#pragma unroll
        for (int q = 0; q < kMmaChunk; ++q) {
          const uintptr_t a = src + 2 * q;
          h[q] = a >= lo && a < end ? __ldg(reinterpret_cast<const uint16_t*>(a)) : uint16_t(0);
        }
        sts128(dst, uint4{h[0] | uint32_t(h[1]) << 16, h[2] | uint32_t(h[3]) << 16, h[4] | uint32_t(h[5]) << 16,
                          h[6] | uint32_t(h[7]) << 16});
      }
    }
  }
  // Tile chunk e: the two raw chunks under it (raw stage at `stage`) -> tile buffer at `buf`.
  __device__ __forceinline__ void realign(uint32_t stage, uint32_t buf, int e) const {
    const uint32_t r = rd + stage + Raw::pos(e * kRowStep, 0) * 16;
    const uint4 a = lds128(r), b = lds128(r + 16);
    sts128(wr + buf + Tile::offset(e * kRowStep, 0) * 2, shift_bytes<2>(a, b, static_cast<int>(shift)));
  }
};

}  // namespace
}  // namespace bankops
