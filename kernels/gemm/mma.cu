// The mma.sync gemm kernel (tiling in mma.h) and its launcher, which runs what the route says.
// A block walks its block tiles; each tile's main loop is one of three schedules, one per
// fill (MmaMainLoop), and all end in the shared epilogue (mma_epilogue.cuh).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "launch.h"
#include "mma_epilogue.cuh"
#include "mma_fill.cuh"
#include "mma_frag.cuh"

namespace bankops {
namespace {

// f(Q) for Q = 0..3 as compile-time constants: the four quarters of a k-tile's mma work.
template <class F>
__device__ __forceinline__ void for_quarters(F&& f) {
  f(std::integral_constant<int, 0>{});
  f(std::integral_constant<int, 1>{});
  f(std::integral_constant<int, 2>{});
  f(std::integral_constant<int, 3>{});
}

struct MmaFlags {
  bool a_along, b_along;
  bool out_vec;  // C rows 16-byte aligned: whole-chunk stores
};

// One block tile as the main loops see it: the shared memory, A and B with the tile's corner
// folded in (corners move along k: A's columns, and B's rows (KN) or columns), the batch's
// matrices (the realigning fill's bounds) and the k-tile count.
template <Layout L, class C, bool KN>
struct MmaBlock {
  using ATile = MmaATile<L, C>;  // (BM, BK) halves
  using BTile = MmaBTile<L, C, KN>;  // (BK, BN) or (BN, BK) halves
  static constexpr int kStage = ATile::kSize + BTile::kSize;  // halves
  uint16_t* smem;
  uint32_t smem_base;
  const LdsmOffsets<L, C, KN>& lo;
  Operand oa, ob;
  const uint16_t *a, *b;
  const GemmArgs& g;
  int nk;
  const MmaFlags& f;
  // B's tile corner at k0: (k0, 0) as Bs[BK][BN], else (0, k0).
  __device__ __forceinline__ static void b_corner(int64_t k0, int64_t& r, int64_t& c) {
    r = KN ? k0 : 0;
    c = KN ? 0 : k0;
  }
};

template <class C>
using MmaAcc = float[C::kFragM][C::kFragN][4];

template <class T, Layout L, class C, bool KN, MmaFill FILL>
struct MmaMainLoop;

// cp.async: kStages - 1 tiles in flight; whole tiles (all but the edges) take WholeFill. In
// CUTLASS's multistage order: the wait and barrier for tile kt + 1 come before the last k16
// step of tile kt, so that step's mma covers the first ldmatrix of tile kt + 1, and the
// barrier's stall overlaps tensor work already issued.
template <class T, Layout L, class C, bool KN>
struct MmaMainLoop<T, L, C, KN, MmaFill::Async> {
  __device__ __forceinline__ static void run(MmaAcc<C>& acc, const MmaBlock<L, C, KN>& k) {
    using ATile = typename MmaBlock<L, C, KN>::ATile;
    using BTile = typename MmaBlock<L, C, KN>::BTile;
    constexpr int kStages = C::kStages, kBK = C::kBK, kStage = MmaBlock<L, C, KN>::kStage, kSteps = C::kSteps;
    const uint32_t smem_base = k.smem_base;
    const int nk = k.nk;
    // k-tiles [0, nk_whole) lie inside K; with the m (n) edge inside too, a tile is whole.
    const int nk_whole = static_cast<int>(k.g.k / kBK);
    const bool a_inner = C::kBM <= k.oa.rows, b_inner = KN ? C::kBN <= k.ob.cols : C::kBN <= k.ob.rows;
    WholeFill<C, ATile> fa(smem_base, k.oa);
    WholeFill<C, BTile> fb(smem_base + ATile::kSize * 2, k.ob);
    const int64_t b_kstep = KN ? kBK * k.ob.s_row : kBK;  // whole tiles have contiguous rows
    const auto fill = [&](int kt, int slot) {
      const uint32_t stage = slot * kStage * 2;
      if (a_inner && kt < nk_whole) fa(stage);
      else fill_async<C, ATile>(smem_base + stage, k.oa, 0, int64_t(kt) * kBK);
      if (b_inner && kt < nk_whole) {
        fb(stage);
      } else {
        int64_t br, bc;
        k.b_corner(int64_t(kt) * kBK, br, bc);
        fill_async<C, BTile>(smem_base + stage + ATile::kSize * 2, k.ob, br, bc);
      }
      fa.src += kBK;
      fb.src += b_kstep;
    };
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < nk) fill(s, s);
      cp_async_commit();
    }
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile 0 landed
    MmaFrags<C> fr[2];
    load_frags<L, C, KN>(fr[0], k.lo, smem_base, smem_base + ATile::kSize * 2, 0);
    int st_read = 0, st_write = kStages - 1;  // ring slots of tile kt and of tile kt + S - 1
    for (int kt = 0; kt < nk; ++kt) {
      const uint32_t a_base = smem_base + st_read * kStage * 2;
      const uint32_t b_base = a_base + ATile::kSize * 2;
#pragma unroll
      for (int s = 0; s < kSteps; ++s) {
        if (s == kSteps - 1) {
          cp_async_wait<kStages - 2>();
          __syncthreads();  // tile kt + 1 landed; every warp is past its reads of tile kt - 1
          st_read = st_read == kStages - 1 ? 0 : st_read + 1;
          // Past the last tile this reads a stale stage: in bounds, and never used.
          const uint32_t a_next = smem_base + st_read * kStage * 2;
          load_frags<L, C, KN>(fr[(s + 1) % 2], k.lo, a_next, a_next + ATile::kSize * 2, 0);
        } else {
          load_frags<L, C, KN>(fr[(s + 1) % 2], k.lo, a_base, b_base, s + 1);
        }
        if (s == 0) {
          // Stage (kt - 1) % S: its last reads came before the previous barrier.
          if (kt + kStages - 1 < nk) fill(kt + kStages - 1, st_write);
          cp_async_commit();
          st_write = st_write == kStages - 1 ? 0 : st_write + 1;
        }
        mma_step<T, C>(acc, fr[s % 2]);
      }
    }
    cp_async_wait<0>();
  }
};

// Realign: raw k-tile x + R - 1 is copied at the top of iteration x (its raw stage was last
// read by the realign of x - 1, before the barrier of x - 1), and k-tile x + 1 is realigned
// into the other tile buffer during the mma of x, a quarter per k16 half-step: one barrier per
// k-tile, and every copy has R - 2 k-tiles of mma work to land.
template <class T, Layout L, class C, bool KN>
struct MmaMainLoop<T, L, C, KN, MmaFill::Realign> {
  __device__ __forceinline__ static void run(MmaAcc<C>& acc, const MmaBlock<L, C, KN>& k) {
    using ATile = typename MmaBlock<L, C, KN>::ATile;
    using BTile = typename MmaBlock<L, C, KN>::BTile;
    using FA = StagedFill<C, ATile, false>;
    using FB = StagedFill<C, BTile, KN>;
    constexpr int kRaw = kMmaRawStages<L, C, KN>;
    constexpr uint32_t kBuf = MmaBlock<L, C, KN>::kStage * 2, kRawStage = FA::Raw::kBytes + FB::Raw::kBytes;
    static_assert(kRaw >= 3 && FA::kChunks == 4 && FB::kChunks == 4 && C::kSteps == 2,
                  "one tile chunk of each operand per quarter k-tile");
    const GemmArgs& g = k.g;
    const uint32_t smem_base = k.smem_base, raw_base = smem_base + 2 * kBuf;
    const int nk = k.nk;
    const uintptr_t a_lo = addr_of(k.a), a_hi = addr_of(k.a + (g.m - 1) * g.a_sm + (g.k - 1) * g.a_sk + 1);
    const uintptr_t b_lo = addr_of(k.b), b_hi = addr_of(k.b + (g.k - 1) * g.b_sk + (g.n - 1) * g.b_sn + 1);
    const FA fa(k.oa, a_lo, a_hi, smem_base, raw_base);
    const FB fb(k.ob, b_lo, b_hi, smem_base + ATile::kSize * 2, raw_base + FA::Raw::kBytes);
    const auto fill = [&](int x) {
      const uint32_t stage = (x % kRaw) * kRawStage;
      fa.fill(x, stage);
      fb.fill(x, stage);
    };
    const auto realign = [&](int x, int e) {
      const uint32_t stage = (x % kRaw) * kRawStage, buf = (x % 2) * kBuf;
      fa.realign(stage, buf, e);
      fb.realign(stage, buf, e);
    };
    for (int x = 0; x < kRaw - 1; ++x) {
      if (x < nk) fill(x);
      cp_async_commit();
    }
    cp_async_wait<kRaw - 2>();
    __syncthreads();  // raw k-tile 0 landed
    if (nk > 0) {
#pragma unroll
      for (int e = 0; e < 4; ++e) realign(0, e);
    }
    for (int kt = 0; kt < nk; ++kt) {
      cp_async_wait<kRaw - 3>();
      __syncthreads();  // tile kt realigned, raw k-tile kt + 1 landed; tile buffer (kt + 1) % 2 is free
      if (kt + kRaw - 1 < nk) fill(kt + kRaw - 1);
      cp_async_commit();
      const bool next = kt + 1 < nk;
      const uint32_t a_base = smem_base + (kt % 2) * kBuf;
      const uint32_t b_base = a_base + ATile::kSize * 2;
      uint32_t bf[C::kFragN / 2][4];
      for_quarters([&](auto q) {
        constexpr int Q = decltype(q)::value;
        if (Q % 2 == 0) load_b_frags<L, C, KN>(bf, k.lo, b_base, Q / 2);
        if (next) realign(kt + 1, Q);
        mma_half<T, L, C, KN, Q % 2>(acc, bf, k.lo, a_base, Q / 2);
      });
    }
    cp_async_wait<0>();
  }
};

// Registers: four 8-element groups of each operand per k-tile; group q of A and of B is in
// flight during quarter q of the previous tile's mma work (k16 step q / 2, half q % 2).
template <class T, Layout L, class C, bool KN>
struct MmaMainLoop<T, L, C, KN, MmaFill::Registers> {
  __device__ __forceinline__ static void run(MmaAcc<C>& acc, const MmaBlock<L, C, KN>& k) {
    using ATile = typename MmaBlock<L, C, KN>::ATile;
    using BTile = typename MmaBlock<L, C, KN>::BTile;
    constexpr int kStages = C::kStages, kBK = C::kBK, kStage = MmaBlock<L, C, KN>::kStage;
    static_assert(C::kElemsA == 4 * kMmaChunk && C::kElemsB == 4 * kMmaChunk && kBK == 32,
                  "the register path's groups");
    const MmaFlags& f = k.f;
    const int nk = k.nk;
    uint16_t va[kMmaChunk], vb[kMmaChunk];
    for (int s = 0; s < kStages - 1 && s < nk; ++s) {
      uint16_t* at = k.smem + s * kStage;
      uint16_t* bt = at + ATile::kSize;
      int64_t br, bc;
      k.b_corner(int64_t(s) * kBK, br, bc);
      const int64_t k0 = int64_t(s) * kBK;
      for_quarters([&](auto q) {
        constexpr int Q = decltype(q)::value;
        stage_load<C, ATile, Q>(va, k.oa, 0, k0, f.a_along);
        stage_load<C, BTile, Q>(vb, k.ob, br, bc, f.b_along);
        stage_store<C, ATile, Q>(at, va, f.a_along);
        stage_store<C, BTile, Q>(bt, vb, f.b_along);
      });
    }
    for (int kt = 0; kt < nk; ++kt) {
      __syncthreads();  // tile kt stored by every thread; stage (kt - 1) % S is free
      const int next = kt + kStages - 1;
      const bool more = next < nk;
      uint16_t* at = k.smem + (next % kStages) * kStage;
      uint16_t* bt = at + ATile::kSize;
      int64_t br, bc;
      k.b_corner(int64_t(next) * kBK, br, bc);
      const int64_t k0 = int64_t(next) * kBK;
      const uint32_t a_base = k.smem_base + (kt % kStages) * kStage * 2;
      const uint32_t b_base = a_base + ATile::kSize * 2;
      uint32_t bf[C::kFragN / 2][4];
      for_quarters([&](auto q) {
        constexpr int Q = decltype(q)::value;
        if (Q % 2 == 0) load_b_frags<L, C, KN>(bf, k.lo, b_base, Q / 2);
        if (more) {
          stage_load<C, ATile, Q>(va, k.oa, 0, k0, f.a_along);
          stage_load<C, BTile, Q>(vb, k.ob, br, bc, f.b_along);
        }
        mma_half<T, L, C, KN, Q % 2>(acc, bf, k.lo, a_base, Q / 2);
        if (more) {
          stage_store<C, ATile, Q>(at, va, f.a_along);
          stage_store<C, BTile, Q>(bt, vb, f.b_along);
        }
      });
    }
  }
};

template <Layout L, class C, class T, bool KN, MmaFill FILL>
__global__ void __launch_bounds__(C::kThreads, C::kBlocksPerSM) mma_kernel(const GemmArgs g, const MmaFlags f) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint16_t* smem = reinterpret_cast<uint16_t*>(smem_raw);
  const uint32_t smem_base = smem_u32(smem);
  const LdsmOffsets<L, C, KN> lo;
  const int64_t tiles_m = ceil_div(g.m, C::kBM);
  // One pass over the m tiles (the usual case): grouped order; otherwise the grid loops.
  const bool grouped = gridDim.y == tiles_m;
  const int nk = static_cast<int>(ceil_div(g.k, C::kBK));

  for (int64_t bz = blockIdx.z; bz < g.batch; bz += gridDim.z) {
    const uint16_t* a = static_cast<const uint16_t*>(g.a) + bz * g.a_sb;
    const uint16_t* b = static_cast<const uint16_t*>(g.b) + bz * g.b_sb;
    uint16_t* c = static_cast<uint16_t*>(g.c) + bz * g.m * g.n;
    for (int64_t ty = blockIdx.y; ty < tiles_m; ty += gridDim.y) {
      const MmaTileIndex idx =
          grouped ? mma_raster(blockIdx.x, ty, gridDim.x, tiles_m) : MmaTileIndex{int64_t(blockIdx.x), ty};
      const int64_t m0 = idx.tm * C::kBM, n0 = idx.tn * C::kBN;
      const Operand oa{a + m0 * g.a_sm, g.a_sm, g.a_sk, g.m - m0, g.k};
      const Operand ob = KN ? Operand{b + n0 * g.b_sn, g.b_sk, g.b_sn, g.k, g.n - n0}
                            : Operand{b + n0 * g.b_sn, g.b_sn, g.b_sk, g.n - n0, g.k};
      float acc[C::kFragM][C::kFragN][4] = {};
      MmaMainLoop<T, L, C, KN, FILL>::run(acc, MmaBlock<L, C, KN>{smem, smem_base, lo, oa, ob, a, b, g, nk, f});
      __syncthreads();  // every warp is done reading the stage ring
      mma_epilogue<C, MmaCTile<L, C>, T>(smem, acc, threadIdx.x, c, g, m0, n0, f.out_vec, [] { __syncthreads(); });
      __syncthreads();  // the C tile is read out before the next tile's loads reuse it
    }
  }
}

template <Layout L, class C, class T, bool KN, MmaFill FILL>
cudaError_t run(const GemmArgs& g, const MmaFlags& f, cudaStream_t stream) {
  constexpr auto kernel = mma_kernel<L, C, T, KN, FILL>;
  constexpr int kSmem =
      FILL == MmaFill::Realign ? mma_realign_bytes<L, C, KN>(kMmaRawStages<L, C, KN>) : mma_smem_bytes<L, C, KN>();
  static_assert(kSmem <= 227 * 1024 && C::kBlocksPerSM * (kSmem + 1024) <= 228 * 1024,
                "the tile rings of the resident blocks exceed an SM's shared memory");
  const cudaError_t err = raise_smem_once<kernel>(kSmem);
  if (err != cudaSuccess) return err;
  const auto clamp = [](int64_t v) { return static_cast<unsigned>(v < 65535 ? v : 65535); };
  const dim3 grid(static_cast<unsigned>(ceil_div(g.n, C::kBN)), clamp(ceil_div(g.m, C::kBM)), clamp(g.batch));
  kernel<<<grid, C::kThreads, kSmem, stream>>>(g, f);
  return cudaGetLastError();
}

// The route's tile and fill as template arguments (the realigning and register fills run
// MmaSmall only: their schedules are written for its tile).
template <Layout L, class T, bool KN>
cudaError_t dispatch(const GemmRoute& r, const MmaFlags& f, cudaStream_t stream) {
  return with_mma_config(r, [&](auto config) {
    using C = decltype(config);
    if (r.ops.fill == MmaFill::Async) return run<L, C, T, KN, MmaFill::Async>(r.args, f, stream);
    if constexpr (!std::is_same<C, MmaSmall>::value) return cudaErrorNotSupported;
    else if (r.ops.fill == MmaFill::Realign) return run<L, C, T, KN, MmaFill::Realign>(r.args, f, stream);
    else return run<L, C, T, KN, MmaFill::Registers>(r.args, f, stream);
  });
}

}  // namespace

cudaError_t launch_mma(const GemmRoute& r, cudaStream_t stream) {
  const GemmArgs& g = r.args;
  if (!gemm_mma_supports(r.dtype, g)) return cudaErrorNotSupported;
  if (g.batch == 0 || g.m == 0 || g.n == 0) return cudaSuccess;
  const MmaFlags f{r.ops.a_along, r.ops.b_along, r.out_vec};
  return with_layout(r.layout, [&](auto tag) {
    constexpr Layout L = decltype(tag)::value;
    const auto typed = [&](auto t) {
      using T = decltype(t);
      return r.ops.b_kn ? dispatch<L, T, true>(r, f, stream) : dispatch<L, T, false>(r, f, stream);
    };
    return r.dtype == DType::F16 ? typed(__half{}) : typed(__nv_bfloat16{});
  });
}

}  // namespace bankops
