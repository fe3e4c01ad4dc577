// The Hopper gemm kernel's tiling (float16/bfloat16, float32 accumulation; the swizzle
// layout's kernel on compute capability 9.0, built for sm_90a only): wgmma.mma_async reads both
// operands from 128-byte-swizzled shared-memory tiles, so a consumer warpgroup issues one
// instruction per 64 x BN x 16 product. Producer warpgroups fill a ring of stages and
// mbarriers hand each stage to the consumers (full) and back (empty): one thread issuing the
// Tensor Memory Accelerator's boxes (tma.cuh) for rows 16 bytes apart, or, for rows that start
// off 16-byte boundaries, warpgroups that cut each chunk out of two aligned loads
// (wgmma_realign.cuh). Unsplit TMA calls of more tiles than SMs, and those on tiles whose width
// is not a power of two, run persistent blocks, one an SM, that walk the tiles and hand C to
// TMA stores, pairs of them sharing B's tiles (TMA multicast). Launches are programmatic
// dependent launches (pdl.cuh).
//
// Only swizzle runs here: the tensor cores read unswizzled (none, pad) tiles at a third of
// the rate, so those layouts stay on the mma.sync kernel, where their bank conflicts show.
#pragma once
#include <cstdint>
#include <type_traits>

#include "mma.h"
#include "split_k.h"

namespace bankops {

// BM x BN x BK block tiles; CONSUMERS warpgroups split BM (64 rows each, m64nBNk16
// instructions); PRODUCERS warpgroups fill STAGES ring slots (one thread of them, for TMA).
template <int BM, int BN, int BK, int CONSUMERS, int STAGES, int PRODUCERS = 1>
struct WgmmaConfig {
  static constexpr int kBM = BM, kBN = BN, kBK = BK, kConsumers = CONSUMERS, kStages = STAGES;
  static constexpr int kProducers = PRODUCERS, kProducerThreads = 128 * PRODUCERS;
  static constexpr int kThreads = 128 * (CONSUMERS + PRODUCERS);
  static constexpr int kSteps = BK / 16, kAcc = BN / 2;  // k16 steps per k-tile, floats per consumer thread
  static_assert(BM == 64 * CONSUMERS && BK % 64 == 0 &&
                    (BN == 64 || BN == 96 || BN == 128 || BN == 144 || BN == 192 || BN == 256),
                "m64n64, m64n96, m64n128, m64n144, m64n192 or m64n256 per consumer");
  // Columns of an n-major B tile in shared memory: whole 64-column blocks (TMA's boxes of 128
  // swizzled bytes), past BN where it is not a multiple of 64; wgmma reads BN of them.
  static constexpr int kBNTile = (BN + 63) / 64 * 64;
  // 96, 144 and 192 columns run persistent blocks only: the block-a-tile epilogue's C tile and
  // split-K's partial tile are swizzled rows of a power-of-two length.
  static constexpr bool kPersistentOnly = (BN & (BN - 1)) != 0;
  // A split last wave (wgmma_plan.h's wgmma_tail) pairs consumer warpgroup w with the pair's block w
  // (wgmma.cu's add_halves): two consumers.
  static constexpr bool kHalves = CONSUMERS == 2;
  // A width that is not whole 64-column blocks (144, 96) runs k-major A and B only: there an
  // n-major B tile's last block is partly the next tile's, and measured slower than 128 x 192.
  static constexpr bool kKMajorOnly = BN % 64 != 0;
  // One consumer: the few-rows tile (wgmma_plan.h's wgmma_thin_candidates), a block a tile, A
  // k-major (x).
  static constexpr bool kFewRows = CONSUMERS == 1;
};
// The configurations (wgmma_plan.h picks one; bench/design_notes.md has the figures):
//   WgmmaLarge         128 x 256: two consumers of 64 x 256, four 48 KB stages;
//   WgmmaBroad         128 x 192: two consumers of 64 x 192, four 40 KB stages (TMA, persistent
//                      blocks only), where 128 x 256 tiles end in a ragged last wave (3072^3);
//   WgmmaSlim          128 x 144: two consumers of 64 x 144, four 34 KB stages (TMA, persistent
//                      blocks, k-major A and B only: x @ W.t()): 1156 x 3712 is 260 of them,
//                      two waves, against 200 of 128 x 192 (1.5);
//   WgmmaTall          192 x 96: three consumers of 64 x 96, four 36 KB stages (TMA, persistent
//                      blocks, unpaired, k-major A and B only): 1536^3 is 128 of them, one
//                      wave as 128 x 144's 132, and three consumers run it faster;
//   WgmmaTallBroad     192 x 192: three consumers of 64 x 192, four 48 KB stages (TMA,
//                      persistent blocks, no split last wave; C out through one 64-column
//                      block a consumer): 1152 x 4096 and 2048 x 2304 are 132 of them, one
//                      wave, against 198 and 192 of 128 x 192;
//   WgmmaMedium        128 x 128: two consumers of 64 x 128, six 32 KB stages (TMA only);
//   WgmmaNarrow        128 x 64, cuBLAS's tile at 1024^3: eight 24 KB stages (TMA only);
//   WgmmaMediumRealign 128 x 128 with two realigning producer warpgroups, which keep a whole
//                      stage of loads in flight (512 threads: 128 registers each);
//   WgmmaThin          64 x 128, a few rows against a weight: one consumer, eight 24 KB stages
//                      (TMA, a block a tile, A k-major, split across a cluster);
//   WgmmaThinNarrow    64 x 64, the same where 128-column tiles leave SMs without a block
//                      (4096 columns: 64 tiles split 2 ways against 32 split 3): twelve 16 KB
//                      stages, 96 KB of the weight in flight (the thin tile: 128).
using WgmmaLarge = WgmmaConfig<128, 256, 64, 2, 4>;
using WgmmaBroad = WgmmaConfig<128, 192, 64, 2, 4>;
using WgmmaSlim = WgmmaConfig<128, 144, 64, 2, 4>;
using WgmmaTall = WgmmaConfig<192, 96, 64, 3, 4>;
using WgmmaTallBroad = WgmmaConfig<192, 192, 64, 3, 4>;
using WgmmaMedium = WgmmaConfig<128, 128, 64, 2, 6>;
using WgmmaNarrow = WgmmaConfig<128, 64, 64, 2, 8>;
using WgmmaMediumRealign = WgmmaConfig<128, 128, 64, 2, 6, 2>;
using WgmmaThin = WgmmaConfig<64, 128, 64, 1, 8>;
using WgmmaThinNarrow = WgmmaConfig<64, 64, 64, 1, 12>;

constexpr int kWgmmaRowCols = 64;  // halves in one 128-byte swizzled row
constexpr int kWgmmaSmemBytes = 227 * 1024;  // dynamic shared memory a block may take
constexpr int kWgmmaWarpRows = 16;  // rows of C a consumer warp holds (wgmma's m64 over 4 warps)
using WgmmaSwizzle = Swizzle<3, 3, 3>;
// A is As[BM][BK] (k-major) or As[BK][BM] (m-major, KM: read with wgmma's transpose bit); B
// is Bs[BK][BN] (n-major, KN: likewise) or Bs[BN][BK] (k-major). Tiles are 64-column blocks
// of 128-byte swizzled rows, one block after another: an m-major A tile's block b is
// consumer b's 64 rows.
template <int ROWS, int COLS>
using WgmmaTile = Blocked<Swizzled<ROWS, kWgmmaRowCols, WgmmaSwizzle>, COLS>;
template <class C, bool KM>  // (BM, BK) halves, or (BK, BM); 128-byte swizzled rows
using WgmmaATile = std::conditional_t<KM, WgmmaTile<C::kBK, C::kBM>, WgmmaTile<C::kBM, C::kBK>>;
template <class C, bool KN>  // (BK, BN) halves (whole blocks: kBNTile), or (BN, BK); 128-byte swizzled rows
using WgmmaBTile = std::conditional_t<KN, WgmmaTile<C::kBK, C::kBNTile>, WgmmaTile<C::kBN, C::kBK>>;
template <class C>
using WgmmaCTile = MmaTile<Layout::Swizzle, C::kBM, C::kBN>;  // (BM, BN) halves of C, in the ring
template <class C>
using WgmmaPartTile = SplitTile<Layout::Swizzle, C::kBM, C::kBN>;  // split-K's (BM, BN) floats, in the ring
static_assert(std::is_same_v<MmaSwizzle<kWgmmaRowCols>, WgmmaSwizzle>, "the swizzle layout's 128-byte rows");

// The descriptor's fixed fields (PTX "matrix descriptor"): leading and stride byte offsets
// (16-byte units) and the 128-byte swizzle mode, read off the tile's own offsets. K_MAJOR: 8
// rows are the stride step and the swizzle fixes the leading one (LBO unused, 1 by
// convention); otherwise the tile's rows are k: 8 k rows are the stride step, the next
// 64-column block the leading one.
template <class Tile, bool K_MAJOR>
BANKOPS_HD constexpr uint64_t wgmma_desc_fields() {
  constexpr int64_t rows8 = Tile::offset(8, 0) * 2, block = Tile::offset(0, kWgmmaRowCols) * 2;
  constexpr int64_t lbo = K_MAJOR ? 16 : block, sbo = rows8;
  static_assert(lbo % 16 == 0 && sbo % 16 == 0 && lbo < (16 << 14) && sbo < (16 << 14), "14-bit 16-byte fields");
  return uint64_t(lbo >> 4) << 16 | uint64_t(sbo >> 4) << 32 | uint64_t(1) << 62;
}
BANKOPS_HD uint64_t wgmma_desc(uint64_t fields, uint32_t smem_addr) { return fields | ((smem_addr >> 4) & 0x3FFF); }

// Element offsets the k16 step s of consumer rows m0 (A) or of B start at (descriptor starts).
template <class Tile, bool KM>
BANKOPS_HD int wgmma_a_at(int m0, int s) { return KM ? Tile::offset(16 * s, m0) : Tile::offset(m0, 16 * s); }
template <class Tile, bool KN>
BANKOPS_HD int wgmma_b_at(int s) { return KN ? Tile::offset(16 * s, 0) : Tile::offset(0, 16 * s); }

// The consumer warps' accumulators as mma_acc and the shared epilogue see them (m16 x n8
// fragments, as mma.sync's): warp w of the consumers holds rows 16 w.. 16 w + 15 of the block
// tile, every n8 tile of BN; consumer thread t is the block's thread kProducerThreads + t.
template <class C>
struct WgmmaFrags {
  static constexpr int kThreads = 128 * C::kConsumers, kWarpsM = 4 * C::kConsumers, kWarpsN = 1;
  static constexpr int kWM = 16, kWN = C::kBN, kFragM = 1, kFragN = C::kBN / 8, kBN = C::kBN;
  static constexpr int kOutChunks = C::kBM * C::kBN / kMmaChunk / kThreads;
};

// The realigning producer's chunk e of thread t in a tile: lanes walk the 8 chunks of a row
// of a 64-column block, then the block's rows, then the next block: each 8-lane phase reads
// one 128-byte line of a row and writes one swizzled row.
template <class C, class Tile>
BANKOPS_HD TileCoord wgmma_chunk(int t, int e) {
  constexpr int kPerRow = kWgmmaRowCols / kMmaChunk, kPerBlock = Tile::kRows * kPerRow;
  const int idx = t + e * C::kProducerThreads;
  return TileCoord{idx % kPerBlock / kPerRow, idx / kPerBlock * kWgmmaRowCols + idx % kPerRow * kMmaChunk};
}

// The Hopper kernel's block tile (wgmma_plan.h decides), and how its producers fill the ring:
// TMA boxes, or chunks realigned in registers.
enum class WgmmaShape { None, Large, Medium, Narrow, Broad, Slim, Tall, Thin, ThinNarrow, TallBroad };
enum class WgmmaLoad { Tma, Realign };

// Whether pairs of persistent blocks can share B's tile of C (n-major B: KN): each loads half of
// it, whole 64-column blocks (n-major) or half its rows (k-major), for tiles 128 columns or wider.
template <class C, bool KN>
BANKOPS_HD constexpr bool wgmma_pairs_share_b() {
  return C::kBN >= 128 && (!KN || C::kBN % 128 == 0);
}

// The persistent kernel's C tiles, one a consumer warpgroup, which TMA stores from: its 64 rows,
// kCols columns (the widest of all of BN, half of it or one 64-column block whose tiles still fit
// beside the ring: half of 128 x 256's, a block of 192 x 192's), in blocks of one TMA box's
// columns: the operands' 128-byte swizzled 64-column blocks, or, for a width of whole 32-column
// blocks only (96), 32-column blocks in TMA's 64-byte swizzle. A pass writes one box (a block) into
// slot p % kSlots and stores it, so a pass waits only on the store that last read its slot, kSlots
// passes back, not on the one just issued. A warp's accumulator pairs (8 rows x 4 pairs) land in 8
// different 16-byte chunks: conflict-free. A width that is neither (144) takes dense rows and one
// unswizzled box (kDense): a swizzled third block's box would write over the next tile's columns.
// Its 288-byte rows put rows r and r + 4 of a warp's pairs on the same banks (2-way).
template <class C>
struct WgmmaCStage {
  static constexpr int bytes(int cols) { return (64 * cols * 2 + 1023) / 1024 * 1024; }
  static constexpr bool fits(int cols) {  // the ring (B at its widest tile) + the C tiles + alignment
    return C::kStages * (C::kBM + C::kBNTile) * C::kBK * 2 + C::kConsumers * bytes(cols) + 1024 <= kWgmmaSmemBytes;
  }
  static constexpr int kCols = fits(C::kBN) ? C::kBN : fits(C::kBN / 2) ? C::kBN / 2 : kWgmmaRowCols;
  static constexpr bool kDense = kCols % 32 != 0;
  static constexpr int kBoxCols = kDense ? kCols : kCols % kWgmmaRowCols == 0 ? kWgmmaRowCols : 32;
  static constexpr int kSwizzleBytes = kDense ? 0 : 2 * kBoxCols;  // TMA's swizzle: 128, 64 or none
  using Tile = std::conditional_t<kDense, RowMajor<64, kCols>,
                                  std::conditional_t<kBoxCols == kWgmmaRowCols, WgmmaTile<64, kCols>,
                                                     Blocked<Swizzled<64, 32, Swizzle<2, 3, 3>>, kCols>>>;
  static constexpr int kPasses = C::kBN / kBoxCols, kSlots = kCols / kBoxCols;
  static constexpr int kBytes = bytes(kCols);  // one consumer's
  // A warp's 16 rows start where TMA may read a box from: on the swizzle's period (1024 or 512
  // bytes) into a swizzled block, 128 into dense rows.
  static_assert(kWgmmaWarpRows * 2 * kBoxCols % (kDense ? 128 : 8 * kSwizzleBytes) == 0, "warp boxes aligned");
};

// Shared memory: the stage ring (every tile 1024-byte aligned: the hardware anchors the
// 128-byte swizzle to address bits), reused by the epilogue's C tile; the persistent kernel's
// C tiles after it (PERSISTENT: its ring refills while its consumers write a tile out); plus
// 1024 bytes to align the base (the mbarriers are static).
template <class C, bool KM, bool KN, bool PERSISTENT = false>
struct WgmmaSmem {
  static constexpr int kA = WgmmaATile<C, KM>::kSize * 2, kB = WgmmaBTile<C, KN>::kSize * 2;
  static constexpr int kStage = kA + kB, kRing = C::kStages * kStage;
  static constexpr int kC = PERSISTENT ? C::kConsumers * WgmmaCStage<C>::kBytes : 0;
  static constexpr int kBytes = kRing + kC + 1024;
  static_assert(kA % 1024 == 0 && kB % 1024 == 0, "tiles on 1024-byte boundaries");
  template <class D = C>
  static constexpr bool fits_ring() {
    if constexpr (D::kPersistentOnly) return true;
    else return kRing >= WgmmaCTile<D>::kSize * 2 && kRing >= WgmmaPartTile<D>::kSize * 4;
  }
  static_assert(fits_ring(), "the C tile and split-K's partial tile fit the ring");
};

}  // namespace bankops
