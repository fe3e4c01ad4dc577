// reduce_sum on CUDA: plan, workspace, launch.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <cstdint>

#include "../kernels/reduce_launch.h"
#include "common.h"
#include "reduce_sum_op.h"

namespace bankops {
namespace {

// ATen's device-properties cache lives behind headers that need cuBLAS and cuSPARSE;
// the SM count alone is one runtime query.
int multiprocessor_count(int device) {
  int count = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

at::Tensor reduce_sum_cuda(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim, std::string_view layout) {
  const Layout l = parse_layout(layout, "reduce_sum");
  const ReduceGeometry g = reduce_geometry(x, dim, keepdim);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = new_output(g.out_sizes, x.options().dtype(g.out_dtype));
  if (out.numel() == 0) return out;
  const at::Tensor xc = element_aligned(x.contiguous());
  const DType dt = to_dtype(x.scalar_type());
  // Column vectors need every row of x on a 16-byte boundary; rows handle their own
  // unaligned head and tail.
  const bool aligned = reinterpret_cast<uintptr_t>(xc.const_data_ptr()) % kLoadBytes == 0 &&
                       (g.shape.inner * static_cast<int64_t>(xc.element_size())) % kLoadBytes == 0;
  const ReducePlan plan = plan_reduce(g.shape, dt, multiprocessor_count(x.get_device()), aligned);
  at::Tensor workspace;
  if (plan.workspace > 0) workspace = at::empty({plan.workspace * acc_bytes(dt)}, x.options().dtype(at::kByte));
  C10_CUDA_CHECK(launch_reduce_sum(l, dt, xc.const_data_ptr(), out.mutable_data_ptr(),
                                   workspace.defined() ? workspace.mutable_data_ptr() : nullptr, g.shape, plan,
                                   c10::cuda::getCurrentCUDAStream()));
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(bankops, CUDA, m) { m.impl("reduce_sum", &reduce_sum_cuda); }

}  // namespace bankops
