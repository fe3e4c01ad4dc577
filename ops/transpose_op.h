#pragma once
#include <ATen/ATen.h>

#include <utility>
#include <vector>

namespace bankops {

struct TransposeGeometry {
  int64_t dim0, dim1;              // wrapped
  std::vector<int64_t> out_sizes;  // x's sizes with dim0 and dim1 swapped
};

// Checks x (dense, element size 1/2/4/8/16) and the dims, naming them in errors.
TransposeGeometry transpose_geometry(const at::Tensor& x, int64_t dim0, int64_t dim1);

}  // namespace bankops
