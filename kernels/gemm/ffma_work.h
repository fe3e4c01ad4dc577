// Which blocks of a 128x256 (GemmWide) launch compute what, on a one-dimensional grid: the
// strip, stream-K and one block per tile.
//
// Stream-K (Osama et al., PPoPP 2023) for one wave's worth only: a Wide block takes a whole SM,
// so a grid of T tiles on P SMs takes ceil(T / P) tile times. The k tiles of T mod P tiles are
// dealt out evenly to more blocks instead, each a run of consecutive k tiles that covers less
// than a tile; a block whose run ends a tile adds the partial sums of the blocks before it
// that hold the tile's earlier k tiles, then stores it. The grid takes T / P tile times, plus
// the partial sums (128 KB a block, through L2).
#pragma once
#include "ffma_strip.h"

namespace bankops {

// A shared tile's k tiles go to at most kGemmMaxSplit blocks (the block that ends it adds the
// others' partial sums), and a block takes kGemmMinSplitK k tiles at least (each fills the
// cp.async pipeline again and writes or adds a partial sum, which a shorter run does not pay
// back).
constexpr int kGemmMaxSplit = 8, kGemmMinSplitK = 32;
// The stream-K blocks of a Wide grid of `tiles` tiles, tiles_k k tiles deep: 0 where the last
// wave is full or too short to share, else as many as its tiles can keep busy.
BANKOPS_HD int gemm_stream_k_blocks(int64_t tiles, int64_t tiles_k, int num_sms) {
  const int64_t rest = tiles % num_sms, blocks = rest * kGemmMaxSplit < num_sms ? rest * kGemmMaxSplit : num_sms;
  return rest > 0 && rest * tiles_k >= blocks * kGemmMinSplitK ? static_cast<int>(blocks) : 0;
}

// The grid's blocks, in order (tiles are numbered n fastest, then m, then batch):
//  1. strip_blocks: kStripBlocks per 128 rows of C (ffma_strip.h), when C has a strip;
//  2. sk_blocks stream-K blocks: block b takes k tiles [sk_begin(b), sk_begin(b + 1)) of the
//     k tiles of tiles 0 .. sk_tiles - 1, counted tile after tile (tiles_k each);
//  3. one block for each of tiles sk_tiles .. tiles - 1.
// The shared tiles are the first ones: a shared tile stays in place (moved back onto the
// matrix's edge, a partial tile would store over its neighbour's elements values summed in
// another order), and the partial tiles of the m and n edges come last, where they move and
// take the unpredicated path. The strip blocks come first (measured faster than after each
// row's tiles).
// A block that ends a shared tile waits for the partial sums of blocks before it only: the
// hardware starts blocks in order, so those are running or done, and never wait on it.
struct GemmWork {
  int64_t tiles_m, tiles_n, tiles, sk_tiles, strip_blocks;
  int sk_blocks, tiles_k;
  BANKOPS_HD int64_t sk_begin(int b) const { return sk_tiles * tiles_k * b / sk_blocks; }
  BANKOPS_HD int64_t blocks() const { return strip_blocks + sk_blocks + tiles - sk_tiles; }
};

// The work of a Wide launch over C's batch x m x n (n: the columns of whole and partial tiles,
// without the strip's), k deep, on num_sms SMs; stream_k: whether it may share k tiles (the
// caller then provides gemm_work_bytes of workspace).
BANKOPS_HD GemmWork gemm_work(int64_t batch, int64_t m, int64_t n, int64_t k, int strip, int num_sms, bool stream_k) {
  GemmWork w{};
  w.tiles_m = ceil_div(m, GemmWide::kBM);
  w.tiles_n = ceil_div(n, GemmWide::kBN);
  w.tiles = batch * w.tiles_m * w.tiles_n;
  w.tiles_k = static_cast<int>(ceil_div(k, GemmWide::kBK));
  w.strip_blocks = strip > 0 ? batch * w.tiles_m * kStripBlocks : 0;
  w.sk_blocks = stream_k ? gemm_stream_k_blocks(w.tiles, w.tiles_k, num_sms) : 0;
  w.sk_tiles = w.sk_blocks > 0 ? w.tiles % num_sms : 0;
  return w;
}

// A block's piece of work: k tiles [kb, ke) of tile (tm, tn) of batch bz.
struct GemmPiece {
  int64_t bz, tm, tn;
  int kb, ke;
  int fixed;       // the tile stays in place: it or a tile it would overlap moved is shared
  int slot;        // >= 0: the sum is partial, for the workspace's slot `slot`, not for C
  int c_lo, c_hi;  // blocks [c_lo, c_hi) hold the tile's earlier k tiles: their sums are added
};

// Piece p (0 or 1) of block u (not a strip block); empty (ke == kb) where there is none. A
// per-tile block has piece 1. A stream-K block's k tiles [s, e), a tile's worth at most, end
// one tile (t0, where s lies: piece 1) and may start the next (t1: piece 0, which goes first,
// so that its partial sum is ready before the block that ends t1, a later one, gets there).
// The kernel computes its pieces from the launch's arguments rather than pass them through
// shared memory: values every thread computes alike stay in uniform registers.
BANKOPS_HD GemmPiece gemm_piece(const GemmWork& w, int64_t u, int p) {
  const int64_t per_batch = w.tiles_m * w.tiles_n;
  const auto piece = [&](int64_t i, int kb, int ke, int slot, int c_lo, int c_hi) {
    // Moved, tile i overlaps tiles i - 1 (n edge), i - tiles_n (m edge) or i - tiles_n - 1.
    const bool fixed = w.sk_tiles > 0 && i < w.sk_tiles + w.tiles_n + 1;
    return GemmPiece{i / per_batch, i % per_batch / w.tiles_n, i % w.tiles_n, kb, ke, fixed, slot, c_lo, c_hi};
  };
  const int64_t v = u - w.strip_blocks;
  if (v >= w.sk_blocks) return p == 1 ? piece(w.sk_tiles + v - w.sk_blocks, 0, w.tiles_k, -1, 0, 0) : GemmPiece{};
  const int b = static_cast<int>(v), n = w.tiles_k;
  const int64_t s = w.sk_begin(b), e = w.sk_begin(b + 1), t0 = s / n, t1 = (e - 1) / n;
  if (p == 0) return t1 > t0 ? piece(t1, 0, static_cast<int>(e - t1 * n), b, 0, 0) : GemmPiece{};
  const int kb = static_cast<int>(s - t0 * n);
  if (t1 == t0 && e < (t0 + 1) * n) return piece(t0, kb, static_cast<int>(e - t0 * n), b, 0, 0);
  int c = b;  // the first block that holds part of tile t0
  while (c > 0 && w.sk_begin(c) > t0 * n) --c;
  return piece(t0, kb, n, -1, c, b);
}

// Bytes of workspace a launch with this work needs: a partial sum (a tile of floats) and a
// flag per stream-K block.
BANKOPS_HD int64_t gemm_work_bytes(const GemmWork& w) {
  return int64_t(w.sk_blocks) * (GemmWide::kBM * GemmWide::kBN * 4 + 4);
}

}  // namespace bankops
