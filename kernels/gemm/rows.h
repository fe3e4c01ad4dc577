// The few-rows kernel (rows.cu): C = A @ B for a few rows of A (decode: x, M up to 32 float32
// rows or 8 16-bit ones) against B = W.t(), a weight read in place with k contiguous. Each
// warp streams kRowsPerWarp weight rows, 512 contiguous bytes of each per load instruction (a
// lane's 16 bytes), straight into registers, and takes the dot products with the rows of x in
// float32 (FFMA: at these M the weight's bytes, not the arithmetic, bound the time). The
// lanes' partial sums meet by warp shuffles, the block's in a partial tile in shared memory,
// and a cluster's k ranges by split-K (split_k.h); the tile's layout is the call's.
#pragma once
#include <cstdint>
#include <type_traits>

#include "../dtype.h"
#include "../layout.cuh"
#include "args.h"
#include "split_k.h"

namespace bankops {

constexpr int kRowsWarps = 8, kRowsPerWarp = 4, kRowsThreads = 32 * kRowsWarps;
constexpr int kRowsBN = kRowsWarps * kRowsPerWarp;  // weight rows (columns of C) a block
constexpr int kRowsUnroll = 2;                       // 16-byte loads of a row in flight per lane
// Blocks resident an SM (by registers: 32 rows of float32 sums take about 220 a thread).
BANKOPS_HD constexpr int rows_blocks_per_sm(int tm) { return tm >= 16 ? 1 : 2; }
// A window: the k a warp covers with one load of each of its rows on every lane, times the unroll.
BANKOPS_HD constexpr int rows_window(int elem_bytes) { return 32 * (16 / elem_bytes) * kRowsUnroll; }
// The element bytes of the dtypes the kernel takes (rows_supports: float32, float16, bfloat16).
BANKOPS_HD constexpr int rows_elem_bytes(DType t) { return t == DType::F32 ? 4 : 2; }

// The rows of A a block takes: the least power of two that covers m (rows_supports: m up to
// rows_max_m).
BANKOPS_HD constexpr int rows_max_m(DType t) { return t == DType::F32 ? 32 : 8; }
BANKOPS_HD int rows_tm(int64_t m, DType t) {
  int tm = 1;
  while (tm < m && tm < rows_max_m(t)) tm *= 2;
  return tm;
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

// Whether an operand's rows are 16-byte vectors of its contiguous dim: unit stride there, the
// data pointer and row and batch strides on 16-byte multiples.
inline bool rows_vectors(const void* p, int64_t s_unit, int64_t s_row, int64_t rows, int64_t s_batch,
                         int64_t batch, int elem_bytes) {
  const auto on16 = [&](int64_t s, int64_t n) { return n <= 1 || (s * elem_bytes) % 16 == 0; };
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && s_unit == 1 && on16(s_row, rows) && on16(s_batch, batch);
}

// Whether the few-rows kernel takes a call: float32, float16 or bfloat16, m up to its largest
// block's rows, k a window or more (shorter products are no stream) and whole 16-byte vectors
// (the loads take 16 bytes wherever one starts before k ends), A and B's rows as 16-byte
// vectors along k (B = W.t(): k contiguous).
inline bool rows_supports(DType t, const GemmArgs& g) {
  const int e = rows_elem_bytes(t);
  return (t == DType::F32 || t == DType::F16 || t == DType::BF16) && g.m <= rows_max_m(t) && g.k >= rows_window(e) &&
         g.k % (16 / e) == 0 &&
         rows_vectors(g.a, g.a_sk, g.a_sm, g.m, g.a_sb, g.batch, e) &&
         rows_vectors(g.b, g.b_sk, g.b_sn, g.n, g.b_sb, g.batch, e);
}

}  // namespace bankops
