#include <type_traits>

#include "transpose_launch.h"
#include "transpose_regs.cuh"

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


// The realigning kernel's load phase (see transpose_vec_kernel): lane t's V vectors, at input
// plane rows i0 + transpose_vec_load(t, k).r, into the tile. seg0: row 0 of the plane at
// column j0 (rows a.in_si elements apart); lrow: the valid bytes of a row from there. Rows
// outside the plane give zeros; a vector that reaches past its row's end is read element by
// element. Lane u of a 16-lane row segment reads the 16 bytes at 16 u in it, from the aligned
// words that hold them (five 4-byte words and a funnel shift for 1- and 2-byte elements, four
// for 4-byte elements, two 8-byte words for 8-byte ones): independent loads, no shuffles, no
// select chains. All V vectors' loads are in flight together (bytes: a batch of 8 at a time).
template <class Tile, int E, bool kInterior>
__device__ __forceinline__ void realign_load_words(const TransposeArgs& a, const char* seg0, int64_t lrow, int64_t i0,
                                                   int t, char* tile) {
  using P = TransposeVec<E, true>;
  constexpr int V = P::kVec, kWords = E >= 4 ? 4 : 5;
  // Bytes: 16 vectors of five words would not fit in registers beside the addresses: two
  // batches, in a loop that is not unrolled.
  constexpr int kBatch = E == 1 ? V / 2 : V;
  // Every vector of this lane sits at the same column, kIGroups rows further each time.
  const TileCoord c0 = transpose_vec_load<E, true>(t, 0);
  const int pos = c0.c * E;  // the lane's vector, from the segment's start
  const bool col_whole = kInterior || pos + 16 <= lrow;
  // The fifth word reaches up to 4 - E bytes past the vector: at a row's end (maybe the
  // tensor's) only the bytes that hold the vector are read.
  const bool col_fifth = kInterior || pos + 16 + (4 - E) <= lrow;
  const int64_t row_step = int64_t(P::kIGroups) * a.in_si * E;
#pragma unroll 1
  for (int k0 = 0; k0 < V; k0 += kBatch) {
    const char* at = seg0 + (i0 + c0.r + k0 * P::kIGroups) * a.in_si * E + pos;  // dereferenced only in rows 0 .. n_i - 1
    uint32_t word[kBatch][kWords];
    int bits[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b, at += row_step) {
      const int64_t i = i0 + c0.r + (k0 + b) * P::kIGroups;
      const bool row_ok = kInterior || (i >= 0 && i < a.n_i);
      const uintptr_t addr = reinterpret_cast<uintptr_t>(at);
      bits[b] = static_cast<int>(addr & 3) * 8;
#pragma unroll
      for (int q = 0; q < kWords; ++q) word[b][q] = 0;
      if (row_ok && col_whole) {
        if constexpr (E >= 8) {
          const uint2* w2 = reinterpret_cast<const uint2*>(at);
          const uint2 x = __ldg(w2), y = __ldg(w2 + 1);
          word[b][0] = x.x, word[b][1] = x.y, word[b][2] = y.x, word[b][3] = y.y;
        } else {
          const uint32_t* w4 = reinterpret_cast<const uint32_t*>(addr & ~uintptr_t(3));
#pragma unroll
          for (int q = 0; q < 4; ++q) word[b][q] = __ldg(w4 + q);
          // The fifth word holds the vector's last bits / 8 bytes (inside the row).
          if constexpr (kWords == 5)
            if (bits[b] != 0) word[b][4] = col_fifth ? __ldg(w4 + 4) : load_word_head<E>(w4 + 4, bits[b] / 8);
        }
      }
    }
    // Partial vectors after all whole ones are in flight (a branch between the loads would hold them back).
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      Vec16 vec;
#pragma unroll
      for (int q = 0; q < 4; ++q)
        vec.w[q] = kWords == 5 ? __funnelshift_r(word[b][q], word[b][q + 1], bits[b]) : word[b][q];
      const int64_t i = i0 + c0.r + (k0 + b) * P::kIGroups;
      if (!kInterior && !col_whole && i >= 0 && i < a.n_i && pos < lrow)
        vec = load_partial<E>(seg0 + i * a.in_si * E + pos, (lrow - pos) / E);
      const TileCoord c = transpose_vec_load<E, true>(t, k0 + b);
      *reinterpret_cast<uint4*>(tile + Tile::offset(transpose_vec_row<E, true>(c.r), c.c) * E) = vec.v;
    }
  }
}

// Store phase, first half: the thread's micro-tile rows out of the tile (once every lane has
// stored its load-phase vectors), transposed in registers: w[c] is output row c's vector.
template <class Tile, int E, bool R>
__device__ __forceinline__ void read_micro_tile(const char* tile, int t, Vec16 (&w)[16 / E]) {
  constexpr int V = 16 / E;
  Vec16 v[V];
  __syncthreads();
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const TileCoord c = transpose_vec_read<E, R>(t, k);
    v[k].v = *reinterpret_cast<const uint4*>(tile + Tile::offset(transpose_vec_row<E, R>(c.r), c.c) * E);
  }
  __syncthreads();  // the tile is free for the next iteration once everything is in registers
  transpose_regs<E>(v, w);
}

// One output chunk of the realigning kernel: w holds output row `row`'s elements i .. i + V - 1
// (the thread's micro-tile group g). Lane g writes the aligned chunk that starts in its
// group's first 16 bytes rounded down, i.e. group g - 1's last mis bytes and its own first
// 16 - mis (mis: how far the output row's start is off 16 bytes; the groups of a unit column,
// neighbouring lanes, call this for the same row at the same time). Lane 0 (group 0) only
// lends its vector to lane 1. Lanes 1 and kIGroups - 1 have chunks of
// the same sector parity (an even number of chunks apart): the one whose chunk starts a
// sector writes, the other leaves it to the neighbouring tile. Group 1 starts at or before the
// row (row -V in tile 0): lanes with i < 0 write nothing. room: bytes of the row from the
// group's start, capped at 32; exists: the output row exists. kInterior: see realign_tile.
template <int E, bool kInterior>
__device__ __forceinline__ void realign_store_chunk(char* row, const Vec16& w, int64_t i, int g, int room, bool exists) {
  using P = TransposeVec<E, true>;
  const int mis = static_cast<int>(reinterpret_cast<uintptr_t>(row) & 15);
  // Group g - 1's vector, or this lane's own when the row starts on 16 bytes (then the
  // chunk is this lane's vector: shift_bytes by 16 - 0 keeps lo).
  const Vec16 lo = shfl_up(w, mis != 0, P::kIGroups);
  Vec16 chunk;
  chunk.v = shift_bytes<E>(lo.v, w.v, 16 - mis);
  char* const at = row + i * E - mis;  // the chunk, 16-byte aligned
  const bool starts_sector = (static_cast<uint32_t>(reinterpret_cast<uintptr_t>(at)) & 16) == 0;
  const bool inner = g >= 2 && g <= P::kIGroups - 2;
  const bool owns = inner || (g == 1 ? starts_sector : g == P::kIGroups - 1 && !starts_sector);
  if (kInterior) {
    if (owns) *reinterpret_cast<uint4*>(at) = chunk.v;
  } else if (owns && i >= 0 && exists) {
    if (i == 0 && mis != 0) {
      // The row's head: the chunk begins in the previous row's tail.
      if (room >= 16 - mis) {
        store_suffix<E>(row, w, 16 - mis);
      } else {
        store_elems<E>(row, w, 0, room / E);  // the row ends in the same chunk
      }
    } else if (room + mis >= 16) {
      *reinterpret_cast<uint4*>(at) = chunk.v;
    } else if (room + mis > 0) {
      store_prefix<E>(at, chunk, room + mis);  // the row's tail
    }
  }
}

// One tile of the realigning kernel (see transpose_vec_kernel). in, out: the plane's first
// element. kInterior: every plane row of the tile exists, with at least a sector of its output
// row past the tile's last group, and every input row has 16 bytes or more past the tile's
// columns: no bound needs a check. The kernel is unrolled straight-line code, and the edge
// branches were most of it: without them the common tile's code fits the instruction cache
// (design notes, "transpose: interior tiles").
template <class Tile, int E, bool kInterior>
__device__ __forceinline__ void realign_tile(const TransposeArgs& a, const char* in, char* out, int64_t i0,
                                             int64_t j0, int t, char* tile) {
  using P = TransposeVec<E, true>;
  constexpr int V = P::kVec;
  realign_load_words<Tile, E, kInterior>(a, in + j0 * E, (a.n_j - j0) * E, i0, t, tile);
  const TileCoord c0 = transpose_vec_read<E, true>(t, 0);
  const int64_t i = i0 + c0.r, jb = j0 + c0.c;
  const int g = c0.r / V;
  const int64_t left = (a.n_i - i) * E;
  const int room = static_cast<int>(left < 32 ? left : 32);
  const int64_t cols = a.n_j - jb;  // output rows of this thread that exist (>= V: all)
  const int64_t row_step = a.out_sj * E;
  char* const row0 = out + jb * a.out_sj * E;  // output row jb; row jb + c is dereferenced only if it exists
  if constexpr (E == 1) {
    // Bytes: the 16 x 16 micro-tile in four passes of a loop that is not unrolled, each one
    // 4-byte word of every micro-tile row (16 lds.32, transpose_vec_byte_word) -> 4 output
    // rows: a quarter of the unrolled code and of the registers, so five blocks an SM. Micro-tile
    // row k is tile row g + kIGroups k (transpose_vec_row): two offsets a thread (k even, odd: a
    // join of the layout) and compile-time steps of 2 kIGroups rows, computed once, and each
    // pass adds its word (else the compiler redoes the row division for all 16 rows a pass).
    static_assert((P::kIGroups & (P::kIGroups - 1)) == 0 && (2 * P::kIGroups) % Tile::kRowPeriod == 0,
                  "byte micro-tile rows: a join, then steps of the layout's period");
    const int row_g = transpose_vec_row<1, true>(c0.r);
    const int base[2] = {Tile::offset(row_g, c0.c), Tile::join(Tile::offset(row_g, c0.c), Tile::offset(P::kIGroups, 0))};
    __syncthreads();
#pragma unroll 1
    for (int q = 0; q < 4; ++q) {
      const int h = transpose_vec_byte_word(t, q);
      const char* at[2] = {tile + base[0] + 4 * h, tile + base[1] + 4 * h};
      uint32_t x[V];
#pragma unroll
      for (int k = 0; k < V; ++k)
        x[k] = *reinterpret_cast<const uint32_t*>(at[k % 2] + Tile::offset(2 * P::kIGroups * (k / 2), 0));
      Vec16 w[4];
#pragma unroll
      for (int m = 0; m < 4; ++m)
        transpose_4x4_bytes(x[4 * m], x[4 * m + 1], x[4 * m + 2], x[4 * m + 3], w[0].w[m], w[1].w[m], w[2].w[m],
                            w[3].w[m]);
      char* row = row0 + 4 * h * row_step;
#pragma unroll
      for (int n = 0; n < 4; ++n, row += row_step) realign_store_chunk<1, kInterior>(row, w[n], i, g, room, 4 * h + n < cols);
    }
    __syncthreads();  // every lane is done reading the tile before the next tile's loads
  } else {
    Vec16 w[V];
    read_micro_tile<Tile, E, true>(tile, t, w);
    // The row pointer's form is the one that leaves each kernel unspilled (ptxas, float32 at
    // 64 registers and 16-bit at 96: 24 and 32 bytes of spills the other way round).
    char* row = row0;
#pragma unroll
    for (int c = 0; c < V; ++c, row += row_step)
      realign_store_chunk<E, kInterior>(E == 4 ? row0 + c * row_step : row, w[c], i, g, room, c < cols);
  }
}

// See TransposeVec in transpose.h. kRealign = false needs transpose_vec_ok(a): every
// vector starts 16-byte aligned and n_i is a multiple of V, so only an input row's last
// vector can be partial (a sliced view; then element-wise) and every output vector is
// whole. kRealign = true needs only in_sj == out_si == 1: rows start anywhere (an odd row
// length). Lane u of a 16-lane row segment then reads its vector, the 16 bytes at 16 u in
// the segment, from the aligned words that hold them (realign_load_words): one loader for
// every size (a chunk and its neighbour's, cut with a byte shift, made the float32 kernel
// issue-bound; design notes, "transpose: the realigning loads").
// On the way out, every 32-byte sector of an output row is written whole by one store
// instruction (two lanes' aligned 16-byte chunks): a sector that two stores each write part
// of costs the L2 a partial write, and at a tile edge those came from two blocks. So tiles
// overlap by two groups: tile ti covers plane rows [ti S - 2V, ti S + S) (S = kRows - 2V),
// and store-phase lane g writes the aligned chunk that starts in (its group's start - V, its
// group's start], made of group g - 1's tail (a shuffle up) and its own head, if that chunk
// is one of the tile's S / V chunks from the first sector boundary past group 1's start:
// lanes 2 .. kIGroups - 2, and lane 1 or lane kIGroups - 1 by the sector parity
// (realign_store_chunk). Only the chunks at output row ends are partial (written piecewise:
// their other bytes are another row's). The overlap costs 2 / kIGroups more input reads,
// mostly L2 hits (the neighbouring tile's block runs at about the same time). The load
// phase's shared-memory stores are the same in both; the store phase of realigned bytes reads
// words (transpose_vec_byte_word).
template <class Tile, int E, bool kRealign>
__global__ void __launch_bounds__(TransposeVec<E, kRealign>::kThreads, transpose_vec_min_blocks<E, kRealign>())
    transpose_vec_kernel(const TransposeArgs a) {
  using P = TransposeVec<E, kRealign>;
  constexpr int V = P::kVec;
  __shared__ uint4 tile_storage[Tile::kSize * E / 16];
  char* const tile = reinterpret_cast<char*>(tile_storage);
  const char* __restrict__ in = static_cast<const char*>(a.in);
  char* __restrict__ out = static_cast<char*>(a.out);
  const int t = threadIdx.x;
  constexpr int kStep = transpose_vec_step<E, kRealign>();
  const int64_t tiles_i = transpose_vec_tiles_i<E, kRealign>(a.n_i);
  const int64_t j0 = int64_t(blockIdx.x) * P::kCols;

  for (int64_t b = blockIdx.z; b < a.batch; b += gridDim.z) {
    int64_t in_base, out_base;
    plane_bases(a, b, in_base, out_base);
    for (int64_t ti = blockIdx.y; ti < tiles_i; ti += gridDim.y) {
      const int64_t i0 = ti * kStep - transpose_vec_overlap<E, kRealign>();  // the tile's first plane row (< 0: zeros)
      if constexpr (kRealign) {
        const bool interior = i0 > 0 && i0 + P::kRows + V <= a.n_i && (a.n_j - j0) * E >= P::kCols * E + 16;
        if (interior) {
          realign_tile<Tile, E, true>(a, in + in_base * E, out + out_base * E, i0, j0, t, tile);
        } else {
          realign_tile<Tile, E, false>(a, in + in_base * E, out + out_base * E, i0, j0, t, tile);
        }
        continue;
      }
      // Load phase: all V loads first, so they are in flight together; every lane stores
      // (zeros past the edges): the instruction count is one per vector.
      Vec16 v[V];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const TileCoord c = transpose_vec_load<E, kRealign>(t, k);
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
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const TileCoord c = transpose_vec_load<E, kRealign>(t, k);
        *reinterpret_cast<uint4*>(tile + Tile::offset(transpose_vec_row<E, kRealign>(c.r), c.c) * E) = v[k].v;
      }
      Vec16 w[V];
      read_micro_tile<Tile, E, kRealign>(tile, t, w);
      const TileCoord c0 = transpose_vec_read<E, kRealign>(t, 0);
      const int64_t i = i0 + c0.r, jb = j0 + c0.c;
      if (i < a.n_i) {
#pragma unroll
        for (int c = 0; c < V; ++c) {
          const int64_t j = jb + c;
          if (j < a.n_j) *reinterpret_cast<uint4*>(out + (out_base + j * a.out_sj + i * a.out_si) * E) = w[c].v;
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
        const auto run = [&](auto realign) {
          constexpr bool R = decltype(realign)::value;
          using P = TransposeVec<kE, R>;
          using Tile = TransposeVecTile<decltype(tag)::value, kE, R>;
          const dim3 grid(static_cast<unsigned>((a.n_j + P::kCols - 1) / P::kCols),
                          clamp_grid(transpose_vec_tiles_i<kE, R>(a.n_i)), clamp_grid(a.batch));
          transpose_vec_kernel<Tile, kE, R><<<grid, P::kThreads, 0, stream>>>(a);
        };
        if (aligned) run(std::false_type{});
        else if constexpr (kE < 16) run(std::true_type{});
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
