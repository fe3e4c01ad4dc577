#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "async_copy.cuh"
#include "gemm_wgmma.h"
#include "launch.h"
#include "mma_epilogue.cuh"
#include "pdl.cuh"
#include "shift.cuh"
#include "tma.cuh"

namespace bankops {
namespace {

#if defined(BANKOPS_WGMMA)
// Code for sm_90a only: wgmma and setmaxnreg do not exist elsewhere. A build for several
// architectures compiles the kernel's body for the 9.0a pass alone (the launcher takes this
// path only on compute capability 9.0).
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define BANKOPS_WGMMA_BODY 1
#endif

__device__ __forceinline__ void mbar_init(uint32_t bar, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
// Makes the inits visible to the async proxy, whose TMA copies count their bytes on them.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// One arrival that also expects `bytes` more of transactions (the TMA copies of a stage).
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" ::"r"(bar) : "memory");
}
// Returns once the phase of parity `parity` has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// Consumer threads only (the producer may have left): named barrier 1.
template <int THREADS>
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(THREADS) : "memory");
}

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
#define BANKOPS_R64_127                                                                           \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "              \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "              \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "  \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
// N: the instruction's n; REGS its accumulator operands; A, B, SCALE, TRANS the numbers of
// the operands after them.
#define BANKOPS_WGMMA_ASM(N, TYPE, REGS, A, B, SCALE, TRANS, ...)                               \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #SCALE ", 0;\n"                             \
               "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32." TYPE "." TYPE " {" REGS "}, "    \
               "%" #A ", %" #B ", p, 1, 1, 0, %" #TRANS ";\n}\n"                                \
               : __VA_ARGS__                                                                     \
               : "l"(da), "l"(db), "r"(1), "n"(TRANS_B))
// D (64 x N, float32) += A (64 x 16, shared, k-major) * B (16 x N, shared; TRANS_B: n-major).
template <class T, int N, int TRANS_B>
__device__ __forceinline__ void wgmma_mma(float (&d)[N / 2], uint64_t da, uint64_t db) {
#define BANKOPS_R256 BANKOPS_R0_63 ", " BANKOPS_R64_127
  constexpr bool kHalf = std::is_same_v<T, __half>;
  if constexpr (N == 256 && kHalf)
    BANKOPS_WGMMA_ASM(256, "f16", BANKOPS_R256, 128, 129, 130, 131, BANKOPS_F64(0), BANKOPS_F64(64));
  else if constexpr (N == 256)
    BANKOPS_WGMMA_ASM(256, "bf16", BANKOPS_R256, 128, 129, 130, 131, BANKOPS_F64(0), BANKOPS_F64(64));
  else if constexpr (N == 128 && kHalf)
    BANKOPS_WGMMA_ASM(128, "f16", BANKOPS_R0_63, 64, 65, 66, 67, BANKOPS_F64(0));
  else if constexpr (N == 128)
    BANKOPS_WGMMA_ASM(128, "bf16", BANKOPS_R0_63, 64, 65, 66, 67, BANKOPS_F64(0));
  else if constexpr (kHalf)
    BANKOPS_WGMMA_ASM(64, "f16", BANKOPS_R0_31, 32, 33, 34, 35, BANKOPS_F16(0), BANKOPS_F16(16));
  else
    BANKOPS_WGMMA_ASM(64, "bf16", BANKOPS_R0_31, 32, 33, 34, 35, BANKOPS_F16(0), BANKOPS_F16(16));
#undef BANKOPS_R256
}
#undef BANKOPS_WGMMA_ASM
#undef BANKOPS_R64_127
#undef BANKOPS_R0_63
#undef BANKOPS_R0_31
#undef BANKOPS_F64
#undef BANKOPS_F16
#undef BANKOPS_F4

// The realigning producer's view of one operand tile (rows at any 2-byte offset, unit-stride
// columns): chunk e of the thread (wgmma_chunk's map) in k-tile kt. The lane loads the
// aligned 16 bytes (granule) under its chunk's first byte, takes the next granule from the
// lane to its right (the 8 lanes of a row group cover one 128-byte row segment; the group's
// last lane loads the granule past it) and cuts its chunk out of the two (shift_bytes). The
// cut, `shift`, is one per thread: its chunks sit kRowStep rows (16 or 32: a multiple of 8
// rows is a multiple of 16 bytes), 64 columns (128 bytes) or whole k-tiles (64 columns, or
// 64 rows) apart. K_ROWS: k runs down the tile's rows (B as Bs[BK][BN]).
//
// Only k needs zeros past the operand's edge (the products of padding would reach real
// outputs); rows (m, n) or columns (n) past it feed outputs that the epilogue drops, so
// they may hold whatever lies there, as long as nothing outside the matrix is read. Whole
// k-tiles (inside K, every granule inside the matrix's bytes) load every granule as it is;
// the others load only granules that hold elements before K, each checked against the
// matrix's bytes, and zero the chunk's elements past K.
template <class C, class Tile, bool K_ROWS>
struct WgmmaShiftFill {
  static constexpr int kRowStep = C::kProducerThreads / 8;
  static constexpr int kBlocks = Tile::kCols / kWgmmaRowCols, kPerBlock = Tile::kRows / kRowStep;
  static constexpr int kChunks = kBlocks * kPerBlock;
  static_assert(Tile::kRows % kRowStep == 0 && kRowStep % Tile::kRowPeriod == 0, "row steps are adds");
  BANKOPS_HD static constexpr int row_of(int e) { return e % kPerBlock * kRowStep; }
  BANKOPS_HD static constexpr int col_of(int e) { return e / kPerBlock * kWgmmaRowCols; }
  // Chunk e's tile offset in bytes from the thread's first: it sits r * 16 rows (a multiple of
  // the swizzle's 8-row period) and b 64-column blocks further, so the offset is a constant.
  BANKOPS_HD static constexpr int at(int e) { return Tile::offset(row_of(e), col_of(e)) * 2; }
  const char* gran;      // the granule under the thread's chunk 0 in k-tile 0
  int64_t s_row;         // elements between the operand's rows
  int64_t k_left;        // k left from chunk 0 (its row for K_ROWS, else its first column) in k-tile 0
  uintptr_t lo, hi;      // the matrix's bytes
  uint32_t dst;          // chunk 0 in stage 0
  int shift;             // bytes from a granule to its chunk (even, 0..14)
  int kt_first, kt_end;  // whole k-tiles: [kt_first, kt_end)

  // p: the operand at the tile's corner in k-tile 0, s_row apart; k: its extent along k.
  __device__ __forceinline__ WgmmaShiftFill(const uint16_t* p, int64_t s_row_, int64_t k, uintptr_t lo_,
                                            uintptr_t hi_, uint32_t tile)
      : s_row(s_row_), lo(lo_), hi(hi_) {
    const TileCoord first = wgmma_chunk<C, Tile>(threadIdx.x, 0);
    const uintptr_t chunk = addr_of(p + first.r * s_row + first.c);
    shift = static_cast<int>(chunk & 15);
    gran = reinterpret_cast<const char*>(chunk - shift);
    k_left = k - (K_ROWS ? first.r : first.c);
    dst = tile + Tile::offset(first.r, first.c) * 2;
    // A k-tile's granules run from its corner's to the one that holds its last row's end,
    // and k-tiles step by k_step() bytes, a multiple of 16: only the first can start before
    // the matrix, and the ones before fit end inside it.
    const uintptr_t corner = addr_of(p);
    const uintptr_t end0 = (addr_of(p + (Tile::kRows - 1) * s_row + Tile::kCols) + 15) & ~uintptr_t(15);
    kt_first = (corner & ~uintptr_t(15)) < lo ? 1 : 0;
    const int64_t fit = hi >= end0 ? static_cast<int64_t>((hi - end0) / k_step()) + 1 : 0;
    const int64_t inside_k = k / C::kBK;
    kt_end = static_cast<int>(fit < inside_k ? fit : inside_k);
  }
  __device__ __forceinline__ int64_t k_step() const { return K_ROWS ? C::kBK * s_row * 2 : C::kBK * 2; }
  __device__ __forceinline__ bool whole(int kt) const { return kt >= kt_first && kt < kt_end; }
  __device__ __forceinline__ const char* granule(int e, int kt) const {
    return gran + kt * k_step() + (row_of(e) * s_row + col_of(e)) * 2;
  }
  // Elements of chunk e in k-tile kt before K (8 or more: all; K_ROWS: all or none).
  __device__ __forceinline__ int64_t k_valid(int e, int kt) const {
    const int64_t left = k_left - int64_t(kt) * C::kBK - (K_ROWS ? row_of(e) : col_of(e));
    return K_ROWS ? (left > 0 ? kMmaChunk : 0) : left;
  }

  // Chunk e of k-tile kt into x (its granule) and nx (the next one, the last lane only). The
  // granule holds elements [-shift/2, 8 - shift/2) of the chunk, the next one 8 more.
  template <bool WHOLE>
  __device__ __forceinline__ void load(uint4& x, uint4& nx, int e, int kt) const {
    const char* p = granule(e, kt);
    const bool last = threadIdx.x % 8 == 7 && shift != 0;
    if constexpr (WHOLE) {
      x = ldg128(p);
      if (last) nx = ldg128(p + 16);
    } else {
      const int64_t n = k_valid(e, kt);
      x = 2 * n + shift > 0 ? ldg128_within(p, lo, hi) : uint4{0, 0, 0, 0};
      if (last) nx = 2 * (n - kMmaChunk) + shift > 0 ? ldg128_within(p + 16, lo, hi) : uint4{0, 0, 0, 0};
    }
  }
  // Pulls a whole k-tile's lines into L1 ahead of its loads (edge k-tiles are left alone).
  __device__ __forceinline__ void prefetch(int kt) const {
    if (!whole(kt)) return;
    const bool last = threadIdx.x % 8 == 7 && shift != 0;
#pragma unroll
    for (int e = 0; e < kChunks; ++e) {
      const char* p = granule(e, kt);
      asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p));
      if (last) asm volatile("prefetch.global.L1 [%0];\n" ::"l"(p + 16));
    }
  }
  // Chunk e of k-tile kt, cut out of x and the next lane's x (nx for the last lane), into the
  // stage at byte offset `stage`; not WHOLE: its elements past K are zeroed.
  template <bool WHOLE>
  __device__ __forceinline__ void store(const uint4& x, const uint4& nx, int e, int kt, uint32_t stage) const {
    uint4 y{__shfl_down_sync(~0u, x.x, 1, 8), __shfl_down_sync(~0u, x.y, 1, 8), __shfl_down_sync(~0u, x.z, 1, 8),
            __shfl_down_sync(~0u, x.w, 1, 8)};
    if (threadIdx.x % 8 == 7) y = nx;
    uint4 v = shift_bytes<2>(x, y, shift);
    if constexpr (!WHOLE) {
      const int64_t left = k_valid(e, kt);
      const int n = left <= 0 ? 0 : left >= kMmaChunk ? kMmaChunk : static_cast<int>(left);
      const auto keep = [n](int i) { return n >= 2 * i + 2 ? ~0u : n == 2 * i + 1 ? 0xffffu : 0u; };
      v = uint4{v.x & keep(0), v.y & keep(1), v.z & keep(2), v.w & keep(3)};
    }
    sts128(dst + stage + at(e), v);
  }
};

// The realigning producer's loop: a k-tile's chunks (A's, then B's: kJobs per thread) pass
// through kSlots register slots, each loaded kSlots cuts before its own: half a k-tile for
// WgmmaLarge's 24 chunks a thread (the loads of k-tile kt + 1's first half go out while kt's
// second half is cut), a whole one for two producer warpgroups' 8 (all of kt + 1's loads go
// out while kt is cut); either way before kt + 1's stage is free. k-tiles whose loads and
// cuts are all whole (both operands, kt and kt + 1) skip the checks. The cuts are
// generic-proxy stores that wgmma reads through the async proxy: each thread fences them
// before it arrives on the stage's full barrier.
template <class C, class FA, class FB, int kStageBytes>
__device__ __forceinline__ void realign_producer(const FA& fa, const FB& fb, int nk, uint32_t full0, uint32_t empty0) {
  constexpr int kStages = C::kStages, kJobs = FA::kChunks + FB::kChunks;
  constexpr int kSlots = kJobs > 8 ? kJobs / 2 : kJobs;
  static_assert(kJobs % kSlots == 0, "whole rounds of slots per k-tile");
  uint4 x[kSlots], nx[kSlots];
  const auto load = [&](auto whole, int j, int kt) {
    constexpr bool W = decltype(whole)::value;
    if (j < FA::kChunks) fa.template load<W>(x[j % kSlots], nx[j % kSlots], j, kt);
    else fb.template load<W>(x[j % kSlots], nx[j % kSlots], j - FA::kChunks, kt);
  };
  const auto tile = [&](auto whole, int kt, uint32_t stage, bool more) {
    constexpr bool W = decltype(whole)::value;
#pragma unroll
    for (int j = 0; j < kJobs; ++j) {
      if (j < FA::kChunks) fa.template store<W>(x[j % kSlots], nx[j % kSlots], j, kt, stage);
      else fb.template store<W>(x[j % kSlots], nx[j % kSlots], j - FA::kChunks, kt, stage);
      if (j + kSlots < kJobs) load(whole, j + kSlots, kt);
      else if (more) load(whole, j + kSlots - kJobs, kt + 1);
    }
  };
  const auto whole = [&](int kt) { return fa.whole(kt) && fb.whole(kt); };
  if (nk > 0) {
#pragma unroll
    for (int j = 0; j < kSlots; ++j) load(std::false_type{}, j, 0);
  }
  for (int kt = 0; kt < nk; ++kt) {
    const int s = kt % kStages;
    if (kt + 1 < nk) {
      fa.prefetch(kt + 1);
      fb.prefetch(kt + 1);
    }
    if (kt >= kStages) mbar_wait(empty0 + 8 * s, (kt / kStages - 1) & 1);
    const uint32_t stage = s * kStageBytes;
    const bool more = kt + 1 < nk;
    if (whole(kt) && (!more || whole(kt + 1))) tile(std::true_type{}, kt, stage, more);
    else tile(std::false_type{}, kt, stage, more);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    mbar_arrive(full0 + 8 * s);
  }
}

// One block tile per block: the producer warpgroups (the first kProducers) stream k-tiles
// into the stage ring; consumer warpgroup w multiplies rows 64 w.. of the block tile into
// float accumulators, then the consumers write the tile out.
//   full[s]:  completes when stage s has landed: TMA's bytes (one arrival that expects them),
//             or the realigning producers' stores (an arrival from each thread);
//   empty[s]: completes when every consumer warp is done reading stage s (a warp arrives once
//             its wgmma on the next k-tile is issued and the previous one has finished, so
//             one k-tile of tensor work is always queued).
template <class C, class T, bool KN, WgmmaLoad LOAD>
__global__ void __launch_bounds__(C::kThreads, 1)
    gemm_wgmma_kernel(const GemmArgs g, const bool out_vec, const __grid_constant__ CUtensorMap tma_a,
                      const __grid_constant__ CUtensorMap tma_b) {
#if defined(BANKOPS_WGMMA_BODY)
  using ATile = WgmmaATile<C>;
  using BTile = WgmmaBTile<C, KN>;
  using Smem = WgmmaSmem<C, KN>;
  using Frags = WgmmaFrags<C>;
  constexpr int kStages = C::kStages, kBK = C::kBK;
  // Registers: the launch gives each thread 65536 / threads in steps of 8 (168 for 384); the
  // realigning producer keeps 152 (its register slots), and the rest go to the consumers'
  // accumulators (128 a thread for 128 x 256). With 512 threads (two producers) everyone
  // keeps the launch's 128.
  constexpr int kLaunchRegs = 65536 / C::kThreads / 8 * 8;
  constexpr int kProducerRegs = kLaunchRegs < 152 ? kLaunchRegs : 152;
  constexpr int kConsumerRegs =
      (kLaunchRegs * C::kThreads - C::kProducerThreads * kProducerRegs) / (C::kThreads - C::kProducerThreads) / 8 * 8;
  static_assert(kConsumerRegs >= kLaunchRegs && kConsumerRegs <= 256, "setmaxnreg's range");
  __shared__ __align__(8) uint64_t bars[2 * kStages];
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023) & ~uint32_t(1023);
  const uint32_t full0 = smem_u32(bars), empty0 = full0 + 8 * kStages;
  if (threadIdx.x == 0) {
    // The maps are parameters, not the earlier kernel's output: fetch them while it runs.
    if constexpr (LOAD == WgmmaLoad::Tma) {
      tma_prefetch(tma_a);
      tma_prefetch(tma_b);
    }
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full0 + 8 * s, LOAD == WgmmaLoad::Tma ? 1 : C::kProducerThreads);
      mbar_init(empty0 + 8 * s, 4 * C::kConsumers);
    }
    mbar_init_fence();
  }
  pdl_launch_next();
  __syncthreads();
  pdl_wait_previous();

  const int64_t bz = blockIdx.z;
  const MmaTileIndex idx = mma_raster(blockIdx.x, blockIdx.y, gridDim.x, gridDim.y);
  const int64_t m0 = idx.tm * C::kBM, n0 = idx.tn * C::kBN;
  const int nk = static_cast<int>(ceil_div(g.k, kBK));
  const int wg = threadIdx.x / 128;

  if (wg < C::kProducers) {
    if constexpr (kProducerRegs < kLaunchRegs)
      asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if constexpr (LOAD == WgmmaLoad::Realign) {
      // The matrices' bytes (this batch's): nothing outside them is read.
      const uint16_t* am = static_cast<const uint16_t*>(g.a) + bz * g.a_sb;
      const uint16_t* bm = static_cast<const uint16_t*>(g.b) + bz * g.b_sb;
      const uintptr_t a_hi = addr_of(am + (g.m - 1) * g.a_sm + (g.k - 1) * g.a_sk + 1);
      const uintptr_t b_hi = addr_of(bm + (g.k - 1) * g.b_sk + (g.n - 1) * g.b_sn + 1);
      const WgmmaShiftFill<C, ATile, false> fa(am + m0 * g.a_sm, g.a_sm, g.k, addr_of(am), a_hi, base);
      const WgmmaShiftFill<C, BTile, KN> fb(bm + n0 * g.b_sn, KN ? g.b_sk : g.b_sn, g.k, addr_of(bm), b_hi,
                                            base + Smem::kA);
      realign_producer<C, decltype(fa), decltype(fb), Smem::kStage>(fa, fb, nk, full0, empty0);
    } else if (threadIdx.x == 0) {
      // A stage's boxes: A's, then B's (one per 64-column block as Bs[BK][BN], one as
      // Bs[BN][BK]). Coordinates past the operand's edges read as zeros. A batch stride of 0
      // (a broadcast operand) is a map of one batch.
      const int za = g.a_sb != 0 ? static_cast<int>(bz) : 0, zb = g.b_sb != 0 ? static_cast<int>(bz) : 0;
      const int tm = static_cast<int>(m0), tn = static_cast<int>(n0);
      for (int kt = 0; kt < nk; ++kt) {
        const int s = kt % kStages, k0 = kt * kBK;
        if (kt >= kStages) mbar_wait(empty0 + 8 * s, (kt / kStages - 1) & 1);
        const uint32_t stage = base + s * Smem::kStage, bar = full0 + 8 * s;
        mbar_expect_tx(bar, Smem::kStage);
        tma_load(stage, tma_a, k0, tm, za, bar);
        if constexpr (KN) {
#pragma unroll
          for (int j = 0; j < C::kBN / kWgmmaRowCols; ++j)
            tma_load(stage + Smem::kA + BTile::offset(0, j * kWgmmaRowCols) * 2, tma_b, tn + j * kWgmmaRowCols, k0, zb,
                     bar);
        } else {
          tma_load(stage + Smem::kA, tma_b, k0, tn, zb, bar);
        }
      }
    }
    return;
  }

  if constexpr (kConsumerRegs > kLaunchRegs)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
  const int ct = threadIdx.x - C::kProducerThreads;  // consumer thread
  float acc[1][C::kBN / 8][4] = {};
  float(&d)[C::kAcc] = reinterpret_cast<float(&)[C::kAcc]>(acc);
  constexpr uint64_t kDescA = wgmma_desc_fields<ATile, true>(), kDescB = wgmma_desc_fields<BTile, !KN>();
  const int a_row = (wg - C::kProducers) * 64;
  for (int kt = 0; kt < nk; ++kt) {
    const int s = kt % kStages;
    const uint32_t stage = base + s * Smem::kStage;
    mbar_wait(full0 + 8 * s, (kt / kStages) & 1);
    wgmma_fence();
#pragma unroll
    for (int k = 0; k < C::kSteps; ++k) {
      const uint64_t da = wgmma_desc(kDescA, stage + wgmma_a_at<ATile>(a_row, k) * 2);
      const uint64_t db = wgmma_desc(kDescB, stage + Smem::kA + wgmma_b_at<BTile, KN>(k) * 2);
      wgmma_mma<T, C::kBN, KN ? 1 : 0>(d, da, db);
    }
    wgmma_commit();
    wgmma_wait<1>();
    if (kt > 0 && ct % 32 == 0) mbar_arrive(empty0 + 8 * ((kt - 1) % kStages));
  }
  wgmma_wait<0>();
  fence_acc(d);
  consumer_sync<Frags::kThreads>();  // every consumer is done reading the ring
  uint16_t* smem = reinterpret_cast<uint16_t*>(smem_raw + (base - smem_u32(smem_raw)));
  uint16_t* c = static_cast<uint16_t*>(g.c) + bz * g.m * g.n;
  mma_epilogue<Frags, WgmmaCTile<C>, T>(smem, acc, ct, c, g, m0, n0, out_vec, [] { consumer_sync<Frags::kThreads>(); });
#endif
}

// The operands' tensor maps: A as (k, m, batch), B as (n, k, batch) when KN, else
// (k, n, batch); boxes of one k-tile of the block tile's rows (of a 64-column block of B when
// KN). A batch stride of 0 maps one batch.
template <class C, bool KN>
cudaError_t tma_maps(const GemmArgs& g, CUtensorMap& a, CUtensorMap& b) {
  const int64_t a_batch = g.a_sb != 0 ? g.batch : 1, b_batch = g.b_sb != 0 ? g.batch : 1;
  const cudaError_t err = tma_map_16bit(&a, g.a, {g.k, g.m, a_batch}, {g.a_sm, g.a_sb}, C::kBM);
  if (err != cudaSuccess) return err;
  if (KN) return tma_map_16bit(&b, g.b, {g.n, g.k, b_batch}, {g.b_sk, g.b_sb}, C::kBK);
  return tma_map_16bit(&b, g.b, {g.k, g.n, b_batch}, {g.b_sn, g.b_sb}, C::kBN);
}

template <class C, class T, bool KN, WgmmaLoad LOAD>
cudaError_t run(const GemmArgs& g, bool out_vec, cudaStream_t stream) {
  constexpr auto kernel = gemm_wgmma_kernel<C, T, KN, LOAD>;
  constexpr int kSmem = WgmmaSmem<C, KN>::kBytes;
  static_assert(kSmem <= 227 * 1024, "the stage ring exceeds a block's shared memory");
  cudaError_t err = raise_smem_once<kernel>(kSmem);
  if (err != cudaSuccess) return err;
  CUtensorMap map_a{}, map_b{};  // unused by the realigning producer
  if constexpr (LOAD == WgmmaLoad::Tma) {
    err = tma_maps<C, KN>(g, map_a, map_b);
    if (err != cudaSuccess) return err;
  }
  const dim3 grid(static_cast<unsigned>(ceil_div(g.n, C::kBN)), static_cast<unsigned>(ceil_div(g.m, C::kBM)),
                  static_cast<unsigned>(g.batch));
  return launch_pdl(kernel, grid, dim3(C::kThreads), kSmem, stream, g, out_vec, map_a, map_b);
}

// The configuration's kernels for one dtype: the realigning producer with B as Bs[BK][BN]
// only, and on WgmmaLarge only (wgmma_shape).
template <class C, class T>
cudaError_t run_fill(const GemmArgs& g, bool b_kn, bool realign, bool out_vec, cudaStream_t stream) {
  if (realign) {
    if constexpr (std::is_same_v<C, WgmmaLarge> || std::is_same_v<C, WgmmaMediumRealign>) {
      if (b_kn) return run<C, T, true, WgmmaLoad::Realign>(g, out_vec, stream);
    }
    return cudaErrorNotSupported;
  }
  if constexpr (C::kProducers > 1) {
    return cudaErrorNotSupported;  // a realigning configuration: TMA takes one thread
  } else {
    return b_kn ? run<C, T, true, WgmmaLoad::Tma>(g, out_vec, stream)
                : run<C, T, false, WgmmaLoad::Tma>(g, out_vec, stream);
  }
}

template <class C>
cudaError_t run_dtype(DType dtype, const GemmArgs& g, bool b_kn, bool realign, bool out_vec, cudaStream_t stream) {
  return dtype == DType::F16 ? run_fill<C, __half>(g, b_kn, realign, out_vec, stream)
                             : run_fill<C, __nv_bfloat16>(g, b_kn, realign, out_vec, stream);
}

}  // namespace

bool gemm_wgmma_built() { return true; }

cudaError_t launch_gemm_wgmma(DType dtype, const GemmArgs& g, WgmmaShape shape, bool b_kn, bool realign,
                              cudaStream_t stream) {
  const bool out_vec = mma_aligned16(g.c) && g.n % kMmaChunk == 0;
  if (shape == WgmmaShape::Medium && realign)
    return run_dtype<WgmmaMediumRealign>(dtype, g, b_kn, realign, out_vec, stream);
  if (shape == WgmmaShape::Medium) return run_dtype<WgmmaMedium>(dtype, g, b_kn, realign, out_vec, stream);
  if (shape == WgmmaShape::Narrow) return run_dtype<WgmmaNarrow>(dtype, g, b_kn, realign, out_vec, stream);
  if (shape == WgmmaShape::Large) return run_dtype<WgmmaLarge>(dtype, g, b_kn, realign, out_vec, stream);
  return cudaErrorNotSupported;
}

#else

}  // namespace

bool gemm_wgmma_built() { return false; }

cudaError_t launch_gemm_wgmma(DType, const GemmArgs&, WgmmaShape, bool, bool, cudaStream_t) {
  return cudaErrorNotSupported;
}

#endif

}  // namespace bankops
