// The FFMA/DFMA gemm kernel's tiling (float32 and float64; 16-bit floats run on the tensor
// cores: mma.h, wgmma.h). A is staged transposed (As[k][m]) and B as is (Bs[k][n]), so each
// step kk of the inner loop reads one tile row of each: 16-byte vectors (LDS.128) of a
// thread's register micro-tile. Tiles have 16-byte units (4 floats, 2 doubles): `pad` adds
// one unit per row and `swizzle` XORs row bits above the units (GemmSwizzle), so a vector is
// never split. ffma_plan.h picks a call's configuration and staging.
#pragma once
#include <cstdint>
#include <type_traits>

#include "../dtype.h"
#include "../layout.cuh"
#include "args.h"

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
  // Register-staged tiles are stored into shared memory a tile after their loads (ffma.cu).
  static_assert(BK % kGemmBK == 0 && STAGES >= 3, "k tiles of whole staging groups, three stages at least");
  static_assert(is_pow2(WARPS_M) && is_pow2(WARPS_N), "gemm_frag_m / gemm_frag_n mask the warp index");
  static constexpr int kThreads = 32 * WARPS_M * WARPS_N;
  static constexpr int kMinBlocks = MIN_BLOCKS;  // blocks per SM the registers must allow
  using OpA = GemmOperand<ACC_BYTES, kBM, kThreads, BK>;
  using OpB = GemmOperand<ACC_BYTES, kBN, kThreads, BK>;
};

// The configurations (ffma_plan.h picks one; bench/design_notes.md has the figures):
//  - Wide: 128x256, 256 threads (2x4 warps of 64x64), 16x8 per thread, 3 stages, one block
//    an SM: cuBLAS's FFMA tile (its 256x128 computes C^T). k-major operands are copied an
//    element per 4-byte cp.async, as cuBLAS does, so nothing waits in registers. Its grid is
//    one-dimensional (ffma_work.h: the strip, stream-K, a block per tile).
//  - Big: 128x128, 128 threads (2x2 warps of 64x64), 16x8 per thread, two blocks an SM;
//    k-major operands through registers.
//  - BigScalar: 128x128, 256 threads, 8x8 per thread, for operands staged element by element
//    through registers (strided or transposed misaligned views).
//  - Small: 64x64, 128 threads, 8x4 per thread: four times the blocks, for small grids; float32
//    products of up to 64 rows (vector staging) split k across a cluster on compute capability
//    9.0 (ffma_plan.h).
//  - Mid: 64x128, 128 threads, 8x8 per thread, three blocks an SM: such split products where
//    Flat's grid is too short and its own keeps 2.5 blocks an SM.
//  - Flat: 64x256, 128 threads (1x4 warps of 64x64), 16x8 per thread, two blocks an SM: 33-64
//    rows against a wide weight, split k across a cluster where its grid keeps 1.5 blocks an SM
//    (Wide's micro-tile on one 64 tile of rows; at one block an SM its four warps stall).
//  - Short: 32x64, 64 threads (1x2 warps of 32x32), 8x4 per thread, eight blocks an SM: up to
//    32 rows split k across a cluster, for the tuner (cuBLAS's tile for such rows), no tile of
//    64 rows half empty.
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
using GemmMid = GemmShape<4, 2, 2, 2, 2, 3>;
using GemmFlat = GemmShape<4, 4, 2, 1, 4, 2>;
using GemmShort = GemmShape<4, 2, 1, 1, 2, 8>;
static_assert(GemmShort::kBM == 32 && GemmShort::kBN == 64 && GemmShort::kThreads == 64, "32 rows, two warps");
static_assert(GemmFlat::kBM == 64 && GemmFlat::kBN == 256 && GemmFlat::kThreads == 128, "Wide's micro-tile, 64 rows");
static_assert(GemmWide::kBM == 128 && GemmWide::kBN == 256 && GemmWide::kThreads == 256, "cuBLAS's tile, transposed");

enum class GemmConfig : int { Big = 0, BigScalar = 1, Small = 2, Wide = 3, Mid = 4, Flat = 5, Short = 6 };

// The split-K partial tile of the configurations that split (BM x BN floats). A warp stores 16-byte
// vectors of rows 4 apart, two rows a quarter-warp phase, 64 bytes each: `pad`'s 16 bytes a row
// and `swizzle`'s XOR of row bits into the 16-byte unit put the two on different banks; `none`
// leaves them on the same (2-way).
template <Layout L, int BM, int BN>
using FfmaSplitTile = TileLayout<L, BM, BN, 4, 16>;
// Small, Mid, Flat (up to 64 rows) and Short (32) split k across a cluster (float32), and stage
// by 16-byte vectors only: Mid, Flat and Short run no other staging.
template <class S>
constexpr bool ffma_vector_only() {
  return std::is_same<S, GemmMid>::value || std::is_same<S, GemmFlat>::value || std::is_same<S, GemmShort>::value;
}
template <class S>
constexpr bool ffma_splits() {
  return std::is_same<S, GemmSmall>::value || ffma_vector_only<S>();
}

// How a call's operands reach shared memory (gemm_staging):
//  - Vector: both with 16-byte vectors (KVec / XAsync).
//  - Async4: A row-major (KVec, or KScalar with contiguous k) and B row-major (XAsync, or
//    XScalar with contiguous n), one of them misaligned: its elements are copied one by one
//    with 4-byte cp.async (float32), no registers between global and shared memory.
//  - Scalar: anything else (strided views, transposed misaligned ones): through registers.
enum class GemmStaging : int { Vector = 0, Async4 = 1, Scalar = 2 };


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
BANKOPS_HD constexpr bool gemm_k_major(GemmStage s) { return s == GemmStage::KVec || s == GemmStage::KScalar; }
BANKOPS_HD constexpr bool gemm_vector(GemmStage s) { return s == GemmStage::KVec || s == GemmStage::XAsync; }

// Whether configuration S copies an aligned k-major A element by element with cp.async instead
// of staging it through registers (16-byte loads, transposed stores), beside a B staged as
// mode_b: Wide beside an x-major B, as cuBLAS does (nothing waits in registers). A k-major B
// goes through registers, and A beside it too: element copies of B's 256 columns touch four
// times the sectors they use (bench/design_notes.md). The launcher and the trace both ask.
template <class S>
BANKOPS_HD constexpr bool gemm_copies_a_k(GemmStage mode_b) {
  return std::is_same<S, GemmWide>::value && !gemm_k_major(mode_b);
}

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
// Row i of a thread's micro-tile, from its first (gemm_frag_m's quadrant 0): quadrant i / VEC,
// row i % VEC of it.
template <class S>
BANKOPS_HD constexpr int gemm_frag_row(int i) {
  return (i / S::kVec) * S::kQuad + i % S::kVec;
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

}  // namespace bankops
