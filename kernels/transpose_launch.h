// The transpose launchers: raw pointers, sizes and a stream in, a CUDA error code out. Only
// ops/transpose_cuda.cpp includes this (the rest of ops/ builds without CUDA).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "transpose.h"

namespace bankops {

cudaError_t launch_transpose(Layout layout, const TransposeArgs& args, cudaStream_t stream);

cudaError_t launch_gather(const GatherArgs& args, cudaStream_t stream);

}  // namespace bankops
