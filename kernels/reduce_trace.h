// The shared-memory instructions of the reduce_sum kernels, replayed on the host
// (smem_trace.h), for the passes launch_reduce_sum makes under plan_reduce.
#pragma once
#include <string>

#include "reduce.h"
#include "smem_trace.h"

namespace bankops {

namespace detail {

// A thread's consecutive shared-memory loads of `width` bytes, byte_of(t, k) for k < n
// (negative: thread t does not run them), as the compiler emits them: ptxas turns a run of
// loads into one wider load (up to 16 bytes) when it can prove them adjacent and aligned,
// which for these tiles is exactly when they are so for every thread (the dense `none`
// tile; pad and swizzle move some thread's pair apart or out of order).
template <class F>
void add_load_run(SmemTrace& trace, const std::string& kernel, const std::string& name, int width, int n,
                  int64_t iterations, F&& byte_of) {
  for (int k = 0; k < n;) {
    int run = 1;
    for (int m = kLoadBytes / width; m > 1 && run == 1; m /= 2) {
      if (k + m > n) continue;
      bool ok = true, any = false;
      for (int t = 0; t < kReduceThreads && ok; ++t) {
        const int64_t a = byte_of(t, k);
        if (a < 0) continue;
        any = true;
        ok = a % (int64_t(width) * m) == 0;
        for (int i = 1; i < m && ok; ++i) ok = byte_of(t, k + i) == a + int64_t(i) * width;
      }
      if (ok && any) run = m;
    }
    const std::string which = run == 1 ? " #" + std::to_string(k)
                                       : " #" + std::to_string(k) + "-" + std::to_string(k + run - 1) + " as one";
    add_block(trace.instr(kernel, name + which, SmemOp::Ld, width * run, iterations), kReduceThreads,
              [&](int t) { return byte_of(t, k); });
    k += run;
  }
}

template <class Tile>
void trace_rows_pass(const std::string& kernel, int acc, int group, int64_t iterations, SmemTrace& trace) {
  const auto byte = [&](int i) { return int64_t(tree_slot<Tile>(i)) * acc; };
  add_block(trace.instr(kernel, "sts tree[t] <- thread sums", SmemOp::St, acc, iterations), kReduceThreads,
            [&](int t) { return byte(t); });
  for (int s = 1; s < group / kReduceWarp; s *= 2) {
    const std::string level = " (s=" + std::to_string(s) + ")";
    add_load_run(trace, kernel, "lds tree[2st], tree[2st+s]" + level, acc, 2, iterations, [&](int t, int k) {
      return t < tree_pairs(s) ? byte(tree_dst(t, s) + k * s) : int64_t(-1);
    });
    add_block(trace.instr(kernel, "sts tree[2st]" + level, SmemOp::St, acc, iterations), kReduceThreads,
              [&](int t) { return t < tree_pairs(s) ? byte(tree_dst(t, s)) : int64_t(-1); });
  }
  const int readers = kReduceThreads / group * kReduceWarp;
  add_block(trace.instr(kernel, "lds tree[group values] -> warp sums", SmemOp::Ld, acc, iterations), kReduceThreads,
            [&](int t) { return t < readers ? byte(tree_final(t, group)) : int64_t(-1); });
}

template <class Tile>
void trace_cols_pass(const std::string& kernel, int acc, int vec, int64_t iterations, SmemTrace& trace) {
  const auto byte = [&](TileCoord c) { return int64_t(Tile::offset(c.r, c.c)) * acc; };
  SmemInstr& st = trace.instr(kernel, "sts tile[j*32+lane][g] <- column sums, j < vec", SmemOp::St, acc, iterations);
  for (int j = 0; j < vec; ++j)
    add_block(st, kReduceThreads, [&](int t) { return byte(cols_store(t % kReduceWarp, t / kReduceWarp, j)); });
  const int rows = kReduceWarp * vec;
  for (int first = 0; first < rows; first += kReduceThreads)
    add_load_run(trace, kernel, "lds tile[row][0..7] -> column sums" + (rows > kReduceThreads ? " row+" + std::to_string(first) : std::string()),
                 acc, kReduceRowGroups, iterations, [&](int t, int gg) {
                   return first + t < rows ? byte(cols_load(first + t, gg)) : int64_t(-1);
                 });
}

}  // namespace detail

// A reduction of x[outer][len][inner] of dtype, on num_sms SMs (rows of x 16-byte aligned,
// as torch allocates them).
inline void trace_reduce_sum(Layout layout, DType dtype, ReduceShape shape, int num_sms, SmemTrace& trace) {
  if (shape.outer == 0 || shape.inner == 0) return;
  const ReducePlan plan = plan_reduce(shape, dtype, num_sms);
  with_layout(layout, [&](auto tag) {
    constexpr Layout L = decltype(tag)::value;
    with_elem_bytes(acc_bytes(dtype), [&](auto e) {
      constexpr int A = decltype(e)::value;
      for (int i = 0; i < plan.passes; ++i) {
        const ReducePass& p = plan.pass[i];
        const std::string suffix = plan.passes > 1 ? "/pass" + std::to_string(i + 1) : "";
        if (plan.columns) {
          const auto go = [&](auto vec) {
            constexpr int V = decltype(vec)::value;
            detail::trace_cols_pass<ReduceColsTileOf<L, A, V>>("reduce_cols" + suffix, A, V, p.blocks, trace);
          };
          switch (p.vec) {  // the kernels' column vectors: 16 bytes of the pass's input, or 1
            case 1: go(std::integral_constant<int, 1>{}); break;
            case 2: go(std::integral_constant<int, 2>{}); break;
            case 4: go(std::integral_constant<int, 4>{}); break;
            case 8: go(std::integral_constant<int, 8>{}); break;
            default: go(std::integral_constant<int, 16>{}); break;
          }
        } else {
          detail::trace_rows_pass<ReduceTreeTile<L, A>>("reduce_rows" + suffix, A, p.group, p.blocks, trace);
        }
      }
    });
  });
}

}  // namespace bankops
