// transpose on CUDA: reduce any N-d transpose to a batched plane transpose (or a gather)
// over as few dims as possible, then launch.
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <algorithm>
#include <cstdint>

#include "../kernels/transpose_launch.h"
#include "common.h"
#include "transpose_op.h"

namespace bankops {
namespace {

struct Dim {
  int64_t size, xs, ys;  // size, stride in x, stride in the output (in x's dim order)
};

// x's dims in the output's memory order (outermost first), size-1 dims dropped and
// neighbours that are one dim in both tensors merged.
std::vector<Dim> output_order_dims(const at::Tensor& x, const at::Tensor& out, int64_t d0, int64_t d1) {
  std::vector<Dim> dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    const int64_t od = d == d0 ? d1 : d == d1 ? d0 : d;
    if (x.size(d) != 1) dims.push_back({x.size(d), x.stride(d), out.stride(od)});
  }
  std::stable_sort(dims.begin(), dims.end(), [](const Dim& a, const Dim& b) { return a.ys > b.ys; });
  std::vector<Dim> merged;
  for (const Dim& d : dims) {
    if (!merged.empty() && merged.back().xs == d.xs * d.size && merged.back().ys == d.ys * d.size) {
      merged.back() = {merged.back().size * d.size, d.xs, d.ys};
    } else {
      merged.push_back(d);
    }
  }
  return merged;
}

// Launches the transpose of x into out; false if x needs more dims than a launch can
// describe (only possible for a non-contiguous x).
bool try_launch(const at::Tensor& x, const at::Tensor& out, int64_t d0, int64_t d1, Layout layout,
                cudaStream_t stream) {
  const std::vector<Dim> dims = output_order_dims(x, out, d0, d1);
  const int elem_bytes = static_cast<int>(x.element_size());
  const size_t n = dims.size();
  // p: the output's contiguous dim (last); q: the input's, preferring p on a tie.
  const size_t p = n - 1;
  size_t q = p;
  for (size_t k = 0; k < n; ++k) {
    if (dims[k].xs < dims[q].xs) q = k;
  }
  if (n == 0 || q == p) {
    // Rows keep their order: a gather that reads and writes along the shared dim.
    if (n > static_cast<size_t>(kGatherDims)) return false;
    GatherArgs g{x.const_data_ptr(), out.mutable_data_ptr(), elem_bytes, static_cast<int>(n), out.numel(), {}, {}};
    for (size_t k = 0; k < n; ++k) {
      g.size[k] = dims[k].size;
      g.in_stride[k] = dims[k].xs;
    }
    C10_CUDA_CHECK(launch_gather(g, stream));
    return true;
  }
  if (n - 2 > static_cast<size_t>(kTransposeBatchDims)) return false;
  TransposeArgs a{x.const_data_ptr(), out.mutable_data_ptr(), elem_bytes,
                  dims[p].size, dims[q].size, dims[p].xs, dims[q].xs, dims[p].ys, dims[q].ys, 0, 1, {}, {}, {}};
  for (size_t k = 0; k < n; ++k) {
    if (k == p || k == q) continue;
    a.batch_size[a.batch_dims] = dims[k].size;
    a.in_batch_stride[a.batch_dims] = dims[k].xs;
    a.out_batch_stride[a.batch_dims] = dims[k].ys;
    a.batch *= dims[k].size;
    ++a.batch_dims;
  }
  C10_CUDA_CHECK(launch_transpose(layout, a, stream));
  return true;
}

at::Tensor transpose_cuda(const at::Tensor& x, int64_t dim0, int64_t dim1, std::string_view layout) {
  const Layout l = parse_layout(layout, "transpose");
  const TransposeGeometry g = transpose_geometry(x, dim0, dim1);
  const c10::cuda::CUDAGuard guard(x.device());
  at::Tensor out = new_output(g.out_sizes, x.options());
  if (out.numel() == 0) return out;
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const at::Tensor src = element_aligned(x);
  if (!try_launch(src, out, g.dim0, g.dim1, l, stream)) {
    TORCH_CHECK(try_launch(src.contiguous(), out, g.dim0, g.dim1, l, stream), "transpose: internal error: no plan");
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(bankops, CUDA, m) { m.impl("transpose", &transpose_cuda); }

}  // namespace bankops
