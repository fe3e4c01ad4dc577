#pragma once
#include <ATen/ATen.h>

#include <array>
#include <vector>

#include "../kernels/gemm_mma.h"

namespace bankops {

struct GemmGeometry {
  int64_t batch, m, n, k;
  bool batched;  // 3-D inputs
  std::vector<int64_t> out_sizes;
};

// Checks a and b (ndim, shapes, dtypes, devices), naming them in errors.
GemmGeometry gemm_geometry(const at::Tensor& a, const at::Tensor& b);

// float16/bfloat16 run on the tensor-core kernel only: refuses the shapes its int tile
// counters cannot hold (no tensor that fits a GPU comes near them).
void check_gemm_mma(DType dtype, const GemmArgs& g, const char* op);

// Test hook (torch.ops.bankops._set_wgmma): whether float16/bfloat16 gemm may take the
// Hopper kernel where it applies (on by default); off, every call runs the mma.sync kernel.
void set_wgmma(bool on);
bool wgmma_enabled();

// Test hook (torch.ops.bankops._set_repack): whether the Hopper kernel's route copies operands
// whose rows start off 16-byte boundaries into aligned scratch rows first (gemm_repack.h; on
// by default); off, such calls realign in the kernel's producers (bankops.explain follows).
void set_repack(bool on);
bool repack_enabled();

// Test hook (torch.ops.bankops._set_stream_k): whether the float32 128x256 kernel deals the
// tiles of its short last wave out by k to all SMs (gemm_work.h; on by default); off, each
// tile is one block's, and ragged grids take the 128x128 kernel.
void set_stream_k(bool on);
bool stream_k_enabled();

// Element strides (batch, rows, cols) of a 2-D or 3-D operand; batch stride 0 for 2-D.
std::array<int64_t, 3> gemm_strides(const at::Tensor& t);

}  // namespace bankops
