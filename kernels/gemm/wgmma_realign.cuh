// The Hopper kernel's realigning producer (wgmma.cu includes it): operand rows that start off
// 16-byte boundaries, cut out of aligned loads in registers and stored into the swizzled tiles.
#pragma once
#include <cstdint>
#include <type_traits>

#include "../async_copy.cuh"
#include "../shift.cuh"
#include "wgmma.h"
#include "wgmma_ptx.cuh"

namespace bankops {
namespace {  // included by wgmma.cu only

// The realigning producer's view of one operand tile (rows at any 2-byte offset, unit-stride
// columns): chunk e of the thread (wgmma_chunk's map) in k-tile kt. The lane loads the
// aligned 16 bytes (granule) under its chunk's first byte, takes the next granule from the
// lane to its right (the 8 lanes of a row group cover one 128-byte row segment; the group's
// last lane loads the granule past it) and cuts its chunk out of the two (shift_bytes). The
// cut, `shift`, is one per thread: its chunks sit kRowStep rows (16 or 32: a multiple of 8
// rows is a multiple of 16 bytes), 64 columns (128 bytes) or whole k-tiles (64 columns, or
// 64 rows) apart. K_ROWS: k runs down the tile's rows (B as Bs[BK][BN]).
//
// Only k needs zeros past the operand's edge (the products of padding would reach real
// outputs); rows (m, n) or columns (n) past it feed outputs that the epilogue drops, so
// they may hold whatever lies there, as long as nothing outside the matrix is read. Whole
// k-tiles (inside K, every granule inside the matrix's bytes) load every granule as it is;
// the others load only granules that hold elements before K, each checked against the
// matrix's bytes, and zero the chunk's elements past K.
template <class C, class Tile, bool K_ROWS>
struct WgmmaShiftFill {
  static constexpr int kRowStep = C::kProducerThreads / 8;
  static constexpr int kBlocks = Tile::kCols / kWgmmaRowCols, kPerBlock = Tile::kRows / kRowStep;
  static constexpr int kChunks = kBlocks * kPerBlock;
  static_assert(Tile::kRows % kRowStep == 0 && kRowStep % Tile::kRowPeriod == 0, "row steps are adds");
  BANKOPS_HD static constexpr int row_of(int e) { return e % kPerBlock * kRowStep; }
  BANKOPS_HD static constexpr int col_of(int e) { return e / kPerBlock * kWgmmaRowCols; }
  // Chunk e's tile offset in bytes from the thread's first: it sits r * 16 rows (a multiple of
  // the swizzle's 8-row period) and b 64-column blocks further, so the offset is a constant.
  BANKOPS_HD static constexpr int at(int e) { return Tile::offset(row_of(e), col_of(e)) * 2; }
  const char* gran;      // the granule under the thread's chunk 0 in k-tile 0
  int64_t s_row;         // elements between the operand's rows
  int64_t k_left;        // k left from chunk 0 (its row for K_ROWS, else its first column) in k-tile 0
  uintptr_t lo, hi;      // the matrix's bytes
  uint32_t dst;          // chunk 0 in stage 0
  int shift;             // bytes from a granule to its chunk (even, 0..14)
  int kt_first, kt_end;  // whole k-tiles: [kt_first, kt_end)

  // p: the operand at the tile's corner in k-tile 0, s_row apart; k: its extent along k.
  __device__ __forceinline__ WgmmaShiftFill(const uint16_t* p, int64_t s_row_, int64_t k, uintptr_t lo_,
                                            uintptr_t hi_, uint32_t tile)
      : s_row(s_row_), lo(lo_), hi(hi_) {
    const TileCoord first = wgmma_chunk<C, Tile>(threadIdx.x, 0);
    const uintptr_t chunk = addr_of(p + first.r * s_row + first.c);
    shift = static_cast<int>(chunk & 15);
    gran = reinterpret_cast<const char*>(chunk - shift);
    k_left = k - (K_ROWS ? first.r : first.c);
    dst = tile + Tile::offset(first.r, first.c) * 2;
    // A k-tile's granules run from its corner's to the one that holds its last row's end,
    // and k-tiles step by k_step() bytes, a multiple of 16: only the first can start before
    // the matrix, and the ones before fit end inside it.
    const uintptr_t corner = addr_of(p);
    const uintptr_t end0 = (addr_of(p + (Tile::kRows - 1) * s_row + Tile::kCols) + 15) & ~uintptr_t(15);
    kt_first = (corner & ~uintptr_t(15)) < lo ? 1 : 0;
    const int64_t fit = hi >= end0 ? static_cast<int64_t>((hi - end0) / k_step()) + 1 : 0;
    const int64_t inside_k = k / C::kBK;
    kt_end = static_cast<int>(fit < inside_k ? fit : inside_k);
  }
  __device__ __forceinline__ int64_t k_step() const { return K_ROWS ? C::kBK * s_row * 2 : C::kBK * 2; }
  __device__ __forceinline__ bool whole(int kt) const { return kt >= kt_first && kt < kt_end; }
  __device__ __forceinline__ const char* granule(int e, int kt) const {
    return gran + kt * k_step() + (row_of(e) * s_row + col_of(e)) * 2;
  }
  // Elements of chunk e in k-tile kt before K (8 or more: all; K_ROWS: all or none).
  __device__ __forceinline__ int64_t k_valid(int e, int kt) const {
    const int64_t left = k_left - int64_t(kt) * C::kBK - (K_ROWS ? row_of(e) : col_of(e));
    return K_ROWS ? (left > 0 ? kMmaChunk : 0) : left;
  }

  // Chunk e of k-tile kt into x (its granule) and nx (the next one, the last lane only). The
  // granule holds elements [-shift/2, 8 - shift/2) of the chunk, the next one 8 more.
  template <bool WHOLE>
  __device__ __forceinline__ void load(uint4& x, uint4& nx, int e, int kt) const {
    const char* p = granule(e, kt);
    const bool last = threadIdx.x % 8 == 7 && shift != 0;
    if constexpr (WHOLE) {
      x = ldg128(p);
      if (last) nx = ldg128(p + 16);
    } else {
      const int64_t n = k_valid(e, kt);
      x = 2 * n + shift > 0 ? ldg128_within(p, lo, hi) : uint4{0, 0, 0, 0};
      if (last) nx = 2 * (n - kMmaChunk) + shift > 0 ? ldg128_within(p + 16, lo, hi) : uint4{0, 0, 0, 0};
    }
  }
  // Pulls a whole k-tile's lines into L1 ahead of its loads (edge k-tiles are left alone).
  __device__ __forceinline__ void prefetch(int kt) const {
    if (!whole(kt)) return;
    const bool last = threadIdx.x % 8 == 7 && shift != 0;
#pragma unroll
    for (int e = 0; e < kChunks; ++e) {
      const char* p = granule(e, kt);
      asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p));
      if (last) asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p + 16));
    }
  }
  // Chunk e of k-tile kt, cut out of x and the next lane's x (nx for the last lane), into the
  // stage at byte offset `stage`; not WHOLE: its elements past K are zeroed.
  template <bool WHOLE>
  __device__ __forceinline__ void store(const uint4& x, const uint4& nx, int e, int kt, uint32_t stage) const {
    uint4 y{__shfl_down_sync(~0u, x.x, 1, 8), __shfl_down_sync(~0u, x.y, 1, 8), __shfl_down_sync(~0u, x.z, 1, 8),
            __shfl_down_sync(~0u, x.w, 1, 8)};
    if (threadIdx.x % 8 == 7) y = nx;
    uint4 v = shift_bytes<2>(x, y, shift);
    if constexpr (!WHOLE) {
      const int64_t left = k_valid(e, kt);
      const int n = left <= 0 ? 0 : left >= kMmaChunk ? kMmaChunk : static_cast<int>(left);
      const auto keep = [n](int i) { return n >= 2 * i + 2 ? ~0u : n == 2 * i + 1 ? 0xffffu : 0u; };
      v = uint4{v.x & keep(0), v.y & keep(1), v.z & keep(2), v.w & keep(3)};
    }
    sts128(dst + stage + at(e), v);
  }
};

// The realigning producer's loop: a k-tile's chunks (A's, then B's: kJobs per thread) pass
// through kSlots register slots, each loaded kSlots cuts before its own: half a k-tile for
// WgmmaLarge's 24 chunks a thread (the loads of k-tile kt + 1's first half go out while kt's
// second half is cut), a whole one for two producer warpgroups' 8 (all of kt + 1's loads go
// out while kt is cut); either way before kt + 1's stage is free. k-tiles whose loads and
// cuts are all whole (both operands, kt and kt + 1) skip the checks. The cuts are
// generic-proxy stores that wgmma reads through the async proxy: each thread fences them
// before it arrives on the stage's full barrier.
template <class C, class FA, class FB, int kStageBytes>
__device__ __forceinline__ void realign_producer(const FA& fa, const FB& fb, int nk, const Ring<C::kStages>& ring) {
  constexpr int kStages = C::kStages, kJobs = FA::kChunks + FB::kChunks;
  constexpr int kSlots = kJobs > 8 ? kJobs / 2 : kJobs;
  static_assert(kJobs % kSlots == 0, "whole rounds of slots per k-tile");
  uint4 x[kSlots], nx[kSlots];
  const auto load = [&](auto whole, int j, int kt) {
    constexpr bool W = decltype(whole)::value;
    if (j < FA::kChunks) fa.template load<W>(x[j % kSlots], nx[j % kSlots], j, kt);
    else fb.template load<W>(x[j % kSlots], nx[j % kSlots], j - FA::kChunks, kt);
  };
  const auto tile = [&](auto whole, int kt, uint32_t stage, bool more) {
    constexpr bool W = decltype(whole)::value;
#pragma unroll
    for (int j = 0; j < kJobs; ++j) {
      if (j < FA::kChunks) fa.template store<W>(x[j % kSlots], nx[j % kSlots], j, kt, stage);
      else fb.template store<W>(x[j % kSlots], nx[j % kSlots], j - FA::kChunks, kt, stage);
      if (j + kSlots < kJobs) load(whole, j + kSlots, kt);
      else if (more) load(whole, j + kSlots - kJobs, kt + 1);
    }
  };
  const auto whole = [&](int kt) { return fa.whole(kt) && fb.whole(kt); };
  if (nk > 0) {
#pragma unroll
    for (int j = 0; j < kSlots; ++j) load(std::false_type{}, j, 0);
  }
  for (int kt = 0; kt < nk; ++kt) {
    const auto pos = RingPos<kStages>::at(kt);
    if (kt + 1 < nk) {
      fa.prefetch(kt + 1);
      fb.prefetch(kt + 1);
    }
    ring.wait_empty(pos, kt);
    const uint32_t stage = pos.stage * kStageBytes;
    const bool more = kt + 1 < nk;
    if (whole(kt) && (!more || whole(kt + 1))) tile(std::true_type{}, kt, stage, more);
    else tile(std::false_type{}, kt, stage, more);
    cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
    mbar_arrive(ring.full(pos.stage));
  }
}

}  // namespace
}  // namespace bankops
