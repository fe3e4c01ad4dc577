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

// Sums x (any strides: read through a contiguous copy) as g describes into out.
void launch(Layout l, const at::Tensor& x, const ReduceGeometry& g, at::Tensor& out) {
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
}

at::Tensor reduce_sum_cuda(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim, std::string_view layout) {
  const Layout l = parse_layout(layout, "reduce_sum");
  const ReduceGeometry g = reduce_geometry(x, dim, keepdim);
  const c10::cuda::CUDAGuard guard(x.device());
  const DistinctInput d = distinct_input(x, dim);
  if (!d.expanded) {
    at::Tensor out = new_output(g.out_sizes, x.options().dtype(g.out_dtype));
    if (out.numel() > 0) launch(l, x, g, out);
    return out;
  }
  // An expanded input (reduce_sum_op.h): the kernel sums the distinct elements. Where a summed
  // dim repeats them, float16 and bfloat16 are summed as float32 (the same values, in the
  // kernels' own float32 accumulator), so that the sums meet the repeat unrounded; the product
  // is taken in float64 (int64 for integers) and rounded once into the output.
  at::Tensor xd = d.x;
  if (d.repeat != 1 && (x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16))
    xd = xd.to(at::kFloat, /*non_blocking=*/false, /*copy=*/false, at::MemoryFormat::Contiguous);
  const ReduceGeometry gd = reduce_geometry(xd, dim, keepdim);
  at::Tensor part = new_output(gd.out_sizes, xd.options().dtype(gd.out_dtype));
  if (part.numel() == 0) return expand_into_output(part, g);
  launch(l, xd, gd, part);
  if (d.repeat != 1) part = (at::isFloatingType(part.scalar_type()) ? part.to(at::kDouble) : part).mul_(d.repeat);
  return expand_into_output(part, g);
}

}  // namespace

TORCH_LIBRARY_IMPL(bankops, CUDA, m) { m.impl("reduce_sum", &reduce_sum_cuda); }

}  // namespace bankops
