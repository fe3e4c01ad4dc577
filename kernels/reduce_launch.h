// The reduce_sum launcher: raw pointers, sizes and a stream in, a CUDA error code out. Only
// ops/reduce_sum_cuda.cpp includes this (the rest of ops/ builds without CUDA).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "reduce.h"

namespace bankops {

// out: outer*inner elements of the output type (the input type for floats, int64 for
// integers and bool); workspace: plan.workspace accumulators (may be null if 0).
cudaError_t launch_reduce_sum(Layout layout, DType dtype, const void* x, void* out, void* workspace,
                              ReduceShape shape, const ReducePlan& plan, cudaStream_t stream);

}  // namespace bankops
