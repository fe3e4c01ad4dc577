// What a gemm call is (its operands), what it runs on (the device) and the process's switches:
// the three inputs of gemm_route (route.h), from which everything else follows.
#pragma once
#include <cstdint>

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

// The calling device: SM count, compute capability (10 * major + minor: 90 for H100/H200) and
// the blocks it holds at once in thread-block clusters. A cluster's blocks share a GPC, and
// GPCs whose slots are not a multiple of the cluster size leave slots over, so clusters of 4
// can hold fewer blocks than num_sms * blocks_per_sm (an H100 at 2 blocks an SM: 248 of 264).
constexpr int kRoomBlocksPerSM = 4, kRoomClusters = 8;  // room's rows: 1..4 blocks an SM; columns: clusters of 2..8
struct DeviceInfo {
  int num_sms;
  int cc;
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

// The process-wide switches (torch.ops.bankops._set_*), read once per call.
struct GemmOptions {
  bool wgmma = true;        // 16-bit swizzle may take the Hopper kernel (and the library has it)
  bool repack = true;       // ... after copying misaligned operands into aligned rows
  bool stream_k = true;     // float32's 128x256 grid may share its last wave's tiles by k
  bool split_k = true;      // a few rows against a weight may split k across a cluster (split_k.h), and a
                            // persistent Hopper walk its last wave's tiles across pairs (route.h's wgmma_tail)
  bool persistent = true;   // the Hopper kernel's unsplit TMA plans run persistent blocks
  bool scratch = true;      // the call may take scratch memory (off: the caching allocator had none)
  bool tma = true;          // the driver encodes tensor maps (off once it refused one: no TMA producer)
};

}  // namespace bankops
