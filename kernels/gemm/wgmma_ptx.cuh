// PTX wrappers of the Hopper kernel (wgmma.cu and wgmma_realign.cuh include it; sm_90a code):
// mbarriers, the stage ring's positions, named barriers and wgmma. The mbarrier wrappers call
// CCCL's cuda::ptx where it has the instruction; named barriers, wgmma and the remote arrival
// stay PTX here (cuda::ptx has no such form: bench/design_notes.md, "CCCL cuda::ptx").
#pragma once
#include <cstdint>
#include <type_traits>

#include <cuda/ptx>

#include "../async_copy.cuh"

namespace bankops {
namespace {  // included by wgmma.cu only

__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  cuda::ptx::mbarrier_init(smem_ptr<uint64_t>(bar), count);
}
// Makes the inits visible to the async proxy, whose TMA copies count their bytes on them.
__device__ __forceinline__ void mbar_init_fence() {
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
}
// One arrival that also expects `bytes` more of transactions (the TMA copies of a stage).
// .release.cta, PTX's default; the phase state it returns is not needed.
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta, cuda::ptx::space_shared,
                                       smem_ptr<uint64_t>(bar), bytes);
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) { cuda::ptx::mbarrier_arrive(smem_ptr<uint64_t>(bar)); }
// An arrival on the mbarrier at cluster shared-memory address `bar` (cluster_map: another
// block's). The arriving warp has only read the stage (wgmma, finished): nothing of its own
// needs releasing to the cluster, so the default (.release.cta) order serves. Hand-written:
// cuda::ptx's remote arrivals are .release.cluster (fences added) or .relaxed.cluster only.
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
// Returns once the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  while (!cuda::ptx::mbarrier_try_wait_parity(smem_ptr<uint64_t>(bar), parity)) {
  }
}

// Consumer threads only (the producer may have left): named barrier 1.
template <int THREADS>
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(THREADS) : "memory");
}

// cuda::ptx has no wgmma (fence, commit, wait or mma_async) for sm_90a: PTX here.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// The accumulators are written by the asynchronous wgmma: keep the compiler from moving
// their reads above the wait.
template <int N>
__device__ __forceinline__ void fence_acc(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

#define BANKOPS_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define BANKOPS_F16(i) BANKOPS_F4(i), BANKOPS_F4(i + 4), BANKOPS_F4(i + 8), BANKOPS_F4(i + 12)
#define BANKOPS_F64(i) BANKOPS_F16(i), BANKOPS_F16(i + 16), BANKOPS_F16(i + 32), BANKOPS_F16(i + 48)
#define BANKOPS_R0_31                                                                             \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                        \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define BANKOPS_R0_63                                                                             \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                        \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "              \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "              \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define BANKOPS_R64_95                                                                            \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "              \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95"
#define BANKOPS_R64_71 "%64, %65, %66, %67, %68, %69, %70, %71"
#define BANKOPS_R32_47 \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47"
#define BANKOPS_R64_127                                                                           \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "              \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "              \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "  \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
// N: the instruction's n; REGS its accumulator operands; A the number of the first operand
// after them (then B, the scale flag and the two transpose immediates).
#define BANKOPS_WGMMA_ASM(N, TYPE, REGS, A, B, SCALE, TA, TB, ...)                              \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #SCALE ", 0;\n"                             \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " {" REGS "}, "    \
               "%" #A ", %" #B ", p, 1, 1, %" #TA ", %" #TB ";\n}\n"                             \
               : __VA_ARGS__                                                                     \
               : "l"(da), "l"(db), "r"(1), "n"(TRANS_A), "n"(TRANS_B))
// D (64 x N, float32) += A (64 x 16, shared; TRANS_A: m-major, else k-major) * B (16 x N,
// shared; TRANS_B: n-major, else k-major).
template <class T, int N, int TRANS_A, int TRANS_B>
__device__ __forceinline__ void wgmma_mma(float (&d)[N / 2], uint64_t da, uint64_t db) {
#define BANKOPS_R256 BANKOPS_R0_63 ", " BANKOPS_R64_127
#define BANKOPS_R192 BANKOPS_R0_63 ", " BANKOPS_R64_95
#define BANKOPS_R144 BANKOPS_R0_63 ", " BANKOPS_R64_71
#define BANKOPS_R96 BANKOPS_R0_31 ", " BANKOPS_R32_47
  constexpr bool kHalf = std::is_same_v<T, __half>;
  if constexpr (N == 256 && kHalf)
    BANKOPS_WGMMA_ASM(256, "f16", BANKOPS_R256, 128, 129, 130, 131, 132, BANKOPS_F64(0), BANKOPS_F64(64));
  else if constexpr (N == 256)
    BANKOPS_WGMMA_ASM(256, "bf16", BANKOPS_R256, 128, 129, 130, 131, 132, BANKOPS_F64(0), BANKOPS_F64(64));
  else if constexpr (N == 192 && kHalf)
    BANKOPS_WGMMA_ASM(192, "f16", BANKOPS_R192, 96, 97, 98, 99, 100, BANKOPS_F64(0), BANKOPS_F16(64), BANKOPS_F16(80));
  else if constexpr (N == 192)
    BANKOPS_WGMMA_ASM(192, "bf16", BANKOPS_R192, 96, 97, 98, 99, 100, BANKOPS_F64(0), BANKOPS_F16(64), BANKOPS_F16(80));
  else if constexpr (N == 144 && kHalf)
    BANKOPS_WGMMA_ASM(144, "f16", BANKOPS_R144, 72, 73, 74, 75, 76, BANKOPS_F64(0), BANKOPS_F4(64), BANKOPS_F4(68));
  else if constexpr (N == 144)
    BANKOPS_WGMMA_ASM(144, "bf16", BANKOPS_R144, 72, 73, 74, 75, 76, BANKOPS_F64(0), BANKOPS_F4(64), BANKOPS_F4(68));
  else if constexpr (N == 96 && kHalf)
    BANKOPS_WGMMA_ASM(96, "f16", BANKOPS_R96, 48, 49, 50, 51, 52, BANKOPS_F16(0), BANKOPS_F16(16), BANKOPS_F16(32));
  else if constexpr (N == 96)
    BANKOPS_WGMMA_ASM(96, "bf16", BANKOPS_R96, 48, 49, 50, 51, 52, BANKOPS_F16(0), BANKOPS_F16(16), BANKOPS_F16(32));
  else if constexpr (N == 128 && kHalf)
    BANKOPS_WGMMA_ASM(128, "f16", BANKOPS_R0_63, 64, 65, 66, 67, 68, BANKOPS_F64(0));
  else if constexpr (N == 128)
    BANKOPS_WGMMA_ASM(128, "bf16", BANKOPS_R0_63, 64, 65, 66, 67, 68, BANKOPS_F64(0));
  else if constexpr (kHalf)
    BANKOPS_WGMMA_ASM(64, "f16", BANKOPS_R0_31, 32, 33, 34, 35, 36, BANKOPS_F16(0), BANKOPS_F16(16));
  else
    BANKOPS_WGMMA_ASM(64, "bf16", BANKOPS_R0_31, 32, 33, 34, 35, 36, BANKOPS_F16(0), BANKOPS_F16(16));
#undef BANKOPS_R256
#undef BANKOPS_R192
#undef BANKOPS_R144
#undef BANKOPS_R96
}
#undef BANKOPS_WGMMA_ASM
#undef BANKOPS_R64_127
#undef BANKOPS_R64_95
#undef BANKOPS_R64_71
#undef BANKOPS_R32_47
#undef BANKOPS_R0_63
#undef BANKOPS_R0_31
#undef BANKOPS_F64
#undef BANKOPS_F16
#undef BANKOPS_F4

// The position of k-tile kt in a ring of STAGES stages: its stage, and the parity of its pass
// over the ring (an mbarrier's phase parity: it flips each time the ring wraps).
template <int STAGES>
struct RingPos {
  int stage;
  uint32_t phase;
  __device__ __forceinline__ static RingPos at(int kt) { return RingPos{kt % STAGES, uint32_t(kt / STAGES) & 1}; }
};

// The ring's barriers: full[s] completes when stage s has landed, empty[s] when the consumers
// are done reading it. A producer's first pass finds every stage empty.
template <int STAGES>
struct Ring {
  uint32_t full0, empty0;  // shared addresses of full[0] and empty[0], 8 bytes apart
  __device__ __forceinline__ uint32_t full(int s) const { return full0 + 8 * s; }
  __device__ __forceinline__ uint32_t empty(int s) const { return empty0 + 8 * s; }
  __device__ __forceinline__ void wait_full(const RingPos<STAGES>& p) const { mbar_wait(full(p.stage), p.phase); }
  // kt: the k-tile about to go into p's stage (none to wait for in the first pass).
  __device__ __forceinline__ void wait_empty(const RingPos<STAGES>& p, int kt) const {
    if (kt >= STAGES) mbar_wait(empty(p.stage), p.phase ^ 1);
  }
};

}  // namespace
}  // namespace bankops
