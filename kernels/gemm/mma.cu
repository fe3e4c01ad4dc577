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
#include "mma_plan.h"
#include "split_k.cuh"

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

// How an operand's tile walks k: down its rows (K_ROWS: As[BK][BM], Bs[BK][BN]) or along its
// columns (As[BM][BK], Bs[BN][BK]). `o` is the operand from the block tile's corner.
template <bool K_ROWS>
struct KWalk {
  // The k-tile's corner at k0.
  __device__ __forceinline__ static int64_t row(int64_t k0) { return K_ROWS ? k0 : 0; }
  __device__ __forceinline__ static int64_t col(int64_t k0) { return K_ROWS ? 0 : k0; }
  // Whether the block tile's m (n) extent lies inside the operand.
  __device__ __forceinline__ static bool inner(const Operand& o, int extent) {
    return extent <= (K_ROWS ? o.cols : o.rows);
  }
  // Elements from one k-tile to the next (whole tiles have contiguous rows).
  __device__ __forceinline__ static int64_t step(const Operand& o, int bk) { return K_ROWS ? bk * o.s_row : bk; }
};

// One block tile as the main loops see it: the shared memory, A and B with the tile's corner
// folded in (corners move along k: down the rows of As[BK][BM] and Bs[BK][BN], along the
// columns of the others), the batch's matrices (the realigning fill's bounds) and the k-tile
// count.
template <Layout L, class C, bool KM, bool KN>
struct MmaBlock {
  using ATile = MmaATile<L, C, KM>;  // (BM, BK) or (BK, BM) halves
  using BTile = MmaBTile<L, C, KN>;  // (BK, BN) or (BN, BK) halves
  using Ldsm = LdsmOffsets<L, C, KM, KN>;
  static constexpr int kStage = ATile::kSize + BTile::kSize;  // halves
  uint16_t* smem;
  uint32_t smem_base;
  const Ldsm& lo;
  Operand oa, ob;
  const uint16_t *a, *b;
  const GemmArgs& g;
  int nk;
};

template <class C>
using MmaAcc = float[C::kFragM][C::kFragN][4];

template <class T, Layout L, class C, bool KM, bool KN, MmaFill FILL>
struct MmaMainLoop;

// cp.async: kStages - 1 tiles in flight; whole tiles (all but the edges) take WholeFill. In
// CUTLASS's multistage order: the wait and barrier for tile kt + 1 come before the last k16
// step of tile kt, so that step's mma covers the first ldmatrix of tile kt + 1, and the
// barrier's stall overlaps tensor work already issued.
template <class T, Layout L, class C, bool KM, bool KN>
struct MmaMainLoop<T, L, C, KM, KN, MmaFill::Async> {
  __device__ __forceinline__ static void run(MmaAcc<C>& acc, const MmaBlock<L, C, KM, KN>& k) {
    using ATile = typename MmaBlock<L, C, KM, KN>::ATile;
    using BTile = typename MmaBlock<L, C, KM, KN>::BTile;
    constexpr int kStages = C::kStages, kBK = C::kBK, kStage = MmaBlock<L, C, KM, KN>::kStage, kSteps = C::kSteps;
    const uint32_t smem_base = k.smem_base;
    const int nk = k.nk;
    // k-tiles [0, nk_whole) lie inside K; with the m (n) edge inside too, a tile is whole.
    const int nk_whole = static_cast<int>(k.g.k / kBK);
    using WA = KWalk<KM>;
    using WB = KWalk<KN>;
    const bool a_inner = WA::inner(k.oa, C::kBM), b_inner = WB::inner(k.ob, C::kBN);
    WholeFill<C, ATile> fa(smem_base, k.oa);
    WholeFill<C, BTile> fb(smem_base + ATile::kSize * 2, k.ob);
    const int64_t a_kstep = WA::step(k.oa, kBK), b_kstep = WB::step(k.ob, kBK);
    const auto fill = [&](int kt, int slot) {
      const uint32_t stage = slot * kStage * 2;
      const int64_t k0 = int64_t(kt) * kBK;
      if (a_inner && kt < nk_whole) fa(stage);
      else fill_async<C, ATile>(smem_base + stage, k.oa, WA::row(k0), WA::col(k0));
      if (b_inner && kt < nk_whole) fb(stage);
      else fill_async<C, BTile>(smem_base + stage + ATile::kSize * 2, k.ob, WB::row(k0), WB::col(k0));
      fa.src += a_kstep;
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
    load_frags<L, C, KM, KN>(fr[0], k.lo, smem_base, smem_base + ATile::kSize * 2, 0);
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
          load_frags<L, C, KM, KN>(fr[(s + 1) % 2], k.lo, a_next, a_next + ATile::kSize * 2, 0);
        } else {
          load_frags<L, C, KM, KN>(fr[(s + 1) % 2], k.lo, a_base, b_base, s + 1);
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
template <class T, Layout L, class C, bool KM, bool KN>
struct MmaMainLoop<T, L, C, KM, KN, MmaFill::Realign> {
  __device__ __forceinline__ static void run(MmaAcc<C>& acc, const MmaBlock<L, C, KM, KN>& k) {
    using ATile = typename MmaBlock<L, C, KM, KN>::ATile;
    using BTile = typename MmaBlock<L, C, KM, KN>::BTile;
    using FA = StagedFill<C, ATile, KM>;
    using FB = StagedFill<C, BTile, KN>;
    constexpr int kRaw = kMmaRawStages<L, C, KM, KN>;
    constexpr uint32_t kBuf = MmaBlock<L, C, KM, KN>::kStage * 2, kRawStage = FA::Raw::kBytes + FB::Raw::kBytes;
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
        if (Q % 2 == 0) load_b_frags<L, C, KM, KN>(bf, k.lo, b_base, Q / 2);
        if (next) realign(kt + 1, Q);
        mma_half<T, L, C, KM, KN, Q % 2>(acc, bf, k.lo, a_base, Q / 2);
      });
    }
    cp_async_wait<0>();
  }
};

// Registers: four 8-element groups of each operand per k-tile; group q of A and of B is in
// flight during quarter q of the previous tile's mma work (k16 step q / 2, half q % 2).
template <class T, Layout L, class C, bool KM, bool KN>
struct MmaMainLoop<T, L, C, KM, KN, MmaFill::Registers> {
  __device__ __forceinline__ static void run(MmaAcc<C>& acc, const MmaBlock<L, C, KM, KN>& k) {
    using ATile = typename MmaBlock<L, C, KM, KN>::ATile;
    using BTile = typename MmaBlock<L, C, KM, KN>::BTile;
    constexpr int kStages = C::kStages, kBK = C::kBK, kStage = MmaBlock<L, C, KM, KN>::kStage;
    static_assert(C::kElemsA == 4 * kMmaChunk && C::kElemsB == 4 * kMmaChunk && kBK == 32,
                  "the register path's groups");
    using WA = KWalk<KM>;
    using WB = KWalk<KN>;
    const int nk = k.nk;
    uint16_t va[kMmaChunk], vb[kMmaChunk];
    for (int s = 0; s < kStages - 1 && s < nk; ++s) {
      uint16_t* at = k.smem + s * kStage;
      uint16_t* bt = at + ATile::kSize;
      const int64_t k0 = int64_t(s) * kBK;
      for_quarters([&](auto q) {
        constexpr int Q = decltype(q)::value;
        stage_load<C, ATile, Q>(va, k.oa, WA::row(k0), WA::col(k0));
        stage_load<C, BTile, Q>(vb, k.ob, WB::row(k0), WB::col(k0));
        stage_store<C, ATile, Q>(at, va);
        stage_store<C, BTile, Q>(bt, vb);
      });
    }
    for (int kt = 0; kt < nk; ++kt) {
      __syncthreads();  // tile kt stored by every thread; stage (kt - 1) % S is free
      const int next = kt + kStages - 1;
      const bool more = next < nk;
      uint16_t* at = k.smem + (next % kStages) * kStage;
      uint16_t* bt = at + ATile::kSize;
      const int64_t k0 = int64_t(next) * kBK;
      const uint32_t a_base = k.smem_base + (kt % kStages) * kStage * 2;
      const uint32_t b_base = a_base + ATile::kSize * 2;
      uint32_t bf[C::kFragN / 2][4];
      for_quarters([&](auto q) {
        constexpr int Q = decltype(q)::value;
        if (Q % 2 == 0) load_b_frags<L, C, KM, KN>(bf, k.lo, b_base, Q / 2);
        if (more) {
          stage_load<C, ATile, Q>(va, k.oa, WA::row(k0), WA::col(k0));
          stage_load<C, BTile, Q>(vb, k.ob, WB::row(k0), WB::col(k0));
        }
        mma_half<T, L, C, KM, KN, Q % 2>(acc, bf, k.lo, a_base, Q / 2);
        if (more) {
          stage_store<C, ATile, Q>(at, va);
          stage_store<C, BTile, Q>(bt, vb);
        }
      });
    }
  }
};

// An operand from the block tile's corner as its tile sees it: rows x cols with strides s_row
// and s_col. x0: the corner's m (A) or n (B); s_x, s_k: the strides of that dim and of k; x:
// its extent. K_ROWS: the tile's rows are k.
template <bool K_ROWS>
__device__ __forceinline__ Operand operand_at(const uint16_t* p, int64_t x0, int64_t s_x, int64_t s_k, int64_t x,
                                              int64_t k) {
  return K_ROWS ? Operand{p + x0 * s_x, s_k, s_x, k, x - x0} : Operand{p + x0 * s_x, s_x, s_k, x - x0, k};
}

// out_vec: C's rows 16-byte aligned (whole-chunk stores). splits: the blocks of a cluster
// (consecutive in x) that share each tile's k tiles (split_k.h); 1 when the grid fills the SMs.
template <Layout L, class C, class T, bool KM, bool KN, MmaFill FILL>
__global__ void __launch_bounds__(C::kThreads, C::kBlocksPerSM)
    mma_kernel(const GemmArgs g, const bool out_vec, const int splits) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint16_t* smem = reinterpret_cast<uint16_t*>(smem_raw);
  const uint32_t smem_base = smem_u32(smem);
  const LdsmOffsets<L, C, KM, KN> lo;
  const int64_t tiles_m = ceil_div(g.m, C::kBM);
  // One pass over the m tiles (the usual case): grouped order; otherwise the grid loops.
  const bool grouped = gridDim.y == tiles_m;
  // This block's k tiles: its rank's share; the main loop sees them as the whole product.
  const int rank = static_cast<int>(blockIdx.x % splits);
  const int64_t bx = blockIdx.x / splits, gx = gridDim.x / splits, nk_all = ceil_div(g.k, C::kBK);
  const int64_t kt0 = split_k_begin(nk_all, splits, rank), kt1 = split_k_begin(nk_all, splits, rank + 1);
  GemmArgs gk = g;
  gk.k = (kt1 * C::kBK < g.k ? kt1 * C::kBK : g.k) - kt0 * C::kBK;
  const int nk = static_cast<int>(kt1 - kt0);

  for (int64_t bz = blockIdx.z; bz < g.batch; bz += gridDim.z) {
    const uint16_t* a = static_cast<const uint16_t*>(g.a) + bz * g.a_sb + kt0 * C::kBK * g.a_sk;
    const uint16_t* b = static_cast<const uint16_t*>(g.b) + bz * g.b_sb + kt0 * C::kBK * g.b_sk;
    uint16_t* c = static_cast<uint16_t*>(g.c) + bz * g.m * g.n;
    for (int64_t ty = blockIdx.y; ty < tiles_m; ty += gridDim.y) {
      const MmaTileIndex idx = grouped ? mma_raster(bx, ty, gx, tiles_m) : MmaTileIndex{bx, ty};
      const int64_t m0 = idx.tm * C::kBM, n0 = idx.tn * C::kBN;
      const Operand oa = operand_at<KM>(a, m0, g.a_sm, g.a_sk, g.m, gk.k);
      const Operand ob = operand_at<KN>(b, n0, g.b_sn, g.b_sk, g.n, gk.k);
      float acc[C::kFragM][C::kFragN][4] = {};
      MmaMainLoop<T, L, C, KM, KN, FILL>::run(acc, MmaBlock<L, C, KM, KN>{smem, smem_base, lo, oa, ob, a, b, gk, nk});
      __syncthreads();  // every warp is done reading the stage ring
      if (splits == 1) {
        mma_epilogue<C, MmaCTile<L, C>, T>(smem, acc, threadIdx.x, c, g, m0, n0, out_vec, [] { __syncthreads(); });
      } else {
        using PTile = SplitTile<L, C::kBM, C::kBN>;
        float* part = reinterpret_cast<float*>(smem_raw);
        mma_store_partial<C, PTile>(part, acc, threadIdx.x);
        split_k_store<T, C::kBM, C::kBN, PTile, C::kThreads>(part, g, reinterpret_cast<T*>(c), m0, n0, splits, rank,
                                                             threadIdx.x);
      }
      __syncthreads();  // the C tile is read out before the next tile's loads reuse it
    }
  }
}

template <Layout L, class C, class T, bool KM, bool KN, MmaFill FILL>
cudaError_t run(const GemmArgs& g, bool out_vec, int splits, cudaStream_t stream) {
  constexpr auto kernel = mma_kernel<L, C, T, KM, KN, FILL>;
  constexpr int kRing = FILL == MmaFill::Realign ? mma_realign_bytes<L, C, KM, KN>(kMmaRawStages<L, C, KM, KN>)
                                                 : mma_smem_bytes<L, C, KM, KN>();
  constexpr int kPart = SplitTile<L, C::kBM, C::kBN>::kSize * 4;  // split-K's partial tile, over the ring
  constexpr int kSmem = kRing > kPart ? kRing : kPart;
  static_assert(kSmem <= 227 * 1024 && C::kBlocksPerSM * (kSmem + 1024) <= 228 * 1024,
                "the tile rings of the resident blocks exceed an SM's shared memory");
  const cudaError_t err = raise_smem_once<kernel>(kSmem);
  if (err != cudaSuccess) return err;
  const auto clamp = [](int64_t v) { return static_cast<unsigned>(v < 65535 ? v : 65535); };
  const dim3 grid(static_cast<unsigned>(ceil_div(g.n, C::kBN) * splits), clamp(ceil_div(g.m, C::kBM)), clamp(g.batch));
  return launch_clustered(kernel, grid, C::kThreads, kSmem, splits, stream, g, out_vec, splits);
}

// The plan's tile and fill as template arguments (the realigning and register fills run
// MmaSmall only: their schedules are written for its tile).
template <Layout L, class T, bool KM, bool KN>
cudaError_t dispatch(const GemmArgs& g, const MmaPlan& p, cudaStream_t stream) {
  return with_mma_config(p, [&](auto config) {
    using C = decltype(config);
    if (p.ops.fill == MmaFill::Async) return run<L, C, T, KM, KN, MmaFill::Async>(g, p.out_vec, p.split, stream);
    if constexpr (!std::is_same<C, MmaSmall>::value) return cudaErrorNotSupported;
    else if (p.ops.fill == MmaFill::Realign)
      return run<L, C, T, KM, KN, MmaFill::Realign>(g, p.out_vec, p.split, stream);
    else return run<L, C, T, KM, KN, MmaFill::Registers>(g, p.out_vec, p.split, stream);
  });
}

}  // namespace

cudaError_t launch_mma(const GemmCall& c, const MmaPlan& p, cudaStream_t stream) {
  const GemmArgs& g = c.args;
  if (!gemm_mma_supports(c.dtype, g)) return cudaErrorNotSupported;
  if (g.batch == 0 || g.m == 0 || g.n == 0) return cudaSuccess;
  return with_layout(c.layout, [&](auto tag) {
    constexpr Layout L = decltype(tag)::value;
    return with_operand_majors(p.ops, [&](auto km, auto kn) {
      constexpr bool KM = decltype(km)::value, KN = decltype(kn)::value;
      return c.dtype == DType::F16 ? dispatch<L, __half, KM, KN>(g, p, stream)
                                   : dispatch<L, __nv_bfloat16, KM, KN>(g, p, stream);
    });
  });
}

}  // namespace bankops
