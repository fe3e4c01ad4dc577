// gemm: C[b] = A[b] @ B[b] with a shared-memory tiled FMA kernel: FFMA for float32, DFMA for
// float64 (float16/bfloat16 run on the tensor cores: gemm_mma.h). The kernel keeps an input
// type apart from its accumulator type, though today the two are always the same.
//
// A is staged transposed (As[k][m]) and B as is (Bs[k][n]), so each step kk of the inner
// loop reads one tile row of each: 16-byte vectors (LDS.128) of a thread's register
// micro-tile. Tiles have 16-byte units (4 floats, 2 doubles): `pad` adds one unit per row and
// `swizzle` XORs row bits above the units (GemmSwizzle), so a vector is never split.
#pragma once
#include <cstdint>
#include <type_traits>

#include "dtype.h"
#include "layout.cuh"

namespace bankops {

constexpr int kGemmBK = 8;      // k rows of one staging group: the transposed store of a 16-byte
                                // k-vector hits rows j and j+4 of it only, which pad and swizzle
                                // both separate; a k tile is one or more groups
constexpr int kGemmVecBytes = 16;

// One operand's tiles in a configuration: BK rows (k) of COLS columns (m for A, n for B),
// staged by THREADS threads in 16-byte vectors of the accumulator type.
template <int ACC_BYTES, int COLS, int THREADS, int BK>
struct GemmOperand {
  static constexpr int kAccBytes = ACC_BYTES, kVec = kGemmVecBytes / ACC_BYTES;
  static constexpr int kCols = COLS, kThreads = THREADS, kBK = BK;
  // 16-byte vectors of one tile per thread (both staging directions).
  static constexpr int kLoads = kBK * kCols / (kVec * kThreads);
  static_assert(kLoads >= 1 && kBK * kCols == kLoads * kVec * kThreads, "whole vectors per thread");
  // Vectors of one staging group (k-major), and rows between a thread's vectors (x-major).
  static constexpr int kGroupVecs = kGemmBK / kVec * kCols, kLoadStepK = kThreads / (kCols / kVec);
  static_assert(kGroupVecs % kThreads == 0 && kLoadStepK * (kCols / kVec) == kThreads, "uniform steps");
};

// One block configuration. Each thread owns QM x QN quadrants of VEC x VEC accumulators (VEC
// = one 16-byte vector of the accumulator type); a warp is 4 (m) x 8 (n) lanes, the block
// WARPS_M x WARPS_N warps (gemm_frag_m / gemm_frag_n place the quadrants). MIN_BLOCKS per SM
// sets the register budget: 65536 / (threads * MIN_BLOCKS), at most 255. BK: k per tile
// (a multiple of kGemmBK), STAGES: tiles in shared memory (the cp.async pipeline depth).
// A's tiles (OpA) are kBM columns wide, B's (OpB) kBN.
template <int ACC_BYTES, int QM, int QN, int WARPS_M, int WARPS_N, int MIN_BLOCKS, int BK = kGemmBK, int STAGES = 4>
struct GemmShape {
  static constexpr int kAccBytes = ACC_BYTES;
  static constexpr int kVec = kGemmVecBytes / ACC_BYTES;
  static constexpr int kQM = QM, kQN = QN, kWarpsM = WARPS_M, kWarpsN = WARPS_N;
  static constexpr int kTM = QM * kVec, kTN = QN * kVec;  // micro-tile
  static constexpr int kLanesM = 4, kLanesN = 8;
  static constexpr int kQuad = 4 * kVec;  // tile columns between a thread's quadrants (A and B)
  static constexpr int kWM = kLanesM * kTM, kWN = kLanesN * kTN;  // warp tile
  static constexpr int kBM = WARPS_M * kWM, kBN = WARPS_N * kWN, kBK = BK, kStages = STAGES;
  // Register-staged tiles are stored into shared memory a tile after their loads (gemm.cu).
  static_assert(BK % kGemmBK == 0 && STAGES >= 3, "k tiles of whole staging groups, three stages at least");
  static_assert(is_pow2(WARPS_M) && is_pow2(WARPS_N), "gemm_frag_m / gemm_frag_n mask the warp index");
  static constexpr int kThreads = 32 * WARPS_M * WARPS_N;
  static constexpr int kMinBlocks = MIN_BLOCKS;  // blocks per SM the registers must allow
  using OpA = GemmOperand<ACC_BYTES, kBM, kThreads, BK>;
  using OpB = GemmOperand<ACC_BYTES, kBN, kThreads, BK>;
};

// The configurations, chosen by gemm_config() (H100, 2026-11-23/24, bench/run.py and ncu):
//  - Wide (float32, both operands staged with 16-byte vectors, grids that fill the GPU):
//    128x256, 256 threads (2x4 warps of 64x64), 16x8 per thread, 3 stages, one block per SM
//    with up to 255 registers: cuBLAS's FFMA kernel (sm80_xmma ...
//    tilesize256x128x8_stage3_warpsize4x2x1_ffma computes C^T, so its 256 is our n). Its
//    k-major operands (row-major A: the transposed store) are copied element by element with
//    4-byte cp.async, as cuBLAS copies all of its operands: nothing waits in registers, and
//    the 3-stage pipeline covers both operands. 0.98-0.99x cuBLAS from 2048^3 to 8192^3
//    in bench/run.py (1.00-1.04x in a harness run), where register staging gave 0.93-0.99x on
//    the same loop and 4 stages 0.96-1.00x. Its grid is one-dimensional (gemm_work.h): with
//    stream-K sharing out the short wave's tiles, 4096^3 and 8192^3 run at 1.00-1.01x cuBLAS
//    instead of 0.95-0.98x (H100, 2026-11-26, in one process), and ragged grids at least a
//    wave deep take it too.
//  - Big (float32, both operands staged with 16-byte vectors): 128x128, 128 threads (2x2 warps
//    of 64x64), 16x8 per thread: 128 FMAs per 6 LDS.128, two blocks per SM with up to 255
//    registers, k-major operands through registers (4-byte cp.async copies measured 0.85-0.92x
//    cuBLAS here against 0.94-0.98x). BK 16 measured slower than BK 8.
//    Big and Wide also take row-major operands whose rows are not 16-byte aligned (odd row
//    lengths, offsets into storage) with 4-byte cp.async copies for those (the Async4
//    staging), which need no staging registers. Wide, with the strip for n = 4097, runs
//    4095x4097x4093 at 1.01x cuBLAS and 8191x8193x8189 at 1.03x (H100, 2026-11-26, with
//    stream-K), where Big ran 0.86x and 0.99x. On Big its 16
//    copies per thread and k tile go between the FMAs; issued back to back they filled the
//    MIO queue (ncu) and it ran at 0.80x.
//  - BigScalar (float32 with an operand staged element by element through registers:
//    strided or transposed misaligned views): 128x128, 256 threads, 8x8 per thread. With the
//    scalar loads' staging registers it beat Big (0.63x vs 0.50x cuBLAS at 4095x4097x4093,
//    before Async4 took that shape; its run-time mode kernel spills 100-160 bytes).
//  - Small (float32: 64x64, 128 threads, 8x4 per thread): four times the blocks, for
//    grids of 128x128 tiles that would leave SMs idle, or matrices of 64 rows or columns.
//  - float64: 64x64, 256 threads, 4x4 doubles per thread (DFMA; registers allow no more).
template <int ACC_BYTES>
struct GemmBigOf {
  using type = GemmShape<4, 4, 2, 2, 2, 2>;
};
template <>
struct GemmBigOf<8> {
  using type = GemmShape<8, 2, 2, 4, 2, 2>;
};
template <int ACC_BYTES>
using GemmBig = typename GemmBigOf<ACC_BYTES>::type;
using GemmWide = GemmShape<4, 4, 2, 2, 4, 1, kGemmBK, 3>;
using GemmBigScalar = GemmShape<4, 2, 2, 4, 2, 2>;
using GemmSmall = GemmShape<4, 2, 1, 2, 2, 4>;
static_assert(GemmWide::kBM == 128 && GemmWide::kBN == 256 && GemmWide::kThreads == 256, "cuBLAS's tile, transposed");
// Whether configuration S copies aligned k-major operands element by element with cp.async
// (Wide) instead of staging them through registers: the launcher and the trace both ask.
template <class S>
BANKOPS_HD constexpr bool gemm_copies_k() {
  return std::is_same<S, GemmWide>::value;
}

enum class GemmConfig : int { Big = 0, BigScalar = 1, Small = 2, Wide = 3 };

// How a call's operands reach shared memory (gemm_staging):
//  - Vector: both with 16-byte vectors (KVec / XAsync).
//  - Async4: A row-major (KVec, or KScalar with contiguous k) and B row-major (XAsync, or
//    XScalar with contiguous n), one of them misaligned: its elements are copied one by one
//    with 4-byte cp.async (float32), no registers between global and shared memory.
//  - Scalar: anything else (strided views, transposed misaligned ones): through registers.
enum class GemmStaging : int { Vector = 0, Async4 = 1, Scalar = 2 };

// Whether Wide's grid over (batch, m, n) keeps at least 7/8 of the SMs busy over all its
// waves. A Wide block takes a whole SM, so a ragged last wave idles whole SMs; Big's
// half-size blocks, two per SM, fill such grids better (an SM left with one runs it at 4
// warps). The powers of two from 2048^3 up fill 97% (128 blocks of 132 SMs at 2048^3, 512
// at 4096^3); 1536^2 (72 blocks) and 1600x1430 (78) do not, nor do ragged shapes just past a
// full wave, e.g. 4096x4352 (544 blocks: 82% of 5 waves), which take Wide only where
// stream-K evens out their last wave (gemm_wide_shares).
BANKOPS_HD bool gemm_wide_fills(int64_t batch, int64_t m, int64_t n, int num_sms) {
  const int64_t wide = batch * ceil_div(m, GemmWide::kBM) * ceil_div(n, GemmWide::kBN);
  return 8 * wide >= 7 * ceil_div(wide, num_sms) * num_sms;
}

// Stream-K (gemm_work.h): a shared tile's k tiles go to at most kGemmMaxSplit blocks (the
// block that ends it adds the others' partial sums), and a block takes kGemmMinSplitK k tiles
// at least (each fills the cp.async pipeline again and writes or adds a partial sum, which a
// shorter run does not pay back).
constexpr int kGemmMaxSplit = 8, kGemmMinSplitK = 32;
// The stream-K blocks of a Wide grid of `tiles` tiles, tiles_k k tiles deep: 0 where the last
// wave is full or too short to share, else as many as its tiles can keep busy.
BANKOPS_HD int gemm_stream_k_blocks(int64_t tiles, int64_t tiles_k, int num_sms) {
  const int64_t rest = tiles % num_sms, blocks = rest * kGemmMaxSplit < num_sms ? rest * kGemmMaxSplit : num_sms;
  return rest > 0 && rest * tiles_k >= blocks * kGemmMinSplitK ? static_cast<int>(blocks) : 0;
}
// Whether stream-K evens out the last wave of Wide's grid over (batch, m, n, k), at least a
// wave deep: 4096x4352x4096 (544 tiles, 82% of 5 waves) then runs Wide at 1.05-1.07x cuBLAS
// where Big ran 0.92x, and 2048x2065x2048 (144 tiles, the last column of them nearly empty)
// at 0.94x where Big ran 0.57x (H100, 2026-11-26; the second with an earlier build).
BANKOPS_HD bool gemm_wide_shares(int64_t batch, int64_t m, int64_t n, int64_t k, int num_sms, bool stream_k) {
  const int64_t wide = batch * ceil_div(m, GemmWide::kBM) * ceil_div(n, GemmWide::kBN);
  return stream_k && wide >= num_sms && gemm_stream_k_blocks(wide, ceil_div(k, GemmWide::kBK), num_sms) > 0;
}

// The strip: at most this many columns past the last whole 256-column tile, which strip
// blocks (gemm_strip.h) compute instead of a column of Wide tiles.
constexpr int kGemmStripCols = 16;

// Columns at the right edge of C that go to the strip blocks, 0 for none: float32 with
// vector or Async4 staging, n a few columns (1 .. kGemmStripCols) past whole Wide tiles, and
// Wide's grid filling the SMs without that last column of blocks but not with it. n = 4097
// (16 tiles and one column) is the case: 544 blocks are 82% of 5 waves; 512 fill 4 waves to
// 97%, and the 128 strip blocks (4 per 128 rows) each take a fraction of a tile's time.
BANKOPS_HD int gemm_strip_cols(int acc_bytes, int64_t batch, int64_t m, int64_t n, int num_sms, GemmStaging staging) {
  const int64_t cols = n % GemmWide::kBN;
  if (acc_bytes != 4 || staging == GemmStaging::Scalar || cols == 0 || cols > kGemmStripCols || n < GemmWide::kBN)
    return 0;
  if (gemm_wide_fills(batch, m, n, num_sms) || !gemm_wide_fills(batch, m, n - cols, num_sms)) return 0;
  return static_cast<int>(cols);
}

// The rule (float32; float64 has one configuration):
//  1. Small when the 128x128 grid leaves an SM without a block, or m or n fits one 64 tile.
//  2. BigScalar when an operand stages through registers element by element (Scalar).
//  3. Wide (Vector or Async4 staging) when its grid fills the SMs (gemm_wide_fills), over all
//     of C or over all but a strip (gemm_strip_cols), or stream-K evens out its last wave
//     (gemm_wide_shares; stream_k: the launch has its workspace).
//  4. Big otherwise.
BANKOPS_HD GemmConfig gemm_config(int acc_bytes, int64_t batch, int64_t m, int64_t n, int64_t k, int num_sms,
                                  GemmStaging staging, bool stream_k) {
  if (acc_bytes != 4) return GemmConfig::Big;
  const int64_t blocks = batch * ceil_div(m, GemmBig<4>::kBM) * ceil_div(n, GemmBig<4>::kBN);
  if (blocks < num_sms || m <= GemmSmall::kBM || n <= GemmSmall::kBN) return GemmConfig::Small;
  if (staging == GemmStaging::Scalar) return GemmConfig::BigScalar;
  const bool wide = gemm_wide_fills(batch, m, n, num_sms) || gemm_wide_shares(batch, m, n, k, num_sms, stream_k) ||
                    gemm_strip_cols(acc_bytes, batch, m, n, num_sms, staging) > 0;
  return wide ? GemmConfig::Wide : GemmConfig::Big;
}

// The swizzle of an operand's tiles. Only the transposed store (k-major staging) walks a tile
// column: one warp phase (128 bytes of requests) holds P consecutive columns of the rows
// kv*VEC + e, kv < kGemmBK/VEC, of one staging group, which all start on bank 0. XORing exactly those row bits (B of
// them) into the offset bits just above the P columns (M) moves each row to its own banks;
// row walks (LDS.128, cp.async, STS.128) only permute whole 16-byte vectors inside a row.
// It XORs the fewest offset bits that remove the conflict, so the inner loop's swizzled
// addresses differ from the dense ones in as few registers as possible.
template <class Op>
struct GemmSwizzle {
  static constexpr int kRowsPerWarp = kGemmBK / Op::kVec;                    // kv values in a warp
  static constexpr int kPhaseLanes = Op::kAccBytes <= 4 ? 32 : 128 / Op::kAccBytes;
  static constexpr int B = log2_exact(kRowsPerWarp);
  static constexpr int M = log2_exact(kPhaseLanes / kRowsPerWarp);            // columns per phase
  static constexpr int S = log2_exact(Op::kCols) + log2_exact(Op::kVec) - M;
  using type = Swizzle<B, M, S>;
};

// An operand's tiles (Op: a GemmShape's OpA or OpB): kBK rows (k) of kCols (m for A, n for
// B), in 16-byte units: `pad` adds one unit per row, `swizzle` is GemmSwizzle.
template <Layout L, class Op>
struct GemmTileSelect {
  using type = RowMajor<Op::kBK, Op::kCols>;
};
template <class Op>
struct GemmTileSelect<Layout::Pad, Op> {
  using type = Padded<Op::kBK, Op::kCols, Op::kVec>;
};
template <class Op>
struct GemmTileSelect<Layout::Swizzle, Op> {
  using type = Swizzled<Op::kBK, Op::kCols, typename GemmSwizzle<Op>::type>;
};
template <Layout L, class Op>
using GemmTileOf = typename GemmTileSelect<L, Op>::type;
// The big configuration's tile (A's; B's is the same) for an accumulator size (what _tile_map shows).
template <Layout L, int ACC_BYTES>
using GemmTile = GemmTileOf<L, typename GemmBig<ACC_BYTES>::OpA>;
static_assert(GemmBig<4>::kBM == GemmBig<4>::kBN && GemmBig<8>::kBM == GemmBig<8>::kBN, "square big tiles");

// How a block stages one operand tile (rows k, columns x = m for A, n for B); chosen per call
// from the operand's strides and alignment:
//  - KVec:    k contiguous, 16-byte aligned: one 16-byte load along k, VEC scalar stores down
//             a tile column (the transposed store: rows kv*VEC + e).
//  - KScalar: k the faster dim but not vector-loadable: the same thread -> element map with
//             scalar loads (misaligned rows, strided views).
//  - XAsync:  x contiguous, 16-byte aligned: cp.async 16 bytes into a tile row.
//  - XScalar: x the faster dim but not vector-loadable: scalar loads, one 16-byte store.
enum class GemmStage : int { KVec = 0, KScalar = 1, XAsync = 2, XScalar = 3 };
BANKOPS_HD bool gemm_k_major(GemmStage s) { return s == GemmStage::KVec || s == GemmStage::KScalar; }
BANKOPS_HD bool gemm_vector(GemmStage s) { return s == GemmStage::KVec || s == GemmStage::XAsync; }

// The operand's mode: k_stride / x_stride / batch_stride in elements, extents k and x.
inline GemmStage gemm_stage_mode(const void* base, int elem_bytes, int acc_bytes, int64_t batch, int64_t batch_stride,
                                 int64_t k, int64_t k_stride, int64_t x, int64_t x_stride) {
  const bool k_unit = k > 1 && k_stride == 1, x_unit = x > 1 && x_stride == 1;
  const bool k_major = k_unit || (!x_unit && k > 1 && (x == 1 || k_stride <= x_stride));
  const int vec = kGemmVecBytes / acc_bytes;
  // Vector loads read whole 16-byte vectors, so every vector's first element must be aligned.
  const auto mult = [&](int64_t stride, int64_t extent) { return extent <= 1 || stride % vec == 0; };
  const bool aligned = elem_bytes == acc_bytes && reinterpret_cast<uintptr_t>(base) % kGemmVecBytes == 0 &&
                       mult(batch_stride, batch);
  if (k_major) return k_unit && aligned && mult(x_stride, x) ? GemmStage::KVec : GemmStage::KScalar;
  return x_unit && aligned && mult(k_stride, k) ? GemmStage::XAsync : GemmStage::XScalar;
}

// A scalar mode whose fast dim is contiguous (rows that are not 16-byte aligned), on an
// element-aligned base: each element can be one cp.async of the element's size.
inline bool gemm_unit_scalar(GemmStage s, const void* base, int elem_bytes, int64_t k_stride, int64_t x_stride) {
  const bool unit = (s == GemmStage::KScalar && k_stride == 1) || (s == GemmStage::XScalar && x_stride == 1);
  return unit && reinterpret_cast<uintptr_t>(base) % elem_bytes == 0;
}

// The call's GemmStaging from its operands' modes; unit_a / unit_b: gemm_unit_scalar.
inline GemmStaging gemm_staging(GemmStage mode_a, bool unit_a, GemmStage mode_b, bool unit_b) {
  if (gemm_vector(mode_a) && gemm_vector(mode_b)) return GemmStaging::Vector;
  const bool a = mode_a == GemmStage::KVec || (mode_a == GemmStage::KScalar && unit_a);
  const bool b = mode_b == GemmStage::XAsync || (mode_b == GemmStage::XScalar && unit_b);
  return a && b ? GemmStaging::Async4 : GemmStaging::Scalar;
}

// Staging of an operand (Op: its GemmOperand): vector v (0 <= v < kLoads) of thread t.
// k-major: tile rows kv*VEC .. +VEC-1 of column x inside one staging group of kGemmBK rows,
// lanes walking k first (coalesced global reads, the tile store walks a column); the groups
// of a deeper k tile follow one another.
// x-major: tile row k, columns xv*VEC .. +VEC-1, lanes walking x (a warp copies whole rows), a
// thread's vectors in consecutive rows: their tile offsets are one offset plus constants in
// every layout (gemm_stage_affine).
template <class Op>
BANKOPS_HD constexpr TileCoord gemm_stage_k(int t, int v) {
  const int i = t + v * Op::kThreads, j = i % Op::kGroupVecs;
  constexpr int kvs = kGemmBK / Op::kVec;
  return TileCoord{i / Op::kGroupVecs * kGemmBK + (j % kvs) * Op::kVec, j / kvs};
}
template <class Op>
BANKOPS_HD constexpr TileCoord gemm_stage_x(int t, int v) {
  constexpr int xvs = Op::kCols / Op::kVec;
  return TileCoord{t / xvs * Op::kLoads + v, (t % xvs) * Op::kVec};
}

// Lanes of a warp, interleaved so that lanes T and T^1 read the same A vector and lanes T and
// T^2 the same B vector: the hardware then serves an LDS.128 in half-warps instead of
// quarters (bank_model.h). Lane bits 0, 2, 4 give the n lane, bits 1, 3 the m lane, so a
// half-warp reads 4 adjacent A vectors and 4 adjacent B vectors: 64 bytes, one wavefront
// each. (With n lanes 0-7 in one half-warp, B's lanes 4-7 sit 128 bytes past lanes 0-3 when
// a thread has two quadrants: the same banks, a second wavefront.)
BANKOPS_HD constexpr int gemm_lane_m(int t) { return ((t >> 1) & 1) | ((t >> 2) & 2); }
BANKOPS_HD constexpr int gemm_lane_n(int t) { return (t & 1) | ((t >> 1) & 2) | ((t >> 2) & 4); }
// First tile column (m) of quadrant q of thread t's A fragment, and (n) of its B fragment.
// A: the 4 m lanes' vectors are adjacent, quadrants 4 vectors apart. B: n lanes 0-3 are
// adjacent, quadrants 4 vectors apart, n lanes 4-7 after all quadrants. Either way the
// quadrant index is one known bit of the column (bit log2(4*VEC)), so for a swizzle that
// XORs only that bit (float32's GemmSwizzle) the inner loop's addresses stay immediates.
template <class S>
BANKOPS_HD constexpr int gemm_frag_m(int t, int q) {
  const int warp_m = (t >> 5) & (S::kWarpsM - 1);
  return warp_m * S::kWM + q * S::kQuad + gemm_lane_m(t) * S::kVec;
}
template <class S>
BANKOPS_HD constexpr int gemm_frag_n(int t, int q) {
  const int warp_n = ((t >> 5) / S::kWarpsM) & (S::kWarpsN - 1);
  const int lane = gemm_lane_n(t);
  return warp_n * S::kWN + (lane & 3) * S::kVec + q * S::kQuad + (lane >> 2) * (S::kQuad * S::kQN);
}

// Whether every fragment read is the thread's row-0 offset plus a constant: offset(kk, x + q *
// kQuad) == offset(0, x) + offset(kk, q * kQuad) for every thread's fragment origin x (in A's
// tile for m, B's for n). Then the inner loop's LDS.128 addresses are one register plus
// immediates in every layout (for float32's GemmSwizzle the XORed bit is the quadrant bit,
// which the origins leave clear).
template <class S, class TileA, class TileB>
BANKOPS_HD constexpr bool gemm_frags_affine() {
  for (int t = 0; t < S::kThreads; ++t)
    for (int kk = 0; kk < S::kBK; ++kk) {
      const int m = gemm_frag_m<S>(t, 0), n = gemm_frag_n<S>(t, 0);
      for (int q = 0; q < S::kQM; ++q)
        if (TileA::offset(kk, m + q * S::kQuad) != TileA::offset(0, m) + TileA::offset(kk, q * S::kQuad)) return false;
      for (int q = 0; q < S::kQN; ++q)
        if (TileB::offset(kk, n + q * S::kQuad) != TileB::offset(0, n) + TileB::offset(kk, q * S::kQuad)) return false;
    }
  return true;
}

struct GemmArgs {
  int64_t batch, m, n, k;
  const void* a;
  int64_t a_sb, a_sm, a_sk;  // element strides of A (batch, m, k); any values, views included
  const void* b;
  int64_t b_sb, b_sk, b_sn;
  void* c;                   // contiguous (batch, m, n)
};

}  // namespace bankops
