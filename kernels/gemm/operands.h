// A 16-bit call's operands as the tensor-core kernels' fills see them (mma.h, wgmma.h): which
// dim each tile row follows, and whether rows start 16-byte aligned. Shared by both plans.
#pragma once
#include <cstdint>
#include <string>
#include <type_traits>

#include "args.h"
#include "mma.h"

namespace bankops {

// fill: Async when every tile row starts 16-byte aligned; Realign when both have a unit-stride
// contiguous dim (rows at any 2-byte offset, 8 or more elements apart unless a row never fills a
// tile); Registers for any strides. a_km: A staged as As[BK][BM] (m contiguous: every weight
// gradient's dy.t()), else As[BM][BK]; b_kn: B as Bs[BK][BN] (n contiguous), else Bs[BN][BK].
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
  p.fill = mma_a_aligned(g) && mma_b_aligned(g) ? MmaFill::Async
           : realign_a && realign_b               ? MmaFill::Realign
                                                  : MmaFill::Registers;
  return p;
}
// C's rows 16-byte aligned (the epilogue's 16-byte stores; TMA stores C).
inline bool mma_out_vec(const GemmArgs& g) { return mma_aligned16(g.c) && g.n % kMmaChunk == 0; }

// Whether a grid of bm x bn tiles gives about every SM a block (most_sms).
inline bool mma_fills(const GemmArgs& g, int bm, int bn, int num_sms) {
  return g.batch > 0 && ceil_div(g.m, bm) * ceil_div(g.n, bn) >= ceil_div(most_sms(num_sms), g.batch);
}

// The operands' majors as the route line spells them: " a=mk b=kn".
inline std::string mma_majors(const MmaOperands& ops) {
  return std::string(" a=") + (ops.a_km ? "km" : "mk") + " b=" + (ops.b_kn ? "kn" : "nk");
}

// What the tensor-core kernels take: 16-bit floats, and grids and k loops that fit their int
// counters (no tensor that fits a GPU comes near the limits).
inline bool gemm_mma_supports(DType dtype, const GemmArgs& g) {
  return (dtype == DType::F16 || dtype == DType::BF16) && ceil_div(g.n, MmaSmall::kBN) <= 0x7fffffff &&
         ceil_div(g.k, MmaSmall::kBK) <= 0x7fffffff;
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

}  // namespace bankops
