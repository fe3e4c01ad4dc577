// reduce_sum: argument checks, geometry and the CPU reference.
#include "reduce_sum_op.h"

#include <ATen/Parallel.h>
#include <torch/library.h>

#include <cstdint>

#include "common.h"
#include "wide.h"

namespace bankops {

ReduceGeometry reduce_geometry(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  check_dense(x, "reduce_sum", "x");
  const auto t = x.scalar_type();
  TORCH_CHECK(t == at::kBool || t == at::kByte || t == at::kChar || t == at::kShort || t == at::kInt ||
                  t == at::kLong || t == at::kHalf || t == at::kBFloat16 || t == at::kFloat || t == at::kDouble,
              "reduce_sum: x has dtype ", dtype_name(t),
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

// A summed expanded dim of size n multiplies the sum S of the rest by n instead of adding n
// copies of it: n * S is their exact sum, rounded once (adding the copies rounds n times).
// The product scales S's rounding error by n, which is what the bound of the whole sum allows:
// over N = n * m terms it is about eps * sqrt(N) * |x|_2, and the view's |x|_2 is sqrt(n)
// times the norm of the m distinct terms, so it is n times the bound of S (eps * sqrt(m) *
// their norm). Integers multiply in int64 modulo 2^64: the bits of n additions, overflow included.
DistinctInput distinct_input(const at::Tensor& x, std::optional<int64_t> dim) {
  DistinctInput d{x, 1, false};
  if (x.numel() == 0) return d;  // nothing to copy
  const int64_t reduced = dim.has_value() && x.dim() > 0 ? wrap_dim(*dim, x.dim(), "reduce_sum", "dim") : -1;
  for (int64_t i = 0; i < x.dim(); ++i) {
    if (x.stride(i) != 0 || x.size(i) <= 1) continue;
    if (!dim.has_value() || i == reduced) d.repeat *= x.size(i);  // <= numel: no overflow
    d.x = d.x.narrow(i, 0, 1);
    d.expanded = true;
  }
  return d;
}

at::Tensor expand_into_output(const at::Tensor& part, const ReduceGeometry& g) {
  if (part.sizes() == at::IntArrayRef(g.out_sizes) && part.scalar_type() == g.out_dtype) return part;
  at::Tensor out = new_output(g.out_sizes, part.options().dtype(g.out_dtype));
  if (out.numel() > 0) out.copy_(part.expand(g.out_sizes));
  return out;
}

namespace {

at::Tensor reduce_sum_cpu(const at::Tensor& x, std::optional<int64_t> dim, bool keepdim, std::string_view layout) {
  parse_layout(layout, "reduce_sum");
  const ReduceGeometry g = reduce_geometry(x, dim, keepdim);
  // Sums the distinct elements, the repeat of summed expanded dims applied to the wide sums.
  const DistinctInput d = distinct_input(x, dim);
  const ReduceGeometry gd = d.expanded ? reduce_geometry(d.x, dim, keepdim) : g;
  at::Tensor part = new_output(gd.out_sizes, x.options().dtype(gd.out_dtype));
  const at::Tensor xc = element_aligned(d.x.contiguous());
  const auto [outer, len, inner] = gd.shape;
  const int64_t repeat = d.repeat;
  AT_DISPATCH_ALL_TYPES_AND3(at::kHalf, at::kBFloat16, at::kBool, x.scalar_type(), "reduce_sum_cpu", [&] {
    using out_t = std::conditional_t<is_float_v<scalar_t>, scalar_t, int64_t>;
    using acc_t = wide_t<scalar_t>;
    const scalar_t* px = xc.const_data_ptr<scalar_t>();
    out_t* po = part.mutable_data_ptr<out_t>();
    at::parallel_for(0, outer * inner, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t o = i / inner, c = i % inner;
        acc_t acc = 0;
        for (int64_t r = 0; r < len; ++r) acc += static_cast<acc_t>(px[(o * len + r) * inner + c]);
        if constexpr (is_float_v<scalar_t>) {
          if (repeat != 1) acc *= static_cast<acc_t>(repeat);
        } else if (repeat != 1) {
          acc = static_cast<acc_t>(static_cast<uint64_t>(acc) * static_cast<uint64_t>(repeat));  // modulo 2^64
        }
        po[i] = static_cast<out_t>(acc);
      }
    });
  });
  return d.expanded ? expand_into_output(part, g) : part;
}

}  // namespace

TORCH_LIBRARY_IMPL(bankops, CPU, m) { m.impl("reduce_sum", &reduce_sum_cpu); }

}  // namespace bankops
