// The mma.sync kernel's plan (float16, bfloat16; mma.h, mma.cu): the block tile, the operands'
// fill, and for a few rows against a weight k split across a cluster. No cost model yet: the
// tile is the largest that still gives about every SM a block.
#pragma once
#include <string>

#include "costs.h"
#include "operands.h"
#include "split_k.h"

namespace bankops {

struct MmaPlan {
  MmaShape shape = MmaShape::Small;
  MmaOperands ops{};
  bool out_vec = false;  // C's rows 16-byte aligned
  int split = 1;         // the blocks (a cluster) that share each tile's k
};

// f(C{}) with C the plan's tile (mma.h's MmaConfig): the one switch that turns a plan into a
// template argument, for the launcher, the trace and the route line alike.
template <class F>
decltype(auto) with_mma_config(const MmaPlan& p, F&& f) {
  switch (p.shape) {
    case MmaShape::Large: return f(MmaLarge{});
    case MmaShape::Narrow: return f(MmaNarrow{});
    case MmaShape::Rows: return f(MmaRows{});
    case MmaShape::Small:
    default: return f(MmaSmall{});
  }
}

// A few rows against a weight (m up to kMmaSplitMaxM a batch) whose tiles leave SMs idle: the tile
// that covers m with the least waste (the realigning and register fills: MmaSmall), its k tiles
// split across a cluster (compute capability 9.0) so that every SM streams the weight; none
// where the tiles fill the SMs or k is too short to share.
constexpr int64_t kMmaSplitMaxM = 128;
template <class Take>
inline void mma_split_candidates(const GemmCall& c, Take&& take) {
  const GemmArgs& g = c.args;
  if (!c.options.split_k || c.device.cc < 90 || g.m > kMmaSplitMaxM || g.batch < 1) return;
  MmaPlan p{MmaShape::Small, mma_operands(g), mma_out_vec(g), 1};
  p.shape = p.ops.fill != MmaFill::Async ? MmaShape::Small
            : g.m <= MmaRows::kBM        ? MmaShape::Rows
            : g.m <= MmaNarrow::kBM      ? MmaShape::Narrow
                                         : MmaShape::Small;
  p.split = with_mma_config(p, [&](auto config) {
    using C = decltype(config);
    const int64_t tiles = g.batch * ceil_div(g.m, C::kBM) * ceil_div(g.n, C::kBN);
    return split_k_count(tiles, ceil_div(g.k, C::kBK), c.device, C::kBlocksPerSM);
  });
  if (p.split > 1) take(p, kUnmodelled);
}

// The unsplit tiles, in order: MmaLarge, then MmaSmall, each where it gives about every SM a
// block, then MmaNarrow; the realigning and register fills run MmaSmall only (their schedules
// are written for its tile).
template <class Take>
inline void mma_candidates(const GemmCall& c, Take&& take) {
  const GemmArgs& g = c.args;
  MmaPlan p{MmaShape::Small, mma_operands(g), mma_out_vec(g), 1};
  const bool async = p.ops.fill == MmaFill::Async;
  for (const MmaShape shape : {MmaShape::Large, MmaShape::Small, MmaShape::Narrow}) {
    p.shape = shape;
    const bool legal = with_mma_config(p, [&](auto config) {
      using C = decltype(config);
      if (shape == MmaShape::Narrow) return async;
      return shape == MmaShape::Small ? !async || mma_fills(g, C::kBM, C::kBN, c.device.num_sms)
                                      : async && mma_fills(g, C::kBM, C::kBN, c.device.num_sms);
    });
    if (legal) take(p, kUnmodelled);
  }
}

inline int64_t mma_blocks(const GemmCall& c, const MmaPlan& p) {
  return with_mma_config(p, [&](auto config) {
    using C = decltype(config);
    return c.args.batch * ceil_div(c.args.m, C::kBM) * ceil_div(c.args.n, C::kBN) * p.split;
  });
}

// e.g. "mma 128x128x32 fill=cp.async a=mk b=kn split=1".
inline std::string mma_describe(const MmaPlan& p) {
  static const char* kFill[] = {"cp.async", "realign", "registers"};
  return with_mma_config(p, [&](auto config) {
    using C = decltype(config);
    return "mma " + std::to_string(C::kBM) + "x" + std::to_string(C::kBN) + "x" + std::to_string(C::kBK) +
           " fill=" + kFill[int(p.ops.fill)] + mma_majors(p.ops) + " split=" + std::to_string(p.split);
  });
}

}  // namespace bankops
