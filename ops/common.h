// What every operator's torch glue shares: the layout argument, dtype names, output
// allocation and argument checks.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <string_view>
#include <utility>

#include "../kernels/dtype.h"
#include "../kernels/layout.cuh"

namespace bankops {

// "none" | "pad" | "swizzle" -> Layout; anything else is an error listing those names.
Layout parse_layout(std::string_view name, const char* op);

// The kernels' view of a torch dtype (only for the dtypes the operators admit).
DType to_dtype(at::ScalarType t);

// A dtype as Python names it ("torch.int8", not c10's "Char"): what messages print.
std::string dtype_name(at::ScalarType t);

// A new tensor for an operator's result. In test mode (torch.ops.bankops._set_poison)
// every byte is 0xFF first (NaN for floats), so an element the kernel never writes shows.
at::Tensor new_output(at::IntArrayRef sizes, const at::TensorOptions& options);
void set_poison(bool on);

// x must be a tensor (not None), dense and strided (not sparse, not quantized).
void check_dense(const at::Tensor& x, const char* op, const char* arg);

// t itself, or, where its data pointer is off a multiple of its element size (only memory
// from from_blob or DLPack can be), a contiguous copy, which torch's allocators align: the
// kernels and the CPU references load whole elements.
at::Tensor element_aligned(const at::Tensor& t);

// Wraps dim into [0, max(ndim, 1)) the way torch does, or fails naming the argument.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op, const char* arg);

}  // namespace bankops
