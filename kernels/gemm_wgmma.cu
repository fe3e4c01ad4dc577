#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "async_copy.cuh"
#include "gemm_wgmma.h"
#include "launch.h"
#include "mma_epilogue.cuh"
#include "pdl.cuh"
#include "shift.cuh"

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

// Clusters (the split kernel). The address in block `rank` of the cluster of this block's
// shared address `addr`.
__device__ __forceinline__ uint32_t peer_addr(uint32_t addr, uint32_t rank) {
  uint32_t out;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(out) : "r"(addr), "r"(rank));
  return out;
}
__device__ __forceinline__ void st_peer(uint32_t addr, float x, float y, float z, float w) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "f"(x), "f"(y), "f"(z), "f"(w)
               : "memory");
}
// The cluster barrier: every thread of the cluster arrives (releasing its writes) and then
// waits (acquiring its peers'), phase after phase.
__device__ __forceinline__ void cluster_arrive() { asm volatile("barrier.cluster.arrive;\n" ::: "memory"); }
__device__ __forceinline__ void cluster_wait() { asm volatile("barrier.cluster.wait;\n" ::: "memory"); }

// One arrival on `bar` once every cp.async this thread issued so far has landed (counted in
// the barrier's expected arrivals: .noinc).
__device__ __forceinline__ void cp_async_arrive(uint32_t bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// Consumer threads only (the producer may have left): named barrier ID.
template <int THREADS, int ID = 1>
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync %0, %1;\n" ::"n"(ID), "n"(THREADS) : "memory");
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
  else if constexpr (kHalf)
    BANKOPS_WGMMA_ASM(128, "f16", BANKOPS_R0_63, 64, 65, 66, 67, BANKOPS_F64(0));
  else
    BANKOPS_WGMMA_ASM(128, "bf16", BANKOPS_R0_63, 64, 65, 66, 67, BANKOPS_F64(0));
#undef BANKOPS_R256
}
#undef BANKOPS_WGMMA_ASM
#undef BANKOPS_R64_127
#undef BANKOPS_R0_63
#undef BANKOPS_F64
#undef BANKOPS_F16
#undef BANKOPS_F4

// The producer's copies of one operand tile: chunk (b, r) of thread t is its wgmma_chunk
// moved r * 16 rows (a multiple of the swizzle's 8-row period) and b 64-column blocks, so its
// tile offset is the thread's first plus a constant. `p`: the operand at the tile's corner; rows
// and cols what is left of it from there. Whole tiles take each chunk's source offset from
// `off` (computed once: the producer's loop is the kernel's critical path, so its copies
// carry no address arithmetic beyond one add); edge tiles zero-fill the chunks past the rows
// or the columns (cp.async's source size), reading nothing outside the operand.
template <class C, class Tile>
struct WgmmaFill {
  static constexpr int kRowStep = C::kProducerThreads / 8;
  static constexpr int kBlocks = Tile::kCols / kWgmmaRowCols, kPerBlock = Tile::kRows / kRowStep;
  static constexpr int kChunks = kBlocks * kPerBlock;
  static_assert(Tile::kRows % kRowStep == 0 && kRowStep % Tile::kRowPeriod == 0, "row steps are adds");
  BANKOPS_HD static constexpr int at(int e) {
    return Tile::offset(e % kPerBlock * kRowStep, e / kPerBlock * kWgmmaRowCols) * 2;
  }
  uint32_t dst;          // the thread's first chunk in stage 0
  TileCoord first;       // its tile coordinates
  int64_t off[kChunks];  // chunk e's source, in bytes from the tile's corner
  __device__ __forceinline__ WgmmaFill(uint32_t tile, int64_t s_row) {
    first = wgmma_chunk<C, Tile>(threadIdx.x, 0);
    dst = tile + Tile::offset(first.r, first.c) * 2;
#pragma unroll
    for (int e = 0; e < kChunks; ++e)
      off[e] = ((first.r + e % kPerBlock * kRowStep) * s_row + first.c + e / kPerBlock * kWgmmaRowCols) * 2;
  }
  __device__ __forceinline__ void whole(uint32_t stage, const uint16_t* p) const {
#pragma unroll
    for (int e = 0; e < kChunks; ++e) cp_async16(dst + stage + at(e), reinterpret_cast<const char*>(p) + off[e], 16);
  }
  __device__ __forceinline__ void edge(uint32_t stage, const uint16_t* p, int64_t rows, int64_t cols) const {
#pragma unroll
    for (int e = 0; e < kChunks; ++e) {
      const int64_t left = cols - (first.c + e / kPerBlock * kWgmmaRowCols);
      const bool in = first.r + e % kPerBlock * kRowStep < rows && left > 0;
      const void* src = in ? static_cast<const void*>(reinterpret_cast<const char*>(p) + off[e]) : p;
      cp_async16(dst + stage + at(e), src, in ? static_cast<int>(left < kMmaChunk ? left : kMmaChunk) * 2 : 0);
    }
  }
};

// 16 global bytes at a 16-byte aligned address; and the part of them inside [lo, hi), zeros
// elsewhere (the granules at a matrix's first or last bytes, read element by element).
__device__ __forceinline__ uint4 ldg128(const char* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ uint4 ldg128_within(const char* p, uintptr_t lo, uintptr_t hi) {
  if (addr_of(p) >= lo && addr_of(p) + 16 <= hi) return ldg128(p);
  uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
  for (int q = 0; q < kMmaChunk; ++q) {
    const uintptr_t at = addr_of(p) + 2 * q;
    if (at >= lo && at < hi) w[q / 2] |= uint32_t(__ldg(reinterpret_cast<const uint16_t*>(at))) << (q % 2 * 16);
  }
  return uint4{w[0], w[1], w[2], w[3]};
}

// The realigning producer's view of one operand tile (rows at any 2-byte offset, unit-stride
// columns): chunk e of the thread (wgmma_chunk's map, as WgmmaFill) in k-tile kt. The lane
// loads the aligned 16 bytes (granule) under its chunk's first byte, takes the next granule
// from the lane to its right (the 8 lanes of a row group cover one 128-byte row segment; the
// group's last lane loads the granule past it) and cuts its chunk out of the two
// (shift_bytes). The cut, `shift`, is one per thread: its chunks sit 16 rows (32 row
// strides of bytes), 64 columns (128 bytes) or whole k-tiles (64 columns, or 64 rows)
// apart, all multiples of 16 bytes. K_ROWS: k runs down the tile's rows (B as Bs[BK][BN]).
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
    sts128(dst + stage + WgmmaFill<C, Tile>::at(e), v);
  }
};

// The realigning producer's loop: a k-tile's chunks (A's, then B's: kJobs per thread) pass
// through kJobs / 2 register slots, each loaded half a k-tile of cuts before its own (the
// loads of k-tile kt + 1's first half go out while kt's second half is cut, before kt + 1's
// stage is free). k-tiles whose loads and cuts are all whole (both operands, kt and kt + 1)
// skip the checks. The cuts are generic-proxy stores that wgmma reads through the async
// proxy: each thread fences them before it arrives on the stage's full barrier.
template <class C, class FA, class FB, int kStageBytes>
__device__ __forceinline__ void realign_producer(const FA& fa, const FB& fb, int nk, uint32_t full0, uint32_t empty0) {
  constexpr int kStages = C::kStages, kJobs = FA::kChunks + FB::kChunks, kSlots = kJobs / 2;
  static_assert(kJobs % 2 == 0, "two halves per k-tile");
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
      if (j < kSlots) load(whole, j + kSlots, kt);
      else if (more) load(whole, j - kSlots, kt + 1);
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

// One block tile per block (SPLIT 1): a producer warpgroup (warps 0-3) streams k-tiles into
// the stage ring; consumer warpgroup w (1, 2) multiplies rows (w - 1) * 64.. of the block tile
// into float accumulators, then the consumers write the tile out.
//   full[s]:  completes when the producer's 128 threads' copies into stage s have landed;
//   empty[s]: completes when every consumer warp is done reading stage s (a warp arrives once
//             its wgmma on the next k-tile is issued and the previous one has finished, so
//             one k-tile of tensor work is always queued).
// Split-K (SPLIT blocks a tile, a cluster along x): block `rank` of the cluster runs the
// rank-th share of the k-tiles; then consumer w's rows are finished by block w - 1: the other
// blocks' consumers w store their accumulators into its shared memory (st.shared::cluster),
// and after a cluster barrier it adds them to its own and writes those 64 rows. Every thread
// of the cluster takes part in its two barriers (started; sums sent), so no block leaves
// while a peer may still write into it.
template <class C, class T, bool KN, bool REALIGN, int SPLIT>
__global__ void __launch_bounds__(C::kThreads, 1) gemm_wgmma_kernel(const GemmArgs g, const bool out_vec) {
#if defined(BANKOPS_WGMMA_BODY)
  static_assert(SPLIT == 1 || (SPLIT == C::kConsumers && !REALIGN), "a block per consumer's rows; cp.async fill");
  using ATile = WgmmaATile<C>;
  using BTile = WgmmaBTile<C, KN>;
  using Smem = WgmmaSmem<C, KN, SPLIT>;
  using Frags = WgmmaFrags<C>;
  constexpr int kStages = C::kStages, kBK = C::kBK;
  // Registers: the launch gives each thread 65536 / threads in steps of 8 (168 for 384); the
  // producer, which keeps two per chunk for its source offsets, hands the rest to the
  // consumers' 128 accumulators.
  constexpr int kLaunchRegs = 65536 / C::kThreads / 8 * 8, kProducerRegs = 152;
  constexpr int kConsumerRegs =
      (kLaunchRegs * C::kThreads - C::kProducerThreads * kProducerRegs) / (C::kThreads - C::kProducerThreads) / 8 * 8;
  static_assert(kConsumerRegs >= kLaunchRegs && kConsumerRegs <= 256, "setmaxnreg's range");
  __shared__ __align__(8) uint64_t bars[2 * kStages];
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023) & ~uint32_t(1023);
  const uint32_t full0 = smem_u32(bars), empty0 = full0 + 8 * kStages;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full0 + 8 * s, C::kProducerThreads);
      mbar_init(empty0 + 8 * s, 4 * C::kConsumers);
    }
  }
  pdl_launch_next();
  __syncthreads();
  if constexpr (SPLIT > 1) cluster_arrive();
  pdl_wait_previous();

  // The cluster is SPLIT consecutive blocks along x (cluster rank blockIdx.x % SPLIT), one tile.
  const int rank = blockIdx.x % SPLIT;
  const int64_t bz = blockIdx.z;
  const MmaTileIndex idx = mma_raster(blockIdx.x / SPLIT, blockIdx.y, gridDim.x / SPLIT, gridDim.y);
  const int64_t m0 = idx.tm * C::kBM, n0 = idx.tn * C::kBN;
  const uint16_t* a = static_cast<const uint16_t*>(g.a) + bz * g.a_sb + m0 * g.a_sm;
  const uint16_t* b = static_cast<const uint16_t*>(g.b) + bz * g.b_sb + n0 * g.b_sn;
  // This block's k-tiles: [kt0, kt0 + nk); its stages and parities count from its first.
  const int nk_all = static_cast<int>(ceil_div(g.k, kBK));
  const int kt0 = nk_all * rank / SPLIT, nk = nk_all * (rank + 1) / SPLIT - kt0;
  const int wg = threadIdx.x / 128;

  if (wg == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kProducerRegs));
    if constexpr (REALIGN) {
      // The matrices' bytes (this batch's): nothing outside them is read.
      const uint16_t* am = static_cast<const uint16_t*>(g.a) + bz * g.a_sb;
      const uint16_t* bm = static_cast<const uint16_t*>(g.b) + bz * g.b_sb;
      const uintptr_t a_hi = addr_of(am + (g.m - 1) * g.a_sm + (g.k - 1) * g.a_sk + 1);
      const uintptr_t b_hi = addr_of(bm + (g.k - 1) * g.b_sk + (g.n - 1) * g.b_sn + 1);
      const WgmmaShiftFill<C, ATile, false> fa(a, g.a_sm, g.k, addr_of(am), a_hi, base);
      const WgmmaShiftFill<C, BTile, KN> fb(b, KN ? g.b_sk : g.b_sn, g.k, addr_of(bm), b_hi, base + Smem::kA);
      realign_producer<C, decltype(fa), decltype(fb), Smem::kStage>(fa, fb, nk, full0, empty0);
      return;
    }
    const WgmmaFill<C, ATile> fa(base, g.a_sm);
    const WgmmaFill<C, BTile> fb(base + Smem::kA, KN ? g.b_sk : g.b_sn);
    // k-tiles [0, nk_whole) lie inside K; with the m (n) edge inside too, a tile is whole.
    const int nk_whole = static_cast<int>(g.k / kBK);
    const bool inner = C::kBM <= g.m - m0 && C::kBN <= g.n - n0;
    const int64_t b_kstep = KN ? kBK * g.b_sk : kBK;
    for (int i = 0; i < nk; ++i) {
      const int s = i % kStages, kt = kt0 + i;
      if (i >= kStages) mbar_wait(empty0 + 8 * s, (i / kStages - 1) & 1);
      const uint32_t stage = s * Smem::kStage;
      const int64_t k0 = int64_t(kt) * kBK;
      if (inner && kt < nk_whole) {
        fa.whole(stage, a + k0);
        fb.whole(stage, b + kt * b_kstep);
      } else {
        fa.edge(stage, a + k0, g.m - m0, g.k - k0);
        if (KN) fb.edge(stage, b + kt * b_kstep, g.k - k0, g.n - n0);
        else fb.edge(stage, b + kt * b_kstep, g.n - n0, g.k - k0);
      }
      cp_async_arrive(full0 + 8 * s);
    }
    cp_async_wait<0>();
    if constexpr (SPLIT > 1) {  // the consumers' two cluster barriers
      cluster_wait();
      cluster_arrive();
      cluster_wait();
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs));
  const int ct = threadIdx.x - C::kProducerThreads;  // consumer thread
  float acc[1][C::kBN / 8][4] = {};
  float(&d)[C::kAcc] = reinterpret_cast<float(&)[C::kAcc]>(acc);
  constexpr uint64_t kDescA = wgmma_desc_fields<ATile, true>(), kDescB = wgmma_desc_fields<BTile, !KN>();
  const int a_row = (wg - 1) * 64;
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
  if constexpr (SPLIT == 1) {
    mma_epilogue<Frags, WgmmaCTile<C>, T>(smem, acc, ct, c, g, m0, n0, out_vec, [] { consumer_sync<Frags::kThreads>(); });
  } else {
    // Thread t of consumer `half` keeps its float4 i at sums + 2048 i (WgmmaSmem).
    const int half = wg - 1, t = ct % 128;
    const uint32_t sums = base + Smem::kRing + 16 * t;
    cluster_wait();  // every block of the cluster has started: its shared memory is there
    if (half != rank) {
      const uint32_t peer = peer_addr(sums, half);
#pragma unroll
      for (int i = 0; i < C::kAcc / 4; ++i) st_peer(peer + 2048 * i, d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]);
    }
    cluster_arrive();
    cluster_wait();  // the peers' sums are in
    if (half != rank) return;
#pragma unroll
    for (int i = 0; i < C::kAcc / 4; ++i) {
      const uint4 v = lds128(sums + 2048 * i);
      d[4 * i] += __uint_as_float(v.x);
      d[4 * i + 1] += __uint_as_float(v.y);
      d[4 * i + 2] += __uint_as_float(v.z);
      d[4 * i + 3] += __uint_as_float(v.w);
    }
    using Rows = WgmmaRows<C>;
    mma_epilogue<WgmmaFrags<Rows>, WgmmaCTile<Rows>, T>(smem, acc, t, c, g, m0 + 64 * half, n0, out_vec,
                                                        [] { consumer_sync<128, 2>(); });
  }
#endif
}

template <class C, class T, bool KN, bool REALIGN, int SPLIT>
cudaError_t run(const GemmArgs& g, bool out_vec, cudaStream_t stream) {
  constexpr auto kernel = gemm_wgmma_kernel<C, T, KN, REALIGN, SPLIT>;
  constexpr int kSmem = WgmmaSmem<C, KN, SPLIT>::kBytes;
  static_assert(kSmem <= 227 * 1024, "the stage ring exceeds a block's shared memory");
  const cudaError_t err = raise_smem_once<kernel>(kSmem);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(SPLIT * ceil_div(g.n, C::kBN)), static_cast<unsigned>(ceil_div(g.m, C::kBM)),
                  static_cast<unsigned>(g.batch));
  return launch_pdl(kernel, grid, dim3(C::kThreads), kSmem, stream, SPLIT, g, out_vec);
}

// The configuration's kernels for one dtype: the realigning producer with B as Bs[BK][BN]
// only, and on WgmmaLarge only (wgmma_shape).
template <class C, class T, int SPLIT>
cudaError_t run_fill(const GemmArgs& g, bool b_kn, bool realign, bool out_vec, cudaStream_t stream) {
  if (realign) {
    if constexpr (std::is_same_v<C, WgmmaLarge> && SPLIT == 1) {
      if (b_kn) return run<C, T, true, true, 1>(g, out_vec, stream);
    }
    return cudaErrorNotSupported;
  }
  return b_kn ? run<C, T, true, false, SPLIT>(g, out_vec, stream) : run<C, T, false, false, SPLIT>(g, out_vec, stream);
}

template <class C, int SPLIT = 1>
cudaError_t run_dtype(DType dtype, const GemmArgs& g, bool b_kn, bool realign, bool out_vec, cudaStream_t stream) {
  return dtype == DType::F16 ? run_fill<C, __half, SPLIT>(g, b_kn, realign, out_vec, stream)
                             : run_fill<C, __nv_bfloat16, SPLIT>(g, b_kn, realign, out_vec, stream);
}

}  // namespace

bool gemm_wgmma_built() { return true; }

cudaError_t launch_gemm_wgmma(DType dtype, const GemmArgs& g, WgmmaShape shape, bool b_kn, bool realign,
                              cudaStream_t stream) {
  const bool out_vec = reinterpret_cast<uintptr_t>(g.c) % 16 == 0 && g.n % kMmaChunk == 0;
  if (shape == WgmmaShape::Medium) return run_dtype<WgmmaMedium>(dtype, g, b_kn, realign, out_vec, stream);
  if (shape == WgmmaShape::MediumSplit)
    return run_dtype<WgmmaMedium, kWgmmaSplit>(dtype, g, b_kn, realign, out_vec, stream);
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
