// A measured table of plans for one GPU (bankops.tune writes it): for a call near one of its
// shapes, the plan timed fastest there, which the router takes before its model wherever the
// call has that plan among its legal ones. Plans are named by gemm_plan_key.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "args.h"

namespace bankops {

// One timed call: its dtype, layout, operand majors (the tile orientations, MmaOperands'
// a_km / b_kn), log2 of its batch, m, n and k, and the plan that ran it fastest (0 where that
// was the model's: calls nearest it keep the model's plan for their own shape).
struct TunedEntry {
  DType dtype;
  Layout layout;
  bool a_km, b_kn;
  double log_batch, log_m, log_n, log_k;
  int64_t plan;
};

struct TunedTable {
  std::string gpu;     // the device's name, as its properties give it
  int num_sms = 0, cc = 0;
  std::string driver;  // the driver the table was timed under
  std::string source;  // where it came from (a file)
  std::vector<TunedEntry> entries;
};

// How far an entry may lie from a call and still name its plan: the sum over batch, m, n and k
// of |log2(call / entry)| (1: one dim twice or half the entry's, the others the same).
constexpr double kTunedReach = 1.0;

// The entry nearest the call (the same dtype, layout and majors; the least distance, the first
// of equals), or null where none is within kTunedReach: the same call always finds the same.
inline const TunedEntry* tuned_entry(const TunedTable& t, DType dtype, Layout layout, bool a_km, bool b_kn,
                                     const GemmArgs& g) {
  if (g.batch < 1 || g.m < 1 || g.n < 1 || g.k < 1) return nullptr;
  const double lb = std::log2(double(g.batch)), lm = std::log2(double(g.m)), ln = std::log2(double(g.n)),
               lk = std::log2(double(g.k));
  const TunedEntry* best = nullptr;
  double best_d = kTunedReach;
  for (const TunedEntry& e : t.entries) {
    if (e.dtype != dtype || e.layout != layout || e.a_km != a_km || e.b_kn != b_kn) continue;
    const double d = std::fabs(lb - e.log_batch) + std::fabs(lm - e.log_m) + std::fabs(ln - e.log_n) +
                     std::fabs(lk - e.log_k);
    if (d <= best_d && (best == nullptr || d < best_d)) best = &e, best_d = d;
  }
  return best;
}

}  // namespace bankops
