// transpose: argument checks, geometry and the CPU reference.
#include "transpose_op.h"

#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cstring>

#include "common.h"

namespace bankops {

TransposeGeometry transpose_geometry(const at::Tensor& x, int64_t dim0, int64_t dim1) {
  check_dense(x, "transpose", "x");
  const int64_t e = x.element_size();
  TORCH_CHECK(e == 1 || e == 2 || e == 4 || e == 8 || e == 16, "transpose: x has dtype ", dtype_name(x.scalar_type()),
              " of ", e, " bytes; expected elements of 1, 2, 4, 8 or 16 bytes");
  TransposeGeometry g{wrap_dim(dim0, x.dim(), "transpose", "dim0"), wrap_dim(dim1, x.dim(), "transpose", "dim1"),
                      x.sizes().vec()};
  if (x.dim() > 0) std::swap(g.out_sizes[g.dim0], g.out_sizes[g.dim1]);
  return g;
}

namespace {

// out[idx] = x at the index whose dim0 and dim1 coordinates are exchanged: a byte copy per
// element, so every dtype of a supported size is moved exactly.
at::Tensor transpose_cpu(const at::Tensor& x, int64_t dim0, int64_t dim1, std::string_view layout) {
  parse_layout(layout, "transpose");
  const TransposeGeometry g = transpose_geometry(x, dim0, dim1);
  at::Tensor out = new_output(g.out_sizes, x.options());
  const int64_t nd = x.dim(), e = x.element_size();
  std::vector<int64_t> src_stride = x.strides().vec();  // x's stride of each output dim
  if (nd > 0) std::swap(src_stride[g.dim0], src_stride[g.dim1]);
  const char* src = static_cast<const char*>(x.const_data_ptr());
  char* dst = static_cast<char*>(out.mutable_data_ptr());
  at::parallel_for(0, out.numel(), 4096, [&](int64_t begin, int64_t end) {
    for (int64_t idx = begin; idx < end; ++idx) {
      int64_t rem = idx, off = 0;
      for (int64_t d = nd - 1; d >= 0; --d) {
        off += (rem % g.out_sizes[d]) * src_stride[d];
        rem /= g.out_sizes[d];
      }
      std::memcpy(dst + idx * e, src + off * e, e);
    }
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(bankops, CPU, m) { m.impl("transpose", &transpose_cpu); }

}  // namespace bankops
