// gemm on Hopper's warpgroup tensor-core instructions (float16/bfloat16, float32
// accumulation), the swizzle layout's kernel on compute capability 9.0: wgmma.mma_async reads
// both operands straight from shared memory, so a consumer warpgroup issues one instruction
// per 64 x BN x 16 product instead of the mma.sync path's ldmatrix + mma stream (gemm_mma.h),
// whose tensor rate is 2/3 of wgmma's. A producer fills a ring of stages and mbarriers hand
// each stage to the consumers (full) and back (empty). Operands with 16-byte aligned rows are
// copied by the Tensor Memory Accelerator (tma.cuh): one thread issues a stage's boxes, which
// land 128-byte swizzled. Rows that start off 16-byte boundaries (odd K or N, offset views)
// take realigning producer warpgroups instead: aligned 16-byte loads into registers, each
// chunk cut out of two neighbouring lanes' loads and stored (gemm_wgmma.cu, WgmmaShiftFill),
// or, on large matrices, are copied into aligned rows before the launch (gemm_repack.h).
// Launches are programmatic dependent launches (pdl.cuh).
//
// Only the swizzle layout runs here. wgmma reads an operand as 8-row x 16-byte core
// matrices, either 128-byte-swizzled (CuTe's Swizzle<3,4,3> on bytes: MmaSwizzle's
// Swizzle<3,3,3> on halves, the swizzle layout's own tile) or unswizzled, with each core
// matrix's 8 rows in 128 contiguous bytes. An early version of this kernel on unswizzled
// tiles (16-byte column blocks, dense or padded after every core matrix and block so that
// the fill is conflict-free) computed 4096^3 at 175 TFLOP/s where the same version on
// swizzled tiles ran 475-510 (H100, 2026-11-25; 700 with today's producer): the tensor cores
// read unswizzled tiles at a third of the rate, whatever the padding, and none and pad run
// faster on the mma.sync kernel (110 and 400 TFLOP/s), whose ldmatrix reads are where their
// bank conflicts show.
//
// The TMA producer replaced a warpgroup of 16-byte cp.async copies (H100, 2026-11-25,
// float16, CUDA graphs, bench/gemm_sweep.py, cp.async -> TMA): 4096^3 192 -> 188 us, 1536^3
// 23.3 -> 20.7 us, and it made the 128 x 64 tile worth running (1024^3: 6.45 -> 5.9 us).
//
// Built for sm_90a only (BANKOPS_WGMMA, setup.py); launch_gemm_mma takes it where wgmma_shape
// says so.
#pragma once
#include <cstdint>
#include <type_traits>

#include "gemm_mma.h"

namespace bankops {

// BM x BN x BK block tiles; CONSUMERS warpgroups split BM (64 rows each, m64nBNk16
// instructions); PRODUCERS warpgroups fill STAGES ring slots (one thread of them, for TMA).
template <int BM, int BN, int BK, int CONSUMERS, int STAGES, int PRODUCERS = 1>
struct WgmmaConfig {
  static constexpr int kBM = BM, kBN = BN, kBK = BK, kConsumers = CONSUMERS, kStages = STAGES;
  static constexpr int kProducers = PRODUCERS, kProducerThreads = 128 * PRODUCERS;
  static constexpr int kThreads = 128 * (CONSUMERS + PRODUCERS);
  static constexpr int kSteps = BK / 16, kAcc = BN / 2;  // k16 steps per k-tile, floats per consumer thread
  static_assert(BM == 64 * CONSUMERS && BK % 64 == 0 && (BN == 64 || BN == 128 || BN == 256),
                "m64n64, m64n128 or m64n256 per consumer");
};
// 128 x 256: two consumers of 64 x 256 (128 accumulators a thread), four 48 KB stages, for
// grids of 128 or more of its tiles.
using WgmmaLarge = WgmmaConfig<128, 256, 64, 2, 4>;
// 128 x 128 for grids with too few 128 x 256 tiles (2048 x 1792: 112; 224 of these): two
// consumers of 64 x 128 and six 32 KB stages, so that more of a tile's k-tiles are in flight.
// Per product it reads 4/3 of what a 128 x 256 tile reads (a 64 x 128 variant with one
// consumer ran 1024^3 in 12.5 us against mma.sync's 64 x 128 tile's 8.7 us, H100,
// 2026-11-25). Only TMA fills it.
using WgmmaMedium = WgmmaConfig<128, 128, 64, 2, 6>;
// 128 x 64 for grids with too few 128 x 128 tiles (1024^3: 64; 128 of these), cuBLAS's own
// tile there (nvjet_sm90_hsh_128x64_64x8_1x2, Nsight Compute): two consumers of 64 x 64 and
// eight 24 KB stages. Only TMA fills it.
using WgmmaNarrow = WgmmaConfig<128, 64, 64, 2, 8>;
// 128 x 128 with two realigning producer warpgroups, for rows off 16-byte boundaries on
// grids of whole waves of these tiles (4095 x 4097: 1056, 8 waves) but not of 128 x 256
// ones. Two producers keep a whole 32 KB stage of loads in flight (WgmmaLarge's one: half of
// a 48 KB stage) and split the shuffles and selects over two warps a scheduler; 512 threads
// leave each the launch's 128 registers. 4095 x 4097 x 4093 in 0.973 ms against the mma.sync
// realigning path's 1.053 and cuBLAS's 0.901; 1407 x 1535 x 519 33.0 us against 41.7 (H100,
// 2026-11-25, float16, CUDA graphs): twice the loads in flight per product bought 8%, so
// they are not what bounds a realigning producer (see wgmma_shape).
using WgmmaMediumRealign = WgmmaConfig<128, 128, 64, 2, 6, 2>;

constexpr int kWgmmaRowCols = 64;  // halves in one 128-byte swizzled row
using WgmmaSwizzle = Swizzle<3, 3, 3>;
// A is As[BM][BK] (k-major); B is Bs[BK][BN] (n-major, KN) or Bs[BN][BK] (k-major). Tiles are
// 64-column blocks of 128-byte swizzled rows, one block after another.
template <int ROWS, int COLS>
using WgmmaTile = Blocked<Swizzled<ROWS, kWgmmaRowCols, WgmmaSwizzle>, COLS>;
template <class C>
using WgmmaATile = WgmmaTile<C::kBM, C::kBK>;
template <class C, bool KN>
using WgmmaBTile = std::conditional_t<KN, WgmmaTile<C::kBK, C::kBN>, WgmmaTile<C::kBN, C::kBK>>;
template <class C>
using WgmmaCTile = MmaTile<Layout::Swizzle, C::kBM, C::kBN>;
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
template <class Tile>
BANKOPS_HD int wgmma_a_at(int m0, int s) { return Tile::offset(m0, 16 * s); }
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

// Whether a grid of C's tiles fills nine tenths of its last wave (of kWgmmaWaveSMs, the
// H100's count, fixed like kMmaMinTiles so that bankops.explain needs no GPU).
constexpr int kWgmmaWaveSMs = 132;
template <class C>
inline bool wgmma_whole_waves(const GemmArgs& g) {
  const int64_t tiles = g.batch * ceil_div(g.m, C::kBM) * ceil_div(g.n, C::kBN);
  return 10 * tiles >= 9 * ceil_div(tiles, kWgmmaWaveSMs) * kWgmmaWaveSMs;
}

// Whether TMA can copy a call's operands (tma.cuh), beyond the cp.async plan's 16-byte
// aligned rows: row strides of 1 element or more (a stride of 0, a broadcast row, has no
// tensor map; a batch stride of 0 is a map of one batch), coordinates within int32 and
// strides within 2^40 bytes.
inline bool wgmma_tma_ok(const GemmArgs& g, const GemmMmaPlan& p) {
  constexpr int64_t kCoord = int64_t(1) << 31, kStride = int64_t(1) << 39;  // 2-byte elements: 2^40 bytes
  const auto stride_ok = [](int64_t stride, int64_t size, bool zero) {
    return size <= 1 || ((stride > 0 || (zero && stride == 0)) && stride < kStride);
  };
  return g.m < kCoord && g.n < kCoord && g.k < kCoord && stride_ok(g.a_sm, g.m, false) &&
         (p.b_kn ? stride_ok(g.b_sk, g.k, false) : stride_ok(g.b_sn, g.n, false)) &&
         stride_ok(g.a_sb, g.batch, true) && stride_ok(g.b_sb, g.batch, true);
}

// Which Hopper kernel configuration takes a call, if any: a caller that allows it (the
// swizzle layout on compute capability 9.0, in a build with sm_90a), grids within the launch
// limits (one block tile per block), and
// - Large (WgmmaLarge): a grid that fills the GPU with its tiles (mma_fills), and either TMA
//   (the cp.async plan's 16-byte aligned rows, A k-contiguous, and wgmma_tma_ok) or the
//   realigning producer with B n-contiguous on a grid of whole waves;
// - Medium (WgmmaMedium): TMA on grids too small for WgmmaLarge but of a wave or more of its
//   own tiles (mma_fills). Against the mma.sync kernel (H100, 2026-11-25, float16, CUDA
//   graphs, bench/gemm_sweep.py, with its earlier cp.async producer): 1.25-1.73x on 128-224
//   of them (2048 x 1792 x 1024, 1536^3, 1024 x 2048 x 1024, 16 x 256 x 512 x 1024,
//   1024 x 2048 x 4096), but 0.91-0.94x on 64, where mma.sync's 64 x 128 tiles give every SM
//   a block;
// - Narrow (WgmmaNarrow): TMA on grids of 128 or more of its tiles, too few of WgmmaMedium's.
//   1024^3 in 5.9 us against mma.sync's 8.6 and cuBLAS's 5.8; 1024^2 x 512 4.2 against 5.9;
//   1024^2 x 256 3.45 against 4.48; 4 x 512^2 x 1024 6.7 against 8.6 (H100, 2026-11-25,
//   float16, CUDA graphs). It replaced split-K clusters of two blocks a 128 x 128 tile, each
//   taking half of K (7.8, 6.2 and 8.3 us there with cp.async), which were 3% faster only at
//   1024^2 x 4096 (17.8 us against 18.3) and gave bits that differed from the other layouts';
// - Medium with rows off 16-byte boundaries (WgmmaMediumRealign): B n-contiguous on a grid
//   of whole waves of its tiles, too ragged for WgmmaLarge's.
// The realigning producer runs at L2's request rate rather than its bytes: a row of 128
// bytes off 16-byte boundaries spans two lines, and the last lane of its row group asks for
// a third granule. Per tile it is about as fast as the mma.sync kernel's realigning path,
// whose 128 x 128 tiles fill ragged grids 4 times finer, and B^T's 256 rows of 128 bytes per
// k-tile make it slower (H100, 2026-11-25, float16, CUDA graphs: 4095 x 4097 x 4093, 4.12
// waves, 1.12 ms against mma.sync's 1.07 and, as B^T, 1.37 against 0.97; 8191 x 8193 x 8189,
// 16 whole waves, 6.25 ms against 6.75, cuBLAS 6.70; 4096^3 from offset pointers, 3.88
// waves, 0.57 against 0.82). Twice the loads in flight per product (WgmmaMediumRealign)
// gained 8%: a rate bound, not a latency one. So on matrices of 256 x 256 or more the op
// copies such operands into aligned rows first and calls take the TMA configurations
// (gemm_repack.h); the realigning producers take the smaller ones.
enum class WgmmaShape { None, Large, Medium, Narrow };
// How the producer fills the stage ring: TMA boxes, or chunks realigned in registers.
enum class WgmmaLoad { Tma, Realign };
inline WgmmaShape wgmma_shape(const GemmArgs& g, const GemmMmaPlan& p, bool allowed) {
  if (!allowed || g.batch > 65535 || ceil_div(g.m, WgmmaLarge::kBM) > 65535) return WgmmaShape::None;
  const bool tma = p.async && wgmma_tma_ok(g, p);
  const bool fill = tma || (p.realign && p.b_kn && wgmma_whole_waves<WgmmaLarge>(g));
  if (fill && mma_fills(g, WgmmaLarge::kBM, WgmmaLarge::kBN)) return WgmmaShape::Large;
  if (!tma && p.realign && p.b_kn && wgmma_whole_waves<WgmmaMediumRealign>(g) &&
      mma_fills(g, WgmmaMediumRealign::kBM, WgmmaMediumRealign::kBN))
    return WgmmaShape::Medium;
  if (!tma) return WgmmaShape::None;
  if (mma_fills(g, WgmmaMedium::kBM, WgmmaMedium::kBN)) return WgmmaShape::Medium;
  if (mma_fills(g, WgmmaNarrow::kBM, WgmmaNarrow::kBN)) return WgmmaShape::Narrow;
  return WgmmaShape::None;
}

// Shared memory: the stage ring (every tile 1024-byte aligned: the hardware anchors the
// 128-byte swizzle to address bits), reused by the epilogue's C tile, plus 1024 bytes to align
// the base (the mbarriers are static).
template <class C, bool KN>
struct WgmmaSmem {
  static constexpr int kA = WgmmaATile<C>::kSize * 2, kB = WgmmaBTile<C, KN>::kSize * 2;
  static constexpr int kStage = kA + kB, kRing = C::kStages * kStage;
  static constexpr int kBytes = kRing + 1024;
  static_assert(kA % 1024 == 0 && kB % 1024 == 0, "tiles on 1024-byte boundaries");
  static_assert(kRing >= WgmmaCTile<C>::kSize * 2, "the C tile fits the ring");
};

}  // namespace bankops
