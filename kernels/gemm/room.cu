// The blocks a GPU holds at once in thread-block clusters (DeviceInfo::room), asked of the
// occupancy calculator with a kernel that shared memory holds to b blocks an SM.
#include "launch.h"

namespace bankops {
namespace {

__global__ void room_probe_kernel() {}

}  // namespace

cudaError_t measure_cluster_room(int device, DeviceInfo& d) {
  int per_sm = 0, reserved = 0, optin = 0;
  cudaError_t err = cudaDeviceGetAttribute(&per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&reserved, cudaDevAttrReservedSharedMemoryPerBlock, device);
  if (err == cudaSuccess) err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (err == cudaSuccess)
    err = cudaFuncSetAttribute(room_probe_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, optin);
  if (err != cudaSuccess || d.cc < 90) return err;  // no clusters below compute capability 9.0
  for (int b = 1; b <= kRoomBlocksPerSM; ++b) {
    // b blocks of this much shared memory fit an SM and b + 1 do not.
    const int smem = 2 * per_sm / (2 * b + 1) - reserved;
    int blocks = 0;
    err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, room_probe_kernel, 128, smem);
    if (err != cudaSuccess) return err;
    if (smem > optin || blocks != b) continue;  // left unmeasured: every slot counts
    for (int c = 2; c <= kRoomClusters; ++c) {
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(c);
      config.blockDim = dim3(128);
      config.dynamicSmemBytes = smem;
      cudaLaunchAttribute attr;
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = c;
      attr.val.clusterDim.y = 1;
      attr.val.clusterDim.z = 1;
      config.attrs = &attr;
      config.numAttrs = 1;
      int clusters = 0;
      err = cudaOccupancyMaxActiveClusters(&clusters, room_probe_kernel, &config);
      if (err != cudaSuccess) return err;
      d.room[b - 1][c - 2] = clusters * c;
    }
  }
  return cudaSuccess;
}

}  // namespace bankops
