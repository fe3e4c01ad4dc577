// The shared-memory instructions of split-K's sums (split_k.cuh), replayed on the host for
// every family that splits k across a cluster (smem_trace.h).
#pragma once
#include <algorithm>

#include "../smem_trace.h"
#include "split_k.h"

namespace bankops {

// Split-K's sums (split_k_store) on `tiles` block tiles (an iteration: one tile's cluster) of
// `splits` blocks of `threads`: each rank's loads of its rows from every block's partial tile,
// its own and, through distributed shared memory, its peers' (the same addresses in each),
// kSplitQuads quads a thread a round, a round's lanes past the rows loading its last quad again.
// Ranks hold split_rows' share of the rows, which differs by one where splits does not divide them.
template <class PTile>
inline void trace_split_loads(const char* kernel, int threads, int64_t tiles, int splits, SmemTrace& trace) {
  SmemInstr& own = trace.instr(kernel, "ld.shared::cluster.v4 P -> the rank's rows, its own partial", SmemOp::Ld, 16,
                               tiles);
  SmemInstr& peers = trace.instr(kernel, "ld.shared::cluster.v4 P -> the rank's rows, the peers' partials", SmemOp::Ld,
                                 16, tiles);
  peers.peer = true;
  for (int rank = 0; rank < splits; ++rank) {
    const SplitRows rows = split_rows(PTile::kRows, splits, rank);
    const int quads = (rows.end - rows.begin) * (PTile::kCols / 4);
    for (int from = 0; from < splits; ++from)
      for (int e0 = 0; e0 < quads; e0 += kSplitQuads * threads)
        for (int u = 0; u < kSplitQuads; ++u)
          add_block(from == rank ? own : peers, threads, [&](int t) {
            if (e0 + t >= quads) return int64_t(-1);  // no round for this thread
            const TileCoord q = split_quad<PTile>(rows, std::min(e0 + u * threads + t, quads - 1));
            return int64_t(PTile::offset(q.r, q.c)) * 4;
          });
  }
}

}  // namespace bankops
