// The Hopper kernel's plan (float16, bfloat16 under swizzle on compute capability 9.0; wgmma.h,
// wgmma.cu): the block tile and split, chosen by a time model whose constants are the GPU's
// (costs.h); then persistent blocks or not, clusters sharing B, a split last wave; before it,
// copies of misaligned operands into aligned rows (repack.h) where the call takes them.
#pragma once
#include <algorithm>
#include <string>
#include <utility>

#include "costs.h"
#include "operands.h"
#include "repack.h"
#include "split_k.h"
#include "wgmma.h"

namespace bankops {

// Copies of misaligned operands into rows on 128-byte lines before the kernel, and the operands
// as the kernel then reads them (pointers: offsets into the scratch until placed).
struct RepackStep {
  RepackJob job[2]{};
  int jobs = 0;
  bool copy_a = false, copy_b = false;
  GemmArgs args{};
  int64_t bytes = 0;

  // The step with its copies' pointers inside `scratch`.
  RepackStep placed(void* scratch) const {
    RepackStep s = *this;
    const auto at = [scratch](const void* offset) {
      return static_cast<char*>(scratch) + reinterpret_cast<uintptr_t>(offset);
    };
    if (copy_a) s.args.a = at(args.a);
    if (copy_b) s.args.b = at(args.b);
    for (int j = 0; j < jobs; ++j) s.job[j].dst = at(job[j].dst);
    return s;
  }
};

struct WgmmaPlan {
  WgmmaShape shape = WgmmaShape::None;
  MmaOperands ops{};        // the operands the kernel reads (the copies' when repacked)
  bool out_vec = false;     // C's rows 16-byte aligned
  int split = 1;            // the blocks (a cluster) that share each tile's k
  bool persistent = false;  // one block an SM walks the tiles (wgmma_finish)
  int multicast = 1;        // persistent: the blocks (a cluster) that share each B tile
  int64_t tail = 0;         // persistent: the last wave's tiles split over pairs of blocks
  RepackStep repack{};
};

// f(C{}) with C the plan's tile (wgmma.h's WgmmaConfig): the one switch that turns a plan into
// a template argument, for the launcher, the trace and the route line alike.
template <class F>
decltype(auto) with_wgmma_config(const WgmmaPlan& p, F&& f) {
  switch (p.shape) {
    case WgmmaShape::Large: return f(WgmmaLarge{});
    case WgmmaShape::Narrow: return f(WgmmaNarrow{});
    case WgmmaShape::Broad: return f(WgmmaBroad{});
    case WgmmaShape::Slim: return f(WgmmaSlim{});
    case WgmmaShape::Tall: return f(WgmmaTall{});
    case WgmmaShape::TallBroad: return f(WgmmaTallBroad{});
    case WgmmaShape::Thin: return f(WgmmaThin{});
    case WgmmaShape::ThinNarrow: return f(WgmmaThinNarrow{});
    case WgmmaShape::Medium:
    default: return p.ops.fill == MmaFill::Async ? f(WgmmaMedium{}) : f(WgmmaMediumRealign{});
  }
}

// The operands the plan's kernel reads: the copies where it repacks them, else the call's.
inline const GemmArgs& wgmma_args(const GemmCall& c, const WgmmaPlan& p) {
  return p.repack.jobs > 0 ? p.repack.args : c.args;
}

// Whether the call may take the Hopper kernel: the switch, compute capability 9.0, swizzle.
inline bool wgmma_allowed(const GemmCall& c) {
  return c.options.wgmma && c.device.cc == 90 && c.layout == Layout::Swizzle;
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

template <class C>
inline int64_t wgmma_tiles(const GemmArgs& g) {
  return g.batch * ceil_div(g.m, C::kBM) * ceil_div(g.n, C::kBN);
}
// Whether a grid of C's tiles fills nine tenths of its last wave.
template <class C>
inline bool wgmma_whole_waves(const GemmArgs& g, int num_sms) {
  const int64_t tiles = wgmma_tiles<C>(g);
  return 10 * tiles >= 9 * ceil_div(tiles, num_sms) * num_sms;
}
// Whether a persistent block's k-tiles over all its tiles (of `tiles` on num_sms blocks) fit
// its int ring counter (no tensor that fits a GPU comes near the limit).
template <class C>
inline bool wgmma_walk_fits(const GemmArgs& g, int64_t tiles, int num_sms) {
  return ceil_div(tiles, num_sms) * ceil_div(g.k, C::kBK) <= 0x7fffffff;
}

// The time model (ns): a block runs its k tiles plus the ring's fill and the epilogue, each a
// step of the tile's width's cost; a split block adds its partial's sum through distributed
// shared memory; blocks run in waves of the clusters the device holds (cluster_room). No plan
// reads its operands faster than its resident blocks pull them: a few rows against a long
// weight are bound by reading it, and there fewer, wider tiles lose. halves: the call may split
// a persistent walk's last wave (wgmma_tail): a wave of half the blocks or fewer, after whole
// ones, takes half a tile and half a sum (counted on the two-consumer tiles only persistent
// blocks run, so that it never moves a call from those to 128 x 256).
template <class C>
inline double wgmma_time_ns(const GemmArgs& g, const DeviceInfo& d, int split, bool halves) {
  const GemmCosts& k = gemm_costs(d);
  const int64_t tiles = wgmma_tiles<C>(g), room = cluster_room(d, split, 1), nk = ceil_div(g.k, C::kBK);
  const double step = k.wgmma_step_units_of(C::kBM, C::kBN), sum = k.wgmma_sum_units + C::kBN * k.wgmma_sum_units_per_col;
  const double block = (double(ceil_div(nk, split)) + k.wgmma_block_steps) * step + (split > 1 ? sum : 0);
  const int64_t left = tiles % room;
  const bool tail = halves && split == 1 && tiles > room && 2 * left <= room && nk >= k.wgmma_tail_min_k;
  const double half = (double(ceil_div(nk, 2)) + k.wgmma_block_steps) * step + sum / 2;
  const double units = tail ? double(tiles / room) * block + (left > 0 ? half : 0)
                            : double(ceil_div(tiles * split, room)) * block;
  // The operands' bytes (a broadcast B once) over the rate the resident blocks reach.
  const double bytes = 2.0 * g.k * (double(g.batch) * g.m + double(g.b_sb != 0 ? g.batch : 1) * g.n);
  const double gbps = std::min(k.wgmma_dram_gbps, double(std::min(tiles * split, room)) * k.wgmma_block_gbps);
  return std::max(units * k.wgmma_step_ns, bytes / gbps);
}

// The TMA plans of a call, in rank order, each with its predicted time: unsplit first, then split
// 2..kMaxSplit (each rank kSplitMinK k tiles or more), each from the largest tile down, but 192 x
// 96 right after 128 x 256, 192 x 192 after 128 x 192 and 128 x 144 after 128 x 128 (the router
// takes a later one only where it ends a tenth sooner: the model rates 192 x 96's short walks too
// slow). 128 x 192, 192 x 192, 128 x 144 and 192 x 96 go unsplit only, where the call may run
// persistent blocks; 128 x 144 and 192 x 96 only with A and B k-major. A plan gives half the SMs
// or more a block (64 of 132).
template <class Take>
inline void wgmma_tma_candidates(const GemmCall& c, const GemmArgs& g, const WgmmaPlan& base, Take&& take) {
  const DeviceInfo& d = c.device;
  const bool split_k = c.options.split_k, persistent = c.options.persistent && base.out_vec;
  const bool k_major = !base.ops.a_km && !base.ops.b_kn;
  WgmmaPlan p = base;
  const auto consider = [&](WgmmaShape shape, auto config, int split) {
    using C = decltype(config);
    const int64_t blocks = wgmma_tiles<C>(g) * split;
    if (2 * blocks < most_sms(d.num_sms)) return;
    if (C::kPersistentOnly && !wgmma_walk_fits<C>(g, blocks, d.num_sms)) return;
    if (!split_k_fits(split, ceil_div(g.k, C::kBK), d, 1)) return;
    p.shape = shape;
    p.split = split;
    take(p, wgmma_time_ns<C>(g, d, split, C::kPersistentOnly && C::kHalves && split_k));
  };
  for (int split = 1; split <= (split_k ? kMaxSplit : 1); ++split) {
    consider(WgmmaShape::Large, WgmmaLarge{}, split);
    if (split == 1 && persistent && k_major) consider(WgmmaShape::Tall, WgmmaTall{}, split);
    if (split == 1 && persistent) consider(WgmmaShape::Broad, WgmmaBroad{}, split);
    if (split == 1 && persistent) consider(WgmmaShape::TallBroad, WgmmaTallBroad{}, split);
    consider(WgmmaShape::Medium, WgmmaMedium{}, split);
    if (split == 1 && persistent && k_major) consider(WgmmaShape::Slim, WgmmaSlim{}, split);
    consider(WgmmaShape::Narrow, WgmmaNarrow{}, split);
  }
}

// The Hopper plans of a call the layout and device allow (grids within the launch limits), on
// operands `g` (the call's or the copies'): the TMA plans (rows 16 bytes apart, the driver
// encoding tensor maps), or, for rows off 16-byte boundaries with B n-contiguous, the realigning
// producer on whole waves of a grid that gives every SM a tile, 128 x 256 then 128 x 128 (two
// producers). The realigning producer runs at L2's request rate, not its bytes, so misaligned
// operands of 256 x 256 or more take copies into aligned rows first where they can
// (wgmma_repacked_candidates).
template <class Take>
inline void wgmma_plans(const GemmCall& c, const GemmArgs& g, const WgmmaPlan& base, Take&& take) {
  if (g.batch > 65535 || ceil_div(g.m, WgmmaLarge::kBM) > 65535) return;
  if (base.ops.fill == MmaFill::Async && c.options.tma && wgmma_tma_ok(g, base.ops.a_km, base.ops.b_kn))
    return wgmma_tma_candidates(c, g, base, take);
  if (base.ops.fill != MmaFill::Realign || !base.ops.b_kn) return;
  const int sms = c.device.num_sms;
  WgmmaPlan p = base;
  p.shape = WgmmaShape::Large;
  if (wgmma_whole_waves<WgmmaLarge>(g, sms) && mma_fills(g, WgmmaLarge::kBM, WgmmaLarge::kBN, sms)) take(p, kUnmodelled);
  p.shape = WgmmaShape::Medium;
  if (wgmma_whole_waves<WgmmaMediumRealign>(g, sms) &&
      mma_fills(g, WgmmaMediumRealign::kBM, WgmmaMediumRealign::kBN, sms))
    take(p, kUnmodelled);
}

// The Hopper plans on the call's own operands.
inline WgmmaPlan wgmma_base(const GemmCall& c) {
  return WgmmaPlan{WgmmaShape::None, mma_operands(c.args), mma_out_vec(c.args)};
}
template <class Take>
inline void wgmma_candidates(const GemmCall& c, Take&& take) {
  if (wgmma_allowed(c)) wgmma_plans(c, c.args, wgmma_base(c), take);
}

// Misaligned operands (rows off 16-byte boundaries, a unit-stride contiguous dim) of matrices of
// 256 x 256 or more: copies into rows on 128-byte lines (repack.h), then the TMA plans on the
// copies. A batch stride of 0 copies one batch. (Each operand is read by two or more 128-row
// block tiles, or the copy would move as many bytes as the product reads.)
template <class Take>
inline void wgmma_repacked_candidates(const GemmCall& c, Take&& take) {
  const GemmArgs& g = c.args;
  const WgmmaPlan own = wgmma_base(c);
  if (!wgmma_allowed(c) || !c.options.repack || !c.options.tma || g.batch < 1 || g.m < kRepackMinMN ||
      g.n < kRepackMinMN || own.ops.fill != MmaFill::Realign)
    return;
  RepackStep r;
  r.copy_a = !mma_a_aligned(g);
  r.copy_b = !mma_b_aligned(g);
  r.args = g;
  const auto copy = [&](const void* src, int64_t s_batch, int64_t rows, int64_t cols, int64_t s_row,
                        const void*& ptr, int64_t& sb, int64_t& s_rows, int64_t& s_cols) {
    const int64_t pitch = repack_pitch(cols, 2), batch = s_batch == 0 ? 1 : g.batch;
    void* dst = reinterpret_cast<void*>(static_cast<uintptr_t>(r.bytes));
    r.job[r.jobs++] = RepackJob{src, dst, batch, rows, cols, s_batch, s_row, pitch};
    r.bytes += (batch * rows * pitch * 2 + 255) / 256 * 256;
    ptr = dst;  // an offset into the scratch, which starts 16-byte aligned
    sb = s_batch == 0 ? 0 : rows * pitch;
    s_rows = pitch;
    s_cols = 1;
  };
  GemmArgs& a = r.args;
  if (r.copy_a && mma_a_km(g)) copy(g.a, g.a_sb, g.k, g.m, g.a_sk, a.a, a.a_sb, a.a_sk, a.a_sm);
  else if (r.copy_a) copy(g.a, g.a_sb, g.m, g.k, g.a_sm, a.a, a.a_sb, a.a_sm, a.a_sk);
  if (r.copy_b && mma_b_kn(g)) copy(g.b, g.b_sb, g.k, g.n, g.b_sk, a.b, a.b_sb, a.b_sk, a.b_sn);
  else if (r.copy_b) copy(g.b, g.b_sb, g.n, g.k, g.b_sn, a.b, a.b_sb, a.b_sn, a.b_sk);
  WgmmaPlan base{WgmmaShape::None, mma_operands(a), own.out_vec};
  base.repack = r;
  if (base.ops.fill == MmaFill::Async) wgmma_plans(c, a, base, take);
}

// A few rows against a weight (x k-major, rows 16 bytes apart) on the thin tiles (64 x 128 and
// 64 x 64, one consumer warpgroup, a deep ring): such a call is bound by reading the weight, which
// TMA rings stream faster than mma.sync's tiles, and 64-row tiles waste no ring on rows past C.
// Its k splits across a cluster up to a block an SM, within the clusters the GPU holds
// (cluster_room): more blocks never read faster. The weight streams only into SMs that hold a
// block, so the width whose grid fills more of its waves' SMs comes first; on a tie the one
// split fewer ways (a shorter sum), else 64 x 128 (fewer waves). Grids of fewer than half the
// SMs stay on the other plans.
template <class Take>
inline void wgmma_thin_candidates(const GemmCall& c, Take&& take) {
  const GemmArgs& g = c.args;
  const int sms = c.device.num_sms;
  const WgmmaPlan base = wgmma_base(c);
  if (!wgmma_allowed(c) || !c.options.tma || g.m > WgmmaThin::kBM || g.batch < 1 || g.batch > 65535 ||
      base.ops.fill != MmaFill::Async || base.ops.a_km || !wgmma_tma_ok(g, false, base.ops.b_kn))
    return;
  const auto plan = [&](WgmmaShape shape, auto config) {
    using C = decltype(config);
    static_assert(C::kFewRows && C::kBM == WgmmaThin::kBM && C::kBK == WgmmaThin::kBK, "the thin tiles");
    WgmmaPlan p = base;
    p.shape = shape;
    const int64_t tiles = g.batch * ceil_div(g.n, C::kBN), nk = ceil_div(g.k, C::kBK);
    for (int s = 2; c.options.split_k && s <= kMaxSplit && nk >= int64_t(s) * kSplitMinK; ++s)
      if (tiles * s <= sms && cluster_room(c.device, s, 1) >= tiles * s) p.split = s;
    return std::make_pair(p, tiles * p.split);
  };
  const auto wide = plan(WgmmaShape::Thin, WgmmaThin{}), narrow = plan(WgmmaShape::ThinNarrow, WgmmaThinNarrow{});
  // blocks / (waves x SMs) of the two, compared by cross-multiplying; then the fewer ranks a sum.
  const int64_t fill_narrow = narrow.second * ceil_div(wide.second, sms);
  const int64_t fill_wide = wide.second * ceil_div(narrow.second, sms);
  const bool narrow_first = fill_narrow > fill_wide || (fill_narrow == fill_wide && narrow.first.split < wide.first.split);
  for (const auto& [p, blocks] : {narrow_first ? narrow : wide, narrow_first ? wide : narrow})
    if (2 * blocks >= most_sms(sms)) take(p, kUnmodelled);
}

// The tiles a persistent plan's blocks walk: its clusters' tiles, `multicast` m tiles each, the
// last cluster's past C's rows too.
inline int64_t wgmma_walked_tiles(const GemmCall& c, const WgmmaPlan& p) {
  const GemmArgs& g = c.args;
  return with_wgmma_config(p, [&](auto config) {
    using C = decltype(config);
    const int m = p.multicast;
    return g.batch * ceil_div(ceil_div(g.m, C::kBM), m) * m * ceil_div(g.n, C::kBN);
  });
}

// Blocks the plan launches: persistent, one an SM in clusters of `multicast`, at most one a
// walked tile; else its tiles (x split).
inline int64_t wgmma_blocks(const GemmCall& c, const WgmmaPlan& p) {
  if (p.persistent)
    return std::min(wgmma_walked_tiles(c, p), cluster_room(c.device, p.multicast, 1) / p.multicast * p.multicast);
  return with_wgmma_config(p, [&](auto config) { return wgmma_tiles<decltype(config)>(c.args) * p.split; });
}

// A chosen tile and split, finished: persistent blocks where the call may run them, one block a
// tile (a split tile's cluster sums in its ring), more tiles than SMs or a tile only they run,
// and a block's k-tiles over all its tiles within its int counter (a grid of one wave or less
// has no next tile to overlap: a block a tile, whose epilogue reads C back through the ring,
// measured faster there); pairs of them sharing each B tile by TMA multicast (each loads its A
// tile and half the B tile) where B's tile halves, on two m tiles or more, an odd count only
// from 9 on (the last cluster's second tile lies past C), and clusters of 2 fill the SMs; the
// walk's ragged last wave split (wgmma_tail).
inline int64_t wgmma_tail(const GemmCall& c, const WgmmaPlan& p);
inline WgmmaPlan wgmma_finish(const GemmCall& c, WgmmaPlan p) {
  const GemmArgs& g = wgmma_args(c, p);
  const int sms = c.device.num_sms;
  with_wgmma_config(p, [&](auto config) {
    using C = decltype(config);
    const int64_t tiles = wgmma_tiles<C>(g);
    p.persistent = c.options.persistent && p.out_vec && p.ops.fill == MmaFill::Async && p.split == 1 &&
                   !C::kFewRows && (tiles > sms || C::kPersistentOnly) && wgmma_walk_fits<C>(g, tiles, sms);
    const bool shares = p.ops.b_kn ? wgmma_pairs_share_b<C, true>() : wgmma_pairs_share_b<C, false>();
    const int64_t tiles_m = ceil_div(g.m, int64_t(C::kBM));
    const bool pairs = p.persistent && g.batch >= 1 && cluster_room(c.device, 2, 1) >= sms;
    p.multicast = pairs && shares && tiles_m >= 2 && (tiles_m % 2 == 0 || tiles_m >= 9) ? 2 : 1;
  });
  p.tail = c.options.split_k ? wgmma_tail(c, p) : 0;
  return p;
}

// The persistent walk's ragged last wave, split: where whole waves of cluster tiles come first and
// the tiles left need half the blocks or fewer, each left tile runs on a pair of blocks (a cluster
// of 2), half its k tiles each, the halves summed through distributed shared memory (wgmma.cu's
// add_halves): that wave ends sooner, though not in half the time. Each half keeps
// costs.wgmma_tail_min_k / 2 k-tiles or more; the blocks pair up only where pairs fill the SMs.
inline int64_t wgmma_tail(const GemmCall& c, const WgmmaPlan& p) {
  if (!p.persistent || c.args.batch < 1 || cluster_room(c.device, 2, 1) < c.device.num_sms) return 0;
  return with_wgmma_config(p, [&](auto config) -> int64_t {
    using C = decltype(config);
    if (!C::kHalves) return 0;
    const int64_t blocks = wgmma_blocks(c, p), walkers = blocks / p.multicast;
    const int64_t tiles = wgmma_walked_tiles(c, p) / p.multicast, left = tiles % walkers;  // cluster tiles
    const bool fits = blocks % 2 == 0 && 2 * left * p.multicast <= blocks;
    const bool long_k = ceil_div(c.args.k, C::kBK) >= gemm_costs(c.device).wgmma_tail_min_k;
    return tiles > walkers && left > 0 && fits && long_k ? left * p.multicast : 0;
  });
}

// e.g. "wgmma 128x256x64 producer=tma a=mk b=kn repack=none split=1 persistent=1 multicast=2 tail=0".
inline std::string wgmma_describe(const WgmmaPlan& p) {
  const RepackStep& r = p.repack;
  return with_wgmma_config(p, [&](auto config) {
    using C = decltype(config);
    return "wgmma " + std::to_string(C::kBM) + "x" + std::to_string(C::kBN) + "x" + std::to_string(C::kBK) +
           " producer=" + (p.ops.fill == MmaFill::Async ? "tma" : "realign") + mma_majors(p.ops) +
           " repack=" + (r.copy_a && r.copy_b ? "a,b" : r.copy_a ? "a" : r.copy_b ? "b" : "none") +
           " split=" + std::to_string(p.split) + " persistent=" + (p.persistent ? "1" : "0") +
           " multicast=" + std::to_string(p.multicast) + " tail=" + std::to_string(p.tail);
  });
}

}  // namespace bankops
