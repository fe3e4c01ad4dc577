// The FFMA/DFMA kernel's plan (float32, float64; ffma.h, ffma.cu): the block configuration,
// each operand's staging, and for 128x256 the strip and stream-K, for a few rows split-K.
// No cost model yet: its candidates go in a fixed order, each legal where its rule holds.
#pragma once
#include <string>

#include "costs.h"
#include "ffma.h"
#include "ffma_work.h"
#include "split_k.h"

namespace bankops {

struct FfmaPlan {
  GemmConfig config = GemmConfig::Big;
  GemmStage mode_a = GemmStage::KVec, mode_b = GemmStage::XAsync;
  GemmStaging staging = GemmStaging::Vector;
  int split = 1;     // Small, Mid, Flat, Short: the blocks (a cluster) that share each tile's k
  int strip = 0;     // Wide: C's last columns on the strip blocks
  GemmWork work{};   // Wide: which blocks compute what (stream-K)
};

// f(S{}) with S the plan's configuration (ffma.h's GemmShape): the one switch that turns a plan
// into a template argument, for the launcher, the trace and the route line alike.
template <class F>
decltype(auto) with_ffma_config(DType dtype, const FfmaPlan& p, F&& f) {
  if (dtype == DType::F64) return f(GemmBig<8>{});
  switch (p.config) {
    case GemmConfig::Wide: return f(GemmWide{});
    case GemmConfig::BigScalar: return f(GemmBigScalar{});
    case GemmConfig::Small: return f(GemmSmall{});
    case GemmConfig::Mid: return f(GemmMid{});
    case GemmConfig::Flat: return f(GemmFlat{});
    case GemmConfig::Short: return f(GemmShort{});
    case GemmConfig::Big:
    default: return f(GemmBig<4>{});
  }
}

// Whether a grid of S tiles over (batch, m, n) keeps at least 7/8 of its `per_sm` block slots an
// SM busy over all its waves.
template <class S>
inline bool ffma_fills(const GemmArgs& g, int num_sms, int per_sm) {
  const int64_t tiles = g.batch * ceil_div(g.m, S::kBM) * ceil_div(g.n, S::kBN), slots = int64_t(num_sms) * per_sm;
  return 8 * tiles >= 7 * ceil_div(tiles, slots) * slots;
}

// Whether stream-K evens out the last wave of Wide's grid (ffma_work.h): a grid a wave deep or
// more, or a shorter one that Big's blocks would leave SMs half idle on (a weight gradient's few
// tiles over a long k).
inline bool ffma_wide_shares(const GemmArgs& g, int num_sms, bool stream_k) {
  const int64_t wide = g.batch * ceil_div(g.m, GemmWide::kBM) * ceil_div(g.n, GemmWide::kBN);
  return stream_k && (wide >= num_sms || !ffma_fills<GemmBig<4>>(g, num_sms, 2)) &&
         gemm_stream_k_blocks(wide, ceil_div(g.k, GemmWide::kBK), num_sms) > 0;
}

// Columns at the right edge of C that go to the strip blocks (ffma_strip.h), 0 for none: vector
// or Async4 staging, n a few columns (1 .. kGemmStripCols) past whole Wide tiles, and Wide's grid
// filling the SMs without that last column of blocks but not with it (n = 4097: 16 tiles and one).
inline int ffma_strip_cols(const GemmArgs& g, int num_sms, GemmStaging staging) {
  const int64_t cols = g.n % GemmWide::kBN;
  if (staging == GemmStaging::Scalar || cols == 0 || cols > kGemmStripCols || g.n < GemmWide::kBN) return 0;
  GemmArgs without = g;
  without.n -= cols;
  if (ffma_fills<GemmWide>(g, num_sms, 1) || !ffma_fills<GemmWide>(without, num_sms, 1)) return 0;
  return static_cast<int>(cols);
}

// S's split-K across a cluster (split_k_count), each rank costs.ffma_split_min_k k tiles or more.
template <class S>
inline int ffma_split_count(const GemmCall& c) {
  const GemmArgs& g = c.args;
  const int64_t tiles = g.batch * ceil_div(g.m, S::kBM) * ceil_div(g.n, S::kBN);
  return split_k_count(tiles, ceil_div(g.k, S::kBK), c.device, S::kMinBlocks, gemm_costs(c.device).ffma_split_min_k);
}

// S's plan split across a cluster (as config), taken where its split grid keeps half_blocks_per_sm
// / 2 blocks an SM (Flat, Mid: below that their few warps an SM stall).
template <class S, class Take>
inline void ffma_take_split(const GemmCall& c, FfmaPlan p, GemmConfig config, int half_blocks_per_sm, Take&& take) {
  const GemmArgs& g = c.args;
  p.config = config;
  p.split = ffma_split_count<S>(c);
  const int64_t blocks = g.batch * ceil_div(g.m, S::kBM) * ceil_div(g.n, S::kBN) * p.split;
  if (2 * blocks >= half_blocks_per_sm * int64_t(c.device.num_sms)) take(p, kUnmodelled);
}

// The legal plans of a float32 or float64 call, in order (the router takes the first):
//  0. Flat: 33-64 rows (vector staging, compute capability 9.0) split k across a cluster, where
//     its split grid keeps costs.ffma_flat_half_blocks_per_sm / 2 blocks an SM (a weight 14336
//     wide: 224 blocks);
//  1. Wide (vector or Async4 staging): past one 64 tile of rows where stream-K deals a long k out
//     to the SMs (128 rows against a weight, or 33-64 where 64x64's own grid leaves SMs idle),
//     or, on grids of a wave of 128x128 tiles and more, where its grid fills the SMs over all of C
//     or all but a strip, or stream-K evens out its last wave;
//  2. Mid: up to 64 rows split k across a cluster (compute capability 9.0, vector staging),
//     where its own split grid keeps costs.ffma_mid_half_blocks_per_sm / 2 blocks an SM;
//  3. Small: grids that leave an SM without a 128x128 block, or m or n within one 64 tile (split
//     as Mid where that applies);
//  4. BigScalar: an operand staged element by element through registers (Scalar);
//  5. Big, which takes anything (float64, k = 0: a block a tile stores C where Wide's blocks run
//     pieces of k);
//  6. for the tuner (bankops.tune) where the call may split: Flat, Mid and Small at every other
//     split whose ranks keep costs.ffma_split_min_k k tiles and whose cluster fits, Flat and Mid
//     where their rules above kept them out, and up to 32 rows Short at every such split (the
//     router never reaches these: Big comes first).
template <class S, class Take>
inline void ffma_other_splits(const GemmCall& c, FfmaPlan p, GemmConfig config, int taken, Take&& take) {
  const GemmArgs& g = c.args;
  const int64_t nk = ceil_div(g.k, S::kBK);
  p.config = config;
  for (int s = 1; s <= kMaxSplit; ++s) {
    if (s == taken || !split_k_fits(s, nk, c.device, S::kMinBlocks, gemm_costs(c.device).ffma_split_min_k)) continue;
    p.split = s;
    take(p, kUnmodelled);
  }
}

template <class Take>
inline void ffma_candidates(const GemmCall& c, Take&& take) {
  const GemmArgs& g = c.args;
  const int eb = c.dtype == DType::F64 ? 8 : 4, sms = c.device.num_sms;
  FfmaPlan p;
  int taken[3] = {0, 0, 0};  // the split Flat, Mid and Small took in the router's list (0: none)
  bool splits = false;
  const auto note = [&](const FfmaPlan& q, int i) {
    taken[i] = q.split;
    take(q, kUnmodelled);
  };
  p.mode_a = gemm_stage_mode(g.a, eb, eb, g.batch, g.a_sb, g.k, g.a_sk, g.m, g.a_sm);
  p.mode_b = gemm_stage_mode(g.b, eb, eb, g.batch, g.b_sb, g.k, g.b_sk, g.n, g.b_sn);
  p.staging = gemm_staging(p.mode_a, gemm_unit_scalar(p.mode_a, g.a, eb, g.a_sk, g.a_sm), p.mode_b,
                           gemm_unit_scalar(p.mode_b, g.b, eb, g.b_sk, g.b_sn));
  if (eb == 4 && g.k > 0) {
    // k tiles are counted in int: K up to 2^34 (no tensor that fits a GPU comes near it).
    const bool stream_k = c.options.stream_k && ceil_div(g.k, kGemmBK) <= 0x7fffffff;
    // Up to 64 rows, both operands staged by 16-byte vectors, split k on compute capability 9.0,
    // in place of Wide's stream-K over tiles half empty.
    splits = c.device.cc >= 90 && c.options.split_k && g.m <= GemmSmall::kBM && p.staging == GemmStaging::Vector;
    const bool shares = ffma_wide_shares(g, sms, stream_k && !splits);
    const int64_t big = g.batch * ceil_div(g.m, GemmBig<4>::kBM) * ceil_div(g.n, GemmBig<4>::kBN);
    const int64_t small = g.batch * ceil_div(g.m, GemmSmall::kBM) * ceil_div(g.n, GemmSmall::kBN);
    const bool small_grid = big < sms || g.m <= GemmSmall::kBM || g.n <= GemmSmall::kBN;
    const bool rows = g.m > GemmSmall::kBM || (2 * g.m > GemmSmall::kBM && small < sms);
    const int strip = ffma_strip_cols(g, sms, p.staging);
    if (small_grid && splits && g.n >= GemmFlat::kBN)
      ffma_take_split<GemmFlat>(c, p, GemmConfig::Flat, gemm_costs(c.device).ffma_flat_half_blocks_per_sm,
                                [&](const FfmaPlan& q, double) { note(q, 0); });
    const bool wide = p.staging != GemmStaging::Scalar &&
                      (small_grid ? rows && g.n > GemmSmall::kBN && shares
                                  : ffma_fills<GemmWide>(g, sms, 1) || shares || strip > 0);
    if (wide) {
      FfmaPlan w = p;
      w.config = GemmConfig::Wide;
      w.strip = strip;
      w.work = gemm_work(g.batch, g.m, g.n - strip, g.k, strip, sms, stream_k);
      take(w, kUnmodelled);
    }
    if (small_grid && splits && g.n >= GemmMid::kBN)
      ffma_take_split<GemmMid>(c, p, GemmConfig::Mid, gemm_costs(c.device).ffma_mid_half_blocks_per_sm,
                               [&](const FfmaPlan& q, double) { note(q, 1); });
    if (small_grid) {
      FfmaPlan s = p;
      s.config = GemmConfig::Small;
      s.split = splits ? ffma_split_count<GemmSmall>(c) : 1;
      note(s, 2);
    }
    if (!small_grid && p.staging == GemmStaging::Scalar) {
      FfmaPlan s = p;
      s.config = GemmConfig::BigScalar;
      take(s, kUnmodelled);
    }
  }
  take(p, kUnmodelled);  // Big
  if (splits) {
    if (g.n >= GemmFlat::kBN) ffma_other_splits<GemmFlat>(c, p, GemmConfig::Flat, taken[0], take);
    if (g.n >= GemmMid::kBN) ffma_other_splits<GemmMid>(c, p, GemmConfig::Mid, taken[1], take);
    ffma_other_splits<GemmSmall>(c, p, GemmConfig::Small, taken[2], take);
    if (g.m <= GemmShort::kBM) ffma_other_splits<GemmShort>(c, p, GemmConfig::Short, 0, take);
  }
}

// Bytes of scratch the plan takes: Wide's stream-K partial sums and flags.
inline int64_t ffma_scratch_bytes(const FfmaPlan& p) { return p.config == GemmConfig::Wide ? gemm_work_bytes(p.work) : 0; }

// Blocks the plan launches: Wide's strip, stream-K and per-tile blocks; else its tiles (x split).
inline int64_t ffma_blocks(const GemmCall& c, const FfmaPlan& p) {
  if (p.config == GemmConfig::Wide) return p.work.blocks();
  return with_ffma_config(c.dtype, p, [&](auto s) {
    using S = decltype(s);
    return c.args.batch * ceil_div(c.args.m, S::kBM) * ceil_div(c.args.n, S::kBN) * p.split;
  });
}

// e.g. "ffma 128x256x8 wide a=kvec b=xasync staging=vector stream_k=132/128 strip=0".
inline std::string ffma_describe(const GemmCall& c, const FfmaPlan& p) {
  static const char* kStage[] = {"kvec", "kscalar", "xasync", "xscalar"};
  static const char* kStaging[] = {"vector", "async4", "scalar"};
  static const char* kConfig[] = {"big", "big_scalar", "small", "wide", "mid", "flat", "short"};
  std::string s = with_ffma_config(c.dtype, p, [](auto shape) {
    using S = decltype(shape);
    return "ffma " + std::to_string(S::kBM) + "x" + std::to_string(S::kBN) + "x" + std::to_string(S::kBK);
  });
  s += std::string(" ") + kConfig[int(p.config)] + " a=" + kStage[int(p.mode_a)] + " b=" + kStage[int(p.mode_b)] +
       " staging=" + kStaging[int(p.staging)];
  if (p.config == GemmConfig::Wide)
    s += " stream_k=" + std::to_string(p.work.sk_blocks) + "/" + std::to_string(p.work.sk_tiles) +
         " strip=" + std::to_string(p.strip);
  if (with_ffma_config(c.dtype, p, [](auto shape) { return ffma_splits<decltype(shape)>(); }))
    s += " split=" + std::to_string(p.split);
  return s;
}

}  // namespace bankops
