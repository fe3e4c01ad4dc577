// reduce_sum: argument checks, geometry and the CPU reference.
#include "reduce_sum_op.h"

#include <ATen/Parallel.h>
#include <torch/library.h>

#include "common.h"
#include "wide.h"

namespace bankops {

ReduceGeometry reduce_geometry(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  check_dense(x, "reduce_sum", "x");
  const auto t = x.scalar_type();
  TORCH_CHECK(t == at::kBool || t == at::kByte || t == at::kChar || t == at::kShort || t == at::kInt ||
                  t == at::kLong || t == at::kHalf || t == at::kBFloat16 || t == at::kFloat || t == at::kDouble,
              "reduce_sum: x has dtype ", t,
              "; expected one of bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64");
  ReduceGeometry g;
  g.out_dtype = at::isIntegralType(t, /*includeBool=*/true) ? at::kLong : t;
  const int64_t nd = x.dim();
  if (!dim.has_value()) {
    g.shape = {1, x.numel(), 1};
    if (keepdim) g.out_sizes.assign(nd, 1);
    return g;
  }
  const int64_t d = wrap_dim(*dim, nd, "reduce_sum", "dim");
  if (nd == 0) {
    g.shape = {1, 1, 1};
    return g;
  }
  const auto sizes = x.sizes();
  g.shape = {c10::multiply_integers(sizes.begin(), sizes.begin() + d), sizes[d],
             c10::multiply_integers(sizes.begin() + d + 1, sizes.end())};
  for (int64_t i = 0; i < nd; ++i) {
    if (i != d) g.out_sizes.push_back(sizes[i]);
    else if (keepdim) g.out_sizes.push_back(1);
  }
  return g;
}

namespace {

at::Tensor reduce_sum_cpu(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim, std::string_view layout) {
  parse_layout(layout, "reduce_sum");
  const ReduceGeometry g = reduce_geometry(x, dim, keepdim);
  at::Tensor out = new_output(g.out_sizes, x.options().dtype(g.out_dtype));
  const at::Tensor xc = element_aligned(x.contiguous());
  const auto [outer, len, inner] = g.shape;
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, x.scalar_type(), "reduce_sum_cpu", [&] {
    using out_t = std::conditional_t<is_float_v<scalar_t>, scalar_t, int64_t>;
    const scalar_t* px = xc.const_data_ptr<scalar_t>();
    out_t* po = out.mutable_data_ptr<out_t>();
    at::parallel_for(0, outer * inner, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t o = i / inner, c = i % inner;
        wide_t<scalar_t> acc = 0;
        for (int64_t r = 0; r < len; ++r) acc += static_cast<wide_t<scalar_t>>(px[(o * len + r) * inner + c]);
        po[i] = static_cast<out_t>(acc);
      }
    });
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(bankops, CPU, m) { m.impl("reduce_sum", &reduce_sum_cpu); }

}  // namespace bankops
