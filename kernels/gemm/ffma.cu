// The FFMA/DFMA gemm kernel (tiling in ffma.h, staging in ffma_stage.cuh, a tile's way out in
// ffma_epilogue.cuh; ffma_trace.h replays its shared-memory accesses) and its launcher, which
// runs what the plan says.
//
// Per k tile of BK: every thread stages kLoads 16-byte vectors of each operand (register
// modes load it while earlier tiles are computed and store it after; cp.async writes
// straight to shared memory, kStages - 1 tiles ahead, a vector at a time or, for misaligned
// rows, an element at a time), then reads BK rows of its A and B fragments as LDS.128 (one
// row ahead of the FMAs) and does QM*QN*VEC*VEC FMAs per row. The kernel is issue-bound:
// every instruction that is not an FMA costs time, so whole tiles (all but the edges of the
// matrices) take a staging path without bounds or zero-fill, and the inner loop's shared
// addresses are a register plus immediates in every layout.
#include <cuda_runtime.h>

#include <climits>
#include <type_traits>

#include "ffma_epilogue.cuh"
#include "ffma_plan.h"
#include "ffma_stage.cuh"
#include "ffma_strip.cuh"
#include "launch.h"
#include "split_k.cuh"

namespace bankops {
namespace {

// The stage ring, sized per configuration at launch.
extern __shared__ float4 gemm_smem[];

// ldc: C's row stride. Wide kernels run a one-dimensional grid that w maps to work
// (ffma_work.h): strip blocks for C's `strip` columns past g.n (gemm_strip_rows, in shared
// memory laid out as TileS), stream-K blocks (partial sums in `partials`, one tile of
// accumulators and one of `flags` per block) and a block per tile. The other configurations
// take a block per tile of a (n, m, batch) grid; the float32 tiles of those that split
// (ffma_splits) split k across a cluster of `splits` blocks along x, whose partial tiles (TileP)
// split_k_store adds.
template <class S, class TileA, class TileB, class TileS, class TileP, class T, class Acc, int MODE_A, int MODE_B>
__global__ void __launch_bounds__(S::kThreads, S::kMinBlocks)
    ffma_kernel(const GemmArgs g, const GemmStage mode_a, const GemmStage mode_b, const int64_t ldc, const int strip,
                const GemmWork w, Acc* const partials, int* const flags, const int splits) {
  constexpr int V = S::kVec, kStages = S::kStages, kStageA = TileA::kSize, kStageB = TileB::kSize;
  static_assert(kStageA % V == 0 && kStageB % V == 0, "stages start on 16-byte boundaries");
  constexpr bool kWide = std::is_same<S, GemmWide>::value && std::is_same<T, float>::value;
  constexpr bool kSplits = ffma_splits<S>() && std::is_same<Acc, float>::value;
  Acc* const sa0 = reinterpret_cast<Acc*>(gemm_smem);
  Acc* const sb0 = sa0 + kStages * kStageA;
  using StA = Stager<typename S::OpA, TileA, T, Acc, MODE_A>;
  using StB = Stager<typename S::OpB, TileB, T, Acc, MODE_B>;
  const int t = threadIdx.x;
  // A partial last tile moves back to end on the matrix's edge, where the matrix has a whole
  // tile and the move keeps the tile's 16-byte vectors aligned: it recomputes some rows or
  // columns of the tile before it (to the same values, stored again) and needs no bounds.
  const auto edge = [](int64_t origin, int64_t extent, int tile, bool x_vectors) {
    const bool move = origin + tile > extent && extent >= tile && (!x_vectors || extent % V == 0);
    return move ? extent - tile : origin;
  };
  const int tiles_k = static_cast<int>(ceil_div(g.k, S::kBK));  // launch_ffma keeps it below 2^31
  const int full_k = static_cast<int>(g.k / S::kBK);             // k tiles of BK rows
  // Rows of k tile kt inside the operands.
  const auto k_rows = [&](int kt) {
    const int64_t left = g.k - int64_t(kt) * S::kBK;
    return static_cast<int>(left < S::kBK ? left : S::kBK);
  };
  // The fragments' tile origins; row kk of quadrant q is a constant step from them
  // (gemm_frags_affine), or else the whole offset is computed per read.
  constexpr bool kAffine = gemm_frags_affine<S, TileA, TileB>();
  const int am = gemm_frag_m<S>(t, 0), bn = gemm_frag_n<S>(t, 0);
  const int a0 = TileA::offset(0, am), b0 = TileB::offset(0, bn);
  const auto frag_at = [&](auto tile, int origin, int x, int kk, int q) {
    using Tile = decltype(tile);
    return kAffine ? origin + Tile::offset(kk, q * S::kQuad) : Tile::offset(kk, x + q * S::kQuad);
  };

  // One piece of work (GemmPiece).
  const auto tile = [&](const GemmPiece& pc) {
    const int64_t bz = pc.bz, tm = pc.tm, tn = pc.tn;
    const bool fixed = pc.fixed;
    const int kb = pc.kb, ke = pc.ke;
    const int64_t m0 = fixed ? tm * S::kBM : edge(tm * S::kBM, g.m, S::kBM, StA::x_vectors(mode_a));
    const int64_t n0 = fixed ? tn * S::kBN : edge(tn * S::kBN, g.n, S::kBN, StB::x_vectors(mode_b));
    const bool whole_a = g.m - m0 >= S::kBM, whole_b = g.n - n0 >= S::kBN;
    const int64_t k0 = int64_t(kb) * S::kBK;
    StA sa(static_cast<const T*>(g.a) + bz * g.a_sb + m0 * g.a_sm + k0 * g.a_sk, g.a_sk, g.a_sm, g.m - m0, mode_a);
    StB sb(static_cast<const T*>(g.b) + bz * g.b_sb + n0 * g.b_sn + k0 * g.b_sk, g.b_sk, g.b_sn, g.n - n0, mode_b);
    Acc acc[S::kTM][S::kTN];
#pragma unroll
    for (int i = 0; i < S::kTM; ++i)
#pragma unroll
      for (int j = 0; j < S::kTN; ++j) acc[i][j] = Acc(0);

    // Prologue: tiles kb .. kb+kStages-2 in flight, one cp.async group each. Register-staged
    // tiles are stored one tile after their loads (see k_tile), so the last one stays in
    // registers.
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s > 0 && kb + s - 1 < ke) {
        sa.store(sa0 + (s - 1) * kStageA);
        sb.store(sb0 + (s - 1) * kStageB);
      }
      if (kb + s < ke) {
        sa.issue(sa0 + s * kStageA, g.a, k_rows(kb + s), whole_a && kb + s < full_k);
        sb.issue(sb0 + s * kStageB, g.b, k_rows(kb + s), whole_b && kb + s < full_k);
      }
      cp_async_commit();
    }

    // Fragments of row kk of the current tile, double-buffered: row kk + 1 is read while
    // row kk's FMAs run.
    Frag<Acc> fa[2][S::kQM], fb[2][S::kQN];
    constexpr int kFrags = S::kQM + S::kQN;
    // Fragment f (A's quadrants, then B's) of row kk into buffer buf.
    const auto load_frag = [&](int f, int buf, const Acc* as, const Acc* bs, int kk) {
      if (f < S::kQM)
        fa[buf][f] = lds16(as + frag_at(TileA{}, a0, am, kk, f));
      else
        fb[buf][f - S::kQM] = lds16(bs + frag_at(TileB{}, b0, bn, kk, f - S::kQM));
    };
    // FMAs of micro-tile rows [i0, i1) from buffer buf. Row kk+1's fragment reads go between
    // them (spread over the first two thirds of the rows), not in one burst: back-to-back
    // LDS.128s wait on one another, FMAs between them keep the scheduler issuing.
    // load(f): read fragment f (a no-op when there is nothing to read).
    const auto fma_rows = [&](int buf, int i0, int i1, auto&& load) {
#pragma unroll
      for (int i = i0; i < i1; ++i) {
#pragma unroll
        for (int j = 0; j < S::kTN; ++j)
          acc[i][j] = fma(fa[buf][i / V].v[i % V], fb[buf][j / V].v[j % V], acc[i][j]);
#pragma unroll
        for (int f = 0; f < kFrags; ++f)
          if (f * 2 * (i1 - i0) / (3 * kFrags) == i - i0) load(f);
      }
    };

    int read = 0;  // the stage of tile kt; tile kt + kStages - 1 goes to the one before it
    cp_async_wait<kStages - 2>();
    __syncthreads();
    if (kb < ke) {
#pragma unroll
      for (int f = 0; f < kFrags; ++f) load_frag(f, 0, sa0, sb0, 0);
    }
    // One k tile. STEADY: tile kt + kStages - 1 exists and both operands' tiles are whole
    // (no bounds to check), so has tile kt + 1.
    const auto k_tile = [&](int kt, auto steady) {
      constexpr bool kSteady = decltype(steady)::value;
      // Tile kt + kStages - 1 goes to the stage before `read`; tile kt + kStages - 2, loaded
      // into registers one tile ago (a whole tile of FMAs to hide the global latency), to
      // the stage before that, which tile kt - 2 used: every warp has left it.
      const int write = read == 0 ? kStages - 1 : read - 1;
      const int prev = write == 0 ? kStages - 1 : write - 1;
      const int next = kt + kStages - 1;
      if (kSteady || next - 1 < ke) {
        sa.store(sa0 + prev * kStageA);
        sb.store(sb0 + prev * kStageB);
      }
      // Element copies of more than one vector a thread go between the first BK - 1 rows'
      // FMAs (Stager::kSpread): issued in one burst they fill the MIO queue, and the
      // fragment reads wait behind them (ncu, 4095x4097x4093).
      constexpr bool kSpreadA = kSteady && StA::kSpread, kSpreadB = kSteady && StB::kSpread;
      if (kSteady || next < ke) {
        const int rows = kSteady ? S::kBK : k_rows(next);
        if constexpr (!kSpreadA) sa.issue(sa0 + write * kStageA, g.a, rows, kSteady || (whole_a && next < full_k));
        if constexpr (!kSpreadB) sb.issue(sb0 + write * kStageB, g.b, rows, kSteady || (whole_b && next < full_k));
      }
      if constexpr (!kSpreadA && !kSpreadB) cp_async_commit();
      // Copies [kk * n / (BK - 1), (kk + 1) * n / (BK - 1)) of n during row kk.
      const auto spread = [&](auto& st, Acc* dst, int kk) {
        constexpr int n = std::remove_reference_t<decltype(st)>::kCopies;
#pragma unroll
        for (int j = kk * n / (S::kBK - 1); j < (kk + 1) * n / (S::kBK - 1); ++j) st.copy_whole(dst, j);
      };

      const Acc* as = sa0 + read * kStageA;
      const Acc* bs = sb0 + read * kStageB;
#pragma unroll
      for (int kk = 0; kk < S::kBK - 1; ++kk) {
        if constexpr (kSpreadA) spread(sa, sa0 + write * kStageA, kk);
        if constexpr (kSpreadB) spread(sb, sb0 + write * kStageB, kk);
        fma_rows(kk % 2, 0, S::kTM, [&](int f) { load_frag(f, (kk + 1) % 2, as, bs, kk + 1); });
      }
      if constexpr (kSpreadA) sa.advance();
      if constexpr (kSpreadB) sb.advance();
      if constexpr (kSpreadA || kSpreadB) cp_async_commit();
      // The last row: a quarter of its FMAs, then the tile is read out: wait for tile
      // kt + 1 and read its first row between the rest.
      constexpr int kLast = (S::kBK - 1) % 2, kSplit = S::kTM / 4;
      fma_rows(kLast, 0, kSplit, [](int) {});
      cp_async_wait<kStages - 2>();
      __syncthreads();
      read = read == kStages - 1 ? 0 : read + 1;
      const bool again = kSteady || kt + 1 < ke;
      fma_rows(kLast, kSplit, S::kTM, [&](int f) {
        if (again) load_frag(f, kLast ^ 1, sa0 + read * kStageA, sb0 + read * kStageB, 0);
      });
    };
    const int steady = whole_a && whole_b ? (ke < full_k ? ke : full_k) - (kStages - 1) : kb;
    int kt = kb;
    for (; kt < steady; ++kt) k_tile(kt, std::true_type{});
    for (; kt < ke; ++kt) k_tile(kt, std::false_type{});
    cp_async_wait<0>();
    __syncthreads();  // the next tile's prologue overwrites the stages

    if constexpr (kWide) {
      if (ffma_share<S, MODE_B>(acc, pc, partials, flags)) return;
    }
    if constexpr (kSplits) {
      if (splits > 1) {
        float* const part = reinterpret_cast<float*>(gemm_smem);
        ffma_store_partial<S, TileP>(acc, part, am, bn);
        split_k_store<T, S::kBM, S::kBN, TileP, S::kThreads>(part, g, static_cast<T*>(g.c) + bz * g.m * ldc, m0, n0,
                                                             splits, static_cast<int>(blockIdx.x % splits), t);
        return;
      }
    }
    ffma_add_bias<S, T>(acc, g, n0 + bn);
    ffma_store_c<S, T>(acc, g, ldc, bz, m0, n0, am, bn, whole_a && whole_b);
  };

  if constexpr (!kWide) {
    // A split tile's cluster: consecutive blocks in x, rank r taking k tiles [kb, ke).
    const int64_t tiles_m = ceil_div(g.m, S::kBM);
    const int rank = kSplits ? static_cast<int>(blockIdx.x % splits) : 0;
    const int64_t tn = kSplits ? blockIdx.x / splits : blockIdx.x;
    const int kb = kSplits ? static_cast<int>(split_k_begin(tiles_k, splits, rank)) : 0;
    const int ke = kSplits ? static_cast<int>(split_k_begin(tiles_k, splits, rank + 1)) : tiles_k;
    for (int64_t bz = blockIdx.z; bz < g.batch; bz += gridDim.z)
      for (int64_t tm = blockIdx.y; tm < tiles_m; tm += gridDim.y)
        tile(GemmPiece{bz, tm, tn, kb, ke, false, -1, 0, 0});
  } else {
    const int64_t u = blockIdx.x;
    if (u < w.strip_blocks) {
      static_assert(TileS::kSize <= S::kStages * (kStageA + kStageB), "the strip's tile fits the stages");
      const int64_t rows = u / kStripBlocks, bz = rows / w.tiles_m;
      const int64_t m0 = rows % w.tiles_m * S::kBM + u % kStripBlocks * kStripRows, n1 = g.n;
      if (m0 < g.m)
        gemm_strip_rows<TileS>(static_cast<const float*>(g.a) + bz * g.a_sb + m0 * g.a_sm, g.a_sm, g.a_sk,
                               static_cast<const float*>(g.b) + bz * g.b_sb + n1 * g.b_sn, g.b_sk, g.b_sn,
                               static_cast<float*>(g.c) + (bz * g.m + m0) * ldc + n1, ldc,
                               g.bias != nullptr ? static_cast<const float*>(g.bias) + n1 : nullptr,
                               g.m - m0 < kStripRows ? g.m - m0 : kStripRows, g.k, strip, sa0);
      return;
    }
#pragma unroll 1
    for (int p = 0; p < 2; ++p) {
      const GemmPiece pc = gemm_piece(w, u, p);
      if (pc.kb < pc.ke) tile(pc);  // K = 0 never comes here (ffma_plan.h: Big)
    }
  }
}

constexpr int kKVec = int(GemmStage::KVec), kXAsync = int(GemmStage::XAsync);

// SPECIALIZE: also build kernels with the aligned row-major / transposed operands' staging
// fixed at compile time (fewer registers and branches); other layouts read it at run time.
// ASYNC4: and the GemmStaging::Async4 pairs. Configurations that copy a k-major A beside an
// x-major B (gemm_copies_a_k) specialize it to kKUnit, as Async4 does misaligned ones, instead
// of loading 16-byte vectors into registers. Wide: the plan's strip columns past the tiles and
// its blocks' work, with the route's scratch as the workspace.
template <class S, Layout L, class T, class Acc, bool SPECIALIZE, bool ASYNC4 = false>
cudaError_t run(const GemmCall& c, const FfmaPlan& p, void* workspace, cudaStream_t stream) {
  const auto clamp = [](int64_t v) { return static_cast<unsigned>(v < 65535 ? v : 65535); };
  constexpr bool kWide = std::is_same<S, GemmWide>::value;
  const GemmStage ma = p.mode_a, mb = p.mode_b;
  const GemmWork w = kWide ? p.work : GemmWork{};
  GemmArgs g = c.args;
  const int64_t ldc = g.n;
  if (kWide) g.n -= p.strip;
  if (kWide && w.blocks() > INT_MAX) return cudaErrorInvalidValue;  // C would hold 2^31 tiles: not in memory
  const int split = p.split;  // the split configurations' clusters along x (1 elsewhere)
  const dim3 grid = kWide ? dim3(static_cast<unsigned>(w.blocks()))
                          : dim3(static_cast<unsigned>(ceil_div(g.n, S::kBN) * split), clamp(ceil_div(g.m, S::kBM)),
                                 clamp(g.batch));
  using TA = GemmTileOf<L, typename S::OpA>;  // (BK, BM) of Acc: A transposed
  using TB = GemmTileOf<L, typename S::OpB>;  // (BK, BN) of Acc
  using TS = StripTile<L>;                    // (strip columns, kStripK) floats
  using TP = FfmaSplitTile<L, S::kBM, S::kBN>;  // the split-K partial tile, floats
  constexpr bool kSplits = ffma_splits<S>() && sizeof(Acc) == 4;  // as the kernel's
  constexpr int kStages = S::kStages * (TA::kSize + TB::kSize) * int(sizeof(Acc));
  static_assert(!kSplits || (TP::kRows == S::kBM && TP::kCols == S::kBN), "a partial tile is a block tile");
  // A split block's partial tile reuses the stages; Flat's (64 KB) outgrows them.
  constexpr int kPart = kSplits ? TP::kSize * 4 : 0;
  const int smem = split > 1 && kPart > kStages ? kPart : kStages;
  static_assert(kStages <= 48 * 1024, "a configuration's stages exceed the default dynamic shared memory");
  cudaError_t raised = cudaSuccess;
  // The kernel for staging modes (MA, MB), fixed at compile time, its shared memory raised past
  // 48 KB where this call's partial tile needs it.
  const auto modes = [&](auto ma_, auto mb_) {
    constexpr auto k = ffma_kernel<S, TA, TB, TS, TP, T, Acc, decltype(ma_)::value, decltype(mb_)::value>;
    if constexpr (kPart > 48 * 1024)
      if (smem > 48 * 1024 && raised == cudaSuccess) raised = raise_smem_once<k>(smem);
    return k;
  };
  using Any = std::integral_constant<int, kAnyMode>;
  using Kernel = void (*)(GemmArgs, GemmStage, GemmStage, int64_t, int, GemmWork, Acc*, int*, int);
  Kernel kernel = nullptr;
  // Mid, Flat and Short run vector staging only (ffma_plan.h splits no other): no run-time-mode kernel.
  if constexpr (!ffma_vector_only<S>()) kernel = modes(Any{}, Any{});
  if constexpr (SPECIALIZE && sizeof(T) == sizeof(Acc)) {
    constexpr int kK = gemm_copies_a_k<S>(GemmStage::XAsync) ? kKUnit : kKVec;  // A beside an x-major B
    using K = std::integral_constant<int, kK>;
    using KVec = std::integral_constant<int, kKVec>;
    using XAsync = std::integral_constant<int, kXAsync>;
    using KUnit = std::integral_constant<int, kKUnit>;
    using XUnit = std::integral_constant<int, kXUnit>;
    if (ma == GemmStage::KVec && mb == GemmStage::XAsync) kernel = modes(K{}, XAsync{});
    if (ma == GemmStage::XAsync && mb == GemmStage::XAsync) kernel = modes(XAsync{}, XAsync{});
    if (ma == GemmStage::KVec && mb == GemmStage::KVec) kernel = modes(KVec{}, KVec{});
    if (ma == GemmStage::XAsync && mb == GemmStage::KVec) kernel = modes(XAsync{}, KVec{});
    if constexpr (ASYNC4) {
      if (p.staging == GemmStaging::Async4) {
        const bool ka = ma == GemmStage::KScalar, xb = mb == GemmStage::XScalar;  // the unit-scalar ones
        if (ka && xb) kernel = modes(KUnit{}, XUnit{});
        if (ka && !xb) kernel = modes(KUnit{}, XAsync{});
        if (!ka && xb) kernel = modes(K{}, XUnit{});
      }
    }
  }
  // The workspace: the stream-K blocks' partial sums, then their flags, which start clear.
  Acc* const partials = static_cast<Acc*>(workspace);
  int* const flags = reinterpret_cast<int*>(partials + int64_t(w.sk_blocks) * S::kBM * S::kBN);
  if (w.sk_blocks > 0) {
    const cudaError_t err = cudaMemsetAsync(flags, 0, sizeof(int) * w.sk_blocks, stream);
    if (err != cudaSuccess) return err;
  }
  if (kernel == nullptr || (split > 1 && !kSplits)) return cudaErrorInvalidValue;
  if (raised != cudaSuccess) return raised;
  if (split > 1)
    return launch_clustered(kernel, grid, S::kThreads, smem, split, stream, g, ma, mb, ldc, p.strip, w, partials,
                            flags, split);
  kernel<<<grid, S::kThreads, smem, stream>>>(g, ma, mb, ldc, p.strip, w, partials, flags, split);
  return cudaGetLastError();
}

// The plan's configuration as a template argument. BigScalar stages through registers only
// (no specialized modes); Wide and Big also take Async4 staging.
template <Layout L, class T>
cudaError_t dispatch(const GemmCall& c, const FfmaPlan& p, void* workspace, cudaStream_t stream) {
  return with_ffma_config(c.dtype, p, [&](auto shape) {
    using S = decltype(shape);
    constexpr bool kSpecialize = !std::is_same<S, GemmBigScalar>::value;
    constexpr bool kAsync4 = std::is_same<S, GemmWide>::value || std::is_same<S, GemmBig<4>>::value;
    if constexpr (S::kAccBytes != sizeof(T)) return cudaErrorNotSupported;  // another dtype's configuration
    else return run<S, L, T, T, kSpecialize, kAsync4>(c, p, workspace, stream);
  });
}

}  // namespace

cudaError_t launch_ffma(const GemmCall& c, const FfmaPlan& p, void* workspace, cudaStream_t stream) {
  const GemmArgs& g = c.args;
  if (g.batch == 0 || g.m == 0 || g.n == 0) return cudaSuccess;
  // k tiles are counted in int: K up to 2^34 (no tensor that fits a GPU comes near it).
  if (ceil_div(g.k, kGemmBK) > INT_MAX) return cudaErrorInvalidValue;
  return with_layout(c.layout, [&](auto tag) {
    constexpr Layout L = decltype(tag)::value;
    switch (c.dtype) {
      case DType::F64: return dispatch<L, double>(c, p, nullptr, stream);
      case DType::F32: return dispatch<L, float>(c, p, workspace, stream);
      default: return cudaErrorNotSupported;
    }
  });
}

}  // namespace bankops
