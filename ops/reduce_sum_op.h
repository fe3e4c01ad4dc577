#pragma once
#include <ATen/ATen.h>

#include <optional>
#include <vector>

#include "../kernels/reduce.h"

namespace bankops {

struct ReduceGeometry {
  ReduceShape shape;               // x seen as [outer][len][inner], summed over len
  std::vector<int64_t> out_sizes;
  at::ScalarType out_dtype;        // x's dtype for floats, int64 for integers and bool
};

// Checks x and dim (naming them in errors) and describes the reduction.
ReduceGeometry reduce_geometry(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim);

}  // namespace bankops
