// Which kernel runs a gemm call, and how: gemm_route() lists the legal plans of every kernel
// family for the call and takes one: the plan the call's options name, else the one its GPU's
// measured table (tuning.h) names for calls like it, else its own pick. Each family's plan
// (ffma_plan.h, mma_plan.h, wgmma_plan.h, rows_plan.h) says what is legal and, where it has a
// cost model, how long each candidate takes; the router only chooses. The op computes the route
// once per call; the launcher runs exactly its plan, explain() traces it (trace.h) and
// torch.ops.bankops._gemm_route prints it.
#pragma once
#include <array>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "ffma_plan.h"
#include "mma_plan.h"
#include "rows_plan.h"
#include "tuning.h"
#include "wgmma_plan.h"

namespace bankops {

static_assert(kRowsFfmaTile == GemmSmall::kBM && kRowsFfmaTile == GemmSmall::kBN, "rows_plan.h's FFMA tile");

using GemmPlan = std::variant<FfmaPlan, MmaPlan, WgmmaPlan, RowsPlan>;

// The tiers the router walks, lowest first: the lowest tier that has a legal plan takes the call.
// They order what no cost model compares yet (the few-rows kernel and mma.sync have none); within
// a tier the first plan in its family's order wins, or a later one its family's model predicts to
// end a tenth sooner (each rank adds to a split's sums; the models are rough).
enum class GemmTier : int {
  Rows,          // the few-rows kernel, wherever it takes the call
  ThinFirst,     // 33-64 rows a batch: the Hopper kernel's thin tile
  FewRowsSplit,  // up to 64 rows: mma.sync split across a cluster (at 32 rows and fewer a few
                 // percent faster than the thin tile in streams of calls)
  Thin,          // up to 32 rows: the thin tile where mma.sync finds no split
  Repacked,      // misaligned 16-bit operands copied into aligned rows, then the Hopper plans
  Hopper,        // the Hopper plans (their model)
  Split,         // 65-128 rows: mma.sync split across a cluster where no Hopper plan applies
  Mma,           // mma.sync's unsplit tiles
  Ffma,          // float32 and float64: the FFMA kernel's configurations
};
constexpr const char* kTierNames[] = {"rows", "thin_first", "few_rows_split", "thin", "repacked",
                                      "hopper", "split", "mma", "ffma"};

// visit(tier, list) for each tier in order, while it returns true; list(take) calls take(plan,
// ns) for each of the tier's legal plans, in its family's order, ns its predicted time
// (kUnmodelled where the family has no model).
template <class Visit>
inline void gemm_tiers(const GemmCall& c, Visit&& visit) {
  const bool few = c.args.m <= MmaNarrow::kBM, fewest = c.args.m <= MmaRows::kBM;
  if (!visit(GemmTier::Rows, [&](auto&& take) { rows_candidates(c, take); })) return;
  if (c.dtype != DType::F16 && c.dtype != DType::BF16) {
    visit(GemmTier::Ffma, [&](auto&& take) { ffma_candidates(c, take); });
    return;
  }
  if (!visit(GemmTier::ThinFirst, [&](auto&& take) { if (few && !fewest) wgmma_thin_candidates(c, take); })) return;
  if (!visit(GemmTier::FewRowsSplit, [&](auto&& take) { if (few) mma_split_candidates(c, take); })) return;
  if (!visit(GemmTier::Thin, [&](auto&& take) { if (fewest) wgmma_thin_candidates(c, take); })) return;
  if (!visit(GemmTier::Repacked, [&](auto&& take) { wgmma_repacked_candidates(c, take); })) return;
  if (!visit(GemmTier::Hopper, [&](auto&& take) { wgmma_candidates(c, take); })) return;
  if (!visit(GemmTier::Split, [&](auto&& take) { if (!few) mma_split_candidates(c, take); })) return;
  visit(GemmTier::Mma, [&](auto&& take) { mma_candidates(c, take); });
}

struct GemmCandidate {
  GemmPlan plan;
  GemmTier tier;
  double ns;  // predicted time, kUnmodelled where the family has no model
};

// Who chose the plan: the router's tiers and models, the GPU's measured table, or the call's
// options (GemmOptions::plan).
enum class GemmChoice : int { Model, Table, Option };
constexpr const char* kChoiceNames[] = {"model", "table", "option"};

// The chosen plan with the call it runs on (its options as the plan read them), who chose it,
// the scratch its launch takes (the copies, or float32 stream-K's partial sums and flags) and
// why the call took a route other than its first choice: none, no scratch to be had
// (GemmOptions::scratch), or no tensor maps from the driver (GemmOptions::tma).
struct GemmRoute {
  GemmCall call;
  GemmCandidate chosen;
  GemmChoice choice = GemmChoice::Model;
  int64_t scratch_bytes = 0;
  const char* fallback = nullptr;
  const GemmPlan& plan() const { return chosen.plan; }
};

// A plan's name for the tables and the options: its family, configuration, block tile, split and
// the flags that set it apart from another plan of the same tile (copies first, the realigning
// producer, the ring, the few-rows kernel's persistent blocks). Plans that differ only in what
// they derive from these (the Hopper plan's persistent blocks, clusters, last wave) share a key;
// 0 names no plan.
inline int64_t gemm_plan_key(const GemmCall& c, const GemmPlan& plan) {
  const auto key = [](int family, int config, int bm, int bn, int bk, int split, int flags) {
    return int64_t(family + 1) << 56 | int64_t(config) << 48 | int64_t(bm) << 36 | int64_t(bn) << 24 |
           int64_t(bk) << 12 | int64_t(split) << 4 | flags;
  };
  const auto tile = [](auto config) { return std::array<int, 3>{decltype(config)::kBM, decltype(config)::kBN,
                                                                decltype(config)::kBK}; };
  return std::visit(
      [&](const auto& p) {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, FfmaPlan>) {
          const auto t = with_ffma_config(c.dtype, p, tile);
          return key(0, int(p.config), t[0], t[1], t[2], p.split, 0);
        } else if constexpr (std::is_same_v<P, MmaPlan>) {
          const auto t = with_mma_config(p, tile);
          return key(1, int(p.shape), t[0], t[1], t[2], p.split, 0);
        } else if constexpr (std::is_same_v<P, WgmmaPlan>) {
          const auto t = with_wgmma_config(p, tile);
          const int flags = (p.repack.jobs > 0 ? 1 : 0) | (p.ops.fill != MmaFill::Async ? 2 : 0);
          return key(2, int(p.shape), t[0], t[1], t[2], p.split, flags);
        } else {
          return key(3, p.mma ? 1 : 0, p.tm, rows_bn(p.mma), rows_window(c.dtype, p.mma), p.split,
                     (p.ring ? 4 : 0) | (p.persistent ? 8 : 0));
        }
      },
      plan);
}

// A plan with what its family derives once it is chosen (the Hopper plan's blocks and clusters).
inline GemmPlan gemm_finish(const GemmCall& c, const GemmPlan& plan) {
  if (const auto* w = std::get_if<WgmmaPlan>(&plan)) return wgmma_finish(c, *w);
  return plan;
}

// The call with its options as every plan reads them: without scratch the copies and stream-K
// are off (the realigning producers and Wide's per-tile blocks need no memory).
inline GemmCall gemm_call_options(GemmCall c) {
  c.options.repack = c.options.repack && c.options.scratch;
  c.options.stream_k = c.options.stream_k && c.options.scratch;
  return c;
}

inline int64_t gemm_scratch_bytes(const GemmPlan& plan) {
  if (const auto* f = std::get_if<FfmaPlan>(&plan)) return ffma_scratch_bytes(*f);
  if (const auto* w = std::get_if<WgmmaPlan>(&plan)) return w->repack.bytes;
  return 0;
}

inline GemmRoute gemm_route_of(const GemmCall& c, const GemmCandidate& chosen) {
  GemmRoute r{c, GemmCandidate{gemm_finish(c, chosen.plan), chosen.tier, chosen.ns}};
  r.scratch_bytes = gemm_scratch_bytes(r.chosen.plan);
  r.fallback = !c.options.scratch ? "no_scratch" : !c.options.tma ? "no_tma" : nullptr;
  return r;
}

// The plan the call's options name, else the one its GPU's table names for calls like it (0:
// neither).
inline int64_t gemm_wanted_plan(const GemmCall& c) {
  if (c.options.plan != 0) return c.options.plan;
  const GemmArgs& g = c.args;
  const TunedEntry* e = c.tuned ? tuned_entry(*c.tuned, c.dtype, c.layout, mma_a_km(g), mma_b_kn(g), g) : nullptr;
  return e ? e->plan : 0;
}

// The route of C = A @ B for the call (float32/float64: ffma; float16/bfloat16: mma or wgmma;
// a few rows: rows). Data pointers count only through their alignment. A wanted plan that is
// not among the call's legal ones leaves the choice to the model.
inline GemmRoute gemm_route(const GemmCall& call) {
  const GemmCall c = gemm_call_options(call);
  GemmCandidate best{FfmaPlan{}, GemmTier::Ffma, kUnmodelled};
  bool found = false;
  if (const int64_t want = gemm_wanted_plan(c); want != 0) {
    gemm_tiers(c, [&](GemmTier tier, auto&& list) {
      list([&](const auto& plan, double ns) {
        if (!found && gemm_plan_key(c, plan) == want) best = GemmCandidate{plan, tier, ns}, found = true;
      });
      return !found;
    });
    if (found) {
      GemmRoute r = gemm_route_of(c, best);
      r.choice = c.options.plan != 0 ? GemmChoice::Option : GemmChoice::Table;
      return r;
    }
  }
  gemm_tiers(c, [&](GemmTier tier, auto&& list) {
    list([&](const auto& plan, double ns) {
      if (!found || (ns >= 0 && best.ns >= 0 && 10 * ns < 9 * best.ns)) best = GemmCandidate{plan, tier, ns};
      found = true;
    });
    return !found;
  });
  return gemm_route_of(c, best);
}

// Every legal plan of every tier, as the router saw them (explain lists them), each finished.
inline std::vector<GemmCandidate> gemm_candidates(const GemmCall& call) {
  const GemmCall c = gemm_call_options(call);
  std::vector<GemmCandidate> all;
  gemm_tiers(c, [&](GemmTier tier, auto&& list) {
    list([&](const auto& plan, double ns) { all.push_back(GemmCandidate{gemm_finish(c, plan), tier, ns}); });
    return true;
  });
  return all;
}

}  // namespace bankops
