// The few-rows kernel (rows.h) and its launcher.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "launch.h"
#include "mma_frag.cuh"
#include "rows_common.cuh"

namespace bankops {
namespace {

// FFMA (float32; 16-bit of up to kRowsFfmaRows rows). One block: kRowsBN weight rows (columns
// n0.. of C) over its rank's windows of k, for TM rows of A. Window w + 1 of A stages while
// window w's weight loads fly and its sums run; each lane reads its own 16 bytes of every row
// of A (512 contiguous bytes a warp: any layout is conflict-free there, so the layout shows in
// the partial tile). Lanes hold sums over their
// own k; the shuffles add them in a fixed order and split_k_store adds the ranks in order:
// the same bits every run.
// (Held to the residency the plan counts on: a register or two more per thread than 128 would
// halve the blocks an SM takes.)
template <Layout L, class T, int TM>
__global__ void __launch_bounds__(kRowsThreads, rows_ffma_blocks_per_sm(TM))
    rows_kernel(const GemmArgs g, const int splits, const int64_t prefetch) {
  constexpr int V = 16 / sizeof(T), kWin = rows_window(dtype_of<T>(), false), R = kRowsPerWarp;
  constexpr int kRowsBN = rows_bn(false);
  using XTile = RowMajor<TM, kWin>;
  constexpr int kWinBytes = TM * kWin * sizeof(T);
  using PTile = SplitTile<L, TM, kRowsBN>;
  static_assert(PTile::kSize * 4 <= 2 * kWinBytes, "the partial tile reuses the staged windows");
  extern __shared__ __align__(16) unsigned char smem[];  // two windows of A, then the partial tile
  const uint32_t base = smem_u32(smem);
  const int lane = threadIdx.x % 32, row0 = threadIdx.x / 32 * R;
  const RowsTile at = rows_tile<TM, kRowsBN>(g, splits);
  const int rank = at.rank;
  const int64_t m0 = at.m0, n0 = at.n0, windows = ceil_div(g.k, kWin);
  const int64_t w0 = split_k_begin(windows, splits, rank), w1 = split_k_begin(windows, splits, rank + 1);
  rows_start<T, false>(g, static_cast<const T*>(g.b) + blockIdx.z * g.b_sb, n0, kRowsBN, w0 * kWin, w1 * kWin,
                       prefetch);
  for (int64_t bz = blockIdx.z; bz < g.batch; bz += gridDim.z) {
    const T* a = static_cast<const T*>(g.a) + bz * g.a_sb + m0 * g.a_sm;
    const T* w[R];
#pragma unroll
    for (int r = 0; r < R; ++r) {
      const int64_t n = n0 + row0 + r;
      w[r] = n < g.n ? static_cast<const T*>(g.b) + bz * g.b_sb + n * g.b_sn : nullptr;
    }
    float acc[R][TM] = {};
    if (w0 < w1) rows_stage_a<XTile, T, TM>(base, a, g, m0, w0 * kWin);
    cp_async_commit();
    for (int64_t win = w0; win < w1; ++win) {
      const uint32_t buf = base + (win - w0) % 2 * kWinBytes;
      if (win + 1 < w1) rows_stage_a<XTile, T, TM>(base + (win + 1 - w0) % 2 * kWinBytes, a, g, m0, (win + 1) * kWin);
      cp_async_commit();
      uint4 wv[kRowsUnroll][R];
#pragma unroll
      for (int u = 0; u < kRowsUnroll; ++u) {
        const int64_t k = win * kWin + (u * 32 + lane) * V;
#pragma unroll
        for (int r = 0; r < R; ++r)
          wv[u][r] = w[r] != nullptr && k < g.k ? __ldcs(reinterpret_cast<const uint4*>(w[r] + k))
                                                : make_uint4(0, 0, 0, 0);
      }
      cp_async_wait<1>();
      __syncthreads();  // window win of A staged
#pragma unroll
      for (int u = 0; u < kRowsUnroll; ++u) {
        float wf[R][V], xf[V];  // each weight element converted once, used for every row of A
#pragma unroll
        for (int r = 0; r < R; ++r) to_floats<T>(wv[u][r], wf[r]);
#pragma unroll
        for (int t = 0; t < TM; ++t) {
          to_floats<T>(lds128(buf + (t * kWin + (u * 32 + lane) * V) * sizeof(T)), xf);
#pragma unroll
          for (int r = 0; r < R; ++r)
#pragma unroll
            for (int i = 0; i < V; ++i) acc[r][t] = fmaf(wf[r][i], xf[i], acc[r][t]);
        }
      }
      __syncthreads();  // every warp is done with this buffer before window win + 2 fills it
    }
    cp_async_wait<0>();
    // The warp's R x TM sums across its lanes (in rows_sum_at's order); each lane lays its own in P.
    constexpr int kSums = R * TM;
    float v[kSums];
#pragma unroll
    for (int j = 0; j < kSums; ++j) {
      const RowsSum at = rows_sum_at(TM, j);
      v[j] = acc[at.r][at.t];
    }
    rows_warp_sums<kSums, 16>(v, lane);
    float* part = reinterpret_cast<float*>(smem);
    if (rows_sum_stores(kSums, lane)) {
#pragma unroll
      for (int i = 0; i < rows_sum_count(kSums); ++i) {
        const RowsSum at = rows_sum_at(TM, rows_sum_index(kSums, lane, i));
        part[PTile::offset(at.t, row0 + at.r)] = v[i];
      }
    }
    __syncthreads();
    split_k_store<T, TM, kRowsBN, PTile, kRowsThreads>(part, g, static_cast<T*>(g.c) + bz * g.m * g.n, m0, n0, splits,
                                                       rank, threadIdx.x);
  }
}

// The ring FFMA kernel's sums into C (batch bz, tile (m0, n0)): lane (q, c) of warp w holds TM
// rows of 4 columns; the q lanes' meet by exchanges over lane bits 4 and 3, which leave lane
// (q, c) column rows_ring_col(KN, c, q); the warps' in RowsWarpSums at the start of shared
// memory, added in warp order into the partial tile after them; then split-K's store. Every
// warp is done with what shared memory held.
template <Layout L, bool KN, int TM>
__device__ __forceinline__ void rows_ring_store(const float (&acc)[4][TM], const GemmArgs& g, int64_t bz, int64_t m0,
                                                int64_t n0, int splits, int rank) {
  constexpr int BN = rows_bn(false);
  using WSums = RowsWarpSums<TM>;
  using PTile = SplitTile<L, TM, BN>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, q = lane / 8, c = lane % 8;
  float v[4 * TM];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int t = 0; t < TM; ++t) v[i * TM + t] = acc[i][t];
  rows_warp_sums<4 * TM, 16, 8>(v, lane);
  float* sums = reinterpret_cast<float*>(smem);
  float* part = sums + WSums::kSize;
#pragma unroll
  for (int t = 0; t < TM; ++t) sums[WSums::offset(warp * TM + t, rows_ring_col(KN, c, q))] = v[t];
  __syncthreads();
  for (int e = threadIdx.x; e < TM * BN; e += kRowsThreads) {
    const int t = e / BN, col = e % BN;
    float s = sums[WSums::offset(t, col)];
#pragma unroll
    for (int w = 1; w < kRowsWarps; ++w) s += sums[WSums::offset(w * TM + t, col)];
    part[PTile::offset(t, col)] = s;
  }
  __syncthreads();
  split_k_store<float, TM, BN, PTile, kRowsThreads>(part, g, static_cast<float*>(g.c) + bz * g.m * g.n, m0, n0,
                                                    splits, rank, threadIdx.x);
}

// FFMA on float32 through a ring (rows.h): x @ W of a weight stored (K, N) (KN), or x @ W.t()
// of one stored (N, K). One block: rows_bn columns (n0..) over its rank's windows of k, for TM
// rows of A. Windows of the weight (RowsRingWTile) and of x go through a ring of
// rows_ffma_ring_stages stages by cp.async. Warp w takes k slice w of each round: lane (q, c)
// reads 4 k (4q + 16w + 128j ..) of 4 columns, KN: 16 bytes at columns 4c.. of each of those
// weight rows (the bytes it copied: four whole 128-byte rows a warp, conflict-free on the dense
// window); k-major: 16 bytes at those k of weight rows c, c + 8, c + 16, c + 24 (the window
// copied 512 contiguous bytes of a row a warp). Beside them x's 16 bytes at those k of each row
// (the warp's four q read 64 contiguous bytes, the same words for every c): 16 FMAs a read of
// x. rows_ring_store adds the lanes' and warps' sums in a fixed order: the same bits every run.
template <Layout L, bool KN, int TM>
__global__ void __launch_bounds__(kRowsThreads, rows_ffma_ring_blocks_per_sm(TM))
    rows_ring_kernel(const GemmArgs g, const int splits, const int64_t prefetch) {
  constexpr int kWin = rows_window(DType::F32, false), BN = rows_bn(false), R = kRowsRingK;
  constexpr int kStep = kRowsRingStep, kRounds = kWin / kStep;
  static_assert(kWin % kStep == 0 && BN / 4 == 8, "a window is whole rounds, 8 lanes a weight row");
  constexpr int S = rows_ffma_ring_stages<L, KN, TM>(), kStage = rows_ffma_ring_stage_bytes<L, KN, TM>();
  using WTile = RowsRingWTile<L, KN>;
  using XTile = RowMajor<TM, kWin>;
  using WSums = RowsWarpSums<TM>;
  using PTile = SplitTile<L, TM, BN>;
  static_assert(S >= 2 && (WSums::kSize + PTile::kSize) * 4 <= S * kStage, "the sums reuse the ring");
  extern __shared__ __align__(16) unsigned char smem[];  // the ring, then the warps' sums and P
  const uint32_t base = smem_u32(smem);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, q = lane / 8, c = lane % 8;
  const int kl = q * R + warp * R * 4;  // the lane's first k in round 0 of a window
  const RowsTile at = rows_tile<TM, BN>(g, splits);
  const int rank = at.rank;
  const int64_t m0 = at.m0, n0 = at.n0, windows = ceil_div(g.k, kWin);
  const int64_t w0 = split_k_begin(windows, splits, rank), w1 = split_k_begin(windows, splits, rank + 1);
  rows_start<float, KN>(g, static_cast<const float*>(g.b) + blockIdx.z * g.b_sb, n0, BN, w0 * kWin, w1 * kWin,
                        prefetch);
  const bool col_in = n0 + 4 * c < g.n;  // KN: n is whole quads
  for (int64_t bz = blockIdx.z; bz < g.batch; bz += gridDim.z) {
    const float* a = static_cast<const float*>(g.a) + bz * g.a_sb + m0 * g.a_sm;
    const float* b = static_cast<const float*>(g.b) + bz * g.b_sb;
    const auto stage = [&](int64_t win) {
      const uint32_t buf = base + (win - w0) % S * kStage;
      if constexpr (KN) {
#pragma unroll
        for (int j = 0; j < kRounds; ++j)
#pragma unroll
          for (int i = 0; i < R; ++i) {
            const int kk = j * kStep + kl + i;
            const int64_t k = win * kWin + kk;
            const bool in = col_in && k < g.k;
            cp_async16(buf + WTile::offset(kk, 4 * c) * 4, in ? b + k * g.b_sk + n0 + 4 * c : b, in ? 16 : 0);
          }
      } else {
        // A warp copies 512 contiguous bytes of a weight row an instruction (zeros past n and k).
        constexpr int kPerRow = kWin / 4;
#pragma unroll
        for (int e = threadIdx.x; e < BN * kPerRow; e += kRowsThreads) {
          const int row = e / kPerRow, kk = e % kPerRow * 4;
          const int64_t n = n0 + row, k = win * kWin + kk;
          const bool in = n < g.n && k < g.k;
          cp_async16(buf + WTile::offset(row, kk) * 4, in ? b + n * g.b_sn + k : b, in ? 16 : 0);
        }
      }
      rows_stage_a<XTile, float, TM>(buf + WTile::kSize * 4, a, g, m0, win * kWin);
    };
    float acc[4][TM] = {};
    rows_ring_fill<S>(w0, w1, stage);
    for (int64_t win = w0; win < w1; ++win) {
      rows_ring_next<S>(win, w1, stage);
      const uint32_t wbuf = base + (win - w0) % S * kStage, xbuf = wbuf + WTile::kSize * 4;
#pragma unroll
      for (int j = 0; j < kRounds; ++j) {
        float w[R][4];  // w[i][col]: k kl + i of the lane's column col
#pragma unroll
        for (int u = 0; u < 4; ++u) {
          const uint4 v = KN ? lds128(wbuf + WTile::offset(j * kStep + kl + u, 4 * c) * 4)
                             : lds128(wbuf + WTile::offset(rows_ring_col(false, c, u), j * kStep + kl) * 4);
          const float f[4] = {__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z), __uint_as_float(v.w)};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            if constexpr (KN) w[u][e] = f[e];  // row k + u, columns 4c + e
            else w[e][u] = f[e];               // column c + 8u, k + e
          }
        }
#pragma unroll
        for (int t = 0; t < TM; ++t) {
          const uint4 x = lds128(xbuf + XTile::offset(t, j * kStep + kl) * 4);
          const float xs[R] = {__uint_as_float(x.x), __uint_as_float(x.y), __uint_as_float(x.z), __uint_as_float(x.w)};
#pragma unroll
          for (int i = 0; i < R; ++i)
#pragma unroll
            for (int col = 0; col < 4; ++col) acc[col][t] = fmaf(w[i][col], xs[i], acc[col][t]);
        }
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // every warp done with the ring before the sums take it
    rows_ring_store<L, KN, TM>(acc, g, bz, m0, n0, splits, rank);
  }
}

// float16/bfloat16, mma.sync. A lane's 16 bytes of a 32-k chunk (elements 8t.. of its row) as
// the k pairs of the chunk's two k16 steps: step s takes elements 4s, 4s + 1 as the pair at k
// 2t and 4s + 2, 4s + 3 as the pair at k 2t + 8, for the weight (B) and x (A) alike.
template <class T>
__device__ __forceinline__ void rows_mma_chunk(float (&acc)[4], const uint4& x0, const uint4& x1, const uint4& w) {
  Mma<T>::run(acc, {x0.x, x1.x, x0.y, x1.y}, w.x, w.y);
  Mma<T>::run(acc, {x0.z, x1.z, x0.w, x1.w}, w.z, w.w);
}

// A thread's cp.async copies of one window of a Tile whose rows are 32 16-byte chunks (the
// mma.sync kernels' weight and x windows, 512 bytes a row): warp w copies rows w, w + 8, ..,
// lane l chunk l of each. Its addresses are set once a tile; a window adds its k0 (the row
// steps fold into immediates), so a window's copies cost a few instructions each. Rows past
// the operand's and k past K are zeros (K is whole 16-byte vectors).
template <class Tile, class T>
struct RowsCopier {
  static constexpr int V = 16 / sizeof(T), kPer = Tile::kRows / kRowsWarps;
  static_assert(Tile::kCols == 32 * V && Tile::kRows % kRowsWarps == 0 && kRowsWarps % Tile::kRowPeriod == 0,
                "32 chunks a row, whole row steps of kRowsWarps");
  const T* base;      // the tile's row 0 (where a zero-filled copy points)
  const T* src;       // the thread's first row, its chunk at k 0
  int64_t step;       // kRowsWarps rows, in elements
  uint32_t dst;       // that chunk's place in a stage, in bytes
  int kk;             // the chunk's k
  uint32_t rows_in;   // bit i: row w + kRowsWarps i lies inside the operand

  // rows: the operand's rows from the tile's row 0 on (past it, zeros); s_row: their stride.
  __device__ __forceinline__ RowsCopier(const T* tile, int64_t s_row, int64_t rows) {
    const int w = threadIdx.x / 32;
    kk = threadIdx.x % 32 * V;
    base = tile;
    src = tile + w * s_row + kk;
    step = kRowsWarps * s_row;
    dst = Tile::offset(w, kk) * sizeof(T);
    rows_in = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) rows_in |= uint32_t(w + kRowsWarps * i < rows) << i;
  }
  // The window at k0 into the stage at buf (k: the operand's K).
  __device__ __forceinline__ void copy(uint32_t buf, int64_t k0, int64_t k) const {
    const bool k_in = k0 + kk < k;
    const T* from = src + k0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) {
      const bool in = k_in && (rows_in >> i & 1);
      cp_async16(buf + dst + Tile::offset(kRowsWarps * i, 0) * sizeof(T), in ? from + i * step : base, in ? 16 : 0);
    }
  }
};

// The same for a weight stored (K, N) (RowsWTileKn): a window's rows k of the tile's 8 chunks
// of n, thread t chunk t % 8 of rows t / 8, t / 8 + 32, .., each row where rows_kn_row puts
// it. Columns past the operand's n and k past K are zeros (n is whole 16-byte vectors).
template <class Tile, class T>
struct RowsKnCopier {
  static constexpr int V = 16 / sizeof(T), kPerRow = Tile::kCols / V, kStep = kRowsThreads / kPerRow;
  static constexpr int kPer = Tile::kRows / kStep;
  static_assert(kStep % 32 == 0 && kStep % Tile::kRowPeriod == 0, "passes of whole 32-k chunks");
  const T* base;     // the tile's column 0 at k 0 (where a zero-filled copy points)
  const T* src;      // the thread's first row, its chunk
  int64_t s_k;       // the rows' stride
  int64_t step;      // kStep rows, in elements
  uint32_t dst;      // that chunk's place in a stage, in bytes
  int r;             // the thread's first row
  bool cols_in;      // its chunk lies inside the operand's n

  // cols: the operand's columns from the tile's column 0 on; s_row: its rows' (k's) stride.
  __device__ __forceinline__ RowsKnCopier(const T* tile, int64_t s_row, int64_t cols) {
    r = threadIdx.x / kPerRow;
    const int kk = threadIdx.x % kPerRow * V;
    base = tile;
    src = tile + r * s_row + kk;
    s_k = s_row;
    step = kStep * s_row;
    dst = Tile::offset(rows_kn_row(r), kk) * sizeof(T);
    cols_in = kk < cols;
  }
  __device__ __forceinline__ void copy(uint32_t buf, int64_t k0, int64_t k) const {
    const T* from = src + k0 * s_k;
    const int64_t left = k - k0 - r;  // the thread's rows before K: kStep i < left
    const int rows = left < Tile::kRows ? static_cast<int>(left) : Tile::kRows;
#pragma unroll
    for (int i = 0; i < kPer; ++i, from += step) {
      const bool in = cols_in && kStep * i < rows;
      cp_async16(buf + dst + Tile::offset(kStep * i, 0) * sizeof(T), in ? from : base, in ? 16 : 0);
    }
  }
};

// A warp's share of the mma.sync kernels' products: 8 weight rows of the block's 64, lane (gq, tq)
// = (lane / 4, lane % 4) the 16 bytes at k 8tq.. of weight row gq in each 32-k chunk, and the
// same k of rows gq and gq + 8 of each m16 tile of x. A weight stored (K, N) (KN) gives the lane
// the same pairs by ldmatrix.trans, lane l the row address of chunk row l (rows_kn_row).
template <Layout L, class T, int TM, bool KN>
struct RowsMmaWarp {
  static constexpr int MT = (TM + 15) / 16;
  using WTile = std::conditional_t<KN, RowsWTileKn<L>, RowsWTile<L>>;
  using XTile = RowsXTile<L, TM>;
  using PTile = SplitTile<L, TM, rows_bn(true)>;
  using WCopy = std::conditional_t<KN, RowsKnCopier<WTile, T>, RowsCopier<WTile, T>>;
  using XCopy = RowsCopier<XTile, T>;
  int warp, gq, tq;
  int wo;         // the lane's weight address in chunk 0: row gq of the warp's 8, or KN chunk row lane
  int xo[MT][2];  // its rows gq and gq + 8 of each m16 tile of x in chunk 0

  __device__ __forceinline__ RowsMmaWarp() {
    const int lane = threadIdx.x % 32;
    warp = threadIdx.x / 32, gq = lane / 4, tq = lane % 4;
    wo = KN ? WTile::offset(lane, 8 * warp) : WTile::offset(warp * 8 + gq, 8 * tq);
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) xo[i][h] = XTile::offset(16 * i + 8 * h + gq, 8 * tq);
  }

  // The copies of a tile's windows: the weight's columns n0.. of batch b (b: its start), x's
  // rows m0.. (a: row m0).
  __device__ __forceinline__ static WCopy w_copy(const GemmArgs& g, const T* b, int64_t n0) {
    if constexpr (KN) return WCopy(b + n0, g.b_sk, g.n - n0);
    else return WCopy(b + n0 * g.b_sn, g.b_sn, g.n - n0);
  }
  __device__ __forceinline__ static XCopy x_copy(const GemmArgs& g, const T* a, int64_t m0) {
    return XCopy(a, g.a_sm, g.m - m0);
  }

  // One window's products: the weight's window at wbuf, x's after it.
  __device__ __forceinline__ void window(float (&acc)[MT][4], uint32_t wbuf) const {
    const uint32_t xbuf = wbuf + WTile::kSize * sizeof(T);
    const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
    for (int c = 0; c < kRowsMmaChunks; ++c) {
      uint4 w;
      if constexpr (KN) {
        uint32_t r[4];
        ldsm_x4_trans(r, wbuf + (wo + WTile::offset(32 * c, 0)) * sizeof(T));
        w = make_uint4(r[0], r[1], r[2], r[3]);
      } else {
        w = lds128(wbuf + WTile::join(wo, WTile::offset(0, 32 * c)) * sizeof(T));
      }
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        const int step = XTile::offset(0, 32 * c);  // a constant once unrolled
        const uint4 x0 = 16 * i < TM ? lds128(xbuf + XTile::join(xo[i][0], step) * 2) : zero;
        const uint4 x1 = 16 * i + 8 < TM ? lds128(xbuf + XTile::join(xo[i][1], step) * 2) : zero;
        rows_mma_chunk<T>(acc[i], x0, x1, w);
      }
    }
  }

  // The accumulator pairs into the partial tile: rows gq and gq + 8 of each m16 tile, weight
  // rows 2tq, 2tq + 1 of the warp's 8.
  __device__ __forceinline__ void to_partial(float* part, const float (&acc)[MT][4]) const {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 16 * i + gq + 8 * h;
        if (r < TM)
          *reinterpret_cast<float2*>(part + PTile::offset(r, warp * 8 + 2 * tq)) =
              make_float2(acc[i][2 * h], acc[i][2 * h + 1]);
      }
  }
};

// One block: 64 weight rows (8 a warp) over its rank's windows of k, for TM rows of x. The ring
// holds rows_stages windows of both; while the warps multiply window w, windows w + 1 .. w +
// stages - 1 fly. The accumulator pairs land in the partial tile for split_k_store (one order
// every run: the same bits).
template <Layout L, class T, int TM, int S, bool KN>
__global__ void __launch_bounds__(kRowsThreads, rows_ring_blocks_per_sm<L, TM>(S))
    rows_mma_kernel(const GemmArgs g, const int splits, const int64_t prefetch) {
  using Warp = RowsMmaWarp<L, T, TM, KN>;
  constexpr int kWin = rows_window(dtype_of<T>(), true), BN = rows_bn(true);
  constexpr int kStage = rows_stage_bytes<L, TM>();
  static_assert(S >= 2 && Warp::PTile::kSize * 4 <= S * kStage,
                "a ring of two stages at least, which the partial tile reuses");
  extern __shared__ __align__(16) unsigned char smem[];  // the ring, then the partial tile
  const uint32_t base = smem_u32(smem);
  const Warp warp;
  const RowsTile at = rows_tile<TM, BN>(g, splits);
  const int rank = at.rank;
  const int64_t m0 = at.m0, n0 = at.n0, windows = ceil_div(g.k, kWin);
  const int64_t w0 = split_k_begin(windows, splits, rank), w1 = split_k_begin(windows, splits, rank + 1);
  rows_start<T, KN>(g, static_cast<const T*>(g.b) + blockIdx.z * g.b_sb, n0, BN, w0 * kWin, w1 * kWin, prefetch);
  for (int64_t bz = blockIdx.z; bz < g.batch; bz += gridDim.z) {
    const T* a = static_cast<const T*>(g.a) + bz * g.a_sb + m0 * g.a_sm;
    const T* b = static_cast<const T*>(g.b) + bz * g.b_sb;
    const typename Warp::WCopy w_copy = Warp::w_copy(g, b, n0);
    const typename Warp::XCopy x_copy = Warp::x_copy(g, a, m0);
    const auto stage = [&](int64_t win) {
      const uint32_t buf = base + (win - w0) % S * kStage;
      w_copy.copy(buf, win * kWin, g.k);
      x_copy.copy(buf + Warp::WTile::kSize * sizeof(T), win * kWin, g.k);
    };
    float acc[Warp::MT][4] = {};
    rows_ring_fill<S>(w0, w1, stage);
    for (int64_t win = w0; win < w1; ++win) {
      rows_ring_next<S>(win, w1, stage);
      warp.window(acc, base + (win - w0) % S * kStage);
    }
    cp_async_wait<0>();
    __syncthreads();  // every warp done with the ring before the partial tile takes it
    float* part = reinterpret_cast<float*>(smem);
    warp.to_partial(part, acc);
    __syncthreads();
    split_k_store<T, TM, BN, typename Warp::PTile, kRowsThreads>(part, g, static_cast<T*>(g.c) + bz * g.m * g.n, m0,
                                                                 n0, splits, rank, threadIdx.x);
  }
}

// The persistent form (split 1, one block an SM): block b takes tiles b, b + gridDim.x, .. of
// every batch's (rows_tile's order: the m tiles over one stretch of the weight are neighbours),
// and its ring runs on from one tile's windows into the next's, so the next tile's weight is in
// flight while a tile's sums go out through a partial tile of its own (after the ring).
template <Layout L, class T, int TM, int S, bool KN>
__global__ void __launch_bounds__(kRowsThreads, 1)
    rows_mma_persistent_kernel(const GemmArgs g, const int64_t prefetch) {
  using Warp = RowsMmaWarp<L, T, TM, KN>;
  constexpr int kWin = rows_window(dtype_of<T>(), true), BN = rows_bn(true);
  constexpr int kStage = rows_stage_bytes<L, TM>();
  static_assert(S >= 2, "a ring of two stages at least");
  extern __shared__ __align__(16) unsigned char smem[];  // the ring, then the partial tile
  const uint32_t base = smem_u32(smem);
  float* const part = reinterpret_cast<float*>(smem + rows_persistent_part_at<L, TM>(S));
  const Warp warp;
  const int64_t per_batch = ceil_div(g.m, int64_t(TM)) * ceil_div(g.n, int64_t(BN));
  const int64_t tiles = g.batch * per_batch, nk = ceil_div(g.k, kWin);
  const int64_t mine = tiles > blockIdx.x ? ceil_div(tiles - blockIdx.x, int64_t(gridDim.x)) : 0;
  // Step q: window q % nk of the block's tile q / nk (tile_at(q / nk)).
  struct At {
    int64_t bz, m0, n0;
  };
  const auto tile_at = [&](int64_t j) {
    const int64_t t = blockIdx.x + j * gridDim.x;
    const RowsTile r = rows_corner<TM, BN>(g, t % per_batch);
    return At{t / per_batch, r.m0, r.n0};
  };
  using WCopy = typename Warp::WCopy;
  using XCopy = typename Warp::XCopy;
  const auto w_at = [&](const At& t) { return Warp::w_copy(g, static_cast<const T*>(g.b) + t.bz * g.b_sb, t.n0); };
  const auto x_at = [&](const At& t) {
    return Warp::x_copy(g, static_cast<const T*>(g.a) + t.bz * g.a_sb + t.m0 * g.a_sm, t.m0);
  };
  // stage() issues the steps in order, one a call: window win of the block's tile j (its
  // copiers set at the tile's first window).
  int64_t j = 0, win = 0;
  const At first = tile_at(0);
  rows_start<T, KN>(g, static_cast<const T*>(g.b) + first.bz * g.b_sb, first.n0, BN, 0, g.k, mine > 0 ? prefetch : 0);
  WCopy w_copy = w_at(first);
  XCopy x_copy = x_at(first);
  const auto stage = [&](int64_t q) {
    if (win == nk) {
      win = 0;
      const At t = tile_at(++j);
      w_copy = w_at(t);
      x_copy = x_at(t);
    }
    const uint32_t buf = base + q % S * kStage;
    w_copy.copy(buf, win * kWin, g.k);
    x_copy.copy(buf + Warp::WTile::kSize * sizeof(T), win * kWin, g.k);
    ++win;
  };
  const int64_t steps = mine * nk;
  float acc[Warp::MT][4] = {};
  rows_ring_fill<S>(0, steps, stage);
  int64_t tile = 0, left = nk;  // the tile the products are on, its windows still to multiply
  for (int64_t q = 0; q < steps; ++q) {
    rows_ring_next<S>(q, steps, stage);
    warp.window(acc, base + q % S * kStage);
    if (--left == 0) {
      // The tile's sums. The partial tile is free: the tile before's split_k_store read it
      // before this tile's ring steps, each past a barrier.
      const At t = tile_at(tile++);
      left = nk;
      warp.to_partial(part, acc);
      __syncthreads();
      split_k_store<T, TM, BN, typename Warp::PTile, kRowsThreads>(part, g, static_cast<T*>(g.c) + t.bz * g.m * g.n,
                                                                   t.m0, t.n0, 1, 0, threadIdx.x);
#pragma unroll
      for (int i = 0; i < Warp::MT; ++i)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][e] = 0.f;
    }
  }
  cp_async_wait<0>();
}

// A launch in clusters of `cluster`; with a prefetch, programmatic (rows_start).
template <class... Params, class... Args>
cudaError_t launch(void (*kernel)(Params...), dim3 grid, int smem, int cluster, int64_t prefetch, cudaStream_t stream,
                   Args&&... args) {
  if (prefetch > 0)
    return launch_pdl(kernel, grid, dim3(kRowsThreads), smem, cluster, stream, std::forward<Args>(args)..., prefetch);
  return launch_clustered(kernel, grid, kRowsThreads, smem, cluster, stream, std::forward<Args>(args)..., prefetch);
}

template <auto kernel>
cudaError_t start(const GemmArgs& g, const RowsPlan& p, int bn, int smem, int64_t prefetch, cudaStream_t stream) {
  const cudaError_t err = raise_smem_once<kernel>(smem);
  if (err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>(ceil_div(g.m, p.tm) * ceil_div(g.n, bn) * p.split), 1,
                  static_cast<unsigned>(g.batch < 65535 ? g.batch : 65535));
  return launch(kernel, grid, smem, p.split, prefetch, stream, g, p.split);
}

template <Layout L, class T>
cudaError_t run(const GemmArgs& g, const RowsPlan& p, int64_t blocks, int64_t prefetch, cudaStream_t stream) {
  return with_rows_tm(p.tm, [&](auto tm) {
    constexpr int TM = decltype(tm)::value;
    // The blocks rows_tm gives each: FFMA any on float32, up to kRowsFfmaRows on 16 bits; mma.sync 8 and 16.
    constexpr bool kFfma = std::is_same<T, float>::value || TM <= kRowsFfmaRows;
    constexpr bool kMma = !std::is_same<T, float>::value && TM >= 8 && TM <= kRowsMmaMaxM;
    if constexpr (std::is_same<T, float>::value) {
      const auto ring = [&](auto kn) {
        constexpr bool KN = decltype(kn)::value;
        constexpr int kSmem = rows_ffma_ring_stages<L, KN, TM>() * rows_ffma_ring_stage_bytes<L, KN, TM>();
        return start<rows_ring_kernel<L, KN, TM>>(g, p, rows_bn(false), kSmem, prefetch, stream);
      };
      if (p.b_kn) return ring(std::true_type{});
      // A weight along k takes the ring at the rows the route sends there only (the others are
      // not built).
      if constexpr (rows_takes_ring(DType::F32, TM, false)) {
        if (p.ring) return ring(std::false_type{});
      }
      if (p.ring) return cudaErrorInvalidValue;
    }
    if constexpr (kFfma) {
      if (!p.mma)
        return start<rows_kernel<L, T, TM>>(g, p, rows_bn(false), 2 * TM * rows_window(dtype_of<T>(), false) * sizeof(T),
                                            prefetch, stream);
    }
    if constexpr (kMma) {
      // The plan's ring (the deep or the shallow one: rows_stages, or the persistent kernel's),
      // the weight along k or stored (K, N).
      const auto mma = [&](auto kn) {
        constexpr bool KN = decltype(kn)::value;
        constexpr int kDeep = rows_stages<L, TM>(true), kShallow = rows_stages<L, TM>(false);
        constexpr int kStage = rows_stage_bytes<L, TM>();
        if (p.persistent) {
          constexpr int S = rows_persistent_stages<L, TM>(), kSmem = rows_persistent_smem<L, TM>(S);
          constexpr auto kernel = rows_mma_persistent_kernel<L, T, TM, S, KN>;
          if (p.split != 1 || p.stages != S) return cudaErrorInvalidValue;
          const cudaError_t err = raise_smem_once<kernel>(kSmem);
          if (err != cudaSuccess) return err;
          return launch(kernel, dim3(static_cast<unsigned>(blocks)), kSmem, 1, prefetch, stream, g);
        }
        if (p.stages == kDeep)
          return start<rows_mma_kernel<L, T, TM, kDeep, KN>>(g, p, rows_bn(true), kDeep * kStage, prefetch, stream);
        if (p.stages == kShallow)
          return start<rows_mma_kernel<L, T, TM, kShallow, KN>>(g, p, rows_bn(true), kShallow * kStage, prefetch,
                                                                stream);
        return cudaErrorInvalidValue;
      };
      if (p.mma) return p.b_kn ? mma(std::true_type{}) : mma(std::false_type{});
    }
    return cudaErrorInvalidValue;
  });
}

}  // namespace

cudaError_t launch_rows(const GemmCall& c, const RowsPlan& p, cudaStream_t stream) {
  const GemmArgs& g = c.args;
  // mma.sync takes 16-bit rows only, FFMA those of up to kRowsFfmaRows rows (rows_candidates).
  // The persistent form: mma.sync on compute capability 9.0 (its ring takes 227 KB a block).
  // A 16-bit weight stored (K, N): mma.sync on compute capability 9.0 (rows_candidates).
  const bool form_ok = p.mma ? c.dtype != DType::F32 && (!p.persistent || c.device.cc >= 90)
                             : !rows_on_mma(c.dtype, g.m) && !p.persistent;
  const bool kn16 = p.b_kn && c.dtype != DType::F32;
  const bool takes = kn16 ? p.mma && c.device.cc >= 90 && rows_kn_supports(c.dtype, g) : rows_supports(c.dtype, g);
  if (!takes || !form_ok || rows_tm(g.m, p.mma) != p.tm || p.b_kn != !rows_b_k_vectors(c.dtype, g))
    return cudaErrorInvalidValue;
  if (g.batch == 0 || g.n == 0) return cudaSuccess;
  const int64_t blocks = rows_blocks(c, p);  // the persistent form's grid
  const int64_t prefetch =
      c.options.prefetch && c.device.cc >= 90 ? (p.b_kn ? kRowsKnPrefetchBytes : kRowsPrefetchBytes) : 0;
  return with_layout(c.layout, [&](auto tag) {
    constexpr Layout L = decltype(tag)::value;
    switch (c.dtype) {
      case DType::F32: return run<L, float>(g, p, blocks, prefetch, stream);
      case DType::F16: return run<L, __half>(g, p, blocks, prefetch, stream);
      default: return run<L, __nv_bfloat16>(g, p, blocks, prefetch, stream);
    }
  });
}

}  // namespace bankops
