// Argument checks of the bank probe (torch.ops.bankops._smem_probe), shared by its CPU
// stub and its CUDA launcher.
#pragma once
#include <ATen/ATen.h>

#include <optional>

namespace bankops {

// addr: integer [patterns, 32] of lane byte addresses, -1 for a lane that sits out; width:
// 1, 2, 4, 8 or 16 bytes; every address aligned to width and inside the probe's buffer.
// src (cp.async probes): like addr, byte offsets into the probe's global buffer; width 4, 8
// or 16, no store; zfill: the zero-filling form of cp.async.
void check_probe(const at::Tensor& addr, int64_t width, bool store, const std::optional<at::Tensor>& src, bool zfill);

}  // namespace bankops
