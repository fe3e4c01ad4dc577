// The shared-memory instructions of the reduce_sum kernels, replayed on the host
// (smem_trace.h), for the passes launch_reduce_sum makes under plan_reduce.
#pragma once
#include <string>

#include "reduce.h"
#include "smem_trace.h"

namespace bankops {

namespace detail {

template <class Tile>
void trace_rows_pass(const std::string& kernel, int acc, int64_t iterations, SmemTrace& trace) {
  const auto byte = [&](int i) { return int64_t(tree_slot<Tile>(i)) * acc; };
  add_block(trace.instr(kernel, "sts tree[t] <- thread sums", SmemOp::St, acc, iterations), kReduceThreads,
            [&](int t) { return byte(t); });
  SmemInstr& lo = trace.instr(kernel, "lds tree[2st] (tree levels)", SmemOp::Ld, acc, iterations);
  SmemInstr& hi = trace.instr(kernel, "lds tree[2st+s] (tree levels)", SmemOp::Ld, acc, iterations);
  SmemInstr& st = trace.instr(kernel, "sts tree[2st] (tree levels)", SmemOp::St, acc, iterations);
  for (int s = 1; s < kTreeStride; s *= 2) {
    const auto active = [&](int t, int i) { return t < tree_pairs(s) ? byte(i) : int64_t(-1); };
    add_block(lo, kReduceThreads, [&](int t) { return active(t, tree_dst(t, s)); });
    add_block(hi, kReduceThreads, [&](int t) { return active(t, tree_dst(t, s) + s); });
    add_block(st, kReduceThreads, [&](int t) { return active(t, tree_dst(t, s)); });
  }
  add_warp(trace.instr(kernel, "lds tree[8t] -> warp 0", SmemOp::Ld, acc, iterations), 0,
           [&](int t) { return byte(t * kTreeStride); });
}

template <class Tile>
void trace_cols_pass(const std::string& kernel, int acc, int64_t iterations, SmemTrace& trace) {
  constexpr int kThreads = kReduceCols * kReduceRowGroups;
  const auto at = [&](TileCoord (*coord)(int, int)) {
    return [=](int t) {
      const TileCoord c = coord(t % kReduceCols, t / kReduceCols);
      return int64_t(Tile::offset(c.r, c.c)) * acc;
    };
  };
  add_block(trace.instr(kernel, "sts tile[lane][group] <- column sums", SmemOp::St, acc, iterations), kThreads, at(cols_store));
  add_block(trace.instr(kernel, "lds tile[row][lane%8] -> group sums", SmemOp::Ld, acc, iterations), kThreads, at(cols_load));
}

}  // namespace detail

// A reduction of x[outer][len][inner] with accumulators of acc_bytes, on num_sms SMs.
inline void trace_reduce_sum(Layout layout, int acc_bytes, ReduceShape shape, int num_sms, SmemTrace& trace) {
  if (shape.outer == 0 || shape.inner == 0) return;
  const ReducePlan plan = plan_reduce(shape, num_sms);
  with_layout(layout, [&](auto tag) {
    constexpr Layout L = decltype(tag)::value;
    with_elem_bytes(acc_bytes, [&](auto e) {
      constexpr int A = decltype(e)::value;
      const auto pass = [&](const std::string& kernel, ReduceShape s, int64_t splits) {
        if (plan.columns)
          detail::trace_cols_pass<ReduceColsTile<L, A>>("reduce_cols" + kernel, A,
                                                        s.outer * ceil_div(s.inner, kReduceCols) * splits, trace);
        else
          detail::trace_rows_pass<ReduceTreeTile<L, A>>("reduce_rows" + kernel, A, s.outer * splits, trace);
      };
      pass(plan.splits > 1 ? "/pass1" : "", shape, plan.splits);
      if (plan.splits > 1) pass("/pass2", ReduceShape{shape.outer, plan.splits, shape.inner}, 1);
    });
  });
}

}  // namespace bankops
