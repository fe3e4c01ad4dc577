// torch.ops.bankops._smem_probe on CUDA: one launch of the bank probe per pattern, so that a
// profiler sees one kernel per pattern (bench/ncu.py --probe).
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "../kernels/probe_launch.h"
#include "probe_op.h"

namespace bankops {
namespace {

at::Tensor smem_probe_cuda(const at::Tensor& addr, int64_t width, bool store, const std::optional<at::Tensor>& src,
                           bool zfill) {
  check_probe(addr, width, store, src, zfill);
  const c10::cuda::CUDAGuard guard(addr.device());
  const at::Tensor a = addr.to(at::kLong).contiguous();
  at::Tensor g, global;  // cp.async probes: the lanes' source offsets, and the source (word i holds i)
  if (src) {
    g = src->to(addr.device(), at::kLong).contiguous();
    global = at::arange(kProbeGlobalBytes / 4, a.options().dtype(at::kInt));
  }
  at::Tensor out = at::empty({a.size(0), 32}, a.options().dtype(at::kInt));
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  for (int64_t p = 0; p < a.size(0); ++p)
    C10_CUDA_CHECK(launch_smem_probe(a[p].const_data_ptr<int64_t>(), src ? g[p].const_data_ptr<int64_t>() : nullptr,
                                     src ? reinterpret_cast<const uint32_t*>(global.const_data_ptr<int32_t>()) : nullptr,
                                     reinterpret_cast<uint32_t*>(out[p].mutable_data_ptr<int32_t>()),
                                     static_cast<int>(width), store, zfill, stream));
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(bankops, CUDA, m) { m.impl("_smem_probe", &smem_probe_cuda); }

}  // namespace bankops
