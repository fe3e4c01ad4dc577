#pragma once
#include <ATen/ATen.h>

#include <vector>

namespace bankops {

struct GemmGeometry {
  int64_t batch, m, n, k;
  bool batched;  // 3-D inputs
  std::vector<int64_t> out_sizes;
};

// Checks a and b (ndim, shapes, dtypes, devices), naming them in errors.
GemmGeometry gemm_geometry(const at::Tensor& a, const at::Tensor& b);

// Element strides (batch, rows, cols) of a 2-D or 3-D operand; batch stride 0 for 2-D.
std::array<int64_t, 3> gemm_strides(const at::Tensor& t);

}  // namespace bankops
