// The bank probe's argument checks, and its CPU entry: the probe exists to run on the GPU.
#include "probe.h"

#include <torch/library.h>

#include "../kernels/probe.h"

namespace bankops {

void check_probe(const at::Tensor& addr, int64_t width) {
  TORCH_CHECK(width == 1 || width == 2 || width == 4 || width == 8 || width == 16,
              "_smem_probe: expected width 1, 2, 4, 8 or 16 bytes, got ", width);
  TORCH_CHECK(!at::isFloatingType(addr.scalar_type()) && !at::isComplexType(addr.scalar_type()) &&
                  addr.scalar_type() != at::kBool,
              "_smem_probe: expected addr to hold integer byte addresses, got ", addr.scalar_type());
  TORCH_CHECK(addr.dim() == 2 && addr.size(1) == 32, "_smem_probe: expected addr of shape [patterns, 32], got ",
              addr.sizes());
  const at::Tensor a = addr.to(at::kCPU, at::kLong).contiguous();
  const int64_t* v = a.const_data_ptr<int64_t>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    TORCH_CHECK(v[i] == -1 || (v[i] >= 0 && v[i] % width == 0 && v[i] + width <= kProbeSharedBytes),
                "_smem_probe: addr[", i / 32, "][", i % 32, "] = ", v[i], " is not -1 or a ", width,
                "-byte aligned address below ", kProbeSharedBytes - width + 1);
  }
}

namespace {

at::Tensor smem_probe_cpu(const at::Tensor& addr, int64_t width, bool) {
  check_probe(addr, width);
  TORCH_CHECK(false, "_smem_probe: runs one warp on the GPU; expected addr on a CUDA device, got ", addr.device());
}

}  // namespace

TORCH_LIBRARY_IMPL(bankops, CPU, m) { m.impl("_smem_probe", &smem_probe_cpu); }

}  // namespace bankops
