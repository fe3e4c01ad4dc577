// The bank probe's argument checks, and its CPU entry: the probe exists to run on the GPU.
#include "probe_op.h"

#include <torch/library.h>

#include "../kernels/probe.h"

namespace bankops {

namespace {

// addr (or src) as int64 on the CPU, every entry -1 or a `width`-aligned offset with
// offset <= limit - width (offset + width would wrap for offsets near 2^63).
at::Tensor checked_offsets(const at::Tensor& t, const char* name, int64_t width, int64_t limit) {
  TORCH_CHECK(!at::isFloatingType(t.scalar_type()) && !at::isComplexType(t.scalar_type()) && t.scalar_type() != at::kBool,
              "_smem_probe: expected ", name, " to hold integer byte offsets, got ", t.scalar_type());
  TORCH_CHECK(t.dim() == 2 && t.size(1) == 32, "_smem_probe: expected ", name, " of shape [patterns, 32], got ",
              t.sizes());
  at::Tensor a = t.to(at::kCPU, at::kLong).contiguous();
  const int64_t* v = a.const_data_ptr<int64_t>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    TORCH_CHECK(v[i] == -1 || (v[i] >= 0 && v[i] % width == 0 && v[i] <= limit - width), "_smem_probe: ", name, "[",
                i / 32, "][", i % 32, "] = ", v[i], " is not -1 or a ", width, "-byte aligned offset below ",
                limit - width + 1);
  }
  return a;
}

}  // namespace

void check_probe(const at::Tensor& addr, int64_t width, bool store, const std::optional<at::Tensor>& src, bool zfill) {
  TORCH_CHECK(width == 1 || width == 2 || width == 4 || width == 8 || width == 16,
              "_smem_probe: expected width 1, 2, 4, 8 or 16 bytes, got ", width);
  const at::Tensor a = checked_offsets(addr, "addr", width, kProbeSharedBytes);
  TORCH_CHECK(src || !zfill, "_smem_probe: zfill picks a cp.async form; expected src with it");
  if (!src) return;
  TORCH_CHECK(!store, "_smem_probe: a cp.async probe (src given) writes shared memory itself; expected store=False");
  TORCH_CHECK(width >= 4, "_smem_probe: cp.async copies 4, 8 or 16 bytes, got width ", width);
  TORCH_CHECK(src->sizes() == addr.sizes(), "_smem_probe: expected src of addr's shape ", addr.sizes(), ", got ",
              src->sizes());
  const at::Tensor g = checked_offsets(*src, "src", width, kProbeGlobalBytes);
  TORCH_CHECK(at::equal(a.eq(-1), g.eq(-1)), "_smem_probe: expected src to be -1 exactly where addr is");
}

namespace {

at::Tensor smem_probe_cpu(const at::Tensor& addr, int64_t width, bool store, const std::optional<at::Tensor>& src,
                          bool zfill) {
  check_probe(addr, width, store, src, zfill);
  TORCH_CHECK(false, "_smem_probe: runs one warp on the GPU; expected addr on a CUDA device, got ", addr.device());
}

}  // namespace

TORCH_LIBRARY_IMPL(bankops, CPU, m) { m.impl("_smem_probe", &smem_probe_cpu); }

}  // namespace bankops
