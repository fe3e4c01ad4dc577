// The constants the plans' cost models and thresholds read, one table per kind of GPU: a new
// GPU is a new table (measured as each line says), not new rules. bench/design_notes.md ("The
// route") has the measurements behind each.
#pragma once
#include "args.h"

namespace bankops {

// A candidate plan's predicted time where its family has no cost model (yet).
constexpr double kUnmodelled = -1.0;

struct GemmCosts {
  const char* gpu;
  // The Hopper plan's time model (wgmma_plan.h): a block runs its k-tiles plus
  // wgmma_block_steps, each wgmma_step_units_of(BM, BN) units of wgmma_step_ns; a split block adds
  // wgmma_sum_units + BN * wgmma_sum_units_per_col; reading the operands runs at
  // wgmma_block_gbps a resident block, at most wgmma_dram_gbps. Fitted to forced plans' times.
  double wgmma_step_ns;
  double wgmma_block_steps;
  double wgmma_step_units[7];  // 128 rows by BN = 256, 192, 144, 128, 64; 192 x 96; 192 x 192
  double wgmma_sum_units, wgmma_sum_units_per_col;
  double wgmma_block_gbps, wgmma_dram_gbps;
  // k-tiles a persistent walk's tile needs before its last wave splits over pairs (wgmma_tail).
  int wgmma_tail_min_k;
  // float32's split 64-row tiles (ffma_plan.h): k-tiles a rank takes at least, and the blocks
  // an SM (in halves) at which the 64x128 tile beats the 64x64 one, and the 64x256 tile both.
  int ffma_split_min_k;
  int ffma_mid_half_blocks_per_sm;
  int ffma_flat_half_blocks_per_sm;

  double wgmma_step_units_of(int bm, int bn) const {
    if (bm == 192) return bn == 192 ? wgmma_step_units[6] : wgmma_step_units[5];
    return bn == 256 ? wgmma_step_units[0] : bn == 192 ? wgmma_step_units[1] : bn == 144 ? wgmma_step_units[2]
         : bn == 128 ? wgmma_step_units[3] : wgmma_step_units[4];
  }
};

// H100 SXM (132 SMs, HBM3): each constant from same-process timings of forced plans there.
inline constexpr GemmCosts kH100Costs{
    "h100",
    180,                           // 1024^3 on 128x64 tiles (36 units) over its time
    2,                             // filling the ring and the epilogue, in k-tiles
    {4.0, 3.3, 2.8, 2.6, 2.0, 3.0, 4.8},  // the line through 256, 192, 128 and 64; 144 between;
                                          // 192 x 96 at k = 16384; 192 x 192 the H200 tuner's
                                          // forced timings (1.17-1.33x a 128 x 256 step)
    6.0, 1.0 / 8,                  // split-K's partial out and its rows summed over distributed shared memory
    23, 2800,                      // a few rows against a long weight: the read rate a TMA ring and all of them reach
    16,                            // a split last wave with 4-5 k-tiles a half ran slower than a whole one
    32,                            // a rank's prologue and partial cost about 32 k-tiles of FMAs
    5,                             // 64x128 faster at 2.5 blocks an SM, slower at 1.9
    3,                             // 64x256 faster at 1.7 blocks an SM (H200), slower at 1.0
};

// H200 (132 SMs, HBM3e): the H100's constants until the tuner has measured this GPU's.
inline constexpr GemmCosts kH200Costs = [] {
  GemmCosts c = kH100Costs;
  c.gpu = "h200";
  return c;
}();

inline const GemmCosts& gemm_costs(const DeviceInfo& d) {
  return d.kind == GpuKind::H200 ? kH200Costs : kH100Costs;
}

}  // namespace bankops
