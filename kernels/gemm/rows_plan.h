// The few-rows kernel's plan (decode: a few rows of x against a weight; rows.h, rows.cu): the
// rows a block takes, FFMA or mma.sync, the weight through registers or a ring, and k split
// across a cluster where the blocks would leave SMs idle: the router's plan where the kernel
// applies, then the others a measured table may name.
#pragma once
#include <algorithm>
#include <string>

#include "costs.h"
#include "rows.h"

namespace bankops {

struct RowsPlan {
  int tm = 1;          // the rows of A a block takes
  bool mma = false;    // mma.sync products (16-bit, more than a few rows), else FFMA
  bool ring = false;   // FFMA: the weight through a ring in shared memory, else registers
  bool b_kn = false;   // the weight read along n (float32's x @ W), else along k
  int split = 1;       // the blocks (a cluster) that share each tile's k windows
  int stages = 0;      // mma.sync: its ring's stages (rows_stages: deep or shallow)
  bool persistent = false;  // mma.sync, split 1: one block an SM walks the tiles, its ring running on
};

// The FFMA kernel's small tile (ffma.h's GemmSmall): past kRowsMaxM rows this kernel takes a call
// only where such tiles leave SMs idle (route.h checks the two agree).
constexpr int kRowsFfmaTile = 64;

// The block tiles of C a plan covers (TM rows by rows_bn columns, every batch's).
inline int64_t rows_tiles(const GemmArgs& g, const RowsPlan& p) {
  return g.batch * ceil_div(g.m, p.tm) * ceil_div(g.n, rows_bn(p.mma));
}

// Plan p at split count `split`, with its ring's stages where it is mma.sync (the deep ring
// where one block an SM holds the grid, else the shallow).
inline RowsPlan rows_split_as(const GemmCall& c, RowsPlan p, int split) {
  p.split = split;
  if (p.mma) p.stages = rows_ring_stages(c.layout, p.tm, rows_tiles(c.args, p) * split <= cluster_room(c.device, split, 1));
  return p;
}

// mma.sync's form p at every split count whose cluster fits but `skip`, then its persistent
// form where its tiles outnumber the SMs (compute capability 9.0).
template <class Take>
inline void rows_mma_plans(const GemmCall& c, const RowsPlan& p, int skip, Take&& take) {
  const int64_t nk = ceil_div(c.args.k, rows_window(c.dtype, true));
  for (int s = 1; s <= kMaxSplit; ++s)
    if (s != skip && split_k_fits(s, nk, c.device, 1, 1)) take(rows_split_as(c, p, s), kUnmodelled);
  if (rows_tiles(c.args, p) > c.device.num_sms) {
    RowsPlan q = p;
    q.persistent = true;
    q.stages = rows_ring_stages(c.layout, q.tm, true, true);
    take(q, kUnmodelled);
  }
}

// The kernel where it takes the call (rows_supports, or for a 16-bit weight stored (K, N) the
// mma.sync form on compute capability 9.0: rows_kn_supports), the weight read along k or along n;
// past one block of rows only where the FFMA kernel cannot split k (below compute capability 9.0)
// and its 64x64 tiles leave SMs idle. Its k windows split on compute capability 9.0 where its
// blocks would leave SMs idle: mma.sync's splits count one block an SM (the deep ring's); a grid
// past one wave of them takes the shallow ring at two blocks an SM instead. That plan comes first
// (the router takes it); the other split counts follow, and for 16-bit rows on FFMA the mma.sync
// form, then mma.sync's persistent form where its tiles are more than the SMs: none of them
// chosen but by a measured table (bankops.tune).
template <class Take>
inline void rows_candidates(const GemmCall& c, Take&& take) {
  const GemmArgs& g = c.args;
  const bool kn = c.device.cc >= 90 && rows_kn_supports(c.dtype, g);  // 16-bit x @ W: mma.sync only
  if (!c.options.split_k || !(kn || rows_supports(c.dtype, g))) return;
  const bool small_fills = g.batch * ceil_div(g.m, kRowsFfmaTile) * ceil_div(g.n, kRowsFfmaTile) >= c.device.num_sms;
  if (g.m > kRowsMaxM && (c.device.cc >= 90 || small_fills)) return;
  const auto form = [&](bool mma) {
    RowsPlan p;
    p.b_kn = !rows_b_k_vectors(c.dtype, g);  // float32's ring or 16-bit mma.sync read W along n
    p.mma = mma;
    p.tm = rows_tm(g.m, p.mma);
    p.ring = !p.mma && rows_takes_ring(c.dtype, p.tm, p.b_kn);
    return p;
  };
  const auto per_sm = [](const RowsPlan& p) {
    return p.mma ? 1 : p.ring ? rows_ffma_ring_blocks_per_sm(p.tm) : rows_ffma_blocks_per_sm(p.tm);
  };
  const RowsPlan first = form(kn || rows_on_mma(c.dtype, g.m));
  const int64_t windows = ceil_div(g.k, rows_window(c.dtype, first.mma));
  const int split = c.device.cc < 90 ? 1 : split_k_count(rows_tiles(g, first), windows, c.device, per_sm(first));
  take(rows_split_as(c, first, split), kUnmodelled);
  if (c.device.cc < 90) return;
  if (first.mma) return rows_mma_plans(c, first, split, take);
  for (int s = 1; s <= kMaxSplit; ++s)
    if (s != split && split_k_fits(s, windows, c.device, per_sm(first), 1)) take(rows_split_as(c, first, s), kUnmodelled);
  if (c.dtype != DType::F32) rows_mma_plans(c, form(true), 0, take);  // 16-bit rows on FFMA: the mma.sync form
}

// The blocks a plan launches: a block a tile and rank, or the persistent form's one an SM (at
// most the tiles).
inline int64_t rows_blocks(const GemmCall& c, const RowsPlan& p) {
  const int64_t tiles = rows_tiles(c.args, p);
  return p.persistent ? std::min<int64_t>(tiles, c.device.num_sms) : tiles * p.split;
}

// e.g. "rows 16x64x256 a=mk b=nk split=2 stages=4".
inline std::string rows_describe(const GemmCall& c, const RowsPlan& p) {
  std::string s = "rows " + std::to_string(p.tm) + "x" + std::to_string(rows_bn(p.mma)) + "x" +
                  std::to_string(rows_window(c.dtype, p.mma)) + " a=mk b=" + (p.b_kn ? "kn" : "nk") +
                  (p.ring ? " ring" : "") + " split=" + std::to_string(p.split);
  if (p.mma) s += " stages=" + std::to_string(p.stages);
  if (p.persistent) s += " persistent";
  return s;
}

}  // namespace bankops
