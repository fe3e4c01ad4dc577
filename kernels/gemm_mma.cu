#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "async_copy.cuh"
#include "gemm_mma.h"
#include "launch.h"
#include "mma_epilogue.cuh"
#include "shift.cuh"

namespace bankops {
namespace {

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

template <class T>
struct Mma;
template <>
struct Mma<__half> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <>
struct Mma<__nv_bfloat16> {
  static __device__ __forceinline__ void run(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

// One operand as a ROWS x COLS tile sees it: rows of the tile are `rows` long in memory
// with stride s_row, columns have stride s_col; (r0, c0) is the tile's corner.
struct Operand {
  const uint16_t* p;
  int64_t s_row, s_col, rows, cols;
};

// threadIdx.x that the compiler cannot hoist: the register path recomputes its tile
// coordinates each k step instead of keeping dozens of them live beside the accumulators.
__device__ __forceinline__ int opaque_tid() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(t));
  return t;
}

// cp.async a ROWS x COLS tile (rows 16-byte aligned, columns contiguous). Partial chunks at
// the right edge and rows past the end are zero-filled by src-size; the source address
// stays inside the operand either way. A thread's chunks share a column and step down by
// kRowStep rows, a multiple of the layout's period: one offset per thread, the steps are
// immediates.
template <class C, class Tile>
__device__ __forceinline__ void fill_async(uint32_t dst, const Operand& o, int64_t r0, int64_t c0) {
  constexpr int kPerRow = Tile::kCols / kMmaChunk, kRowStep = C::kThreads / kPerRow;
  constexpr int kChunks = Tile::kRows * kPerRow / C::kThreads;
  static_assert(C::kThreads % kPerRow == 0 && kRowStep % Tile::kRowPeriod == 0, "chunk rows step by the period");
  const TileCoord t0 = mma_chunk<C>(threadIdx.x, 0, Tile::kCols);
  const uint32_t d0 = dst + Tile::offset(t0.r, t0.c) * 2;
  // Whole tiles inside the operand (all but the edges) skip the per-chunk bounds.
  if (r0 + Tile::kRows <= o.rows && c0 + Tile::kCols <= o.cols) {
    const uint16_t* src = o.p + (r0 + t0.r) * o.s_row + c0 + t0.c;
    const int64_t step = kRowStep * o.s_row;
#pragma unroll
    for (int e = 0; e < kChunks; ++e) cp_async16(d0 + Tile::offset(e * kRowStep, 0) * 2, src + e * step, 16);
    return;
  }
#pragma unroll
  for (int e = 0; e < kChunks; ++e) {
    const int64_t r = r0 + t0.r + e * kRowStep, c = c0 + t0.c;
    const int64_t left = o.cols - c;
    const bool in = r < o.rows && left > 0;
    const int bytes = in ? static_cast<int>(left < kMmaChunk ? left : kMmaChunk) * 2 : 0;
    const uint16_t* src = in ? o.p + r * o.s_row + c : o.p;
    cp_async16(d0 + Tile::offset(e * kRowStep, 0) * 2, src, bytes);
  }
}

// The same fill for whole tiles (all but the edges), with everything but the stage and the
// k advance hoisted out of the k loop: the k loop's issue slots belong to the mma.
template <class C, class Tile>
struct WholeFill {
  static constexpr int kPerRow = Tile::kCols / kMmaChunk, kRowStep = C::kThreads / kPerRow;
  static constexpr int kChunks = Tile::kRows * kPerRow / C::kThreads;
  uint32_t dst;          // the thread's first chunk in stage 0
  const uint16_t* src;   // its source at the k-tile the next fill loads
  int64_t step;          // kRowStep rows of the operand
  __device__ __forceinline__ WholeFill(uint32_t tile, const Operand& o) {
    const TileCoord t0 = mma_chunk<C>(threadIdx.x, 0, Tile::kCols);
    dst = tile + Tile::offset(t0.r, t0.c) * 2;
    src = o.p + t0.r * o.s_row + t0.c;
    step = kRowStep * o.s_row;
  }
  __device__ __forceinline__ void operator()(uint32_t stage) const {
#pragma unroll
    for (int e = 0; e < kChunks; ++e) cp_async16(dst + stage + Tile::offset(e * kRowStep, 0) * 2, src + e * step, 16);
  }
};

// Register path, group G (8 elements) of a thread's elements: the loads are issued before
// a quarter of a k-tile's mma work and stored into the tile after it, so that only 8-16
// loaded values are live beside the accumulators. Along: a thread's elements share a
// column and step down the rows; across: group G is one 8-element chunk of a row. The
// addresses advance from one pointer: hoisting a 64-bit offset per element out of the k
// loop would cost more registers than the accumulators leave.
template <class C, class Tile, int G>
__device__ __forceinline__ void stage_load(uint16_t (&v)[kMmaChunk], const Operand& o, int64_t r0, int64_t c0,
                                           bool along) {
  const int64_t rows_left = o.rows - r0, cols_left = o.cols - c0;
  const int tid = opaque_tid();
  if (along) {
    static_assert(C::kThreads % Tile::kCols == 0, "along: a thread's elements share a column");
    constexpr int kRowStep = C::kThreads / Tile::kCols;
    const TileCoord t = mma_along_elem<C>(tid, G * kMmaChunk, Tile::kCols);
    const bool col_in = t.c < cols_left;
    const uint16_t* p = o.p + (r0 + t.r) * o.s_row + (c0 + t.c) * o.s_col;
    const int64_t step = kRowStep * o.s_row;
#pragma unroll
    for (int e = 0; e < kMmaChunk; ++e)
      v[e] = (col_in && t.r + e * kRowStep < rows_left) ? __ldg(p + e * step) : uint16_t(0);
  } else {
    const TileCoord t = mma_across_chunk<C>(tid, G, Tile::kRows);
    const bool row_in = t.r < rows_left;
    const uint16_t* p = o.p + (r0 + t.r) * o.s_row + (c0 + t.c) * o.s_col;
#pragma unroll
    for (int q = 0; q < kMmaChunk; ++q) v[q] = (row_in && t.c + q < cols_left) ? __ldg(p + q * o.s_col) : uint16_t(0);
  }
}

template <class C, class Tile, int G>
__device__ __forceinline__ void stage_store(uint16_t* tile, const uint16_t (&v)[kMmaChunk], bool along) {
  const int tid = opaque_tid();
  if (along) {
#pragma unroll
    for (int e = 0; e < kMmaChunk; ++e) {
      const TileCoord t = mma_along_elem<C>(tid, G * kMmaChunk + e, Tile::kCols);
      tile[Tile::offset(t.r, t.c)] = v[e];
    }
  } else {
    const TileCoord t = mma_across_chunk<C>(tid, G, Tile::kRows);
    uint4 w;
    w.x = v[0] | uint32_t(v[1]) << 16;
    w.y = v[2] | uint32_t(v[3]) << 16;
    w.z = v[4] | uint32_t(v[5]) << 16;
    w.w = v[6] | uint32_t(v[7]) << 16;
    *reinterpret_cast<uint4*>(tile + Tile::offset(t.r, t.c)) = w;
  }
}

// One operand of the realigning path (MmaRaw): cp.async of the aligned chunks under k-tile
// x's rows into a raw stage, and the realign pass from a raw stage into a tile buffer.
// `o` is the operand as the tile sees it with the block tile's corner folded in (unit
// stride along its columns); k-tile x's corner is (x * BK, 0) (KN_ROWS: k runs down the
// rows, B in Bs[BK][BN]) or (0, x * BK). Either way a row's offset in 16 bytes is the same
// for every k-tile (x * BK columns are 64 bytes, x * BK rows 64 row strides), and a
// thread's tile chunks sit kRowStep rows apart (a multiple of 8): one offset per thread.
template <class C, class Tile, bool KN_ROWS>
struct StagedFill {
  using Raw = MmaRaw<Tile::kRows, Tile::kCols>;
  static constexpr int kPerRow = Tile::kCols / kMmaChunk, kRowStep = C::kThreads / kPerRow;
  static constexpr int kChunks = Tile::kRows * kPerRow / C::kThreads;  // tile chunks per thread
  static constexpr int kFills = (Raw::kChunks + C::kThreads - 1) / C::kThreads;  // raw chunks per thread
  static_assert(C::kThreads % kPerRow == 0 && kRowStep % Tile::kRowPeriod == 0 && kRowStep % 8 == 0,
                "a thread's tile chunks: steps of the layout's period, one offset in 16 bytes");
  static_assert(kRowStep % 2 == 0, "split raw rows: a thread's chunks keep their row parity");
  const uint16_t* p;
  int64_t s_row, rows, cols;
  uintptr_t lo, hi;       // the matrix's bytes [lo, hi): nothing outside is read
  uint32_t raw;           // the operand's raw area in raw stage 0
  uint32_t rd, wr;        // realign: the thread's first raw chunk (stage 0), its tile chunk (buffer 0)
  uint32_t shift;         // the thread's rows' offset in 16 bytes
  __device__ __forceinline__ StagedFill(const Operand& o, uintptr_t lo_, uintptr_t hi_, uint32_t tile,
                                        uint32_t raw_) {
    p = o.p;
    s_row = o.s_row;
    rows = o.rows;
    cols = o.cols;
    lo = lo_;
    hi = hi_;
    raw = raw_;
    const TileCoord t0 = mma_chunk<C>(threadIdx.x, 0, Tile::kCols);
    rd = raw + Raw::pos(t0.r, t0.c / kMmaChunk) * 16;
    wr = tile + Tile::offset(t0.r, t0.c) * 2;
    shift = static_cast<uint32_t>(addr_of(p + t0.r * s_row)) & 15;
  }
  __device__ __forceinline__ static int64_t r_of(int x) { return KN_ROWS ? int64_t(x) * C::kBK : 0; }
  __device__ __forceinline__ static int64_t c_of(int x) { return KN_ROWS ? 0 : int64_t(x) * C::kBK; }

  // Raw chunks of k-tile x -> raw stage at byte offset `stage`. A whole k-tile (every row
  // and column inside, and every covering chunk inside the matrix's bytes) copies all of
  // them; otherwise each chunk copies only what lies before the end of its row's valid
  // columns (cp.async zero-fills the rest: K tails must be zero), chunks past it or in rows
  // past the edge are zeroed, and a chunk that starts before the matrix (its first row, a
  // pointer off 16 bytes) or ends past it (its last row) is loaded element by element:
  // compute-sanitizer counts a cp.async as all 16 bytes whatever its source size. The trace
  // replays these choices through MmaRaw::whole and ::chunk (gemm_mma.h): change both.
  __device__ __forceinline__ void fill(int x, uint32_t stage) const {
    const int64_t r0 = r_of(x), c0 = c_of(x);
    const uint16_t* first = p + r0 * s_row + c0;
    const uintptr_t first_chunk = addr_of(first) & ~uintptr_t(15);
    const uintptr_t last_end = (addr_of(first + (Tile::kRows - 1) * s_row) & ~uintptr_t(15)) + Raw::kPerRow * 16;
    const bool whole = r0 + Tile::kRows <= rows && c0 + Tile::kCols <= cols && first_chunk >= lo && last_end <= hi;
    const int64_t valid = cols - c0 < Tile::kCols ? cols - c0 : Tile::kCols;
    const int t = threadIdx.x;
#pragma unroll
    for (int i = 0; i < kFills; ++i) {
      const int s = t + i * C::kThreads;
      if (Raw::kChunks % C::kThreads != 0 && i == kFills - 1 && s >= Raw::kChunks) break;
      const TileCoord rq = Raw::slot(s);
      const uint32_t dst = raw + stage + Raw::slot_pos(s) * 16;
      const uint16_t* seg = first + rq.r * s_row;
      const uintptr_t src = (addr_of(seg) & ~uintptr_t(15)) + rq.c * 16;
      if (whole) {
        cp_async16(dst, reinterpret_cast<const void*>(src), 16);
        continue;
      }
      const uintptr_t end = addr_of(seg) + 2 * valid;  // this row's valid bytes end here
      const int64_t left = r0 + rq.r < rows ? int64_t(end) - int64_t(src) : 0;
      const int bytes = left <= 0 ? 0 : left < 16 ? static_cast<int>(left) : 16;
      if (bytes == 0) {
        sts128(dst, uint4{0, 0, 0, 0});
      } else if (src >= lo && src + 16 <= hi) {
        cp_async16(dst, reinterpret_cast<const void*>(src), bytes);
      } else {
        uint16_t h[kMmaChunk];
#pragma unroll
        for (int q = 0; q < kMmaChunk; ++q) {
          const uintptr_t a = src + 2 * q;
          h[q] = a >= lo && a < end ? __ldg(reinterpret_cast<const uint16_t*>(a)) : uint16_t(0);
        }
        sts128(dst, uint4{h[0] | uint32_t(h[1]) << 16, h[2] | uint32_t(h[3]) << 16, h[4] | uint32_t(h[5]) << 16,
                          h[6] | uint32_t(h[7]) << 16});
      }
    }
  }
  // Tile chunk e: the two raw chunks under it (raw stage at `stage`) -> tile buffer at `buf`.
  __device__ __forceinline__ void realign(uint32_t stage, uint32_t buf, int e) const {
    const uint32_t r = rd + stage + Raw::pos(e * kRowStep, 0) * 16;
    const uint4 a = lds128(r), b = lds128(r + 16);
    sts128(wr + buf + Tile::offset(e * kRowStep, 0) * 2, shift_bytes<2>(a, b, static_cast<int>(shift)));
  }
};
// A thread's ldmatrix byte offsets inside one stage, computed once per kernel: the swizzle
// of a step that the thread's own coordinates leave clear is one XOR (layout.cuh, join), so
// the k loop only adds the stage base and compile-time row offsets. A joins its k16 steps s;
// B joins its n16 pairs j (Bs[BK][BN], s adds rows) or its k16 steps s (Bs[BN][BK], j adds
// rows).
template <Layout L, class C, bool KN>
struct LdsmOffsets {
  using ATile = MmaATile<L, C>;
  using BTile = MmaBTile<L, C, KN>;
  static constexpr int kA = C::kSteps, kB = KN ? C::kFragN / 2 : C::kSteps;
  static_assert(16 % ATile::kRowPeriod == 0 && 16 % BTile::kRowPeriod == 0, "16-row steps are adds");
  uint32_t a[kA], b[kB];
  __device__ __forceinline__ LdsmOffsets() {
    const TileCoord ca = mma_ldsm_a<C>(threadIdx.x, 0, 0), cb = mma_ldsm_b<C>(threadIdx.x, 0, 0, KN);
    const int oa = ATile::offset(ca.r, ca.c), ob = BTile::offset(cb.r, cb.c);
#pragma unroll
    for (int s = 0; s < kA; ++s) a[s] = ATile::join(oa, ATile::offset(0, 16 * s)) * 2;
#pragma unroll
    for (int x = 0; x < kB; ++x) b[x] = BTile::join(ob, BTile::offset(0, 16 * x)) * 2;
  }
  // ldmatrix addresses: A (m16 tile i, k16 step s), B (n8 pair j, k16 step s).
  __device__ __forceinline__ uint32_t a_addr(uint32_t base, int i, int s) const {
    return base + a[s] + ATile::offset(16 * i, 0) * 2;
  }
  __device__ __forceinline__ uint32_t b_addr(uint32_t base, int j, int s) const {
    return KN ? base + b[j] + BTile::offset(16 * s, 0) * 2 : base + b[s] + BTile::offset(16 * j, 0) * 2;
  }
};

// The B fragments of k16 step s: n8 tiles 2j, 2j+1 from ldmatrix.x4 j.
template <Layout L, class C, bool KN>
__device__ __forceinline__ void load_b_frags(uint32_t (&bf)[C::kFragN / 2][4], const LdsmOffsets<L, C, KN>& lo,
                                             uint32_t b_base, int s) {
#pragma unroll
  for (int j = 0; j < C::kFragN / 2; ++j) {
    if (KN) ldsm_x4_trans(bf[j], lo.b_addr(b_base, j, s));
    else ldsm_x4(bf[j], lo.b_addr(b_base, j, s));
  }
}
// Half H of a k16 step: m16 tiles 2H and 2H+1 against every n8 tile of the warp.
template <class T, Layout L, class C, bool KN, int H>
__device__ __forceinline__ void mma_half(float (&acc)[C::kFragM][C::kFragN][4], const uint32_t (&bf)[C::kFragN / 2][4],
                                         const LdsmOffsets<L, C, KN>& lo, uint32_t a_base, int s) {
  constexpr int kI = C::kFragM / 2;
  uint32_t af[kI][4];
#pragma unroll
  for (int i = 0; i < kI; ++i) ldsm_x4(af[i], lo.a_addr(a_base, H * kI + i, s));
#pragma unroll
  for (int i = 0; i < kI; ++i)
#pragma unroll
    for (int j = 0; j < C::kFragN; ++j)
      Mma<T>::run(acc[H * kI + i][j], af[i], bf[j / 2][j % 2 * 2], bf[j / 2][j % 2 * 2 + 1]);
}

// Every fragment of one k16 step (A: all m16 tiles, B: all n8 pairs), for the cp.async
// path's double buffer: the next step's ldmatrix latency hides behind this step's mma.
template <class C>
struct MmaFrags {
  uint32_t a[C::kFragM][4], b[C::kFragN / 2][4];
};
template <Layout L, class C, bool KN>
__device__ __forceinline__ void load_frags(MmaFrags<C>& fr, const LdsmOffsets<L, C, KN>& lo, uint32_t a_base,
                                           uint32_t b_base, int s) {
  load_b_frags<L, C, KN>(fr.b, lo, b_base, s);
#pragma unroll
  for (int i = 0; i < C::kFragM; ++i) ldsm_x4(fr.a[i], lo.a_addr(a_base, i, s));
}
template <class T, class C>
__device__ __forceinline__ void mma_step(float (&acc)[C::kFragM][C::kFragN][4], const MmaFrags<C>& fr) {
#pragma unroll
  for (int i = 0; i < C::kFragM; ++i)
#pragma unroll
    for (int j = 0; j < C::kFragN; ++j)
      Mma<T>::run(acc[i][j], fr.a[i], fr.b[j / 2][j % 2 * 2], fr.b[j / 2][j % 2 * 2 + 1]);
}

struct MmaFlags {
  bool a_along, b_along;
  bool out_vec;  // C rows 16-byte aligned: whole-chunk stores
};

template <Layout L, class C, class T, bool KN, MmaFill FILL>
__global__ void __launch_bounds__(C::kThreads, C::kBlocksPerSM) gemm_mma_kernel(const GemmArgs g, const MmaFlags f) {
  using ATile = MmaATile<L, C>;
  using BTile = MmaBTile<L, C, KN>;
  using CTile = MmaCTile<L, C>;
  constexpr int kStages = C::kStages, kBK = C::kBK;
  constexpr int kStage = ATile::kSize + BTile::kSize;  // halves
  extern __shared__ __align__(16) unsigned char smem_raw[];
  uint16_t* smem = reinterpret_cast<uint16_t*>(smem_raw);
  const uint32_t smem_base = smem_u32(smem);
  const LdsmOffsets<L, C, KN> lo;
  const int64_t tiles_m = ceil_div(g.m, C::kBM);
  // One pass over the m tiles (the usual case): grouped order; otherwise the grid loops.
  const bool grouped = gridDim.y == tiles_m;
  const int nk = static_cast<int>(ceil_div(g.k, kBK));

  for (int64_t bz = blockIdx.z; bz < g.batch; bz += gridDim.z) {
    const uint16_t* a = static_cast<const uint16_t*>(g.a) + bz * g.a_sb;
    const uint16_t* b = static_cast<const uint16_t*>(g.b) + bz * g.b_sb;
    uint16_t* c = static_cast<uint16_t*>(g.c) + bz * g.m * g.n;
    for (int64_t ty = blockIdx.y; ty < tiles_m; ty += gridDim.y) {
      const MmaTileIndex idx =
          grouped ? mma_raster(blockIdx.x, ty, gridDim.x, tiles_m) : MmaTileIndex{int64_t(blockIdx.x), ty};
      const int64_t m0 = idx.tm * C::kBM, n0 = idx.tn * C::kBN;
      // Tile corners move along k: A's columns, and B's rows (KN) or columns (NK).
      const Operand oa{a + m0 * g.a_sm, g.a_sm, g.a_sk, g.m - m0, g.k};
      const Operand ob = KN ? Operand{b + n0 * g.b_sn, g.b_sk, g.b_sn, g.k, g.n - n0}
                            : Operand{b + n0 * g.b_sn, g.b_sn, g.b_sk, g.n - n0, g.k};
      const auto b_corner = [](int64_t k0, int64_t& r, int64_t& cc) {
        r = KN ? k0 : 0;
        cc = KN ? 0 : k0;
      };
      float acc[C::kFragM][C::kFragN][4] = {};

      if constexpr (FILL == MmaFill::Async) {
        // k-tiles [0, nk_whole) lie inside K; with the m (n) edge inside too, a tile is whole.
        const int nk_whole = static_cast<int>(g.k / kBK);
        const bool a_inner = C::kBM <= oa.rows, b_inner = KN ? C::kBN <= ob.cols : C::kBN <= ob.rows;
        WholeFill<C, ATile> fa(smem_base, oa);
        WholeFill<C, BTile> fb(smem_base + ATile::kSize * 2, ob);
        const int64_t b_kstep = KN ? kBK * ob.s_row : kBK;  // whole tiles have contiguous rows
        const auto fill = [&](int kt, int slot) {
          const uint32_t stage = slot * kStage * 2;
          if (a_inner && kt < nk_whole) fa(stage);
          else fill_async<C, ATile>(smem_base + stage, oa, 0, int64_t(kt) * kBK);
          if (b_inner && kt < nk_whole) {
            fb(stage);
          } else {
            int64_t br, bc;
            b_corner(int64_t(kt) * kBK, br, bc);
            fill_async<C, BTile>(smem_base + stage + ATile::kSize * 2, ob, br, bc);
          }
          fa.src += kBK;
          fb.src += b_kstep;
        };
#pragma unroll
        for (int s = 0; s < kStages - 1; ++s) {
          if (s < nk) fill(s, s);
          cp_async_commit();
        }
        // CUTLASS's multistage order: the wait and barrier for tile kt + 1 come before the
        // last k16 step of tile kt, so that step's mma covers the first ldmatrix of tile
        // kt + 1, and the barrier's stall overlaps tensor work already issued.
        constexpr int kSteps = C::kSteps;
        cp_async_wait<kStages - 2>();
        __syncthreads();  // tile 0 landed
        MmaFrags<C> fr[2];
        load_frags<L, C, KN>(fr[0], lo, smem_base, smem_base + ATile::kSize * 2, 0);
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
              load_frags<L, C, KN>(fr[(s + 1) % 2], lo, a_next, a_next + ATile::kSize * 2, 0);
            } else {
              load_frags<L, C, KN>(fr[(s + 1) % 2], lo, a_base, b_base, s + 1);
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
      } else if constexpr (FILL == MmaFill::Realign) {
        // Raw k-tile x + R - 1 is copied at the top of iteration x (its raw stage was last read
        // by the realign of x - 1, before the barrier of x - 1), and k-tile x + 1 is realigned
        // into the other tile buffer during the mma of x, a quarter per k16 half-step: one
        // barrier per k-tile, and every copy has R - 2 k-tiles of mma work to land.
        using FA = StagedFill<C, ATile, false>;
        using FB = StagedFill<C, BTile, KN>;
        constexpr int kRaw = kMmaRawStages<L, C, KN>;
        constexpr uint32_t kBuf = kStage * 2, kRawStage = FA::Raw::kBytes + FB::Raw::kBytes;
        static_assert(kRaw >= 3 && FA::kChunks == 4 && FB::kChunks == 4 && C::kSteps == 2,
                      "one tile chunk of each operand per quarter k-tile");
        const uint32_t raw_base = smem_base + 2 * kBuf;
        const uintptr_t a_lo = addr_of(a), a_hi = addr_of(a + (g.m - 1) * g.a_sm + (g.k - 1) * g.a_sk + 1);
        const uintptr_t b_lo = addr_of(b), b_hi = addr_of(b + (g.k - 1) * g.b_sk + (g.n - 1) * g.b_sn + 1);
        const FA fa(oa, a_lo, a_hi, smem_base, raw_base);
        const FB fb(ob, b_lo, b_hi, smem_base + ATile::kSize * 2, raw_base + FA::Raw::kBytes);
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
#define BANKOPS_MMA_QUARTER(Q)                                  \
  if (Q % 2 == 0) load_b_frags<L, C, KN>(bf, lo, b_base, Q / 2); \
  if (next) realign(kt + 1, Q);                                 \
  mma_half<T, L, C, KN, Q % 2>(acc, bf, lo, a_base, Q / 2);
          BANKOPS_MMA_QUARTER(0) BANKOPS_MMA_QUARTER(1) BANKOPS_MMA_QUARTER(2) BANKOPS_MMA_QUARTER(3)
#undef BANKOPS_MMA_QUARTER
        }
        cp_async_wait<0>();
      } else {
        // Four 8-element groups of each operand per k-tile; group q of A and of B is in
        // flight during quarter q of the previous tile's mma work (k16 step q / 2, half q % 2).
        static_assert(C::kElemsA == 4 * kMmaChunk && C::kElemsB == 4 * kMmaChunk && kBK == 32,
                      "the register path's groups");
        uint16_t va[kMmaChunk], vb[kMmaChunk];
        for (int s = 0; s < kStages - 1 && s < nk; ++s) {
          uint16_t* at = smem + s * kStage;
          uint16_t* bt = at + ATile::kSize;
          int64_t br, bc;
          b_corner(int64_t(s) * kBK, br, bc);
          const int64_t k0 = int64_t(s) * kBK;
#define BANKOPS_MMA_FILL(Q)                                \
  stage_load<C, ATile, Q>(va, oa, 0, k0, f.a_along);       \
  stage_load<C, BTile, Q>(vb, ob, br, bc, f.b_along);      \
  stage_store<C, ATile, Q>(at, va, f.a_along);             \
  stage_store<C, BTile, Q>(bt, vb, f.b_along);
          BANKOPS_MMA_FILL(0) BANKOPS_MMA_FILL(1) BANKOPS_MMA_FILL(2) BANKOPS_MMA_FILL(3)
#undef BANKOPS_MMA_FILL
        }
        for (int kt = 0; kt < nk; ++kt) {
          __syncthreads();  // tile kt stored by every thread; stage (kt - 1) % S is free
          const int next = kt + kStages - 1;
          const bool more = next < nk;
          uint16_t* at = smem + (next % kStages) * kStage;
          uint16_t* bt = at + ATile::kSize;
          int64_t br, bc;
          b_corner(int64_t(next) * kBK, br, bc);
          const int64_t k0 = int64_t(next) * kBK;
          const uint32_t a_base = smem_base + (kt % kStages) * kStage * 2;
          const uint32_t b_base = a_base + ATile::kSize * 2;
          uint32_t bf[C::kFragN / 2][4];
#define BANKOPS_MMA_QUARTER(Q)                                  \
  if (Q % 2 == 0) load_b_frags<L, C, KN>(bf, lo, b_base, Q / 2); \
  if (more) {                                                   \
    stage_load<C, ATile, Q>(va, oa, 0, k0, f.a_along);          \
    stage_load<C, BTile, Q>(vb, ob, br, bc, f.b_along);         \
  }                                                             \
  mma_half<T, L, C, KN, Q % 2>(acc, bf, lo, a_base, Q / 2);     \
  if (more) {                                                   \
    stage_store<C, ATile, Q>(at, va, f.a_along);                \
    stage_store<C, BTile, Q>(bt, vb, f.b_along);                \
  }
          BANKOPS_MMA_QUARTER(0) BANKOPS_MMA_QUARTER(1) BANKOPS_MMA_QUARTER(2) BANKOPS_MMA_QUARTER(3)
#undef BANKOPS_MMA_QUARTER
        }
      }

      __syncthreads();  // every warp is done reading the stage ring
      mma_epilogue<C, CTile, T>(smem, acc, threadIdx.x, c, g, m0, n0, f.out_vec, [] { __syncthreads(); });
      __syncthreads();  // the C tile is read out before the next tile's loads reuse it
    }
  }
}

template <Layout L, class C, class T, bool KN, MmaFill FILL>
cudaError_t run(const GemmArgs& g, const MmaFlags& f, cudaStream_t stream) {
  constexpr auto kernel = gemm_mma_kernel<L, C, T, KN, FILL>;
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

// The realigning and register paths run MmaSmall only: their staging schedules are written
// for 4 chunks (groups of 8 elements) per operand and k-tile.
template <Layout L, class T>
cudaError_t dispatch(const GemmArgs& g, const GemmMmaPlan& p, const MmaFlags& f, cudaStream_t stream) {
  constexpr MmaFill kA = MmaFill::Async;
  if (p.async && p.shape == MmaShape::Large)
    return p.b_kn ? run<L, MmaLarge, T, true, kA>(g, f, stream) : run<L, MmaLarge, T, false, kA>(g, f, stream);
  if (p.async && p.shape == MmaShape::Narrow)
    return p.b_kn ? run<L, MmaNarrow, T, true, kA>(g, f, stream) : run<L, MmaNarrow, T, false, kA>(g, f, stream);
  if (p.async)
    return p.b_kn ? run<L, MmaSmall, T, true, kA>(g, f, stream) : run<L, MmaSmall, T, false, kA>(g, f, stream);
  if (p.realign)
    return p.b_kn ? run<L, MmaSmall, T, true, MmaFill::Realign>(g, f, stream)
                  : run<L, MmaSmall, T, false, MmaFill::Realign>(g, f, stream);
  return p.b_kn ? run<L, MmaSmall, T, true, MmaFill::Registers>(g, f, stream)
                : run<L, MmaSmall, T, false, MmaFill::Registers>(g, f, stream);
}

}  // namespace

cudaError_t launch_gemm_mma(Layout layout, DType dtype, const GemmArgs& g, bool hopper, cudaStream_t stream) {
  if (!gemm_mma_supports(dtype, g)) return cudaErrorNotSupported;
  if (g.batch == 0 || g.m == 0 || g.n == 0) return cudaSuccess;
  const GemmMmaPlan p = gemm_mma_plan(g, mma_aligned16(g.a), mma_aligned16(g.b));
  const WgmmaShape wgmma = wgmma_shape(g, p, hopper && layout == Layout::Swizzle);
  if (wgmma != WgmmaShape::None) return launch_gemm_wgmma(dtype, g, wgmma, p.b_kn, !p.async, stream);
  const MmaFlags f{p.a_along, p.b_along, mma_aligned16(g.c) && g.n % kMmaChunk == 0};
  return with_layout(layout, [&](auto tag) {
    constexpr Layout L = decltype(tag)::value;
    return dtype == DType::F16 ? dispatch<L, __half>(g, p, f, stream) : dispatch<L, __nv_bfloat16>(g, p, f, stream);
  });
}

}  // namespace bankops
