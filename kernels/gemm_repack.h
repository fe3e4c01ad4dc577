// The swizzle layout's Hopper route for 16-bit operands whose rows start off 16-byte
// boundaries (odd K or N, offset views) on matrices of 256 x 256 or more: copy them once into
// scratch rows on 128-byte lines (repack.h), then run the aligned kernel, TMA and all, on the
// copies. Realigning in the kernel's producers costs a second 128-byte line per tile row on
// every read of a tile, and the producers run at L2's request rate (gemm_wgmma.h); the copy
// moves each operand's bytes twice, once. H100, 2026-11-25, float16, CUDA graphs
// (bench/gemm_sweep.py --off repack), copied against realigned in the producers:
// 4095 x 4097 x 4093 322 us against 958 (cuBLAS 915; the copy kernel 71 us of it); with the
// copy kernel before it took 2 KB items a warp (100 us at 4095 x 4097): 8191 x 8193 x 8189
// 2.00 ms against 5.90, 2047 x 2049 x 4093 148 us against 474, 1407 x 1535 x 519 19.9
// against 30.2, 256 x 4096 x 4093 43.9 against 157, 4096 x 256 x 4093 76 against 157. The
// rule wants each operand read by two or more block tiles of 128 (m and n of 256 or more);
// below that the copy would move as many bytes as the product reads.
#pragma once
#include <cstdint>

#include "gemm_wgmma.h"
#include "repack.h"

namespace bankops {

constexpr int64_t kRepackMinMN = 256;

struct GemmRepack {
  GemmArgs args{};    // the call on the copies (their data pointers: offsets into the scratch until place())
  GemmMmaPlan plan{};  // its plan, and its Hopper tile
  WgmmaShape shape = WgmmaShape::None;
  RepackJob job[2]{};
  int jobs = 0;
  bool a = false, b = false;  // which operands are copied (A's copy first)
  int64_t bytes = 0;          // scratch: the copies one after another, each on a 256-byte boundary

  void place(void* scratch) {
    const auto at = [scratch](const void* offset) {
      return static_cast<char*>(scratch) + reinterpret_cast<uintptr_t>(offset);
    };
    if (a) args.a = at(args.a);
    if (b) args.b = at(args.b);
    for (int j = 0; j < jobs; ++j) job[j].dst = at(job[j].dst);
  }
};

// Whether a call copies its misaligned operands first (hopper_swizzle: the swizzle layout on
// a device that runs the Hopper kernel; a16 / b16: whether the data pointers are 16-byte
// aligned), and how (r). Only operands whose rows are realignable (a unit-stride contiguous
// dim) and off 16-byte boundaries are copied; a batch stride of 0 copies one batch.
inline bool gemm_repack_plan(const GemmArgs& g, bool a16, bool b16, bool hopper_swizzle, GemmRepack& r) {
  if (!hopper_swizzle || g.batch < 1 || g.m < kRepackMinMN || g.n < kRepackMinMN) return false;
  if (!gemm_mma_plan(g, a16, b16).realign) return false;  // aligned already, or strided
  r = GemmRepack{};
  r.args = g;
  const auto copy = [&](const void* src, int64_t s_batch, int64_t rows, int64_t cols, int64_t s_row,
                        const void*& ptr, int64_t& sb, int64_t& s_rows, int64_t& s_cols) {
    const int64_t pitch = repack_pitch(cols, 2), batch = s_batch == 0 ? 1 : g.batch;
    void* dst = reinterpret_cast<void*>(static_cast<uintptr_t>(r.bytes));
    r.job[r.jobs++] = RepackJob{src, dst, batch, rows, cols, s_batch, s_row, pitch};
    r.bytes += (batch * rows * pitch * 2 + 255) / 256 * 256;
    ptr = dst;
    sb = s_batch == 0 ? 0 : rows * pitch;
    s_rows = pitch;
    s_cols = 1;
  };
  GemmArgs& c = r.args;
  r.a = !mma_a_aligned(g, a16);
  r.b = !mma_b_aligned(g, b16);
  if (r.a) copy(g.a, g.a_sb, g.m, g.k, g.a_sm, c.a, c.a_sb, c.a_sm, c.a_sk);
  if (r.b && mma_b_kn(g)) copy(g.b, g.b_sb, g.k, g.n, g.b_sk, c.b, c.b_sb, c.b_sk, c.b_sn);
  else if (r.b) copy(g.b, g.b_sb, g.n, g.k, g.b_sn, c.b, c.b_sb, c.b_sn, c.b_sk);
  r.plan = gemm_mma_plan(c, r.a || a16, r.b || b16);
  r.shape = wgmma_shape(c, r.plan, true);
  return r.plan.async && r.shape != WgmmaShape::None;
}

}  // namespace bankops
