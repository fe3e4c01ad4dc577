// The shared-memory instructions each operator's kernels issue, with the bank model's
// prediction, for bankops.explain and bankops.plot_banks.
#include <torch/library.h>

#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "../kernels/gemm_mma_trace.h"
#include "../kernels/gemm_trace.h"
#include "../kernels/reduce.h"
#include "../kernels/reduce_trace.h"
#include "../kernels/transpose_trace.h"
#include "common.h"
#include "gemm.h"

namespace bankops {
namespace {

int64_t positive(const std::vector<int64_t>& p, size_t i, const char* what) {
  TORCH_CHECK(p[i] >= 0, "_smem_trace: ", what, " must be >= 0, got ", p[i]);
  return p[i];
}

SmemTrace trace_op(std::string_view op, Layout layout, at::ScalarType dtype, const std::vector<int64_t>& p,
                   int64_t num_sms, bool hopper) {
  SmemTrace trace;
  const auto expect = [&](size_t n, const char* what) {
    TORCH_CHECK(p.size() == n, "_smem_trace: ", op, " expects problem = ", what, ", got ", p.size(), " values");
  };
  if (op == "transpose") {
    expect(3, "[batch, rows, cols]");
    const int64_t bytes = c10::elementSize(dtype);
    TORCH_CHECK(bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8 || bytes == 16,
                "_smem_trace: transpose moves 1, 2, 4, 8 or 16-byte elements, got ", dtype);
    trace_transpose(layout, static_cast<int>(bytes), positive(p, 0, "batch"), positive(p, 1, "rows"),
                    positive(p, 2, "cols"), trace);
  } else if (op == "reduce_sum") {
    expect(3, "[outer, len, inner]");
    TORCH_CHECK(num_sms > 0, "_smem_trace: num_sms must be positive, got ", num_sms);
    const ReduceShape s{positive(p, 0, "outer"), positive(p, 1, "len"), positive(p, 2, "inner")};
    trace_reduce_sum(layout, to_dtype(dtype), s, static_cast<int>(num_sms), trace);
  } else if (op == "gemm") {
    expect(6, "[batch, m, n, k, a_k_contiguous, b_k_contiguous]");
    TORCH_CHECK(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kDouble,
                "_smem_trace: gemm takes float32, float16, bfloat16 or float64, got ", dtype);
    TORCH_CHECK(num_sms > 0, "_smem_trace: num_sms must be positive, got ", num_sms);
    const int64_t batch = positive(p, 0, "batch"), m = positive(p, 1, "m"), n = positive(p, 2, "n"),
                  k = positive(p, 3, "k");
    // The same choice as gemm_cuda: 16-bit floats run on the tensor cores (hopper: the device
    // runs the Hopper kernel).
    if (dtype == at::kHalf || dtype == at::kBFloat16) {
      check_gemm_mma(to_dtype(dtype), GemmArgs{batch, m, n, k, nullptr, 0, 0, 0, nullptr, 0, 0, 0, nullptr}, "_smem_trace");
      trace_gemm_mma(layout, batch, m, n, k, p[4] != 0, p[5] != 0, hopper, repack_enabled(), trace);
    } else {
      trace_gemm(layout, static_cast<int>(c10::elementSize(dtype)), batch, m, n, k, p[4] != 0, p[5] != 0,
                 static_cast<int>(num_sms), stream_k_enabled(), trace);
    }
  } else {
    TORCH_CHECK(false, "_smem_trace: unknown op '", op, "'; expected one of: reduce_sum, transpose, gemm");
  }
  return trace;
}

// names: "kernel: instruction"; stats: int64 [n, 7] = SmemOp (0 ld, 1 st, 2 ldsm, 3 ldgsts), width, count per iteration,
// wavefronts and ideal per iteration, iterations per launch, wavefronts of the worst warp;
// worst: int64 [n, 32], that warp's lane byte addresses (-1: inactive lane).
std::tuple<std::vector<std::string>, at::Tensor, at::Tensor> smem_trace(std::string_view op, std::string_view layout,
                                                                        at::ScalarType dtype, std::vector<int64_t> problem,
                                                                        int64_t num_sms, bool hopper) {
  const SmemTrace trace = trace_op(op, parse_layout(layout, "_smem_trace"), dtype, problem, num_sms, hopper);
  const auto& rows = trace.rows();
  const int64_t n = static_cast<int64_t>(rows.size());
  at::Tensor stats = at::zeros({n, 7}, at::kLong), worst = at::full({n, kWarpLanes}, -1, at::kLong);
  auto s = stats.accessor<int64_t, 2>();
  auto w = worst.accessor<int64_t, 2>();
  std::vector<std::string> names;
  for (int64_t i = 0; i < n; ++i) {
    const SmemInstr& r = rows[i];
    names.push_back(r.kernel + ": " + r.name);
    const int64_t v[7] = {static_cast<int64_t>(r.op), r.width, r.count, r.wavefronts, r.ideal, r.iterations, r.worst_wavefronts};
    for (int j = 0; j < 7; ++j) s[i][j] = v[j];
    for (int lane = 0; lane < kWarpLanes; ++lane)
      if (r.worst.active >> lane & 1u) w[i][lane] = r.worst.addr[lane];
  }
  return {names, stats, worst};
}

}  // namespace

TORCH_LIBRARY_IMPL(bankops, CompositeExplicitAutograd, m) { m.impl("_smem_trace", &smem_trace); }

}  // namespace bankops
