#include "bytes.cuh"
#include "shift.cuh"
#include "launch.h"

namespace bankops {
namespace {

// Element offsets of plane b (a flat index over the batch dims) in the input and output.
__device__ __forceinline__ void plane_bases(const TransposeArgs& a, int64_t b, int64_t& in_base, int64_t& out_base) {
  int64_t rem = b;
  in_base = out_base = 0;
#pragma unroll
  for (int d = kTransposeBatchDims - 1; d >= 0; --d) {
    if (d < a.batch_dims) {
      const int64_t q = rem / a.batch_size[d], r = rem - q * a.batch_size[d];
      in_base += r * a.in_batch_stride[d];
      out_base += r * a.out_batch_stride[d];
      rem = q;
    }
  }
}

// Four blocks an SM at least: 32 KB of tile loads in flight.
template <class Tile, class E>
__global__ void __launch_bounds__(kTransposeTile * kTransposeRowGroups, 4) transpose_kernel(const TransposeArgs a) {
  constexpr int kRows = Tile::kRows, kPerThread = kRows / kTransposeRowGroups;
  __shared__ E tile[Tile::kSize];
  const E* __restrict__ in = static_cast<const E*>(a.in);
  E* __restrict__ out = static_cast<E*>(a.out);
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t tiles_i = (a.n_i + kRows - 1) / kRows;
  const int64_t j0 = int64_t(blockIdx.x) * kTransposeTile;

  for (int64_t b = blockIdx.z; b < a.batch; b += gridDim.z) {
    int64_t in_base, out_base;
    plane_bases(a, b, in_base, out_base);
    for (int64_t ti = blockIdx.y; ti < tiles_i; ti += gridDim.y) {
      const int64_t i0 = ti * kRows;
      // Read rows of the input plane: lanes walk j, the input's contiguous dim. All loads
      // first, so that they are in flight together.
      // One running pointer (step: 8 rows) keeps a narrow element's 32 loads from holding
      // 32 64-bit addresses in registers.
      E v[kPerThread];
      const TileCoord t0 = transpose_in(tx, ty, 0);
      const E* p = in + in_base + (i0 + t0.r) * a.in_si + (j0 + t0.c) * a.in_sj;
      const int64_t step = int64_t(transpose_in(tx, ty, 1).r - t0.r) * a.in_si;
      const bool j_ok = j0 + t0.c < a.n_j;
#pragma unroll
      for (int k = 0; k < kPerThread; ++k, p += step) {
        const TileCoord t = transpose_in(tx, ty, k);
        if (j_ok && i0 + t.r < a.n_i) v[k] = *p;
      }
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        const TileCoord t = transpose_in(tx, ty, k);
        if (i0 + t.r < a.n_i && j0 + t.c < a.n_j) tile[Tile::offset(t.r, t.c)] = v[k];
      }
      __syncthreads();
      // Write rows of the output plane: lanes walk i, reading a column of the tile.
      const TileCoord o0 = transpose_out(tx, ty, 0);
      E* const q = out + out_base + (j0 + o0.c) * a.out_sj + (i0 + o0.r) * a.out_si;
#pragma unroll
      for (int k = 0; k < kPerThread; ++k) {
        const TileCoord t = transpose_out(tx, ty, k);
        const int64_t i = i0 + t.r, j = j0 + t.c;
        if (i < a.n_i && j < a.n_j)
          q[(t.c - o0.c) * a.out_sj + (t.r - o0.r) * a.out_si] = tile[Tile::offset(t.r, t.c)];
      }
      __syncthreads();
    }
  }
}

// A 16-byte vector as four 32-bit words (the register transposes work on words).
union Vec16 {
  uint4 v;
  uint32_t w[4];
};

// Element type of E bytes, for the element-wise edges of the vector kernel.
template <int E> struct ElemOf;
template <> struct ElemOf<1> { using type = uint8_t; };
template <> struct ElemOf<2> { using type = uint16_t; };
template <> struct ElemOf<4> { using type = uint32_t; };
template <> struct ElemOf<8> { using type = uint64_t; };
template <> struct ElemOf<16> { using type = uint4; };

// Elements [first, last) of the 16-byte chunk at p (the rest zero): a chunk that reaches
// past the valid bytes of a row segment. p is 16-byte aligned; only valid elements are read.
template <int E>
__device__ __forceinline__ Vec16 load_elems(const char* p, int first, int last) {
  using T = typename ElemOf<E>::type;
  union {
    Vec16 vec;
    T e[16 / E];
  } u;
  u.vec.v = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int c = 0; c < 16 / E; ++c)
    if (c >= first && c < last) u.e[c] = reinterpret_cast<const T*>(p)[c];
  return u.vec;
}

// The first n (< V) elements of a vector: a row's partial last vector. The rest of the
// vector is zero; the caller never writes it out.
template <int E>
__device__ __forceinline__ Vec16 load_partial(const char* p, int64_t n) {
  return load_elems<E>(p, 0, static_cast<int>(n));
}

// Writes elements [first, last) of vec to p: a chunk that holds both ends of a short output
// row (its other bytes belong to the neighbouring rows).
template <int E>
__device__ __forceinline__ void store_elems(char* p, const Vec16& vec, int first, int last) {
  using T = typename ElemOf<E>::type;
  union {
    Vec16 vec;
    T e[16 / E];
  } u;
  u.vec = vec;
#pragma unroll
  for (int c = 0; c < 16 / E; ++c)
    if (c >= first && c < last) reinterpret_cast<T*>(p)[c] = u.e[c];
}

// Vector of the lane `delta` lanes above, within groups of `width` lanes (all lanes must call it).
__device__ __forceinline__ Vec16 shfl_down(const Vec16& v, int delta, int width) {
  Vec16 r;
#pragma unroll
  for (int w = 0; w < 4; ++w) r.w[w] = __shfl_down_sync(0xffffffffu, v.w[w], delta, width);
  return r;
}

// Vector of lane `src` of this lane's group of `width` lanes (all lanes must call it).
__device__ __forceinline__ Vec16 shfl_idx(const Vec16& v, int src, int width) {
  Vec16 r;
#pragma unroll
  for (int w = 0; w < 4; ++w) r.w[w] = __shfl_sync(0xffffffffu, v.w[w], src, width);
  return r;
}

// Vector of the lane `delta` lanes below, within groups of `width` lanes (all lanes must call it).
__device__ __forceinline__ Vec16 shfl_up(const Vec16& v, int delta, int width) {
  Vec16 r;
#pragma unroll
  for (int w = 0; w < 4; ++w) r.w[w] = __shfl_up_sync(0xffffffffu, v.w[w], delta, width);
  return r;
}

// The partial chunks at an output row's ends (their other bytes are the neighbouring row's,
// written by another block) go out in at most one aligned piece of each size (8/4/2/1
// bytes), each taken from fixed words of the vector with a select or a funnel shift; a
// general byte shift per piece would cost as much as the realignment itself.
template <int E, int SIZE>
__device__ __forceinline__ void store_piece(char* p, uint32_t lo, uint32_t hi) {
  if constexpr (SIZE == 8) *reinterpret_cast<uint2*>(p) = make_uint2(lo, hi);
  if constexpr (SIZE == 4) *reinterpret_cast<uint32_t*>(p) = lo;
  if constexpr (SIZE == 2) *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(lo);
  if constexpr (SIZE == 1) *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(lo);
}

// Bytes [0, n) of chunk (0 < n < 16, a multiple of E) to p, 16-byte aligned: the tail of an
// output row. Piece sizes descend, so piece SIZE starts at n & (16 - 2 SIZE) (the bits of n
// above it): 8 bytes at 0, 4 at 0 or 8, 2 and 1 in word (n >> 2) & 3.
template <int E>
__device__ __forceinline__ void store_prefix(char* p, const Vec16& chunk, int n) {
  n &= 16 - E;
  if (n & 8) store_piece<E, 8>(p, chunk.w[0], chunk.w[1]);
  if constexpr (E <= 4)
    if (n & 4) store_piece<E, 4>(p + (n & 8), (n & 8) ? chunk.w[2] : chunk.w[0], 0);
  if constexpr (E <= 2) {
    const uint32_t w01 = (n & 4) ? chunk.w[1] : chunk.w[0], w23 = (n & 4) ? chunk.w[3] : chunk.w[2];
    const uint32_t w = (n & 8) ? w23 : w01;
    if (n & 2) store_piece<E, 2>(p + (n & 12), w, 0);
    if constexpr (E == 1)
      if (n & 1) store_piece<E, 1>(p + (n & 14), w >> ((n & 2) * 8), 0);
  }
}

// Bytes [0, n) of vec to p, where p + n is 16-byte aligned (0 < n < 16, a multiple of E):
// the head of an output row. Piece sizes ascend, so piece SIZE is vec bytes [n & (SIZE - 1), +SIZE).
template <int E>
__device__ __forceinline__ void store_suffix(char* p, const Vec16& vec, int n) {
  n &= 16 - E;
  if constexpr (E == 1)
    if (n & 1) store_piece<E, 1>(p, vec.w[0], 0);
  if constexpr (E <= 2)
    if (n & 2) store_piece<E, 2>(p + (n & 1), vec.w[0] >> ((n & 1) * 8), 0);
  if constexpr (E <= 4)
    if (n & 4) store_piece<E, 4>(p + (n & 3), E >= 4 ? vec.w[0] : __funnelshift_r(vec.w[0], vec.w[1], (n & 3) * 8), 0);
  if (n & 8) {
    const int off = n & 7;
    uint32_t a = vec.w[0], b = vec.w[1], c = vec.w[2];
    if (off & 4) a = vec.w[1], b = vec.w[2], c = vec.w[3];
    if constexpr (E <= 2) {
      const uint32_t bits = (off & 3) * 8;
      a = __funnelshift_r(a, b, bits), b = __funnelshift_r(b, c, bits);
    }
    store_piece<E, 8>(p + off, a, b);
  }
}

// w[c] holds element c of every v[k] (k < V): the V x V micro-tile transposed.
template <int E>
__device__ __forceinline__ void transpose_regs(const Vec16 (&v)[16 / E], Vec16 (&w)[16 / E]) {
  constexpr int V = 16 / E;
  if constexpr (E >= 4) {
    constexpr int W = E / 4;  // words per element: a pure renaming of registers
#pragma unroll
    for (int c = 0; c < V; ++c)
#pragma unroll
      for (int k = 0; k < V; ++k)
#pragma unroll
        for (int h = 0; h < W; ++h) w[c].w[k * W + h] = v[k].w[c * W + h];
  } else if constexpr (E == 2) {
    // Word m of w[c] packs element c of rows 2m and 2m+1: the matching halves of two words.
#pragma unroll
    for (int c = 0; c < V; ++c)
#pragma unroll
      for (int m = 0; m < 4; ++m)
        w[c].w[m] = __byte_perm(v[2 * m].w[c / 2], v[2 * m + 1].w[c / 2], (c & 1) ? 0x7632 : 0x5410);
  } else {
    // 4x4 byte blocks: byte n of word q of rows 4m..4m+3 becomes word m of w[4q + n],
    // in two rounds of prmt (interleave pairs of rows, then pairs of pairs).
#pragma unroll
    for (int m = 0; m < 4; ++m)
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const uint32_t a = v[4 * m].w[q], b = v[4 * m + 1].w[q], c = v[4 * m + 2].w[q], d = v[4 * m + 3].w[q];
        const uint32_t ab01 = __byte_perm(a, b, 0x5140), ab23 = __byte_perm(a, b, 0x7362);
        const uint32_t cd01 = __byte_perm(c, d, 0x5140), cd23 = __byte_perm(c, d, 0x7362);
        w[4 * q + 0].w[m] = __byte_perm(ab01, cd01, 0x5410);
        w[4 * q + 1].w[m] = __byte_perm(ab01, cd01, 0x7632);
        w[4 * q + 2].w[m] = __byte_perm(ab23, cd23, 0x5410);
        w[4 * q + 3].w[m] = __byte_perm(ab23, cd23, 0x7632);
      }
  }
}

// See TransposeVec in transpose.h. kRealign = false needs transpose_vec_ok(a): every
// vector starts 16-byte aligned and n_i is a multiple of V, so only an input row's last
// vector can be partial (a sliced view; then element-wise) and every output vector is
// whole. kRealign = true needs only in_sj == out_si == 1: rows start anywhere (an odd row
// length). Each 16-lane row segment then loads the aligned 16-byte chunks that cover it
// and shifts each lane's vector out of its chunk and the next lane's (a shuffle).
// On the way out, every aligned output chunk is written whole by exactly one lane of one
// block: a chunk inside a row segment of kRows elements straddles two micro-tile groups,
// and a chunk at a tile's edge would otherwise go out in two pieces from two blocks (2.5 L2
// sector operations per 32 bytes instead of 1.5, plus the piece instructions). So tiles
// overlap by one group: tile ti covers plane rows [ti S - V, ti S + S) (S = kRows - V), and
// store-phase lane g > 0 writes the aligned chunk that starts in (its group's start - V, its
// group's start], made of group g - 1's tail (a shuffle up) and its own head. Only the chunks
// at output row ends are partial (written piecewise: their other bytes are another row's).
// The overlap costs 1 / kIGroups more input reads, mostly L2 hits (the neighbouring tile's
// block runs at about the same time). The shared-memory accesses are the same in both.
template <class Tile, int E, bool kRealign>
__global__ void __launch_bounds__(TransposeVec<E>::kThreads, TransposeVec<E>::kMinBlocks) transpose_vec_kernel(const TransposeArgs a) {
  using P = TransposeVec<E>;
  constexpr int V = P::kVec;
  __shared__ uint4 tile_storage[Tile::kSize * E / 16];
  char* const tile = reinterpret_cast<char*>(tile_storage);
  const char* __restrict__ in = static_cast<const char*>(a.in);
  char* __restrict__ out = static_cast<char*>(a.out);
  const int t = threadIdx.x;
  constexpr int kStep = transpose_vec_step<E>(kRealign);
  const int64_t tiles_i = transpose_vec_tiles_i<E>(a.n_i, kRealign);
  const int64_t j0 = int64_t(blockIdx.x) * P::kCols;

  for (int64_t b = blockIdx.z; b < a.batch; b += gridDim.z) {
    int64_t in_base, out_base;
    plane_bases(a, b, in_base, out_base);
    for (int64_t ti = blockIdx.y; ti < tiles_i; ti += gridDim.y) {
      const int64_t i0 = ti * kStep - (kRealign ? V : 0);  // the tile's first plane row (< 0: zeros)
      // Load phase: all V loads first, so they are in flight together.
      Vec16 v[V];
      if constexpr (!kRealign) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const TileCoord c = transpose_vec_load<E>(t, k);
          const int64_t i = i0 + c.r, j = j0 + c.c;
          v[k].v = make_uint4(0, 0, 0, 0);
          if (i < a.n_i && j < a.n_j) {
            const char* p = in + (in_base + i * a.in_si + j * a.in_sj) * E;
            if (j + V <= a.n_j) {
              v[k].v = __ldg(reinterpret_cast<const uint4*>(p));
            } else {
              v[k] = load_partial<E>(p, a.n_j - j);
            }
          }
        }
      } else {
        // Row segment: the tile's kCols elements of input row i from j0; lrow: the valid
        // bytes of the row from there. Lane u's vector is bytes [s, 16) of its aligned chunk
        // and [0, s) of the next one (lane u + 1's; for the last lane, the chunk past the
        // segment). Chunks that reach past the row's end are read element by element.
        // Loads go out in batches: 16 vectors of bytes and their chunks would not fit in registers.
        const int64_t lrow = (a.n_j - j0) * E;
        constexpr int kBatch = E == 1 ? V / 2 : V;
        static_assert(kBatch <= P::kUnits, "bytes: one lane of the segment per batch entry loads its chunk past the segment");
        const auto load_chunk = [&](const char* seg, int pos) {
          Vec16 r;
          r.v = make_uint4(0, 0, 0, 0);
          if (pos + 16 <= lrow) {
            r.v = __ldg(reinterpret_cast<const uint4*>(seg + pos));
          } else if (pos < lrow) {
            r = load_elems<E>(seg + pos, 0, static_cast<int>((lrow - pos) / E));
          }
          return r;
        };
        // The chunk past the segment (the last lane's `next`): bytes share it, lane b of the
        // segment loading batch entry b's and a shuffle taking it to the last lane (a batch
        // entry's row depends only on the lane's 16-lane group), so a lane holds one vector
        // for it instead of kBatch; that keeps the 16x16 byte micro-tile's kernel from
        // spilling (H100, 4097 x 8191: 0.0449 -> 0.0394 ms). Wider elements do not spill
        // and their shuffles measured slower (float32 +3%), so there the last lane loads its own.
        constexpr bool kSharePast = E == 1;
#pragma unroll
        for (int k0 = 0; k0 < V; k0 += kBatch) {
          int shift[kBatch];
          Vec16 chunk[kBatch], after[kSharePast ? 1 : kBatch];
#pragma unroll
          for (int b = 0; b < kBatch; ++b) {
            const TileCoord c = transpose_vec_load<E>(t, k0 + b);
            const int64_t i = i0 + c.r;
            const int u = c.c / V;  // this lane's vector in the segment
            const bool row_ok = i >= 0 && i < a.n_i;
            const char* seg = in + (in_base + (row_ok ? i : 0) * a.in_si + j0) * E;
            shift[b] = static_cast<int>(reinterpret_cast<uintptr_t>(seg) & 15);
            const int pos = 16 * u - shift[b];  // this lane's aligned chunk, from seg (>= -15)
            if constexpr (kSharePast) {
              chunk[b].v = make_uint4(0, 0, 0, 0);
              if (row_ok) chunk[b] = load_chunk(seg, pos);
            } else {
              chunk[b].v = after[b].v = make_uint4(0, 0, 0, 0);
              if (row_ok) {
                chunk[b] = load_chunk(seg, pos);
                if (u == P::kUnits - 1 && shift[b] != 0) after[b] = load_chunk(seg, pos + 16);
              }
            }
          }
          if constexpr (kSharePast) {
            after[0].v = make_uint4(0, 0, 0, 0);
            const int b = t % P::kUnits;
            if (b < kBatch) {
              const int64_t i = i0 + transpose_vec_load<E>(t, k0 + b).r;  // batch entry b's row
              const char* seg = in + (in_base + (i >= 0 && i < a.n_i ? i : 0) * a.in_si + j0) * E;
              const int s = static_cast<int>(reinterpret_cast<uintptr_t>(seg) & 15);
              if (i >= 0 && i < a.n_i && s != 0) after[0] = load_chunk(seg, 16 * P::kUnits - s);
            }
          }
#pragma unroll
          for (int b = 0; b < kBatch; ++b) {
            const TileCoord c = transpose_vec_load<E>(t, k0 + b);
            Vec16 next = shfl_down(chunk[b], 1, P::kUnits);
            if constexpr (kSharePast) {
              const Vec16 past = shfl_idx(after[0], b, P::kUnits);
              if (c.c / V == P::kUnits - 1) next = past;
            } else {
              if (c.c / V == P::kUnits - 1) next = after[b];
            }
            // Into the tile at once: a batch's vectors need not wait for the next batch's
            // loads, which keeps the byte kernel's registers within four blocks an SM.
            Vec16 vec;
            vec.v = shift_bytes<E>(chunk[b].v, next.v, shift[b]);
            *reinterpret_cast<uint4*>(tile + Tile::offset(transpose_vec_row<E>(c.r), c.c) * E) = vec.v;
          }
        }
      }
      if constexpr (!kRealign) {
        // Every lane stores (zeros past the edges): the instruction count is one per vector.
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const TileCoord c = transpose_vec_load<E>(t, k);
          *reinterpret_cast<uint4*>(tile + Tile::offset(transpose_vec_row<E>(c.r), c.c) * E) = v[k].v;
        }
      }
      __syncthreads();
      // Store phase: the micro-tile's V rows, transposed in registers, out as V vectors.
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const TileCoord c = transpose_vec_read<E>(t, k);
        v[k].v = *reinterpret_cast<const uint4*>(tile + Tile::offset(transpose_vec_row<E>(c.r), c.c) * E);
      }
      __syncthreads();  // the tile is free for the next iteration once everything is in registers
      Vec16 w[V];
      transpose_regs<E>(v, w);
      const TileCoord c0 = transpose_vec_read<E>(t, 0);
      const int64_t i = i0 + c0.r, jb = j0 + c0.c;
      if constexpr (!kRealign) {
        if (i < a.n_i) {
#pragma unroll
          for (int c = 0; c < V; ++c) {
            const int64_t j = jb + c;
            if (j < a.n_j) *reinterpret_cast<uint4*>(out + (out_base + j * a.out_sj + i * a.out_si) * E) = w[c].v;
          }
        }
      } else {
        // Lane g's chunk: its group's start rounded down to 16 bytes, i.e. group g - 1's last
        // mis bytes and its own first 16 - mis (mis: how far output row j's start is off 16
        // bytes; the same for every group). Lane 0 (group 0) only lends its vector to lane 1.
        // room: bytes of row j from the group's start, capped (32-bit compares).
        const int g = c0.r / V;
        const int64_t left = (a.n_i - i) * E;
        const int room = static_cast<int>(left < 32 ? left : 32);
#pragma unroll
        for (int c = 0; c < V; ++c) {
          const int64_t j = jb + c;
          char* const row = out + (out_base + (j < a.n_j ? j : 0) * a.out_sj) * E;
          const int mis = static_cast<int>(reinterpret_cast<uintptr_t>(row) & 15);
          Vec16 lo = shfl_up(w[c], 1, P::kIGroups);  // group g - 1's vector
          // A row start on 16 bytes: the chunk is this lane's vector. Word by word: a select
          // of the two vectors as a whole would put them in local memory.
#pragma unroll
          for (int k = 0; k < 4; ++k) lo.w[k] = mis ? lo.w[k] : w[c].w[k];
          Vec16 chunk;
          chunk.v = shift_bytes<E>(lo.v, w[c].v, 16 - mis);
          char* const at = row + i * E - mis;  // the chunk, 16-byte aligned
          if (g > 0 && j < a.n_j) {
            if (i == 0 && mis != 0) {
              // The row's head: the chunk begins in the previous row's tail.
              if (room >= 16 - mis) {
                store_suffix<E>(row, w[c], 16 - mis);
              } else {
                store_elems<E>(row, w[c], 0, room / E);  // the row ends in the same chunk
              }
            } else if (room + mis >= 16) {
              *reinterpret_cast<uint4*>(at) = chunk.v;
            } else if (room + mis > 0) {
              store_prefix<E>(at, chunk, room + mis);  // the row's tail
            }
          }
        }
      }
    }
  }
}

template <class E>
__global__ void __launch_bounds__(256) gather_kernel(const GatherArgs a) {
  const E* __restrict__ in = static_cast<const E*>(a.in);
  E* __restrict__ out = static_cast<E*>(a.out);
  for (int64_t idx = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; idx < a.numel;
       idx += int64_t(gridDim.x) * blockDim.x) {
    int64_t rem = idx, off = 0;
#pragma unroll
    for (int d = kGatherDims - 1; d >= 0; --d) {
      if (d < a.ndim) {
        const int64_t q = rem / a.size[d];
        off += (rem - q * a.size[d]) * a.in_stride[d];
        rem = q;
      }
    }
    out[idx] = in[off];
  }
}

unsigned clamp_grid(int64_t v) { return static_cast<unsigned>(v < 65535 ? v : 65535); }

}  // namespace

cudaError_t launch_transpose(Layout layout, const TransposeArgs& a, cudaStream_t stream) {
  if (a.n_i == 0 || a.n_j == 0 || a.batch == 0) return cudaSuccess;
  const bool aligned = transpose_vec_ok(a);
  if (aligned || transpose_vec_realign_ok(a)) {
    return with_layout(layout, [&](auto tag) {
      return with_bytes(a.elem_bytes, [&](auto e) {
        constexpr int kE = sizeof(e);
        using P = TransposeVec<kE>;
        using Tile = TransposeVecTile<decltype(tag)::value, kE>;
        const dim3 grid(static_cast<unsigned>((a.n_j + P::kCols - 1) / P::kCols),
                        clamp_grid(transpose_vec_tiles_i<kE>(a.n_i, !aligned)),
                        clamp_grid(a.batch));
        if (aligned) {
          transpose_vec_kernel<Tile, kE, false><<<grid, P::kThreads, 0, stream>>>(a);
        } else if constexpr (kE < 16) {
          transpose_vec_kernel<Tile, kE, true><<<grid, P::kThreads, 0, stream>>>(a);
        }
        return cudaGetLastError();
      });
    });
  }
  const int64_t rows = transpose_tile_rows(a.elem_bytes);
  const dim3 grid(static_cast<unsigned>((a.n_j + kTransposeTile - 1) / kTransposeTile),
                  clamp_grid((a.n_i + rows - 1) / rows), clamp_grid(a.batch));
  const dim3 block(kTransposeTile, kTransposeRowGroups);
  return with_layout(layout, [&](auto tag) {
    return with_bytes(a.elem_bytes, [&](auto e) {
      using E = decltype(e);
      transpose_kernel<TransposeTile<decltype(tag)::value, sizeof(E)>, E><<<grid, block, 0, stream>>>(a);
      return cudaGetLastError();
    });
  });
}

cudaError_t launch_gather(const GatherArgs& a, cudaStream_t stream) {
  if (a.numel == 0) return cudaSuccess;
  const int64_t blocks = (a.numel + 255) / 256;
  return with_bytes(a.elem_bytes, [&](auto e) {
    gather_kernel<decltype(e)><<<static_cast<unsigned>(blocks < (1 << 20) ? blocks : (1 << 20)), 256, 0, stream>>>(a);
    return cudaGetLastError();
  });
}

}  // namespace bankops
