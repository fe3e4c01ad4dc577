// The few-rows kernel (rows.cu): C = A @ B for a few rows of A (decode: x, M up to 64 in
// float32, 16 in 16 bits) against a weight read in place and streamed once from memory: B =
// W.t() with k contiguous, or for float32 also B = W with n contiguous. The products:
// - FFMA (float32; 16-bit up to kRowsFfmaRows rows): the weight straight into registers by
//   16-byte loads; each warp takes kRowsPerWarp weight rows, a lane 16 bytes of each per load
//   (512 contiguous bytes a row); the rows of A go through shared memory a window of k at a
//   time (cp.async, double-buffered); the lanes' sums meet by halving exchanges (rows_sum_index);
// - FFMA through a ring (float32: a weight stored (K, N), x @ W, and one stored (N, K) in
//   blocks of 16 rows, rows_takes_ring): windows of the weight and of x go through a ring of
//   stages by cp.async; lane (q, c) = (lane / 8, lane % 8) reads 4 k (k .. k + 3 = 4q + 16 warp
//   + 128 j of each window) of 4 weight columns, 16 bytes a column (along k) or a k (along n,
//   the 16 bytes it copied: a warp's copy takes four whole 128-byte lines), and multiplies them
//   by x's 16 bytes at k of each row (one LDS.128 for 16 FMAs); the four q lanes' sums meet by
//   two halving exchanges, the eight warps' in shared memory (rows_ring_kernel);
// - mma.sync m16n8k16 (16-bit past kRowsFfmaRows rows): windows of the weight (RowsWTile) and
//   of x (RowsXTile) go through a ring of stages (rows_stages) by cp.async, each warp copying 512
//   contiguous bytes of one weight row an instruction (whole 128-byte lines: DRAM streams them
//   faster than the fragments' 64 bytes of 8 rows, and the ring keeps more in flight than
//   registers could). Each warp then takes 8 weight rows, lane (g, t) = (lane / 4, lane % 4)
//   the 16 bytes at k 8t.. of row g in each 32-k chunk, which are its B pairs of two k16 steps
//   as they stand; its A pairs are the same k of rows g and g + 8 of x, so every product pairs
//   the same k.
//   Its persistent form (split 1, a plan only a measured table picks): one block an SM walks
//   the tiles, its ring running on from one tile's windows into the next's. A weight stored
//   (K, N) (x @ W, KN: compute capability 9.0) comes the same way, its window 256
//   rows k of the block's 128 bytes of n (RowsWTileKn); each warp's B pairs come from it by
//   ldmatrix.trans, its rows placed so that the pairs are those same k of x (rows_kn_row).
// The warps' sums meet in a partial tile in shared memory, a cluster's k ranges by split-K
// (split_k.h); the layout is the call's, for every tile.
#pragma once
#include <cstdint>
#include <type_traits>

#include "../dtype.h"
#include "../layout.cuh"
#include "args.h"
#include "split_k.h"

namespace bankops {

constexpr int kRowsWarps = 8, kRowsThreads = 32 * kRowsWarps;
constexpr int kRowsPerWarp = 4, kRowsUnroll = 2;  // FFMA: weight rows a warp; loads of a row in flight a lane
constexpr int kRowsMmaChunks = 8;                 // mma.sync: 32-k chunks a window (loads of its row a lane)
// The weight bytes a block asks L2 for before it waits on the kernel ahead (options.prefetch,
// compute capability 9.0; rows_start): the blocks that start early take a few MB in all, about
// what DRAM delivers while that kernel's last blocks drain and this one's start. A weight stored
// (K, N) is asked for a short line at a time (a block's columns of one row k), and less of it.
constexpr int64_t kRowsPrefetchBytes = 64 * 1024, kRowsKnPrefetchBytes = 16 * 1024;

// 16-bit products of more than kRowsFfmaRows rows take mma.sync; fewer, FFMA (an m16 tile
// of a row or two is mostly zeros, and FFMA streams the weight as fast there), unless a GPU's
// measured table names the mma.sync form for them (rows_plan.h lists it).
constexpr int kRowsFfmaRows = 4;
BANKOPS_HD constexpr bool rows_on_mma(DType t, int64_t m) {
  return (t == DType::F16 || t == DType::BF16) && m > kRowsFfmaRows;
}
// The element bytes of the dtypes the kernel takes (rows_supports: float32, float16, bfloat16).
BANKOPS_HD constexpr int rows_elem_bytes(DType t) { return t == DType::F32 ? 4 : 2; }
// Weight rows (columns of C) a block takes.
BANKOPS_HD constexpr int rows_bn(bool mma) { return kRowsWarps * (mma ? 8 : kRowsPerWarp); }
// A window: the k the block's warps cover with the loads a lane keeps in flight.
BANKOPS_HD constexpr int rows_window(DType t, bool mma) {
  return mma ? 32 * kRowsMmaChunks : 32 * (16 / rows_elem_bytes(t)) * kRowsUnroll;
}
// FFMA's warp sums (rows.cu's rows_warp_sums): of N sums (a power of two), lane l ends with
// rows_sum_count(N) fully summed, its i-th being sum rows_sum_index(N, l, i): each exchange over
// lane bit o = 16, 8, .. while a lane keeps more than one gives the lanes with that bit set the
// upper half of what they kept. Fewer than 32 sums end on groups of lanes holding the same one,
// and the lowest lane of each group stores it (rows_sum_stores).
BANKOPS_HD constexpr int rows_sum_count(int n) { return n > 32 ? n / 32 : 1; }
BANKOPS_HD constexpr int rows_sum_index(int n, int lane, int i) {
  int idx = i;
  for (int o = 16, half = n / 2; o >= 1 && half >= 1; o /= 2, half /= 2)
    if (lane & o) idx += half;
  return idx;
}
BANKOPS_HD constexpr bool rows_sum_stores(int n, int lane) { return n >= 32 || lane % (32 / n) == 0; }
// The sum that index idx of a warp's kRowsPerWarp x TM stands for: row t of A, weight row r.
// Past 32 sums a lane keeps several, one store each: the lanes' bits take t's low three and r,
// so each store covers 8 rows of A by 4 weight rows, which pad and swizzle spread over 16 banks.
struct RowsSum {
  int t, r;
};
BANKOPS_HD constexpr RowsSum rows_sum_at(int tm, int idx) {
  const int per_lane = rows_sum_count(kRowsPerWarp * tm), hi = idx / per_lane, lo = idx % per_lane;
  return per_lane == 1 ? RowsSum{idx % tm, idx / tm} : RowsSum{(hi & 7) | lo << 3, hi >> 3};
}
// FFMA's blocks resident an SM, by registers (32 rows of sums take about 220 a thread).
BANKOPS_HD constexpr int rows_ffma_blocks_per_sm(int tm) { return tm < 16 ? 2 : 1; }
// The ring kernel's: two up to 16 rows (its ring holds the weight, not registers; 16 rows ran
// faster at two blocks an SM than at one: bench/design_notes.md).
BANKOPS_HD constexpr int rows_ffma_ring_blocks_per_sm(int tm) { return tm <= 16 ? 2 : 1; }
// Whether float32's FFMA takes the ring: a weight along n always; along k for blocks of 16 rows,
// where two ring blocks an SM beat one register block (at 8 rows and fewer the registers win, at
// 32 neither: bench/design_notes.md).
BANKOPS_HD constexpr bool rows_takes_ring(DType t, int tm, bool b_kn) { return b_kn || (t == DType::F32 && tm == 16); }

// The ring FFMA kernel's k per lane and round (k .. k + 3), and its warps' sums before they
// meet: k slice w's TM x rows_bn at rows w * TM.. (dense: a warp stores 32 consecutive columns
// of a row, and the sums read along rows).
constexpr int kRowsRingK = 4;
// The k a round covers (8 k slices x 4 q lanes x kRowsRingK: 128): a window is two.
constexpr int kRowsRingStep = kRowsWarps * 4 * kRowsRingK;
template <int TM>
using RowsWarpSums = RowMajor<kRowsWarps * TM, rows_bn(false)>;
// Lane (q, c)'s column of the block's 32 once the sums meet (column j of the lane's 4 before):
// a weight along n gives the lane 4 adjacent columns (16 bytes of a row), along k 4 columns 8
// apart (rows c, c + 8, ..: the 8 lanes of a phase read 8 consecutive weight rows).
BANKOPS_HD constexpr int rows_ring_col(bool kn, int c, int j) { return kn ? 4 * c + j : c + 8 * j; }

// The rows of A a block takes: the least power of two that covers m, 8 at least on mma.sync
// (half its m16 tile; the other half is zeros), at most kRowsMaxM. A call takes up to 64 rows
// on float32 below compute capability 9.0 (two blocks of 32 over each stretch of the weight,
// side by side in the grid so that the weight comes from memory once; rows_plan.h says where;
// on 9.0 the FFMA kernel's split tiles take them), 16 on 16 bits (past them the mma.sync
// kernel's own tiles, split across a cluster, run faster: bench/design_notes.md).
constexpr int kRowsMaxM = 32, kRowsMmaMaxM = 16, kRowsF32MaxM = 64;
BANKOPS_HD constexpr int rows_max_m(DType t) { return t == DType::F32 ? kRowsF32MaxM : kRowsMmaMaxM; }
BANKOPS_HD int rows_tm(int64_t m, bool mma) {
  int tm = mma ? 8 : 1;
  while (tm < m && tm < kRowsMaxM) tm *= 2;
  return tm;
}

// The 16-bit kernel's window of x (TM x window elements): a row's four lanes read 64
// contiguous bytes, two rows an 8-lane phase, so the unit is 64 bytes: `pad` moves each row 64
// bytes on and `swizzle` XORs row bits into the 64-byte group (conflict-free); `none` puts the
// two rows on the same banks (2-way).
template <Layout L, int TM>
using RowsXTile = TileLayout<L, TM, rows_window(DType::BF16, true), 2, 64>;

// The mma.sync kernel's window of the weight (rows_bn x window elements, 512 bytes a row): its
// reads are x's (lanes (g, t): 64 contiguous bytes of row g, two rows an 8-lane phase), so the
// unit is 64 bytes again, and `none` takes two wavefronts where one would do. The copies write
// 512 contiguous bytes of a row.
template <Layout L>
using RowsWTile = TileLayout<L, rows_bn(true), rows_window(DType::BF16, true), 2, 64>;

// The same window of a weight stored (K, N): its rows k of rows_bn columns (128 bytes), each
// warp's ldmatrix.trans reading 16 bytes (its 8 columns) of 8 rows a phase, so the unit is 16
// bytes: `pad` moves each row 16 bytes on and `swizzle` XORs the row's low bits into the unit
// (conflict-free); `none` puts the 8 rows on the same banks (8-way). The same size as
// RowsWTile's under every layout, so the two forms share their rings.
template <Layout L>
using RowsWTileKn = TileLayout<L, rows_window(DType::BF16, true), rows_bn(true), 2, 16>;
static_assert(RowsWTileKn<Layout::None>::kSize == RowsWTile<Layout::None>::kSize &&
                  RowsWTileKn<Layout::Pad>::kSize == RowsWTile<Layout::Pad>::kSize &&
                  RowsWTileKn<Layout::Swizzle>::kSize == RowsWTile<Layout::Swizzle>::kSize,
              "the two weight windows take the same stages");
// Where row k of a 32-k chunk of RowsWTileKn lies, k = 8a + 2j + e (a, j < 4, e < 2): row 8j +
// 2a + e. Lane (g, t)'s ldmatrix.trans pairs of matrix j are then k 8t + 2j, 8t + 2j + 1 of
// column g: the pairs at k 8t.. that x's 16 bytes give the lane (rows_mma_chunk), and lane l of
// the ldmatrix gives row l of the chunk.
BANKOPS_HD constexpr int rows_kn_row(int k) { return (k & ~31) | (k >> 1 & 3) << 3 | (k >> 3 & 3) << 1 | (k & 1); }

// The mma.sync kernel's ring: stages of the weight's window then x's. A grid of one wave at one
// block an SM takes the deep ring (as many stages as one block fits, up to four: the more bytes
// in flight an SM, the faster it streams); a longer grid the shallow one (as many as two blocks
// an SM fit), which keeps every block resident rather than run a second wave. A block takes at
// most the 163 KB that compute capability 8.x allows (bench/design_notes.md).
template <Layout L, int TM>
constexpr int rows_stage_bytes() { return (RowsWTile<L>::kSize + RowsXTile<L, TM>::kSize) * 2; }
constexpr int kRowsSmemPerSM = 228 * 1024, kRowsSmemPerBlock = 163 * 1024, kRowsMaxStages = 4;
template <Layout L, int TM>
constexpr int rows_stages(bool deep) {
  const int fit = (deep ? kRowsSmemPerBlock : kRowsSmemPerSM / 2 - 1024) / rows_stage_bytes<L, TM>();
  return fit < kRowsMaxStages ? fit : kRowsMaxStages;
}
// The blocks an SM that a ring of S stages leaves room for (1 KB of the SM's 228 KB a block).
template <Layout L, int TM>
constexpr int rows_ring_blocks_per_sm(int S) {
  return 2 * (S * rows_stage_bytes<L, TM>() + 1024) <= kRowsSmemPerSM ? 2 : 1;
}

// The persistent mma.sync kernel (rows_mma_persistent_kernel: split 1, one block an SM, compute
// capability 9.0): its ring takes as many stages as the 227 KB a block may have fit beside its
// own partial tile (which starts on a 128-byte line after the ring), up to kRowsPersistentStages.
constexpr int kRowsSmemPersistent = 227 * 1024, kRowsPersistentStages = 6;
template <Layout L, int TM>
constexpr int rows_persistent_part_at(int S) {
  return (S * rows_stage_bytes<L, TM>() + 127) / 128 * 128;
}
template <Layout L, int TM>
constexpr int rows_persistent_smem(int S) {
  return rows_persistent_part_at<L, TM>(S) + SplitTile<L, TM, rows_bn(true)>::kSize * 4;
}
template <Layout L, int TM>
constexpr int rows_persistent_stages() {
  int s = kRowsPersistentStages;
  while (s > 2 && rows_persistent_smem<L, TM>(s) > kRowsSmemPersistent) --s;
  return s;
}

// The ring FFMA kernel's ring: stages of the weight's window then x's, as many as the block's
// share of shared memory fits (at most the 163 KB of compute capability 8.x at one block an
// SM, half an SM's at two), up to four. The weight's window along n (KN): its rows k of 32
// floats, dense (lane (q, c) copies and reads 16 bytes of four whole 128-byte rows a warp);
// along k: its 32 rows n of the window's k, lane (q, c) reading 16 bytes at k 4q.. of rows c,
// c + 8, ..: 8 rows a phase, 1 KB apart, on the same banks under `none` (8-way), moved apart by
// `pad`'s 16 bytes a row and by `swizzle`'s XOR of row bits into the 16-byte unit.
template <Layout L, bool KN>
using RowsRingWTile = std::conditional_t<KN, RowMajor<rows_window(DType::F32, false), rows_bn(false)>,
                                         TileLayout<L, rows_bn(false), rows_window(DType::F32, false), 4, 16>>;
template <Layout L, bool KN, int TM>
constexpr int rows_ffma_ring_stage_bytes() {
  return (RowsRingWTile<L, KN>::kSize + TM * rows_window(DType::F32, false)) * 4;
}
template <Layout L, bool KN, int TM>
constexpr int rows_ffma_ring_stages() {
  const int fit = (rows_ffma_ring_blocks_per_sm(TM) == 1 ? kRowsSmemPerBlock : kRowsSmemPerSM / 2 - 1024) /
                  rows_ffma_ring_stage_bytes<L, KN, TM>();
  return fit < kRowsMaxStages ? fit : kRowsMaxStages;
}

// f(std::integral_constant<int, TM>{}) for a block's rows of A (rows_tm): the one switch that
// turns them into a template argument, for the launcher and the trace.
template <class F>
decltype(auto) with_rows_tm(int tm, F&& f) {
  switch (tm) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 8: return f(std::integral_constant<int, 8>{});
    case 16: return f(std::integral_constant<int, 16>{});
    default: return f(std::integral_constant<int, 32>{});
  }
}

// The stages of a block of tm rows under `layout`, deep or shallow (rows_stages at run time), or
// the persistent kernel's (rows_persistent_stages).
inline int rows_ring_stages(Layout layout, int tm, bool deep, bool persistent = false) {
  return with_layout(layout, [&](auto tag) {
    return with_rows_tm(tm, [&](auto t) {
      constexpr Layout L = decltype(tag)::value;
      constexpr int TM = decltype(t)::value;
      return persistent ? rows_persistent_stages<L, TM>() : rows_stages<L, TM>(deep);
    });
  });
}

// Whether an operand's rows are 16-byte vectors of its contiguous dim: unit stride there, the
// data pointer and row and batch strides on 16-byte multiples.
inline bool rows_vectors(const void* p, int64_t s_unit, int64_t s_row, int64_t rows, int64_t s_batch,
                         int64_t batch, int elem_bytes) {
  const auto on16 = [&](int64_t s, int64_t n) { return n <= 1 || (s * elem_bytes) % 16 == 0; };
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && s_unit == 1 && on16(s_row, rows) && on16(s_batch, batch);
}

// Whether the weight's rows are 16-byte vectors along k (B = W.t(), W stored (N, K): x @ W.t()).
inline bool rows_b_k_vectors(DType t, const GemmArgs& g) {
  return rows_vectors(g.b, g.b_sk, g.b_sn, g.n, g.b_sb, g.batch, rows_elem_bytes(t));
}
// Whether the weight's rows are 16-byte vectors along n instead (B = W stored (K, N): x @ W),
// whole ones (n a multiple of a vector).
inline bool rows_b_n_vectors(DType t, const GemmArgs& g) {
  const int e = rows_elem_bytes(t);
  return g.n % (16 / e) == 0 && rows_vectors(g.b, g.b_sn, g.b_sk, g.k, g.b_sb, g.batch, e);
}

// Whether x suits the kernel: m up to rows_max_m (float32: two blocks of rows), k a window or
// more (shorter products are no stream) and whole 16-byte vectors (the loads take 16 bytes
// wherever one starts before k ends), A's rows as 16-byte vectors along k.
inline bool rows_takes_x(DType t, const GemmArgs& g, int window) {
  const int e = rows_elem_bytes(t);
  return g.m <= rows_max_m(t) && g.k >= window && g.k % (16 / e) == 0 &&
         rows_vectors(g.a, g.a_sk, g.a_sm, g.m, g.a_sb, g.batch, e);
}
// Whether the few-rows kernel takes a call: float32, float16 or bfloat16, x as rows_takes_x
// says, B's rows along k or, for float32, along n.
inline bool rows_supports(DType t, const GemmArgs& g) {
  return (t == DType::F32 || t == DType::F16 || t == DType::BF16) &&
         rows_takes_x(t, g, rows_window(t, rows_on_mma(t, g.m))) &&
         (rows_b_k_vectors(t, g) || (t == DType::F32 && rows_b_n_vectors(t, g)));
}
// Whether the mma.sync form takes a 16-bit call against a weight stored (K, N) (KN): x as
// rows_takes_x says for mma.sync's window, B's rows along n only.
inline bool rows_kn_supports(DType t, const GemmArgs& g) {
  return (t == DType::F16 || t == DType::BF16) && rows_takes_x(t, g, rows_window(t, true)) &&
         !rows_b_k_vectors(t, g) && rows_b_n_vectors(t, g);
}

}  // namespace bankops
