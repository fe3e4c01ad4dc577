// The gemm families' launchers, each running exactly the plan it is given on the call's
// operands: a CUDA error code out. Each kernel file includes this and its own family's plan;
// ops/gemm_cuda.cpp runs a route's plan through them.
#pragma once
#include <cuda_runtime_api.h>

#include "args.h"

namespace bankops {

struct FfmaPlan;
struct MmaPlan;
struct WgmmaPlan;
struct RowsPlan;
struct RepackJob;

// workspace: the plan's scratch (ffma_scratch_bytes), null where it takes none.
cudaError_t launch_ffma(const GemmCall& c, const FfmaPlan& p, void* workspace, cudaStream_t stream);
cudaError_t launch_mma(const GemmCall& c, const MmaPlan& p, cudaStream_t stream);
// Runs the plan's copies (launch_repack; their pointers placed in the scratch) and then the
// kernel, after encoding its tensor maps; returns cudaErrorNotSupported, having launched nothing,
// where the driver refuses a map (or `tma` is false), so that the caller can take another route.
cudaError_t launch_wgmma(const GemmCall& c, const WgmmaPlan& p, cudaStream_t stream, bool tma);
cudaError_t launch_rows(const GemmCall& c, const RowsPlan& p, cudaStream_t stream);
// Fills d.room (the blocks `device`, the current one, holds at once in clusters) on compute
// capability 9.0 and above.
cudaError_t measure_cluster_room(int device, DeviceInfo& d);
// Copies jobs (1 or 2) of 2-byte elements into rows on 128-byte lines (repack.h), as a
// programmatic dependent launch, so that the gemm kernel launched next overlaps its start.
cudaError_t launch_repack(const RepackJob* job, int jobs, int num_sms, cudaStream_t stream);
// Whether this library holds the Hopper kernel (a build with sm_90a).
bool gemm_wgmma_built();

}  // namespace bankops
