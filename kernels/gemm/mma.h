// The mma.sync gemm kernel's tiling (float16/bfloat16, float32 accumulation): m16n8k16 fed by
// ldmatrix from shared-memory tiles whose rows follow each operand's contiguous dim (halves):
// A is As[BM][BK] (k contiguous, plain ldmatrix) or As[BK][BM] (m contiguous, ldmatrix.trans);
// B is Bs[BK][BN] (n contiguous, ldmatrix.trans) or Bs[BN][BK] (plain ldmatrix). The fills
// (mma_fill.cuh): cp.async of 16-byte chunks when every tile row starts 16-byte aligned; a raw
// staging ring and a realign pass in shared memory when rows are contiguous but start
// anywhere (odd K or N, offset data pointers); element by element through registers
// otherwise. The epilogue goes through a shared-memory C tile so that each thread writes
// whole 16-byte chunks of a row (mma_epilogue.cuh).
//
// Block shapes (MmaConfig; mma_plan.h picks one, bench/design_notes.md has the figures):
//   MmaSmall  128 x 128 x 32, 4 warps, 4 stages, two blocks an SM: small grids, and the
//             realigning and register fills (their schedules are written for its tile);
//   MmaLarge  128 x 256 x 64, 8 warps, 3 stages, one block an SM: a third less L2 -> SM
//             traffic per flop than 128 x 128 and half the barriers per k;
//   MmaNarrow 64 x 128 x 64, 4 warps of 32 x 64, 3 stages: grids with too few 128 x 128 tiles.
//   MmaRows   32 x 128 x 128, 8 warps of 32 x 16, 3 stages, one block an SM: a few rows against
//             a weight (decode), its k split across a cluster (split_k.h) so that the weight
//             streams on every SM, 256 contiguous bytes of each weight row a k-tile.
#pragma once
#include <cstdint>
#include <type_traits>

#include "../dtype.h"
#include "../layout.cuh"
#include "args.h"

namespace bankops {

constexpr int kMmaChunk = 8;  // halves in 16 bytes

template <int BM, int BN, int BK, int WARPS_M, int WARPS_N, int STAGES, int BLOCKS_PER_SM>
struct MmaConfig {
  static constexpr int kBM = BM, kBN = BN, kBK = BK, kStages = STAGES, kBlocksPerSM = BLOCKS_PER_SM;
  static constexpr int kWarpsM = WARPS_M, kWarpsN = WARPS_N, kThreads = 32 * WARPS_M * WARPS_N;
  static constexpr int kWM = BM / WARPS_M, kWN = BN / WARPS_N;
  static constexpr int kFragM = kWM / 16, kFragN = kWN / 8;    // m16 x n8 mma tiles per warp
  static constexpr int kSteps = BK / 16;                      // k16 steps per k-tile
  static constexpr int kElemsA = BM * BK / kThreads, kElemsB = BN * BK / kThreads;  // per thread and k-tile
  static constexpr int kOutChunks = BM * BN / kMmaChunk / kThreads;
  // mma_half splits the m16 tiles in two; ldmatrix.x4 loads B for n8 tiles in pairs.
  static_assert(kWM % 32 == 0 && kWN % 16 == 0, "warp tiles of whole m16 pairs and n8 pairs");
  static_assert(BK % 16 == 0 && kThreads % (BK / kMmaChunk) == 0, "cp.async rows");
  static_assert(kSteps % 2 == 0, "fragment buffers alternate within a k-tile");
};
using MmaSmall = MmaConfig<128, 128, 32, 2, 2, 4, 2>;
using MmaLarge = MmaConfig<128, 256, 64, 2, 4, 3, 1>;
using MmaNarrow = MmaConfig<64, 128, 64, 2, 2, 3, 2>;
using MmaRows = MmaConfig<32, 128, 128, 1, 8, 3, 1>;

// Every tile is addressed in 16-byte units: `pad` adds 16 bytes per row; `swizzle` XORs the
// 16-byte chunk index with row bits. Eight chunks cover the 32 banks, so rows of 128 bytes
// or more take Swizzle<3,3,S> (row bits 0-2 into chunk bits 0-2: ldmatrix's 8 rows and
// cp.async's 8-lane phases each hit 8 different chunks), which repeats every 8 rows: steps
// of 8 rows are plain adds (layout.cuh, kRowPeriod). The 64-byte rows of a BK = 32 tile
// take Swizzle<2,3,3> (two rows share a 128-byte line).
template <int COLS>
using MmaSwizzle = std::conditional_t<(COLS * 2 >= 128), Swizzle<3, 3, log2_exact(COLS) - 3>,
                                      typename BankSwizzle<COLS, 2, 16>::type>;
template <Layout L, int ROWS, int COLS>
using MmaTile = std::conditional_t<L == Layout::Swizzle, Swizzled<ROWS, COLS, MmaSwizzle<COLS>>,
                                   TileLayout<L, ROWS, COLS, 2, 16>>;
template <Layout L, class C, bool KM>  // (BM, BK) halves, or (BK, BM)
using MmaATile = std::conditional_t<KM, MmaTile<L, C::kBK, C::kBM>, MmaTile<L, C::kBM, C::kBK>>;
template <Layout L, class C, bool KN>  // (BK, BN) halves, or (BN, BK)
using MmaBTile = std::conditional_t<KN, MmaTile<L, C::kBK, C::kBN>, MmaTile<L, C::kBN, C::kBK>>;
template <Layout L, class C>
using MmaCTile = MmaTile<L, C::kBM, C::kBN>;  // (BM, BN) halves of C, reusing the stage ring

// The block tile, and how the fill stages a call's operands (mma_plan.h decides both; the kernel
// is a template over them).
enum class MmaShape { Small, Large, Narrow, Rows };
enum class MmaFill { Async, Realign, Registers };

BANKOPS_HD int mma_lane(int t) { return t % 32; }
template <class C>
BANKOPS_HD int mma_warp_m(int t) { return t / 32 % C::kWarpsM * C::kWM; }
template <class C>
BANKOPS_HD int mma_warp_n(int t) { return t / 32 / C::kWarpsM % C::kWarpsN * C::kWN; }

// cp.async (and the epilogue's output chunks): 16-byte chunk e of thread t in a tile with
// `cols` halves per row; lanes walk the chunks of a row, then the next rows.
template <class C>
BANKOPS_HD TileCoord mma_chunk(int t, int e, int cols) {
  const int idx = t + e * C::kThreads, per_row = cols / kMmaChunk;
  return TileCoord{idx / per_row, idx % per_row * kMmaChunk};
}
// The epilogue's element e of thread t when C's rows are off 16-byte boundaries: the lanes of
// a warp on consecutive columns of a row, the block's warps on consecutive rows.
template <class C>
BANKOPS_HD TileCoord mma_out_elem(int t, int e) {
  constexpr int kPerRow = C::kBN / 32, kWarps = C::kThreads / 32;
  return TileCoord{e / kPerRow * kWarps + t / 32, e % kPerRow * 32 + t % 32};
}
// Register path: element e of thread t; lanes on consecutive columns.
template <class C>
BANKOPS_HD TileCoord mma_elem(int t, int e, int cols) {
  const int idx = t + e * C::kThreads;
  return TileCoord{idx / cols, idx % cols};
}

// ldmatrix.x4: lane l gives the address of row l % 8 of 8x8 matrix l / 8.
// A (m16 tile i, k16 step s): matrices (m 0-7, k 0-7), (m 8-15, k 0-7), (m 0-7, k 8-15),
// (m 8-15, k 8-15): the registers come out as mma's a0..a3. In As[BM][BK] a matrix row is an
// m row (the kernel reaches (i, s) from the thread's (0, 0) with offset(16 i, 0) added and
// offset(0, 16 s) joined, layout.cuh), in As[BK][BM] a k row (ldmatrix.trans; s adds rows,
// i joins columns).
template <class C>
BANKOPS_HD TileCoord mma_ldsm_a(int t, int i, int s, bool km) {
  const int lane = mma_lane(t), q = lane / 8;
  const int m = mma_warp_m<C>(t) + i * 16 + (q & 1) * 8;
  if (km) return TileCoord{s * 16 + (q >> 1) * 8 + lane % 8, m};
  return TileCoord{m + lane % 8, s * 16 + (q >> 1) * 8};
}
// B (n8 tiles 2j and 2j+1, k16 step s): matrices (k 0-7, n 0-7), (k 8-15, n 0-7),
// (k 0-7, n 8-15), (k 8-15, n 8-15): b0, b1 of tile 2j, then of tile 2j+1. In Bs[BK][BN]
// a matrix row is a k row (ldmatrix.trans; s adds rows, j joins columns), in Bs[BN][BK]
// an n row (j adds rows, s joins columns).
template <class C>
BANKOPS_HD TileCoord mma_ldsm_b(int t, int j, int s, bool kn) {
  const int lane = mma_lane(t), q = lane / 8;
  const int k = s * 16;
  if (kn) return TileCoord{k + (q & 1) * 8 + lane % 8, mma_warp_n<C>(t) + j * 16 + (q >> 1) * 8};
  return TileCoord{mma_warp_n<C>(t) + j * 16 + (q >> 1) * 8 + lane % 8, k + (q & 1) * 8};
}
// Accumulators c0,c1 (h = 0) or c2,c3 (h = 1) of mma tile (i, j): two adjacent columns.
template <class C>
BANKOPS_HD TileCoord mma_acc(int t, int i, int j, int h) {
  const int lane = mma_lane(t);
  return TileCoord{mma_warp_m<C>(t) + i * 16 + lane / 4 + 8 * h, mma_warp_n<C>(t) + j * 8 + lane % 4 * 2};
}

// Block (bx, by) of a gx x gy grid -> (n tile, m tile), in groups of kMmaGroup m tiles: the
// blocks resident at one time share a few rows of A tiles and a band of B tiles in L2,
// instead of every wave streaming all of B.
constexpr int kMmaGroup = 8;
struct MmaTileIndex {
  int64_t tn, tm;
};
BANKOPS_HD MmaTileIndex mma_raster(int64_t bx, int64_t by, int64_t gx, int64_t gy) {
  const int64_t pid = by * gx + bx, per_group = kMmaGroup * gx, first = pid / per_group * kMmaGroup;
  const int64_t rows = gy - first < kMmaGroup ? gy - first : kMmaGroup, local = pid % per_group;
  return MmaTileIndex{local / rows, first + local % rows};
}

// One k-tile of an operand as the realigning fill reads it: the byte address of its corner,
// the bytes between its rows, the rows left in the operand from the corner, its valid
// columns (at most the tile's) and the matrix's bytes [lo, hi), outside which nothing is read.
struct RawKTile {
  uintptr_t first;
  int64_t row_bytes, rows, valid;
  uintptr_t lo, hi;
};
// What the fill does with one raw chunk of a k-tile that is not whole (MmaRaw::chunk).
enum class RawCopy { Copy, Zero, Elements };
struct RawChunk {
  uintptr_t src, end;  // the aligned 16 bytes under the chunk; where its row's valid bytes end
  int bytes;           // Copy: cp.async of these (zero-filling the rest)
  RawCopy how;
};

// The realigning path's raw staging of one ROWS x COLS tile: tile row r's COLS halves start
// at any 2-byte offset, so they are covered by COLS / 8 + 1 aligned 16-byte chunks (kPerRow),
// which cp.async copies as they are; the realign pass reads the two raw chunks under each
// tile chunk and shifts them by the row's offset. Positions are in 16-byte units. Rows of
// 8 or more tile chunks are stored one after the other: the 8 lanes of an lds.128 phase
// read 8 consecutive chunks of one row. Shorter rows (4 tile chunks: a phase reads rows r
// and r + 1, chunks j and then j + 1 of each) keep even and odd rows in two halves 4 chunks
// apart mod 8, so that both reads of a phase hit 8 different bank groups. The fill's lanes
// walk consecutive positions (slot), one 128-byte shared-memory line per phase.
template <int ROWS, int COLS>
struct MmaRaw {
  static constexpr int kTileChunks = COLS / kMmaChunk, kPerRow = kTileChunks + 1;
  static constexpr bool kSplit = kTileChunks < 8;
  static constexpr int kChunks = ROWS * kPerRow;            // filled per k-tile
  static constexpr int kHalf = ROWS / 2 * kPerRow;          // split: the even rows' chunks
  static constexpr int kOdd = (kHalf + 7) / 8 * 8 + 4;      // split: where the odd rows start
  static constexpr int kBytes = ((kSplit ? kOdd + kHalf : kChunks) * 16 + 127) / 128 * 128;  // whole lines
  static_assert(!kSplit || (kTileChunks == 4 && ROWS % 2 == 0 && kHalf % 8 == 0), "split rows: pairs per phase");
  BANKOPS_HD static constexpr int pos(int row, int q) {
    return kSplit ? row % 2 * kOdd + row / 2 * kPerRow + q : row * kPerRow + q;
  }
  // Fill slot s (thread t's i-th is t + i * threads): the chunk at the s-th position.
  BANKOPS_HD static constexpr TileCoord slot(int s) {
    return kSplit ? TileCoord{(s % kHalf) / kPerRow * 2 + s / kHalf, s % kHalf % kPerRow}
                  : TileCoord{s / kPerRow, s % kPerRow};
  }
  // Raw position of fill slot s: the slots are the positions in order, past the split gap.
  BANKOPS_HD static constexpr int slot_pos(int s) { return kSplit && s >= kHalf ? s - kHalf + kOdd : s; }
  // The choices StagedFill::fill (mma_fill.cuh) makes, for the trace to replay. The kernel
  // writes them out in its own loop (calling these instead compiled to a slower fill), so a
  // change to one is a change to the other.
  // Whether every raw chunk of the k-tile is copied whole: every row and column inside the
  // operand, and every chunk under its rows inside the matrix's bytes.
  BANKOPS_HD static bool whole(const RawKTile& k);
  // Fill slot s of a k-tile: the aligned chunk under it and, unless the k-tile is whole, how
  // it is filled: cp.async of what lies before its row's valid end (zeros after: K tails must
  // be zero), zeros for a chunk past that end or in a row past the operand, element loads for
  // a chunk that starts before the matrix or ends past it (compute-sanitizer counts a
  // cp.async as all 16 bytes whatever its source size).
  BANKOPS_HD static RawChunk chunk(int s, const RawKTile& k);
};
template <int ROWS, int COLS>
BANKOPS_HD bool MmaRaw<ROWS, COLS>::whole(const RawKTile& k) {
  const uintptr_t last_end = ((k.first + uintptr_t((ROWS - 1) * k.row_bytes)) & ~uintptr_t(15)) + kPerRow * 16;
  return ROWS <= k.rows && k.valid == COLS && (k.first & ~uintptr_t(15)) >= k.lo && last_end <= k.hi;
}
template <int ROWS, int COLS>
BANKOPS_HD RawChunk MmaRaw<ROWS, COLS>::chunk(int s, const RawKTile& k) {
  const TileCoord rq = slot(s);
  const uintptr_t seg = k.first + uintptr_t(rq.r * k.row_bytes);
  const uintptr_t src = (seg & ~uintptr_t(15)) + rq.c * 16, end = seg + uintptr_t(2 * k.valid);
  const int64_t left = rq.r < k.rows ? int64_t(end) - int64_t(src) : 0;
  const int bytes = left <= 0 ? 0 : left < 16 ? static_cast<int>(left) : 16;
  const RawCopy how = bytes == 0 ? RawCopy::Zero : src >= k.lo && src + 16 <= k.hi ? RawCopy::Copy : RawCopy::Elements;
  return RawChunk{src, end, bytes, how};
}

template <class C, bool KM>
using MmaRawA = std::conditional_t<KM, MmaRaw<C::kBK, C::kBM>, MmaRaw<C::kBM, C::kBK>>;
template <class C, bool KN>
using MmaRawB = std::conditional_t<KN, MmaRaw<C::kBK, C::kBN>, MmaRaw<C::kBN, C::kBK>>;

// Bytes of dynamic shared memory: the stage ring, reused by the C tile.
template <Layout L, class C, bool KM, bool KN>
constexpr int mma_smem_bytes() {
  const int ring = C::kStages * (MmaATile<L, C, KM>::kSize + MmaBTile<L, C, KN>::kSize) * 2;
  const int out = MmaCTile<L, C>::kSize * 2;
  return ring > out ? ring : out;
}

// The realigning path: two tile buffers (realign k-tile x + 1 while the mma reads x), then
// a ring of raw stages, as deep as two blocks per SM leave room for (3 or 4: a raw stage
// is filled 2 or 3 k-tiles before its realign; 3 is the least the schedule works with).
template <Layout L, class C, bool KM, bool KN>
constexpr int mma_realign_bytes(int raw_stages) {
  const int tiles = 2 * (MmaATile<L, C, KM>::kSize + MmaBTile<L, C, KN>::kSize) * 2;
  const int raw = raw_stages * (MmaRawA<C, KM>::kBytes + MmaRawB<C, KN>::kBytes);
  const int out = MmaCTile<L, C>::kSize * 2;
  return tiles + raw > out ? tiles + raw : out;
}
template <Layout L, class C, bool KM, bool KN>
constexpr int kMmaRawStages =
    C::kBlocksPerSM * (mma_realign_bytes<L, C, KM, KN>(4) + 1024) <= 228 * 1024 ? 4 : 3;

}  // namespace bankops
