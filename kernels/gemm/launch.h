// The gemm launcher: a route in (route.h), its kernels on the stream, a CUDA error code out.
// Only ops/gemm_cuda.cpp includes this (the rest of ops/ builds without CUDA).
#pragma once
#include <cuda_runtime_api.h>

#include "route.h"

namespace bankops {

// The families' launchers, each running exactly what the route names.
cudaError_t launch_ffma(const GemmRoute& r, void* workspace, cudaStream_t stream);
cudaError_t launch_mma(const GemmRoute& r, cudaStream_t stream);
// launch_wgmma runs the route's copies (launch_repack) and then the kernel, after encoding its
// tensor maps; it returns cudaErrorNotSupported, having launched nothing, where the driver
// refuses a map (or `tma` is false), so that the caller can take another route.
cudaError_t launch_wgmma(const GemmRoute& r, cudaStream_t stream, bool tma);
cudaError_t launch_rows(const GemmRoute& r, cudaStream_t stream);
// Fills d.room (the blocks `device`, the current one, holds at once in clusters) on compute
// capability 9.0 and above.
cudaError_t measure_cluster_room(int device, DeviceInfo& d);
// Copies jobs (1 or 2) of 2-byte elements into rows on 128-byte lines (repack.h), as a
// programmatic dependent launch, so that the gemm kernel launched next overlaps its start.
cudaError_t launch_repack(const RepackJob* job, int jobs, int num_sms, cudaStream_t stream);
// Whether this library holds the Hopper kernel (a build with sm_90a).
bool gemm_wgmma_built();

// Runs the route; scratch: route.scratch_bytes bytes (null when 0), free to reuse once the
// launches are queued on this stream. tma false acts out the driver refusing every tensor map
// (the test hook torch.ops.bankops._set_refuse_tma).
inline cudaError_t launch_gemm(GemmRoute route, void* scratch, cudaStream_t stream, bool tma) {
  if (route.scratch_bytes > 0 && scratch == nullptr) return cudaErrorInvalidValue;
  switch (route.family) {
    case GemmFamily::Ffma: return launch_ffma(route, scratch, stream);
    case GemmFamily::Mma: return launch_mma(route, stream);
    case GemmFamily::Rows: return launch_rows(route, stream);
    case GemmFamily::Wgmma:
    default:
      if (route.jobs > 0) route.place(scratch);
      return launch_wgmma(route, stream, tma);
  }
}

}  // namespace bankops
