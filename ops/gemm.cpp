// gemm: argument checks, the operands as the kernels see them, the CPU reference, and
// _gemm_route and _gemm_candidates (the route a call would take on a given device, and the
// plans it was chosen from).
#include "gemm_op.h"

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include <iterator>
#include <limits>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "common.h"
#include "wide.h"

namespace bankops {

DeviceInfo checked_device(int64_t num_sms, int64_t cc, at::OptionalIntArrayRef room, const char* op) {
  TORCH_CHECK(num_sms >= 1 && num_sms <= 65536, op, ": num_sms must be in [1, 65536], got ", num_sms);
  TORCH_CHECK(cc >= 10 && cc <= 255, op, ": cc must be 10 * major + minor (e.g. 90 for an H100), got ", cc);
  DeviceInfo d{static_cast<int>(num_sms), static_cast<int>(cc)};
  if (!room.has_value()) return d;
  constexpr int64_t kRows = kRoomBlocksPerSM, kCols = kRoomClusters - 1;
  TORCH_CHECK(static_cast<int64_t>(room->size()) == kRows * kCols, op, ": room must hold ", kRows * kCols,
              " values (blocks resident in clusters of 2..", kRoomClusters, " at 1..", kRows,
              " blocks an SM, as _device_room gives them), got ", room->size());
  for (int64_t b = 1; b <= kRows; ++b)
    for (int64_t c = 2; c <= kRoomClusters; ++c) {
      const int64_t v = (*room)[(b - 1) * kCols + c - 2];
      TORCH_CHECK(v >= 0 && v <= num_sms * b && v % c == 0, op, ": room for clusters of ", c, " at ", b,
                  " blocks an SM must be a multiple of ", c, " in [0, num_sms * ", b, "], got ", v);
      d.room[b - 1][c - 2] = static_cast<int>(v);
    }
  return d;
}

DeviceRoomFn& device_room_hook() {
  static DeviceRoomFn hook = nullptr;
  return hook;
}

GemmRoute checked_route(const GemmCall& call, const char* op) {
  const GemmArgs& g = call.args;
  TORCH_CHECK((call.dtype != DType::F16 && call.dtype != DType::BF16) || gemm_mma_supports(call.dtype, g), op,
              ": float16/bfloat16 gemm takes n below 2^31 * ", MmaSmall::kBN, " and k below 2^31 * ", MmaSmall::kBK,
              ", got n = ", g.n, ", k = ", g.k);
  GemmRoute route = gemm_route(call);
  TORCH_CHECK(call.options.plan == 0 || route.choice == GemmChoice::Option, op, ": bankops.options(plan=",
              call.options.plan, ") names no legal plan of this call (bankops.gemm_route(a, b).candidates lists them)");
  return route;
}

GemmGeometry gemm_geometry(const at::Tensor& a, const at::Tensor& b) {
  check_dense(a, "gemm", "a");
  check_dense(b, "gemm", "b");
  TORCH_CHECK(a.dim() == 2 || a.dim() == 3, "gemm: expected a to be 2-D (M, K) or 3-D (B, M, K), got ", a.dim(),
              "-D with shape ", a.sizes());
  TORCH_CHECK(b.dim() == a.dim(), "gemm: expected b to be ", a.dim(), "-D like a, got ", b.dim(), "-D with shape ",
              b.sizes());
  const auto t = a.scalar_type();
  TORCH_CHECK(t == at::kFloat || t == at::kHalf || t == at::kBFloat16 || t == at::kDouble, "gemm: a has dtype ",
              dtype_name(t), "; expected float32, float16, bfloat16 or float64");
  TORCH_CHECK(b.scalar_type() == t, "gemm: b has dtype ", dtype_name(b.scalar_type()), " but a has ", dtype_name(t),
              "; a and b must have the same dtype");
  TORCH_CHECK(a.device() == b.device(), "gemm: a is on ", a.device(), " but b is on ", b.device(),
              "; a and b must be on the same device");
  const bool batched = a.dim() == 3;
  const int64_t o = batched ? 1 : 0;
  TORCH_CHECK(a.size(o + 1) == b.size(o), "gemm: a has shape ", a.sizes(), " and b has shape ", b.sizes(),
              "; a's columns (K=", a.size(o + 1), ") must equal b's rows (", b.size(o), ")");
  TORCH_CHECK(!batched || a.size(0) == b.size(0), "gemm: a has batch size ", a.size(0), " but b has ", b.size(0),
              "; they must match");
  GemmGeometry g{batched ? a.size(0) : 1, a.size(o), b.size(o + 1), a.size(o + 1), batched, {}};
  if (batched) g.out_sizes = {g.batch, g.m, g.n};
  else g.out_sizes = {g.m, g.n};
  return g;
}

LinearCall linear_call(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias) {
  check_dense(x, "linear", "x");
  check_dense(weight, "linear", "weight");
  TORCH_CHECK(weight.dim() == 2, "linear: expected weight to be 2-D (out_features, in_features), got ", weight.dim(),
              "-D with shape ", weight.sizes());
  TORCH_CHECK(x.dim() >= 1 && x.size(-1) == weight.size(1), "linear: x has shape ", x.sizes(),
              "; expected its last dim to be weight's in_features = ", weight.size(1));
  const auto t = x.scalar_type();
  TORCH_CHECK(t == at::kFloat || t == at::kHalf || t == at::kBFloat16 || t == at::kDouble, "linear: x has dtype ",
              dtype_name(t), "; expected torch.float32, torch.float16, torch.bfloat16 or torch.float64");
  TORCH_CHECK(weight.scalar_type() == t, "linear: x has dtype ", dtype_name(t), " but weight has ",
              dtype_name(weight.scalar_type()), "; they must match");
  TORCH_CHECK(x.device() == weight.device(), "linear: x is on ", x.device(), " but weight is on ", weight.device());
  const int64_t rows = c10::multiply_integers(x.sizes().slice(0, x.dim() - 1));  // -1 cannot infer it at K = 0
  LinearCall call{x.reshape({rows, x.size(-1)}), weight.t(), at::Tensor(), x.sizes().vec()};
  call.out_sizes.back() = weight.size(0);
  if (bias.has_value() && bias->defined()) {
    const at::Tensor& b = *bias;
    check_dense(b, "linear", "bias");
    TORCH_CHECK(b.dim() == 1 && b.size(0) == weight.size(0), "linear: bias has shape ", b.sizes(),
                "; expected (out_features,) = (", weight.size(0), ",)");
    TORCH_CHECK(b.scalar_type() == t, "linear: bias has dtype ", dtype_name(b.scalar_type()), " but x has ",
                dtype_name(t), "; they must match");
    TORCH_CHECK(b.device() == x.device(), "linear: bias is on ", b.device(), " but x is on ", x.device());
    call.bias = element_aligned(b.contiguous());
  }
  return call;
}

GemmArgs gemm_args(const GemmGeometry& g, const at::Tensor& a, const at::Tensor& b, void* c) {
  const auto data = [](const at::Tensor& t) -> const void* {
    if (!t.is_meta()) return t.const_data_ptr();
    return reinterpret_cast<const void*>(static_cast<uintptr_t>(t.storage_offset() * t.element_size()));
  };
  const auto stride = [&](const at::Tensor& t, int64_t d) { return t.stride(d + (g.batched ? 1 : 0)); };
  return GemmArgs{g.batch, g.m, g.n, g.k,
                  data(a), g.batched ? a.stride(0) : 0, stride(a, 0), stride(a, 1),
                  data(b), g.batched ? b.stride(0) : 0, stride(b, 0), stride(b, 1), c};
}

namespace {

// a @ b (+ bias, added to the wide sum before its one rounding, as the kernels do).
at::Tensor gemm_reference(const at::Tensor& a_in, const at::Tensor& b_in, const at::Tensor& bias, Layout layout) {
  // Blocked so that the time follows the work whatever the strides: a task takes kRows rows of
  // one product and copies b, kDepth x kCols at a time, into a contiguous tile of the wide type
  // that its rows stream through. Each sum still adds its k terms in order, in the wide type.
  const GemmGeometry g = gemm_geometry(a_in, b_in);
  const at::Tensor a = element_aligned(a_in), b = element_aligned(b_in);
  at::Tensor out = new_output(g.out_sizes, a.options());
  const GemmArgs s = gemm_args(g, a, b, nullptr);
  record_gemm_call(s, to_dtype(a.scalar_type()), layout);
  constexpr int64_t kRows = 32, kCols = 128, kDepth = 128;
  const int64_t row_blocks = (g.m + kRows - 1) / kRows;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "gemm_cpu", [&] {
    using acc_t = wide_t<scalar_t>;
    const scalar_t* pa = a.const_data_ptr<scalar_t>();
    const scalar_t* pb = b.const_data_ptr<scalar_t>();
    const scalar_t* pbias = bias.defined() ? bias.const_data_ptr<scalar_t>() : nullptr;
    scalar_t* pc = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, g.batch * row_blocks, 1, [&](int64_t begin, int64_t end) {
      std::vector<acc_t> acc(kRows * kCols), tile(kDepth * kCols);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t bi = task / row_blocks, m0 = (task % row_blocks) * kRows;
        const int64_t rows = std::min(kRows, g.m - m0);
        const scalar_t* a0 = pa + bi * s.a_sb + m0 * s.a_sm;
        const scalar_t* b0 = pb + bi * s.b_sb;
        for (int64_t n0 = 0; n0 < g.n; n0 += kCols) {
          const int64_t cols = std::min(kCols, g.n - n0);
          std::fill(acc.begin(), acc.end(), acc_t(0));
          for (int64_t k0 = 0; k0 < g.k; k0 += kDepth) {
            const int64_t depth = std::min(kDepth, g.k - k0);
            for (int64_t k = 0; k < depth; ++k)
              for (int64_t j = 0; j < cols; ++j)
                tile[k * kCols + j] = static_cast<acc_t>(b0[(k0 + k) * s.b_sk + (n0 + j) * s.b_sn]);
            // Four rows at a time, so that each tile row loaded serves four sums (rows past the
            // last add zeros into sums never stored).
            for (int64_t i = 0; i < rows; i += 4) {
              acc_t* sums = acc.data() + i * kCols;
              for (int64_t k = 0; k < depth; ++k) {
                acc_t x[4];
                for (int64_t q = 0; q < 4; ++q)
                  x[q] = i + q < rows ? static_cast<acc_t>(a0[(i + q) * s.a_sm + (k0 + k) * s.a_sk]) : acc_t(0);
                const acc_t* row = tile.data() + k * kCols;
                for (int64_t j = 0; j < cols; ++j) {
                  sums[j] += x[0] * row[j];
                  sums[kCols + j] += x[1] * row[j];
                  sums[2 * kCols + j] += x[2] * row[j];
                  sums[3 * kCols + j] += x[3] * row[j];
                }
              }
            }
          }
          for (int64_t i = 0; i < rows; ++i)
            for (int64_t j = 0; j < cols; ++j) {
              acc_t v = acc[i * kCols + j];
              if (pbias != nullptr) v += static_cast<acc_t>(pbias[n0 + j]);
              pc[(bi * g.m + m0 + i) * g.n + n0 + j] = static_cast<scalar_t>(v);
            }
        }
      }
    });
  });
  return out;
}

at::Tensor gemm_cpu(const at::Tensor& a, const at::Tensor& b, std::string_view layout) {
  return gemm_reference(a, b, at::Tensor(), parse_layout(layout, "gemm"));
}

at::Tensor linear_cpu(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                      std::string_view layout) {
  const Layout l = parse_layout(layout, "linear");
  const LinearCall call = linear_call(x, weight, bias);
  return gemm_reference(call.rows, call.wt, call.bias, l).view(call.out_sizes);
}

// The call a.gemm(b) would be under `layout` on a device of num_sms SMs and compute capability
// cc (the library's CUDA build assumed: the Hopper kernel is in it), with this thread's options;
// gpu, where given, names the device (its properties' name): its cost constants and its
// measured table, if one is registered for it.
GemmCall route_call(const at::Tensor& a, const at::Tensor& b, std::string_view layout, int64_t num_sms, int64_t cc,
                    at::OptionalIntArrayRef room, std::string_view gpu, const TunedTables& tables, const char* op) {
  const Layout l = parse_layout(layout, op);
  const GemmGeometry g = gemm_geometry(a, b);
  DeviceInfo device = checked_device(num_sms, cc, room, op);
  device.kind = gpu_kind(gpu);
  GemmCall call{gemm_args(g, a, b, nullptr), to_dtype(a.scalar_type()), l, device, gemm_options()};
  call.tuned = gpu.empty() ? nullptr : find_tuned(tables, gpu, device.num_sms);
  return call;
}

// Its route, as one line.
std::string gemm_route_op(const at::Tensor& a, const at::Tensor& b, std::string_view layout, int64_t num_sms,
                          int64_t cc, at::OptionalIntArrayRef room, std::string_view gpu) {
  const TunedTables tables = tuned_tables();
  const GemmCall call = route_call(a, b, layout, num_sms, cc, room, gpu, tables, "_gemm_route");
  return gemm_route_line(checked_route(call, "_gemm_route"));
}

// Every legal plan the router weighed for it: each as a route line, its tier, its predicted
// microseconds (NaN where its family has no model) and its key (gemm_plan_key); the index of the
// one it took, and who chose it ("model", "option", or "table <where the table came from>").
std::tuple<std::vector<std::string>, std::vector<std::string>, std::vector<double>, std::vector<int64_t>, int64_t,
           std::string>
gemm_candidates_op(const at::Tensor& a, const at::Tensor& b, std::string_view layout, int64_t num_sms, int64_t cc,
                   at::OptionalIntArrayRef room, std::string_view gpu) {
  const TunedTables tables = tuned_tables();
  const GemmCall call = route_call(a, b, layout, num_sms, cc, room, gpu, tables, "_gemm_candidates");
  const GemmRoute route = checked_route(call, "_gemm_candidates");
  const std::string chosen = gemm_route_line(route);
  std::vector<std::string> lines, tiers;
  std::vector<double> us;
  std::vector<int64_t> keys;
  int64_t index = -1;
  for (const GemmCandidate& c : gemm_candidates(call)) {
    lines.push_back(gemm_route_line(gemm_route_of(gemm_call_options(call), c)));
    tiers.push_back(kTierNames[int(c.tier)]);
    us.push_back(c.ns >= 0 ? c.ns / 1000 : std::numeric_limits<double>::quiet_NaN());
    keys.push_back(gemm_plan_key(call, c.plan));
    if (index < 0 && lines.back() == chosen) index = static_cast<int64_t>(lines.size()) - 1;
  }
  std::string by = kChoiceNames[int(route.choice)];
  if (route.choice == GemmChoice::Table) by += " " + call.tuned->source;
  return {lines, tiers, us, keys, index, by};
}

// Autocast on CUDA, as torch's matmul and linear: float16/32 operands are cast to the autocast
// dtype (float64 and non-CUDA tensors stay as they are; leaf weights' casts are cached for
// the autocast region, as torch caches them).
at::Tensor gemm_autocast(const at::Tensor& a, const at::Tensor& b, std::string_view layout) {
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
  const at::ScalarType to = at::autocast::get_autocast_dtype(c10::DeviceType::CUDA);
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("bankops::gemm", "").typed<decltype(gemm_cpu)>();
  return op.call(at::autocast::cached_cast(to, a, c10::DeviceType::CUDA),
                 at::autocast::cached_cast(to, b, c10::DeviceType::CUDA), layout);
}

at::Tensor linear_autocast(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                           std::string_view layout) {
  const c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
  const at::ScalarType to = at::autocast::get_autocast_dtype(c10::DeviceType::CUDA);
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("bankops::linear", "").typed<decltype(linear_cpu)>();
  constexpr auto kCuda = c10::DeviceType::CUDA;
  return op.call(at::autocast::cached_cast(to, x, kCuda), at::autocast::cached_cast(to, weight, kCuda),
                 at::autocast::cached_cast(to, bias, kCuda), layout);
}

}  // namespace

TORCH_LIBRARY_IMPL(bankops, CPU, m) {
  m.impl("gemm", &gemm_cpu);
  m.impl("linear", &linear_cpu);
}
TORCH_LIBRARY_IMPL(bankops, AutocastCUDA, m) {
  m.impl("gemm", &gemm_autocast);
  m.impl("linear", &linear_autocast);
}
// The blocks GPU `device` holds at once in clusters, row after row (DeviceInfo::room).
std::vector<int64_t> device_room(int64_t device) {
  TORCH_CHECK(device_room_hook() != nullptr, "_device_room: this build of bankops has no CUDA kernels");
  const DeviceInfo d = device_room_hook()(device);
  std::vector<int64_t> out;
  for (const auto& row : d.room) out.insert(out.end(), std::begin(row), std::end(row));
  return out;
}

TORCH_LIBRARY_IMPL(bankops, CompositeExplicitAutograd, m) {
  m.impl("_gemm_route", &gemm_route_op);
  m.impl("_gemm_candidates", &gemm_candidates_op);
  m.impl("_device_room", &device_room);
}

}  // namespace bankops
