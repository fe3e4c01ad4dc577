// The shared-memory instructions each operator's kernels issue, with the bank model's
// prediction, for bankops.explain and bankops.plot_banks.
#include <torch/library.h>

#include <initializer_list>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "../kernels/gemm/trace.h"
#include "../kernels/reduce.h"
#include "../kernels/reduce_trace.h"
#include "../kernels/transpose_trace.h"
#include "common.h"
#include "gemm_op.h"

namespace bankops {
namespace {

int64_t positive(const std::vector<int64_t>& p, size_t i, const char* what) {
  TORCH_CHECK(p[i] >= 0, "_smem_trace: ", what, " must be >= 0, got ", p[i]);
  return p[i];
}

// Dims of one tensor of the problem: more than 2^62 elements fit in no tensor, and the plans'
// int64 arithmetic would overflow (once into a division by zero).
void check_elements(std::string_view op, std::initializer_list<int64_t> dims) {
  int64_t n = 1;
  for (const int64_t d : dims)
    TORCH_CHECK(!__builtin_mul_overflow(n, d, &n) && n <= (int64_t(1) << 62), "_smem_trace: ", op,
                "'s problem holds a tensor of more than 2^62 elements (dims ", std::vector<int64_t>(dims), ")");
}

// A gemm problem's operands, contiguous: A row-major, or a transposed view when k is not its
// contiguous dim; B a transposed view when k is its contiguous dim, else row-major. Data
// pointers are null (16-byte aligned).
GemmArgs problem_args(int64_t batch, int64_t m, int64_t n, int64_t k, bool a_k_fast, bool b_k_fast) {
  return GemmArgs{batch, m, n, k, nullptr, m * k, a_k_fast ? k : 1, a_k_fast ? 1 : m,
                  nullptr, k * n, b_k_fast ? 1 : n, b_k_fast ? k : 1, nullptr};
}

SmemTrace trace_op(std::string_view op, Layout layout, at::ScalarType dtype, const std::vector<int64_t>& p,
                   int64_t num_sms, int64_t cc, at::OptionalIntArrayRef room, std::string_view gpu) {
  SmemTrace trace;
  const auto expect = [&](size_t n, const char* what) {
    TORCH_CHECK(p.size() == n, "_smem_trace: ", op, " expects problem = ", what, ", got ", p.size(), " values");
  };
  if (op == "transpose") {
    expect(3, "[batch, rows, cols]");
    const int64_t bytes = c10::elementSize(dtype);
    TORCH_CHECK(bytes == 1 || bytes == 2 || bytes == 4 || bytes == 8 || bytes == 16,
                "_smem_trace: transpose moves 1, 2, 4, 8 or 16-byte elements, got ", dtype);
    check_elements(op, {positive(p, 0, "batch"), positive(p, 1, "rows"), positive(p, 2, "cols")});
    trace_transpose(layout, static_cast<int>(bytes), p[0], p[1], p[2], trace);
  } else if (op == "reduce_sum") {
    expect(3, "[outer, len, inner]");
    const ReduceShape s{positive(p, 0, "outer"), positive(p, 1, "len"), positive(p, 2, "inner")};
    check_elements(op, {s.outer, s.len, s.inner});
    trace_reduce_sum(layout, to_dtype(dtype), s, static_cast<int>(num_sms), trace);
  } else if (op == "gemm") {
    expect(6, "[batch, m, n, k, a_k_contiguous, b_k_contiguous]");
    TORCH_CHECK(dtype == at::kFloat || dtype == at::kHalf || dtype == at::kBFloat16 || dtype == at::kDouble,
                "_smem_trace: gemm takes float32, float16, bfloat16 or float64, got ", dtype);
    DeviceInfo device = checked_device(num_sms, cc, room, "_smem_trace");
    device.kind = gpu_kind(gpu);
    const GemmArgs args = problem_args(positive(p, 0, "batch"), positive(p, 1, "m"), positive(p, 2, "n"),
                                       positive(p, 3, "k"), p[4] != 0, p[5] != 0);
    check_elements(op, {args.batch, args.m, args.k});
    check_elements(op, {args.batch, args.k, args.n});
    check_elements(op, {args.batch, args.m, args.n});
    // The route gemm_cuda takes on such a device (the library's CUDA build assumed).
    const TunedTables tables = tuned_tables();
    GemmCall call{args, to_dtype(dtype), layout, device, gemm_options()};
    call.tuned = gpu.empty() ? nullptr : find_tuned(tables, gpu, device.num_sms);
    trace_gemm(checked_route(call, "_smem_trace"), trace);
  } else {
    TORCH_CHECK(false, "_smem_trace: unknown op '", op, "'; expected one of: reduce_sum, transpose, gemm");
  }
  return trace;
}

// names: "kernel: instruction"; stats: int64 [n, 9] = SmemOp (0 ld, 1 st, 2 ldsm, 3 ldgsts), width, count per iteration,
// wavefronts and ideal per iteration, iterations per launch, wavefronts of the worst warp, 1 for
// accesses to a cluster peer's shared memory (SmemInstr::peer), and the bytes moved per iteration;
// worst: int64 [n, 32], that warp's lane byte addresses (-1: inactive lane).
std::tuple<std::vector<std::string>, at::Tensor, at::Tensor> smem_trace(std::string_view op, std::string_view layout,
                                                                        at::ScalarType dtype, std::vector<int64_t> problem,
                                                                        int64_t num_sms, int64_t cc,
                                                                        at::OptionalIntArrayRef room,
                                                                        std::string_view gpu) {
  TORCH_CHECK(num_sms >= 1 && num_sms <= 65536, "_smem_trace: num_sms must be in [1, 65536], got ", num_sms);
  const SmemTrace trace = trace_op(op, parse_layout(layout, "_smem_trace"), dtype, problem, num_sms, cc, room, gpu);
  const auto& rows = trace.rows();
  const int64_t n = static_cast<int64_t>(rows.size());
  at::Tensor stats = at::zeros({n, 9}, at::kLong), worst = at::full({n, kWarpLanes}, -1, at::kLong);
  auto s = stats.accessor<int64_t, 2>();
  auto w = worst.accessor<int64_t, 2>();
  std::vector<std::string> names;
  for (int64_t i = 0; i < n; ++i) {
    const SmemInstr& r = rows[i];
    names.push_back(r.kernel + ": " + r.name);
    const int64_t v[9] = {static_cast<int64_t>(r.op), r.width,      r.count,          r.wavefronts, r.ideal,
                          r.iterations,              r.worst_wavefronts, r.peer,        r.bytes};
    for (int j = 0; j < 9; ++j) s[i][j] = v[j];
    for (int lane = 0; lane < kWarpLanes; ++lane)
      if (r.worst.active >> lane & 1u) w[i][lane] = r.worst.addr[lane];
  }
  return {names, stats, worst};
}

}  // namespace

TORCH_LIBRARY_IMPL(bankops, CompositeExplicitAutograd, m) { m.impl("_smem_trace", &smem_trace); }

}  // namespace bankops
