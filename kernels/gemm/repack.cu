#include <atomic>

#include "../async_copy.cuh"
#include "../shift.cuh"
#include "launch.h"
#include "pdl.cuh"
#include "repack.h"

namespace bankops {
namespace {

constexpr int kMaxDevices = 64;
constexpr int kRepackWarps = 8;                    // a block: 256 threads
constexpr int kRepackAlign = 16;                   // bytes: the vectors the copy moves
constexpr int kRepackSegment = 32 * kRepackAlign;  // bytes of a copied row one warp instruction writes
constexpr int kRepackUnroll = 4;                   // segments of one warp item, all loaded before any is stored

struct RepackJobs {
  RepackJob job[2];
  int64_t groups[2];  // warp items per copied row
  int64_t items[2];   // warp items, every row and batch (0: no second job)
};

// One segment of a copied row: lane l writes the 16 bytes at `at` + 16 l, cut out of the
// aligned granule under its source bytes (x) and the next lane's (the last lane loads that
// one itself: y). Granules that reach outside the row are read element by element inside it
// (zeros elsewhere), so nothing outside the operand is read and the row's padded tail comes
// out zero.
template <int E>
__device__ __forceinline__ uint4 repack_cut(const uint4& x, const uint4& y, int lane, int shift) {
  const uint4 next{__shfl_down_sync(~0u, x.x, 1), __shfl_down_sync(~0u, x.y, 1), __shfl_down_sync(~0u, x.z, 1),
                   __shfl_down_sync(~0u, x.w, 1)};
  return shift_bytes<E>(x, lane == 31 ? y : next, shift);
}

// A warp item is kRepackUnroll segments (2 KB) of one copied row; the grid's warps, all
// resident, loop over the items (a warp that walked a whole row a segment pair at a time
// waited out a load's latency 8 times a row).
template <int E>
__global__ void __launch_bounds__(32 * kRepackWarps) repack_rows_kernel(const RepackJobs jobs) {
  pdl_wait_previous();
  pdl_launch_next();
  const int lane = threadIdx.x % 32;
  const int64_t total = jobs.items[0] + jobs.items[1];
  const int64_t warps = int64_t(gridDim.x) * kRepackWarps;
  for (int64_t w = int64_t(blockIdx.x) * kRepackWarps + threadIdx.x / 32; w < total; w += warps) {
    const int j = w < jobs.items[0] ? 0 : 1;
    const RepackJob job = j == 0 ? jobs.job[0] : jobs.job[1];  // selects: no copy of the parameters to index
    const int64_t item = j == 0 ? w : w - jobs.items[0], groups = j == 0 ? jobs.groups[0] : jobs.groups[1];
    const int64_t row = item / groups, group = item - row * groups;
    const int64_t b = row / job.rows, r = row - b * job.rows;
    const char* src = static_cast<const char*>(job.src) + (b * job.s_batch + r * job.s_row) * E;
    const uintptr_t lo = addr_of(src), hi = lo + uintptr_t(job.cols) * E;
    const int shift = static_cast<int>(lo & 15);
    const int64_t at = group * kRepackUnroll * kRepackSegment + lane * kRepackAlign, bytes = job.d_row * E;
    const char* gran = src - shift + at;
    char* dst = static_cast<char*>(job.dst) + row * bytes + at;
    uint4 x[kRepackUnroll], y[kRepackUnroll];
#pragma unroll
    for (int u = 0; u < kRepackUnroll; ++u) {
      x[u] = ldg128_within(gran + u * kRepackSegment, lo, hi);
      y[u] = lane == 31 ? ldg128_within(gran + u * kRepackSegment + 16, lo, hi) : uint4{0, 0, 0, 0};
    }
#pragma unroll
    for (int u = 0; u < kRepackUnroll; ++u) {
      const uint4 v = repack_cut<E>(x[u], y[u], lane, shift);
      if (at + u * kRepackSegment < bytes) *reinterpret_cast<uint4*>(dst + u * kRepackSegment) = v;
    }
  }
}

// Resident blocks of the copy kernel per SM, asked once per device (0: not asked yet).
int repack_blocks_per_sm() {
  static std::atomic<int> per_sm[kMaxDevices] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) return 1;
  int n = per_sm[device].load(std::memory_order_relaxed);
  if (n < 1) {
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, repack_rows_kernel<2>, 32 * kRepackWarps, 0) != cudaSuccess ||
        n < 1)
      n = 1;
    per_sm[device].store(n, std::memory_order_relaxed);
  }
  return n;
}

}  // namespace

cudaError_t launch_repack(const RepackJob* job, int jobs, int num_sms, cudaStream_t stream) {
  if (jobs < 1 || jobs > 2 || num_sms < 1) return cudaErrorInvalidValue;
  constexpr int kBytes = 2;  // float16 / bfloat16
  RepackJobs p{};
  int64_t total = 0;
  for (int j = 0; j < jobs; ++j) {
    p.job[j] = job[j];
    p.groups[j] = (job[j].d_row * kBytes + kRepackUnroll * kRepackSegment - 1) / (kRepackUnroll * kRepackSegment);
    p.items[j] = job[j].batch * job[j].rows * p.groups[j];
    total += p.items[j];
  }
  if (total == 0) return cudaSuccess;
  // As many blocks as are resident at once (the rest would only queue behind them), so the
  // gemm launched after this (pdl.cuh) is scheduled as soon as they have all started.
  const int64_t want = (total + kRepackWarps - 1) / kRepackWarps, cap = int64_t(num_sms) * repack_blocks_per_sm();
  const dim3 grid(static_cast<unsigned>(want < cap ? want : cap));
  return launch_pdl(repack_rows_kernel<kBytes>, grid, dim3(32 * kRepackWarps), 0, 1, stream, p);
}

}  // namespace bankops
