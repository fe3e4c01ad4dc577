// The launchers: raw pointers, sizes, strides and a stream in; a CUDA error code out.
// Only the CUDA glue in ops/ includes this (the rest of ops/ builds without CUDA).
#pragma once
#include <cuda_runtime_api.h>

#include "gemm.h"
#include "gemm_mma.h"
#include "gemm_wgmma.h"
#include "probe.h"
#include "reduce.h"
#include "repack.h"
#include "transpose.h"

namespace bankops {

// out: outer*inner elements of the output type (the input type for floats, int64 for
// integers and bool); workspace: plan.workspace accumulators (may be null if 0).
cudaError_t launch_reduce_sum(Layout layout, DType dtype, const void* x, void* out, void* workspace,
                              ReduceShape shape, const ReducePlan& plan, cudaStream_t stream);

cudaError_t launch_transpose(Layout layout, const TransposeArgs& args, cudaStream_t stream);

cudaError_t launch_gather(const GatherArgs& args, cudaStream_t stream);

// The bank probe: addr holds 32 lane byte addresses (-1: the lane sits out), each a multiple
// of width (1, 2, 4, 8 or 16) with addr + width <= kProbeSharedBytes; out gets 32 words, what
// each lane loaded or stored. A load probe first fills shared memory with 4-byte stores, so
// its one access is the only load. With src (32 byte offsets into `global`, which holds
// kProbeGlobalBytes), each lane instead cp.asyncs width (4, 8 or 16) bytes from global + src
// to addr (zfill: in the zero-filling form, source size width from a register), and out
// gets the first word that arrived.
cudaError_t launch_smem_probe(const int64_t* addr, const int64_t* src, const uint32_t* global, uint32_t* out, int width,
                              bool store, bool zfill, cudaStream_t stream);

// float32/float64. workspace: gemm_workspace_bytes(dtype, args) bytes, which let the float32
// 128x256 kernel share out by k the tiles its last wave would run short of SMs (gemm_work.h);
// null: it does not.
cudaError_t launch_gemm(Layout layout, DType dtype, const GemmArgs& args, void* workspace, cudaStream_t stream);
int64_t gemm_workspace_bytes(DType dtype, const GemmArgs& args);

// float16/bfloat16 on tensor cores; cudaErrorNotSupported for other dtypes (use launch_gemm).
// hopper: the device runs gemm_wgmma's kernel (compute capability 9.0 and gemm_wgmma_built()),
// which the swizzle layout then takes where wgmma_shape allows.
cudaError_t launch_gemm_mma(Layout layout, DType dtype, const GemmArgs& args, bool hopper, cudaStream_t stream);

// The Hopper kernel (gemm_wgmma.h), launched by launch_gemm_mma; built only with sm_90a.
bool gemm_wgmma_built();
// shape: wgmma_shape's choice; realign: rows off 16-byte boundaries (the plan's realign fill)
// take the realigning producer.
cudaError_t launch_gemm_wgmma(DType dtype, const GemmArgs& args, WgmmaShape shape, bool b_kn, bool realign,
                              cudaStream_t stream);

// Copies jobs (1 or 2) of 2-byte elements into rows on 128-byte lines (repack.h), as a
// programmatic dependent launch, so that the gemm kernel launched next overlaps its start.
cudaError_t launch_repack(const RepackJob* job, int jobs, cudaStream_t stream);

}  // namespace bankops
