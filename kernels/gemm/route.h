// Which kernel runs a gemm call, and how: gemm_route() is the one place that decides. The op
// computes the route once per call from the operands, the device and the switches; the
// launcher (launch.h) runs exactly the route, explain() traces exactly the route (trace.h),
// and torch.ops.bankops._gemm_route prints it (gemm_route_line).
//
//   a few rows (decode) -> rows:  the few-rows kernel (rows.h): a weight streamed into registers
//                                 (FFMA along k) or a shared-memory ring (float32 along n, and
//                                 16-row blocks along k; mma.sync), split-K across a cluster (split_k.h)
//   float32 / float64   -> ffma:  the FFMA/DFMA kernel (ffma.h): tile, each operand's staging,
//                                 for the 128x256 tile the strip and stream-K (ffma_work.h), for
//                                 64-row tiles of up to 64 rows split-K across a cluster
//   float16 / bfloat16  -> wgmma: the Hopper kernel (wgmma.h), swizzle on compute capability
//                                 9.0: tile and split (wgmma_tma_plan; a few rows: the thin
//                                 tile, wgmma_thin_route), TMA or realigning producers, copies
//                                 of misaligned operands into aligned rows first (repack.h),
//                                 persistent blocks (wgmma_persists)
//                       -> mma:   the mma.sync kernel (mma.h) otherwise: tile and fill; a few
//                                 rows against a weight split k across a cluster (split_k.h)
#pragma once
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../dtype.h"
#include "args.h"
#include "ffma.h"
#include "ffma_work.h"
#include "mma.h"
#include "repack.h"
#include "rows.h"
#include "split_k.h"
#include "wgmma.h"

namespace bankops {

// ---- float32: the FFMA kernel's configuration ------------------------------------------------

// Whether Wide's grid over (batch, m, n) keeps at least 7/8 of the SMs busy over all its waves
// (a Wide block takes a whole SM, so a ragged last wave idles whole SMs; Big's half-size
// blocks fill such grids better).
BANKOPS_HD bool gemm_wide_fills(int64_t batch, int64_t m, int64_t n, int num_sms) {
  const int64_t wide = batch * ceil_div(m, GemmWide::kBM) * ceil_div(n, GemmWide::kBN);
  return 8 * wide >= 7 * ceil_div(wide, num_sms) * num_sms;
}

// Whether Big's grid (two blocks an SM, each half an SM's worth of warps) keeps at least 7/8
// of its block slots busy over all its waves.
BANKOPS_HD bool gemm_big_fills(int64_t batch, int64_t m, int64_t n, int num_sms) {
  const int64_t big = batch * ceil_div(m, GemmBig<4>::kBM) * ceil_div(n, GemmBig<4>::kBN);
  const int64_t slots = 2 * int64_t(num_sms);
  return 8 * big >= 7 * ceil_div(big, slots) * slots;
}

// Whether stream-K evens out the last wave of Wide's grid over (batch, m, n, k)
// (ffma_work.h: gemm_stream_k_blocks): a grid a wave deep or more, or a shorter one that
// Big's blocks would leave SMs half idle on (a weight gradient's few tiles over a long k).
BANKOPS_HD bool gemm_wide_shares(int64_t batch, int64_t m, int64_t n, int64_t k, int num_sms, bool stream_k) {
  const int64_t wide = batch * ceil_div(m, GemmWide::kBM) * ceil_div(n, GemmWide::kBN);
  return stream_k && (wide >= num_sms || !gemm_big_fills(batch, m, n, num_sms)) &&
         gemm_stream_k_blocks(wide, ceil_div(k, GemmWide::kBK), num_sms) > 0;
}

// Columns at the right edge of C that go to the strip blocks (ffma_strip.h), 0 for none:
// float32 with vector or Async4 staging, n a few columns (1 .. kGemmStripCols) past whole Wide
// tiles, and Wide's grid filling the SMs without that last column of blocks but not with it
// (n = 4097: 16 tiles and one column).
BANKOPS_HD int gemm_strip_cols(int acc_bytes, int64_t batch, int64_t m, int64_t n, int num_sms, GemmStaging staging) {
  const int64_t cols = n % GemmWide::kBN;
  if (acc_bytes != 4 || staging == GemmStaging::Scalar || cols == 0 || cols > kGemmStripCols || n < GemmWide::kBN)
    return 0;
  if (gemm_wide_fills(batch, m, n, num_sms) || !gemm_wide_fills(batch, m, n - cols, num_sms)) return 0;
  return static_cast<int>(cols);
}

// The rule (float32; float64 has one configuration):
//  0. Big when K = 0: a block a tile stores C (zeros, the bias), where Wide's blocks run pieces
//     of k (a test for K = 0 in Wide's loop slowed all its kernels: bench/RESULTS.md).
//  1. Small when the 128x128 grid leaves an SM without a block, or m or n fits one 64 tile;
//     but Wide where stream-K deals a long k out to the SMs and m is past one 64 tile (a
//     product of 128 rows against a weight), or past half of one where Small's own grid leaves
//     SMs idle (33-64 rows against a (4096, 4096) weight: 64 blocks, unsplit), unless
//     ffma_route splits Small's k instead (stream_k off: compute capability 9.0).
//  2. BigScalar when an operand stages through registers element by element (Scalar).
//  3. Wide (Vector or Async4 staging) when its grid fills the SMs (gemm_wide_fills), over all
//     of C or over all but a strip (gemm_strip_cols), or stream-K evens out its last wave.
//  4. Big otherwise.
BANKOPS_HD GemmConfig gemm_config(int acc_bytes, int64_t batch, int64_t m, int64_t n, int64_t k, int num_sms,
                                  GemmStaging staging, bool stream_k) {
  if (acc_bytes != 4 || k == 0) return GemmConfig::Big;
  const int64_t blocks = batch * ceil_div(m, GemmBig<4>::kBM) * ceil_div(n, GemmBig<4>::kBN);
  if (blocks < num_sms || m <= GemmSmall::kBM || n <= GemmSmall::kBN) {
    const int64_t small = batch * ceil_div(m, GemmSmall::kBM) * ceil_div(n, GemmSmall::kBN);
    const bool rows = m > GemmSmall::kBM || (2 * m > GemmSmall::kBM && small < num_sms);
    const bool shares = staging != GemmStaging::Scalar && rows && n > GemmSmall::kBN &&
                        gemm_wide_shares(batch, m, n, k, num_sms, stream_k);
    return shares ? GemmConfig::Wide : GemmConfig::Small;
  }
  if (staging == GemmStaging::Scalar) return GemmConfig::BigScalar;
  const bool wide = gemm_wide_fills(batch, m, n, num_sms) || gemm_wide_shares(batch, m, n, k, num_sms, stream_k) ||
                    gemm_strip_cols(acc_bytes, batch, m, n, num_sms, staging) > 0;
  return wide ? GemmConfig::Wide : GemmConfig::Big;
}

// ---- float16/bfloat16: what the operands allow ----------------------------------------------

// The operands as the tensor-core fills see them. fill: Async when every tile row starts
// 16-byte aligned; Realign when both have a unit-stride contiguous dim (rows at any 2-byte
// offset, 8 or more elements apart unless a row never fills a tile); Registers for any
// strides. Each operand's tile rows follow its faster dim: a_km: A staged as As[BK][BM] (m
// contiguous: every weight gradient's dy.t()), else As[BM][BK]; b_kn: B as Bs[BK][BN] (n
// contiguous), else Bs[BN][BK]. So every fill reads along the tile's rows (the register
// fill's lanes an element each on consecutive columns).
struct MmaOperands {
  MmaFill fill;
  bool a_km, b_kn;
};

inline bool mma_stride16(int64_t stride, int64_t size) { return size <= 1 || stride % kMmaChunk == 0; }
inline bool mma_realign_ok(int64_t s_fast, int64_t s_row, int64_t rows, int64_t cols) {
  return (s_fast == 1 || cols <= 1) && (rows <= 1 || s_row >= kMmaChunk || s_row >= cols);
}
inline bool mma_aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }
// Whether an operand's tile takes the dim of stride s_col as its columns (the contiguous dim,
// or the faster of two strided ones) rather than the one of stride s_row.
inline bool mma_cols_fast(int64_t s_col, int64_t s_row) { return s_col == 1 || (s_row != 1 && s_col <= s_row); }
inline bool mma_a_km(const GemmArgs& g) { return mma_cols_fast(g.a_sm, g.a_sk); }
inline bool mma_b_kn(const GemmArgs& g) { return mma_cols_fast(g.b_sn, g.b_sk); }
// Whether every tile row of an operand starts 16-byte aligned: a unit-stride contiguous dim,
// rows and batches 16 bytes apart, an aligned data pointer.
inline bool mma_rows_aligned(const void* p, int64_t s_batch, int64_t batch, int64_t s_col, int64_t cols,
                             int64_t s_row, int64_t rows) {
  return mma_aligned16(p) && mma_stride16(s_batch, batch) && (s_col == 1 || cols <= 1) && mma_stride16(s_row, rows);
}
inline bool mma_a_aligned(const GemmArgs& g) {
  return mma_a_km(g) ? mma_rows_aligned(g.a, g.a_sb, g.batch, g.a_sm, g.m, g.a_sk, g.k)
                     : mma_rows_aligned(g.a, g.a_sb, g.batch, g.a_sk, g.k, g.a_sm, g.m);
}
inline bool mma_b_aligned(const GemmArgs& g) {
  return mma_b_kn(g) ? mma_rows_aligned(g.b, g.b_sb, g.batch, g.b_sn, g.n, g.b_sk, g.k)
                     : mma_rows_aligned(g.b, g.b_sb, g.batch, g.b_sk, g.k, g.b_sn, g.n);
}
inline MmaOperands mma_operands(const GemmArgs& g) {
  MmaOperands p;
  p.a_km = mma_a_km(g);
  p.b_kn = mma_b_kn(g);
  const bool realign_a = p.a_km ? mma_realign_ok(g.a_sm, g.a_sk, g.k, g.m) : mma_realign_ok(g.a_sk, g.a_sm, g.m, g.k);
  const bool realign_b = p.b_kn ? mma_realign_ok(g.b_sn, g.b_sk, g.k, g.n) : mma_realign_ok(g.b_sk, g.b_sn, g.n, g.k);
  const bool realign = realign_a && realign_b;
  p.fill = mma_a_aligned(g) && mma_b_aligned(g) ? MmaFill::Async : realign ? MmaFill::Realign : MmaFill::Registers;
  return p;
}

// What the tensor-core kernels take: 16-bit floats, and grids and k loops that fit their int
// counters (no tensor that fits a GPU comes near the limits).
inline bool gemm_mma_supports(DType dtype, const GemmArgs& g) {
  return (dtype == DType::F16 || dtype == DType::BF16) && ceil_div(g.n, MmaSmall::kBN) <= 0x7fffffff &&
         ceil_div(g.k, MmaSmall::kBK) <= 0x7fffffff;
}

// About every SM: 31/32 of them (128 on 132), the blocks a grid must give to fill the GPU.
inline int64_t most_sms(int num_sms) { return (int64_t(num_sms) * 31 + 31) / 32; }

// Whether a grid of bm x bn tiles gives about every SM a block (most_sms).
inline bool mma_fills(const GemmArgs& g, int bm, int bn, int num_sms) {
  const int64_t want = most_sms(num_sms);
  return g.batch > 0 && ceil_div(g.m, bm) * ceil_div(g.n, bn) >= ceil_div(want, g.batch);
}

// The mma.sync tile: the largest that still gives about every SM a block; the realigning and
// register fills run MmaSmall (their schedules are written for its tile).
inline MmaShape mma_shape(const GemmArgs& g, MmaFill fill, int num_sms) {
  if (fill != MmaFill::Async) return MmaShape::Small;
  if (mma_fills(g, MmaLarge::kBM, MmaLarge::kBN, num_sms)) return MmaShape::Large;
  if (mma_fills(g, MmaSmall::kBM, MmaSmall::kBN, num_sms)) return MmaShape::Small;
  return MmaShape::Narrow;
}

// Whether a grid of C's tiles fills nine tenths of its last wave.
template <class C>
inline bool wgmma_whole_waves(const GemmArgs& g, int num_sms) {
  const int64_t tiles = g.batch * ceil_div(g.m, C::kBM) * ceil_div(g.n, C::kBN);
  return 10 * tiles >= 9 * ceil_div(tiles, num_sms) * num_sms;
}

// Whether TMA can map a call's operands (tma.cuh), beyond 16-byte aligned rows: row strides of
// 1 element or more (a broadcast row, stride 0, has no tensor map; a batch stride of 0 is a map
// of one batch), coordinates within int32 and strides within 2^40 bytes.
inline bool wgmma_tma_ok(const GemmArgs& g, bool a_km, bool b_kn) {
  constexpr int64_t kCoord = int64_t(1) << 31, kStride = int64_t(1) << 39;  // 2-byte elements: 2^40 bytes
  const auto stride_ok = [](int64_t stride, int64_t size, bool zero) {
    return size <= 1 || ((stride > 0 || (zero && stride == 0)) && stride < kStride);
  };
  return g.m < kCoord && g.n < kCoord && g.k < kCoord &&
         (a_km ? stride_ok(g.a_sk, g.k, false) : stride_ok(g.a_sm, g.m, false)) &&
         (b_kn ? stride_ok(g.b_sk, g.k, false) : stride_ok(g.b_sn, g.n, false)) &&
         stride_ok(g.a_sb, g.batch, true) && stride_ok(g.b_sb, g.batch, true);
}

// A Hopper tile and how many blocks (a cluster) share each tile's k tiles.
struct WgmmaPlan {
  WgmmaShape shape = WgmmaShape::None;
  int split = 1;
};

// The plan's cost model, from H100 timings of forced plans: a block runs its k tiles plus
// kWgmmaBlockSteps (filling the ring, the epilogue), each taking wgmma_step_time<C>() (the
// wider tiles do more work a step and feed the tensor cores better); a split block adds
// wgmma_sum_time<C>() (its partial tile out, its rows summed through distributed shared
// memory, which moves tens of GB/s an SM); the blocks run in waves of the clusters the device
// holds (cluster_room). No plan reads its operands faster than its resident blocks pull them
// (each TMA ring about kWgmmaBlockGBps, all of them at most kWgmmaDramGBps): a few rows against
// a long weight are bound by reading it, and there fewer, wider tiles lose.
constexpr double kWgmmaBlockSteps = 2;
constexpr double kWgmmaStepNs = 180;  // a unit of wgmma_step_time (1024^3: 36 units, 6.4 us)
constexpr double kWgmmaBlockGBps = 23, kWgmmaDramGBps = 2800;
constexpr int64_t kWgmmaTailMinK = 16;  // k-tiles of a tile whose last wave splits (wgmma_tail)
// Whether a persistent block's k-tiles over all its tiles (of `tiles` on num_sms blocks) fit
// its int ring counter (no tensor that fits a GPU comes near the limit).
template <class C>
inline bool wgmma_walk_fits(const GemmArgs& g, int64_t tiles, int num_sms) {
  return ceil_div(tiles, num_sms) * ceil_div(g.k, C::kBK) <= 0x7fffffff;
}
template <class C>
constexpr double wgmma_step_time() {
  // 144: between 128's and 192's on the line through the measured three; 192 x 96 from k =
  // 16384, where the fill and the epilogue are a small part (3072 x 768 x 16384 x @ W.t()).
  return C::kBN == 256   ? 4.0
         : C::kBN == 192 ? 3.3
         : C::kBN == 144 ? 2.8
         : C::kBN == 128 ? 2.6
         : C::kBN == 96  ? 3.0
                         : 2.0;
}
template <class C>
constexpr double wgmma_sum_time() {
  return 6.0 + C::kBN / 8.0;
}
// tail: the call may split a persistent walk's last wave (wgmma_tail; counted here in tiles, not
// clusters): a wave of half the blocks or fewer, after whole ones, takes half a tile and half a
// sum. The plan counts it on the two-consumer tiles only persistent blocks run (128 x 192,
// 128 x 144), so that it never moves a call from those to 128 x 256 (3072^3: 128 x 192 80.5 us,
// 128 x 256 109.8); 192 x 96's three consumers never split.
template <class C>
inline double wgmma_plan_time(const GemmArgs& g, const DeviceInfo& d, int split, bool tail = false) {
  const int64_t tiles = g.batch * ceil_div(g.m, C::kBM) * ceil_div(g.n, C::kBN);
  const int64_t room = cluster_room(d, split, 1), nk = ceil_div(g.k, C::kBK);
  const double block = (double(ceil_div(nk, split)) + kWgmmaBlockSteps) * wgmma_step_time<C>() +
                       (split > 1 ? wgmma_sum_time<C>() : 0);
  const int64_t left = tiles % room;
  const bool halves = tail && split == 1 && tiles > room && 2 * left <= room && nk >= kWgmmaTailMinK;
  const double half = (double(ceil_div(nk, 2)) + kWgmmaBlockSteps) * wgmma_step_time<C>() + wgmma_sum_time<C>() / 2;
  const double compute = halves ? double(tiles / room) * block + (left > 0 ? half : 0)
                                : double(ceil_div(tiles * split, room)) * block;
  // The operands' bytes (a broadcast B once) over the rate the resident blocks reach, in units.
  const double bytes = 2.0 * g.k * (double(g.batch) * g.m + double(g.b_sb != 0 ? g.batch : 1) * g.n);
  const double gbps = std::min(kWgmmaDramGBps, double(std::min(tiles * split, room)) * kWgmmaBlockGBps);
  return std::max(compute, bytes / gbps / kWgmmaStepNs);
}

// The TMA plan: the tile and split whose waves end soonest. Candidates go unsplit first, then
// split (2..kMaxSplit, each rank kSplitMinK k tiles or more), each from the largest tile down,
// but 192 x 96 right after 128 x 256 and 128 x 144 after 128 x 128 (128 x 192, 128 x 144 and
// 192 x 96 unsplit only, and only where `persistent`: the call may run persistent blocks;
// 128 x 144 and 192 x 96 only where `k_major`: A and B k-major); a later one is taken only where
// it ends a tenth sooner. 192 x 96 goes early because the model rates its short walks too slow:
// 1536^3 x @ W.t() on it beats 128 x 144 and 128 x 192 (bench/RESULTS.md).
// A plan must give half the SMs or more a block (64 of 132); where none does, mma.sync's
// smaller tiles take the call.
inline WgmmaPlan wgmma_tma_plan(const GemmArgs& g, const DeviceInfo& d, bool split_k, bool persistent,
                                bool k_major) {
  const int64_t want = most_sms(d.num_sms);
  WgmmaPlan best;
  double best_time = 0;
  const auto consider = [&](WgmmaShape shape, auto config, int split) {
    using C = decltype(config);
    const int64_t blocks = g.batch * ceil_div(g.m, C::kBM) * ceil_div(g.n, C::kBN) * split;
    if (2 * blocks < want) return;
    if (C::kPersistentOnly && !wgmma_walk_fits<C>(g, blocks, d.num_sms)) return;
    if (split > 1 && (ceil_div(g.k, C::kBK) < int64_t(split) * kSplitMinK || cluster_room(d, split, 1) < split))
      return;
    const double time = wgmma_plan_time<C>(g, d, split, C::kPersistentOnly && C::kHalves && split_k);
    if (best.shape == WgmmaShape::None || 10 * time < 9 * best_time) best = WgmmaPlan{shape, split}, best_time = time;
  };
  for (int split = 1; split <= (split_k ? kMaxSplit : 1); ++split) {
    consider(WgmmaShape::Large, WgmmaLarge{}, split);
    if (split == 1 && persistent && k_major) consider(WgmmaShape::Tall, WgmmaTall{}, split);
    if (split == 1 && persistent) consider(WgmmaShape::Broad, WgmmaBroad{}, split);
    consider(WgmmaShape::Medium, WgmmaMedium{}, split);
    if (split == 1 && persistent && k_major) consider(WgmmaShape::Slim, WgmmaSlim{}, split);
    consider(WgmmaShape::Narrow, WgmmaNarrow{}, split);
  }
  return best;
}

// The Hopper plan, if any, for a call the layout and device allow (one block tile a block,
// grids within the launch limits):
// - TMA (rows 16 bytes apart, tma_on: the driver encodes tensor maps): wgmma_tma_plan, its k
//   split across a cluster where split_k allows;
// - the realigning producer, B n-contiguous, on whole waves of a grid that gives every SM a
//   tile: Large, then Medium with two producers.
// The realigning producer runs at L2's request rate, not its bytes, so misaligned operands of
// 256 x 256 or more are copied into aligned rows first (gemm_repack) and take TMA.
inline WgmmaPlan wgmma_plan(const GemmArgs& g, const MmaOperands& p, bool allowed, bool tma_on, bool split_k,
                            bool persistent, const DeviceInfo& d) {
  if (!allowed || g.batch > 65535 || ceil_div(g.m, WgmmaLarge::kBM) > 65535) return {};
  if (p.fill == MmaFill::Async && tma_on && wgmma_tma_ok(g, p.a_km, p.b_kn))
    return wgmma_tma_plan(g, d, split_k, persistent, !p.a_km && !p.b_kn);
  if (p.fill != MmaFill::Realign || !p.b_kn) return {};
  if (wgmma_whole_waves<WgmmaLarge>(g, d.num_sms) && mma_fills(g, WgmmaLarge::kBM, WgmmaLarge::kBN, d.num_sms))
    return WgmmaPlan{WgmmaShape::Large, 1};
  if (wgmma_whole_waves<WgmmaMediumRealign>(g, d.num_sms) &&
      mma_fills(g, WgmmaMediumRealign::kBM, WgmmaMediumRealign::kBN, d.num_sms))
    return WgmmaPlan{WgmmaShape::Medium, 1};
  return {};
}

// ---- The route ---------------------------------------------------------------------------

enum class GemmFamily { Ffma, Mma, Wgmma, Rows };

struct GemmRoute {
  GemmFamily family = GemmFamily::Ffma;
  DType dtype = DType::F32;
  Layout layout = Layout::Swizzle;
  DeviceInfo device{};
  GemmArgs args{};  // what the kernel reads: the copies (offsets into scratch until place()) when repacked

  // ffma: the configuration, each operand's staging, and Wide's strip columns and blocks.
  GemmConfig config = GemmConfig::Big;
  GemmStage mode_a = GemmStage::KVec, mode_b = GemmStage::XAsync;
  bool unit_a = false, unit_b = false;
  GemmStaging staging = GemmStaging::Vector;
  int strip = 0;
  GemmWork work{};

  // mma / wgmma: the operands' fill and B orientation, the tile, C's rows 16-byte aligned.
  MmaOperands ops{};
  MmaShape mma = MmaShape::Small;
  int split = 1;    // mma, rows: the blocks (a cluster) that share each tile's k
  int rows_tm = 1;        // rows: the rows of A a block takes
  int rows_stages = 0;    // rows on mma.sync: its ring's stages (rows_stages: deep or shallow)
  bool rows_mma = false;  // rows: mma.sync products (16-bit, more than a few rows), else FFMA
  bool rows_ring = false; // rows, FFMA: the weight through a ring in shared memory, else registers
  WgmmaShape wgmma = WgmmaShape::None;
  bool persistent = false;  // wgmma: persistent blocks walk the tiles (wgmma_persists)
  int multicast = 1;        // wgmma persistent: the blocks (a cluster) that share each B tile
  int64_t tail = 0;         // wgmma persistent: the last wave's tiles split over pairs of blocks (wgmma_tail)
  bool out_vec = false;

  // Copies of misaligned operands into aligned rows, before the Hopper kernel.
  RepackJob job[2]{};
  int jobs = 0;
  bool copy_a = false, copy_b = false;

  // Bytes of scratch the launch needs: the copies, or float32 stream-K's partial sums and flags.
  int64_t scratch_bytes = 0;
  // Why the call took a route other than its first choice: none, no scratch to be had
  // (GemmOptions::scratch), or no tensor maps from the driver (GemmOptions::tma).
  const char* fallback = nullptr;

  // Points the copies' operands and jobs into the scratch (repacked routes).
  void place(void* scratch) {
    const auto at = [scratch](const void* offset) {
      return static_cast<const void*>(static_cast<char*>(scratch) + reinterpret_cast<uintptr_t>(offset));
    };
    if (copy_a) args.a = at(args.a);
    if (copy_b) args.b = at(args.b);
    for (int j = 0; j < jobs; ++j) job[j].dst = const_cast<void*>(at(job[j].dst));
  }
};

// ---- The route's block configuration as a type -----------------------------------------------

// f(C{}) with C the route's configuration (ffma.h's GemmShape, mma.h's MmaConfig, wgmma.h's
// WgmmaConfig): the one switch per family that turns a route into a template argument, for the
// launchers, the trace and the route line alike.
template <class F>
decltype(auto) with_ffma_config(const GemmRoute& r, F&& f) {
  if (r.dtype == DType::F64) return f(GemmBig<8>{});
  switch (r.config) {
    case GemmConfig::Wide: return f(GemmWide{});
    case GemmConfig::BigScalar: return f(GemmBigScalar{});
    case GemmConfig::Small: return f(GemmSmall{});
    case GemmConfig::Mid: return f(GemmMid{});
    case GemmConfig::Big:
    default: return f(GemmBig<4>{});
  }
}
template <class F>
decltype(auto) with_mma_config(const GemmRoute& r, F&& f) {
  switch (r.mma) {
    case MmaShape::Large: return f(MmaLarge{});
    case MmaShape::Narrow: return f(MmaNarrow{});
    case MmaShape::Rows: return f(MmaRows{});
    case MmaShape::Small:
    default: return f(MmaSmall{});
  }
}
template <class F>
decltype(auto) with_wgmma_config(const GemmRoute& r, F&& f) {
  switch (r.wgmma) {
    case WgmmaShape::Large: return f(WgmmaLarge{});
    case WgmmaShape::Narrow: return f(WgmmaNarrow{});
    case WgmmaShape::Broad: return f(WgmmaBroad{});
    case WgmmaShape::Slim: return f(WgmmaSlim{});
    case WgmmaShape::Tall: return f(WgmmaTall{});
    case WgmmaShape::Thin: return f(WgmmaThin{});
    case WgmmaShape::Medium:
    default: return r.ops.fill == MmaFill::Async ? f(WgmmaMedium{}) : f(WgmmaMediumRealign{});
  }
}

// f(km, kn) with the operands' tile orientations (MmaOperands::a_km, b_kn) as
// std::bool_constant: the one switch that turns them into template arguments.
template <class F>
decltype(auto) with_operand_majors(const MmaOperands& ops, F&& f) {
  using Y = std::true_type;
  using N = std::false_type;
  if (ops.a_km) return ops.b_kn ? f(Y{}, Y{}) : f(Y{}, N{});
  return ops.b_kn ? f(N{}, Y{}) : f(N{}, N{});
}

// The block tile (m x n x k) of a route.
struct GemmTileDims {
  int bm, bn, bk;
};
inline GemmTileDims gemm_tile_dims(const GemmRoute& r) {
  const auto dims = [](auto c) {
    using C = decltype(c);
    return GemmTileDims{C::kBM, C::kBN, C::kBK};
  };
  switch (r.family) {
    case GemmFamily::Rows: return GemmTileDims{r.rows_tm, rows_bn(r.rows_mma), rows_window(r.dtype, r.rows_mma)};
    case GemmFamily::Wgmma: return with_wgmma_config(r, dims);
    case GemmFamily::Mma: return with_mma_config(r, dims);
    case GemmFamily::Ffma:
    default: return with_ffma_config(r, dims);
  }
}

// The tiles a persistent Hopper route's blocks walk: its clusters' tiles, `multicast` m tiles
// each, the last cluster's past C's rows too.
inline int64_t wgmma_walked_tiles(const GemmRoute& r) {
  const GemmTileDims t = gemm_tile_dims(r);
  const int c = r.multicast;
  return r.args.batch * ceil_div(ceil_div(r.args.m, t.bm), c) * c * ceil_div(r.args.n, t.bn);
}

// Blocks the route launches (its tiles; Wide: strip, stream-K and per-tile blocks; persistent:
// one an SM, in clusters of `multicast`, at most one a walked tile).
inline int64_t gemm_route_blocks(const GemmRoute& r) {
  if (r.family == GemmFamily::Ffma && r.config == GemmConfig::Wide) return r.work.blocks();
  if (r.family == GemmFamily::Wgmma && r.persistent)
    return std::min(wgmma_walked_tiles(r), cluster_room(r.device, r.multicast, 1) / r.multicast * r.multicast);
  const GemmTileDims t = gemm_tile_dims(r);
  return r.args.batch * ceil_div(r.args.m, t.bm) * ceil_div(r.args.n, t.bn) * r.split;
}

// The persistent walk's ragged last wave, split: where whole waves of cluster tiles come first
// and the tiles left need half the blocks or fewer, each left tile runs on a pair of blocks (a
// cluster of 2), half its k tiles each, the halves summed through distributed shared memory
// (wgmma.cu's add_halves): that wave ends sooner, though not in half the time (2048 x 2304 x
// 2048: 192 tiles of 128 x 192, 132 whole and 60 split, 35.4 -> 32.5 us; bench/RESULTS.md). Each
// half keeps kWgmmaTailMinK / 2 k-tiles or more (with 4 or 5 the split wave measured slower
// than a whole one); the blocks pair up only where pairs fill the SMs. Every tile on persistent
// blocks splits (128 x 256 too: 4352 x 4096 x 2048, 16 tiles split, 124.2 -> 117.3 us).
inline int64_t wgmma_tail(const GemmRoute& r) {
  if (!r.persistent || r.args.batch < 1 || cluster_room(r.device, 2, 1) < r.device.num_sms) return 0;
  if (!with_wgmma_config(r, [](auto config) { return decltype(config)::kHalves; })) return 0;
  const GemmTileDims t = gemm_tile_dims(r);
  const int64_t blocks = gemm_route_blocks(r), walkers = blocks / r.multicast;
  const int64_t tiles = wgmma_walked_tiles(r) / r.multicast, left = tiles % walkers;  // cluster tiles
  const bool fits = blocks % 2 == 0 && 2 * left * r.multicast <= blocks;
  return tiles > walkers && left > 0 && fits && ceil_div(r.args.k, t.bk) >= kWgmmaTailMinK ? left * r.multicast : 0;
}

namespace route_detail {

// Small's or Mid's split-K across a cluster (split_k_count), each rank 32 k tiles or more.
template <class S>
inline int ffma_split_count(const GemmRoute& r) {
  const GemmArgs& g = r.args;
  const int64_t tiles = g.batch * ceil_div(g.m, S::kBM) * ceil_div(g.n, S::kBN);
  return split_k_count(tiles, ceil_div(g.k, S::kBK), r.device, S::kMinBlocks, kFfmaSplitMinK);
}
// Whether Mid's grid, split `split` ways, keeps 2.5 blocks an SM or more (10 warps): there its
// 8x8 threads ran faster than Small's 8x4 (64 rows against (4096, 14336): 2.5 blocks an SM, 210
// against 254 us); at 1.9 blocks an SM (against (4096, 4096)) slower (84 against 79;
// bench/RESULTS.md).
inline bool ffma_mid_fills(const GemmRoute& r, int split) {
  const GemmArgs& g = r.args;
  const int64_t blocks = g.batch * ceil_div(g.m, GemmMid::kBM) * ceil_div(g.n, GemmMid::kBN) * split;
  return 2 * blocks >= 5 * int64_t(r.device.num_sms);
}

inline void ffma_route(GemmRoute& r, const GemmOptions& opt) {
  const GemmArgs& g = r.args;
  const int eb = r.dtype == DType::F64 ? 8 : 4;
  r.mode_a = gemm_stage_mode(g.a, eb, eb, g.batch, g.a_sb, g.k, g.a_sk, g.m, g.a_sm);
  r.mode_b = gemm_stage_mode(g.b, eb, eb, g.batch, g.b_sb, g.k, g.b_sk, g.n, g.b_sn);
  r.unit_a = gemm_unit_scalar(r.mode_a, g.a, eb, g.a_sk, g.a_sm);
  r.unit_b = gemm_unit_scalar(r.mode_b, g.b, eb, g.b_sk, g.b_sn);
  r.staging = gemm_staging(r.mode_a, r.unit_a, r.mode_b, r.unit_b);
  const int sms = r.device.num_sms;
  // k tiles are counted in int: K up to 2^34 (no tensor that fits a GPU comes near it).
  const bool stream_k = opt.stream_k && eb == 4 && ceil_div(g.k, kGemmBK) <= 0x7fffffff;
  // float32 products of up to 64 rows, both operands staged by 16-byte vectors, split k across a
  // cluster (compute capability 9.0), in place of Wide's stream-K over tiles half empty. (The
  // element-staged forms were not measured split: they keep the rule below.)
  const bool splits = eb == 4 && r.device.cc >= 90 && opt.split_k && g.m <= GemmSmall::kBM &&
                      r.staging == GemmStaging::Vector;
  r.config = gemm_config(eb, g.batch, g.m, g.n, g.k, sms, r.staging, stream_k && !splits);
  if (r.config == GemmConfig::Small && splits) {
    const int mid = ffma_split_count<GemmMid>(r);
    const bool takes_mid = g.n >= GemmMid::kBN && ffma_mid_fills(r, mid);
    r.config = takes_mid ? GemmConfig::Mid : GemmConfig::Small;
    r.split = takes_mid ? mid : ffma_split_count<GemmSmall>(r);
  }
  if (r.config != GemmConfig::Wide) return;
  r.strip = gemm_strip_cols(eb, g.batch, g.m, g.n, sms, r.staging);
  r.work = gemm_work(g.batch, g.m, g.n - r.strip, g.k, r.strip, sms, stream_k);
  r.scratch_bytes = gemm_work_bytes(r.work);
}

// Whether a Hopper call may run persistent blocks (wgmma.cu's wgmma_persistent_kernel): TMA
// (the plan's own condition), C's rows 16-byte aligned (TMA stores it), the switch on.
inline bool wgmma_may_persist(const GemmRoute& r, const GemmOptions& opt) { return opt.persistent && r.out_vec; }

// Whether a Hopper route runs persistent blocks: wgmma_may_persist, one block a tile (a split
// tile's cluster sums in its ring), more tiles than SMs or a tile only they run (128 x 192,
// 128 x 144, 192 x 96), and a block's k-tiles over all its tiles within its int counter. Then
// one block an SM walks the tiles, its ring refilling while its consumers write a tile out. A
// grid of one wave or less has no next tile to overlap, and there a block a tile, whose
// epilogue reads C back through the ring in 16-byte rows, measured faster on 128 x 256
// (bench/RESULTS.md).
inline bool wgmma_persists(const GemmRoute& r, const GemmOptions& opt) {
  const GemmArgs& g = r.args;
  if (!wgmma_may_persist(r, opt) || r.ops.fill != MmaFill::Async || r.split != 1) return false;
  return with_wgmma_config(r, [&](auto config) {
    using C = decltype(config);
    const int64_t tiles = g.batch * ceil_div(g.m, C::kBM) * ceil_div(g.n, C::kBN);
    return !C::kFewRows && (tiles > r.device.num_sms || C::kPersistentOnly) &&
           wgmma_walk_fits<C>(g, tiles, r.device.num_sms);
  });
}

// The persistent blocks that share each B tile, a cluster of 2 on m tiles 2i and 2i + 1 (each
// loads its A tile and half the B tile, by TMA multicast into both: a third less L2 traffic a
// block on 128 x 256 tiles), or 1: where the tile's B halves (wgmma_pairs_share_b), two m
// tiles or more, an odd count only from 9 on (the last cluster's second tile lies past C: a
// wasted tile in 9 or more), and clusters of 2 that fill the SMs.
inline int wgmma_clusters(const GemmRoute& r) {
  if (!r.persistent || r.args.batch < 1 || cluster_room(r.device, 2, 1) < r.device.num_sms) return 1;
  return with_wgmma_config(r, [&](auto config) {
    using C = decltype(config);
    const bool shares = r.ops.b_kn ? wgmma_pairs_share_b<C, true>() : wgmma_pairs_share_b<C, false>();
    const int64_t tiles_m = ceil_div(r.args.m, int64_t(C::kBM));
    return shares && tiles_m >= 2 && (tiles_m % 2 == 0 || tiles_m >= 9) ? 2 : 1;
  });
}

// The route takes the Hopper plan: its tile and split, persistent blocks or not
// (wgmma_persists), in clusters that share B or not (wgmma_clusters), its last wave split or not
// (wgmma_tail).
inline void wgmma_route(GemmRoute& r, const WgmmaPlan& plan, const GemmOptions& opt) {
  r.family = GemmFamily::Wgmma;
  r.wgmma = plan.shape;
  r.split = plan.split;
  r.persistent = wgmma_persists(r, opt);
  r.multicast = wgmma_clusters(r);
  r.tail = opt.split_k ? wgmma_tail(r) : 0;
}

// Misaligned 16-bit operands (rows off 16-byte boundaries, a unit-stride contiguous dim) of
// matrices of 256 x 256 or more, on the swizzle layout's Hopper route: copies into rows on
// 128-byte lines (repack.h), as long as the call on the copies takes a TMA tile. Each operand
// must be read by two or more 128-row block tiles, or the copy moves as many bytes as the
// product reads. A batch stride of 0 copies one batch.
inline bool repack_route(GemmRoute& r, const GemmOptions& opt) {
  const GemmArgs& g = r.args;
  if (g.batch < 1 || g.m < kRepackMinMN || g.n < kRepackMinMN || r.ops.fill != MmaFill::Realign) return false;
  GemmRoute c = r;
  c.copy_a = !mma_a_aligned(g);
  c.copy_b = !mma_b_aligned(g);
  const auto copy = [&](const void* src, int64_t s_batch, int64_t rows, int64_t cols, int64_t s_row,
                        const void*& ptr, int64_t& sb, int64_t& s_rows, int64_t& s_cols) {
    const int64_t pitch = repack_pitch(cols, 2), batch = s_batch == 0 ? 1 : g.batch;
    void* dst = reinterpret_cast<void*>(static_cast<uintptr_t>(c.scratch_bytes));
    c.job[c.jobs++] = RepackJob{src, dst, batch, rows, cols, s_batch, s_row, pitch};
    c.scratch_bytes += (batch * rows * pitch * 2 + 255) / 256 * 256;
    ptr = dst;  // an offset into the scratch, which starts 16-byte aligned
    sb = s_batch == 0 ? 0 : rows * pitch;
    s_rows = pitch;
    s_cols = 1;
  };
  GemmArgs& a = c.args;
  if (c.copy_a && mma_a_km(g)) copy(g.a, g.a_sb, g.k, g.m, g.a_sk, a.a, a.a_sb, a.a_sk, a.a_sm);
  else if (c.copy_a) copy(g.a, g.a_sb, g.m, g.k, g.a_sm, a.a, a.a_sb, a.a_sm, a.a_sk);
  if (c.copy_b && mma_b_kn(g)) copy(g.b, g.b_sb, g.k, g.n, g.b_sk, a.b, a.b_sb, a.b_sk, a.b_sn);
  else if (c.copy_b) copy(g.b, g.b_sb, g.n, g.k, g.b_sn, a.b, a.b_sb, a.b_sn, a.b_sk);
  c.ops = mma_operands(a);
  const WgmmaPlan plan = wgmma_plan(a, c.ops, true, true, opt.split_k, wgmma_may_persist(c, opt), r.device);
  if (c.ops.fill != MmaFill::Async || plan.shape == WgmmaShape::None) return false;
  wgmma_route(c, plan, opt);
  r = c;
  return true;
}

// A few rows against a weight (decode: m up to kFewRows a batch) whose tiles leave SMs idle:
// the mma.sync tile that covers m with the least waste (the realigning and register fills:
// MmaSmall), its k tiles split across a cluster (compute capability 9.0) so that every SM
// streams the weight; none where the tiles fill the SMs or k is too short to share.
constexpr int64_t kFewRows = 128;
inline bool split_route(GemmRoute& r, const GemmOptions& opt) {
  const GemmArgs& g = r.args;
  if (!opt.split_k || r.device.cc < 90 || g.m > kFewRows || g.batch < 1) return false;
  GemmRoute c = r;
  c.family = GemmFamily::Mma;
  c.mma = r.ops.fill != MmaFill::Async ? MmaShape::Small
          : g.m <= MmaRows::kBM        ? MmaShape::Rows
          : g.m <= MmaNarrow::kBM      ? MmaShape::Narrow
                                       : MmaShape::Small;
  c.split = with_mma_config(c, [&](auto config) {
    using C = decltype(config);
    const int64_t tiles = g.batch * ceil_div(g.m, C::kBM) * ceil_div(g.n, C::kBN);
    return split_k_count(tiles, ceil_div(g.k, C::kBK), r.device, C::kBlocksPerSM);
  });
  if (c.split == 1) return false;
  r = c;
  return true;
}

// The few-rows kernel where it takes the call (rows_supports), the weight read along k or, for
// float32, along n; its k windows split across a cluster on compute capability 9.0 where its
// blocks would leave SMs idle. mma.sync's splits count one block an SM (the deep ring's); a
// grid past one wave of them takes the shallow ring at two blocks an SM instead (rows.h's
// rows_stages).
inline bool rows_route(GemmRoute& r, const GemmOptions& opt) {
  const GemmArgs& g = r.args;
  if (!opt.split_k || !rows_supports(r.dtype, g)) return false;
  // Past one block of rows only where the FFMA kernel cannot split k (below compute capability
  // 9.0) and its 64x64 tiles leave SMs idle: where they fill them, or split, they ran faster
  // (bench/RESULTS.md).
  const bool small_fills = g.batch * ceil_div(g.m, GemmSmall::kBM) * ceil_div(g.n, GemmSmall::kBN) >= r.device.num_sms;
  if (g.m > kRowsMaxM && (r.device.cc >= 90 || small_fills)) return false;
  r.family = GemmFamily::Rows;
  r.ops.b_kn = !rows_b_k_vectors(r.dtype, g);  // float32's weight read along n (rows_b_n_vectors)
  r.rows_mma = rows_on_mma(r.dtype, g.m);
  r.rows_tm = rows_tm(g.m, r.rows_mma);
  r.rows_ring = rows_takes_ring(r.dtype, r.rows_tm, r.ops.b_kn);
  const int64_t blocks = g.batch * ceil_div(g.m, r.rows_tm) * ceil_div(g.n, rows_bn(r.rows_mma));
  const int64_t windows = ceil_div(g.k, rows_window(r.dtype, r.rows_mma));
  const int per_sm = r.rows_mma    ? 1
                     : r.rows_ring ? rows_ffma_ring_blocks_per_sm(r.rows_tm)
                                   : rows_ffma_blocks_per_sm(r.rows_tm);
  r.split = r.device.cc < 90 ? 1 : split_k_count(blocks, windows, r.device, per_sm);
  if (r.rows_mma)
    r.rows_stages = rows_ring_stages(r.layout, r.rows_tm, blocks * r.split <= cluster_room(r.device, r.split, 1));
  return true;
}

// A few rows against a weight (x k-major, rows 16 bytes apart) on the Hopper kernel's thin tile
// (64 x 128, one consumer warpgroup, eight stages): such a call is bound by reading the weight,
// which TMA rings stream faster than mma.sync's tiles, and 64-row tiles waste no ring on rows
// past C (the 128-row plans' half or more). Its k splits across a cluster up to a block an SM,
// within the clusters the GPU holds (cluster_room): more blocks never read faster. Grids of
// fewer than half the SMs (a short k, a narrow weight) stay on the other routes.
inline bool wgmma_thin_route(GemmRoute& r, const GemmOptions& opt, bool hopper) {
  const GemmArgs& g = r.args;
  if (!hopper || !opt.tma || g.m > WgmmaThin::kBM || g.batch < 1 || g.batch > 65535 ||
      r.ops.fill != MmaFill::Async || r.ops.a_km || !wgmma_tma_ok(g, false, r.ops.b_kn))
    return false;
  const int64_t tiles = g.batch * ceil_div(g.n, WgmmaThin::kBN), nk = ceil_div(g.k, WgmmaThin::kBK);
  int split = 1;
  for (int s = 2; opt.split_k && s <= kMaxSplit && nk >= int64_t(s) * kSplitMinK; ++s)
    if (tiles * s <= r.device.num_sms && cluster_room(r.device, s, 1) >= tiles * s) split = s;
  if (2 * tiles * split < most_sms(r.device.num_sms)) return false;  // as wgmma_tma_plan's
  wgmma_route(r, WgmmaPlan{WgmmaShape::Thin, split}, opt);
  return true;
}

// A few rows against a weight on the Hopper route: 33-64 rows a batch take the thin tile
// (wgmma_thin_route); 32 or fewer mma.sync's 32-row split tiles (split_route: they ran a few
// percent faster there in streams of calls), or the thin tile where those find no split (the
// tiles alone fill the SMs). Then, where neither takes a call (a short k, an m-major A), the
// Hopper plan: its 128-row tiles are half zeros or more, but so thin a call is bound by reading
// the weight, which its TMA rings stream faster than mma.sync's tiles. More rows try the Hopper
// plan first (its own split), then split_route, then mma.sync's tiles.
inline void tensor_core_route(GemmRoute& r, const GemmOptions& opt) {
  const GemmArgs& g = r.args;
  r.ops = mma_operands(g);
  r.out_vec = mma_aligned16(g.c) && g.n % kMmaChunk == 0;
  const bool few_rows = g.m <= MmaNarrow::kBM;
  const bool hopper = opt.wgmma && r.device.cc == 90 && r.layout == Layout::Swizzle;
  if (few_rows) {
    const bool thin_first = g.m > MmaRows::kBM;
    if (thin_first && wgmma_thin_route(r, opt, hopper)) return;
    if (split_route(r, opt)) return;
    if (!thin_first && wgmma_thin_route(r, opt, hopper)) return;
  }
  if (hopper && opt.repack && opt.tma && repack_route(r, opt)) return;
  const WgmmaPlan plan = wgmma_plan(g, r.ops, hopper, opt.tma, opt.split_k, wgmma_may_persist(r, opt), r.device);
  if (plan.shape != WgmmaShape::None) return wgmma_route(r, plan, opt);
  if (!few_rows && split_route(r, opt)) return;
  r.family = GemmFamily::Mma;
  r.mma = mma_shape(g, r.ops.fill, r.device.num_sms);
}

}  // namespace route_detail

// The route of C = A @ B for dtype (float32/float64: ffma; float16/bfloat16: mma or wgmma)
// under `layout` on `device`. Data pointers count only through their alignment. Without
// scratch the copies and stream-K are off: the realigning producers and Wide's per-tile blocks
// need no memory.
inline GemmRoute gemm_route(const GemmArgs& g, DType dtype, Layout layout, const DeviceInfo& device,
                            const GemmOptions& options) {
  GemmOptions opt = options;
  opt.repack = opt.repack && opt.scratch;
  opt.stream_k = opt.stream_k && opt.scratch;
  GemmRoute r;
  r.dtype = dtype;
  r.layout = layout;
  r.device = device;
  r.args = g;
  r.fallback = !opt.scratch ? "no_scratch" : !opt.tma ? "no_tma" : nullptr;
  if (route_detail::rows_route(r, opt)) return r;
  if (dtype == DType::F16 || dtype == DType::BF16) route_detail::tensor_core_route(r, opt);
  else route_detail::ffma_route(r, opt);
  return r;
}

// ---- The route as one line (torch.ops.bankops._gemm_route, bankops.explain) -------------------

// e.g. "wgmma 128x256x64 producer=tma a=mk b=kn repack=none split=1 persistent=1 multicast=2
// tail=0 layout=swizzle blocks=132 sms=132 cc=90 scratch=0".
inline std::string gemm_route_line(const GemmRoute& r) {
  static const char* kStage[] = {"kvec", "kscalar", "xasync", "xscalar"};
  static const char* kStaging[] = {"vector", "async4", "scalar"};
  static const char* kConfig[] = {"big", "big_scalar", "small", "wide", "mid"};
  static const char* kFill[] = {"cp.async", "realign", "registers"};
  const GemmTileDims t = gemm_tile_dims(r);
  const std::string tile = std::to_string(t.bm) + "x" + std::to_string(t.bn) + "x" + std::to_string(t.bk);
  const std::string ab = std::string(" a=") + (r.ops.a_km ? "km" : "mk") + " b=" + (r.ops.b_kn ? "kn" : "nk");
  std::string s;
  switch (r.family) {
    case GemmFamily::Ffma:
      s = "ffma " + tile + " " + kConfig[int(r.config)] + " a=" + kStage[int(r.mode_a)] + " b=" + kStage[int(r.mode_b)] +
          " staging=" + kStaging[int(r.staging)];
      if (r.config == GemmConfig::Wide)
        s += " stream_k=" + std::to_string(r.work.sk_blocks) + "/" + std::to_string(r.work.sk_tiles) +
             " strip=" + std::to_string(r.strip);
      if (r.config == GemmConfig::Small || r.config == GemmConfig::Mid) s += " split=" + std::to_string(r.split);
      break;
    case GemmFamily::Rows:
      s = "rows " + tile + ab + (r.rows_ring ? " ring" : "") + " split=" + std::to_string(r.split);
      if (r.rows_mma) s += " stages=" + std::to_string(r.rows_stages);
      break;
    case GemmFamily::Mma:
      s = std::string("mma ") + tile + " fill=" + kFill[int(r.ops.fill)] + ab + " split=" + std::to_string(r.split);
      break;
    case GemmFamily::Wgmma:
      s = std::string("wgmma ") + tile + " producer=" + (r.ops.fill == MmaFill::Async ? "tma" : "realign") + ab +
          " repack=" + (r.copy_a && r.copy_b ? "a,b" : r.copy_a ? "a" : r.copy_b ? "b" : "none") +
          " split=" + std::to_string(r.split) + " persistent=" + (r.persistent ? "1" : "0") +
          " multicast=" + std::to_string(r.multicast) + " tail=" + std::to_string(r.tail);
      break;
  }
  return s + " layout=" + kLayoutNames[int(r.layout)] + " blocks=" + std::to_string(gemm_route_blocks(r)) +
         " sms=" + std::to_string(r.device.num_sms) + " cc=" + std::to_string(r.device.cc) +
         " scratch=" + std::to_string(r.scratch_bytes) + (r.fallback ? std::string(" fallback=") + r.fallback : "");
}

}  // namespace bankops
