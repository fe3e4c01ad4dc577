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

// Expanded inputs: a dim of stride 0 and size > 1 (torch's expand) repeats the same elements,
// and a contiguous copy of the view would hold every repeat (torch.randn(1).expand(2**40):
// 4 TB). reduce_sum reads only the distinct elements instead: `x` narrowed to index 0 along each
// such dim, a view of the same storage. An expanded dim that is summed over multiplies the sum
// of the rest by its size (`repeat`, applied once to the unrounded sum); one that is kept is
// summed once and its result expanded into the output.
struct DistinctInput {
  at::Tensor x;           // x narrowed to size 1 along its expanded dims (x itself if none)
  int64_t repeat = 1;     // the product of the sizes of the expanded dims summed over
  bool expanded = false;  // whether x has an expanded dim
};
DistinctInput distinct_input(const at::Tensor& x, std::optional<int64_t> dim);

// A new contiguous output of g's sizes and dtype holding `part` (the result over an expanded
// input's distinct elements, repeat applied: size 1 along the kept expanded dims) expanded to
// g's sizes, converted (rounded) once from part's dtype.
at::Tensor expand_into_output(const at::Tensor& part, const ReduceGeometry& g);

}  // namespace bankops
