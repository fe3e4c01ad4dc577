// gemm: argument checks, geometry and the CPU reference.
#include "gemm.h"

#include <ATen/Parallel.h>
#include <atomic>
#include <torch/library.h>

#include "common.h"
#include "wide.h"

namespace bankops {
namespace {
std::atomic<bool> g_wgmma{true}, g_repack{true}, g_stream_k{true};
}

void set_wgmma(bool on) { g_wgmma.store(on); }
bool wgmma_enabled() { return g_wgmma.load(std::memory_order_relaxed); }
void set_repack(bool on) { g_repack.store(on); }
bool repack_enabled() { return g_repack.load(std::memory_order_relaxed); }
void set_stream_k(bool on) { g_stream_k.store(on); }
bool stream_k_enabled() { return g_stream_k.load(std::memory_order_relaxed); }

void check_gemm_mma(DType dtype, const GemmArgs& g, const char* op) {
  TORCH_CHECK(gemm_mma_supports(dtype, g), op, ": float16/bfloat16 gemm takes n below 2^31 * ", MmaSmall::kBN,
              " and k below 2^31 * ", MmaSmall::kBK, ", got n = ", g.n, ", k = ", g.k);
}

GemmGeometry gemm_geometry(const at::Tensor& a, const at::Tensor& b) {
  check_dense(a, "gemm", "a");
  check_dense(b, "gemm", "b");
  TORCH_CHECK(a.dim() == 2 || a.dim() == 3, "gemm: expected a to be 2-D (M, K) or 3-D (B, M, K), got ", a.dim(),
              "-D with shape ", a.sizes());
  TORCH_CHECK(b.dim() == a.dim(), "gemm: expected b to be ", a.dim(), "-D like a, got ", b.dim(), "-D with shape ",
              b.sizes());
  const auto t = a.scalar_type();
  TORCH_CHECK(t == at::kFloat || t == at::kHalf || t == at::kBFloat16 || t == at::kDouble, "gemm: a has dtype ", t,
              "; expected float32, float16, bfloat16 or float64");
  TORCH_CHECK(b.scalar_type() == t, "gemm: b has dtype ", b.scalar_type(), " but a has ", t,
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

std::array<int64_t, 3> gemm_strides(const at::Tensor& t) {
  if (t.dim() == 3) return {t.stride(0), t.stride(1), t.stride(2)};
  return {0, t.stride(0), t.stride(1)};
}

namespace {

at::Tensor gemm_cpu(const at::Tensor& a, const at::Tensor& b, std::string_view layout) {
  parse_layout(layout, "gemm");
  const GemmGeometry g = gemm_geometry(a, b);
  at::Tensor out = new_output(g.out_sizes, a.options());
  const auto [asb, asm_, ask] = gemm_strides(a);
  const auto [bsb, bsk, bsn] = gemm_strides(b);
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, a.scalar_type(), "gemm_cpu", [&] {
    const scalar_t* pa = a.const_data_ptr<scalar_t>();
    const scalar_t* pb = b.const_data_ptr<scalar_t>();
    scalar_t* pc = out.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, g.batch * g.m, 1, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t bi = row / g.m, m = row % g.m;
        for (int64_t n = 0; n < g.n; ++n) {
          wide_t<scalar_t> acc = 0;
          for (int64_t k = 0; k < g.k; ++k) {
            acc += static_cast<wide_t<scalar_t>>(pa[bi * asb + m * asm_ + k * ask]) *
                   static_cast<wide_t<scalar_t>>(pb[bi * bsb + k * bsk + n * bsn]);
          }
          pc[row * g.n + n] = static_cast<scalar_t>(acc);
        }
      }
    });
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(bankops, CPU, m) { m.impl("gemm", &gemm_cpu); }

}  // namespace bankops
