// The bank probe's launcher: raw pointers, sizes and a stream in, a CUDA error code out. Only
// ops/probe_cuda.cpp includes this (the rest of ops/ builds without CUDA).
#pragma once
#include <cuda_runtime_api.h>

#include <cstdint>

#include "probe.h"

namespace bankops {

// The bank probe: addr holds 32 lane byte addresses (-1: the lane sits out), each a multiple
// of width (1, 2, 4, 8 or 16) with addr + width <= kProbeSharedBytes; out gets 32 words, what
// each lane loaded or stored. A load probe first fills shared memory with 4-byte stores, so
// its one access is the only load. With src (32 byte offsets into `global`, which holds
// kProbeGlobalBytes), each lane instead cp.asyncs width (4, 8 or 16) bytes from global + src
// to addr (zfill: in the zero-filling form, source size width from a register), and out
// gets the first word that arrived.
cudaError_t launch_smem_probe(const int64_t* addr, const int64_t* src, const uint32_t* global, uint32_t* out, int width,
                              bool store, bool zfill, cudaStream_t stream);

}  // namespace bankops
