// What a gemm call is: its operands, dtype and layout, the device it runs on and its options
// (GemmCall), from which every family's plan and the route follow (route.h).
#pragma once
#include <cstdint>

#include "../dtype.h"
#include "../layout.cuh"

namespace bankops {

// C[b] = A[b] @ B[b] (+ bias): element strides of each operand (batch, rows, cols), any values
// (views, broadcast batches); C contiguous (batch, m, n); bias, when given, n contiguous
// elements of C's dtype added to every row in the epilogue (torch.ops.bankops.linear's).
struct GemmArgs {
  int64_t batch, m, n, k;
  const void* a;
  int64_t a_sb, a_sm, a_sk;
  const void* b;
  int64_t b_sb, b_sk, b_sn;
  void* c;
  const void* bias = nullptr;
};

// The kinds of GPU whose cost constants the plans know (costs.h); Other takes the H100's.
enum class GpuKind : int { Other = 0, H100 = 1, H200 = 2 };

// The calling device: SM count, compute capability (10 * major + minor: 90 for H100/H200), its
// kind and the blocks it holds at once in thread-block clusters. A cluster's blocks share a GPC, and
// GPCs whose slots are not a multiple of the cluster size leave slots over, so clusters of 4
// can hold fewer blocks than num_sms * blocks_per_sm (an H100 at 2 blocks an SM: 248 of 264).
constexpr int kRoomBlocksPerSM = 4, kRoomClusters = 8;  // room's rows: 1..4 blocks an SM; columns: clusters of 2..8
struct DeviceInfo {
  int num_sms;
  int cc;
  GpuKind kind = GpuKind::Other;
  // room[b - 1][c - 2]: blocks resident at once in clusters of c, for kernels of b blocks an SM
  // (cudaOccupancyMaxActiveClusters * c); 0 where not measured: every slot counts.
  int room[kRoomBlocksPerSM][kRoomClusters - 1] = {};
};

// The blocks of `cluster`-block clusters resident at once, for a kernel of blocks_per_sm blocks an SM.
inline int64_t cluster_room(const DeviceInfo& d, int cluster, int blocks_per_sm) {
  const int64_t slots = int64_t(d.num_sms) * blocks_per_sm;
  if (cluster <= 1) return slots;
  const bool measured = blocks_per_sm <= kRoomBlocksPerSM && cluster <= kRoomClusters &&
                        d.room[blocks_per_sm - 1][cluster - 2] > 0;
  return measured ? d.room[blocks_per_sm - 1][cluster - 2] : slots / cluster * cluster;
}

// About every SM: 31/32 of them (128 on 132), the blocks a grid must give to fill the GPU.
inline int64_t most_sms(int num_sms) { return (int64_t(num_sms) * 31 + 31) / 32; }

// A call's options (the calling thread's, bankops.options), and what the caller could give it.
struct GemmOptions {
  bool wgmma = true;        // 16-bit swizzle may take the Hopper kernel (and the library has it)
  bool repack = true;       // ... after copying misaligned operands into aligned rows
  bool stream_k = true;     // float32's 128x256 grid may share its last wave's tiles by k
  bool split_k = true;      // a few rows against a weight may split k across a cluster (split_k.h), and a
                            // persistent Hopper walk its last wave's tiles across pairs (wgmma_tail)
  bool persistent = true;   // the Hopper kernel's unsplit TMA plans run persistent blocks
  bool prefetch = true;     // the few-rows kernel launches early and prefetches its weight into L2 (cc 9.0)
  bool scratch = true;      // the call may take scratch memory (off: the caching allocator had none)
  bool tma = true;          // the driver encodes tensor maps (off once it refused one: no TMA producer)
  int64_t plan = 0;         // the plan the call must take (route.h's gemm_plan_key), 0: the router's choice
};

struct TunedTable;  // tuning.h

// One gemm call as every family's plan sees it, and the measured table of its GPU, if any.
struct GemmCall {
  GemmArgs args;
  DType dtype;
  Layout layout;
  DeviceInfo device;
  GemmOptions options;
  const TunedTable* tuned = nullptr;
};

}  // namespace bankops
