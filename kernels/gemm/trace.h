// The shared-memory instructions a gemm route issues, for bankops.explain: the same route the
// launcher runs (route.h), replayed on the host.
#pragma once
#include "route.h"
#include "trace_ffma.h"
#include "trace_mma.h"

namespace bankops {

// The few-rows kernel (rows.cu): each window's cp.async of the rows of A into shared memory
// (16 bytes a thread, row after row) and every warp's 16-byte reads of them (a lane its own 16
// bytes of each row: a warp reads 512 contiguous bytes, conflict-free on any layout, so the
// window is dense); each warp's stores of its sums into the partial tile (each sum a store by
// the one lane that holds it, lane l those of index l mod 32), then split-K's loads. The weight
// goes straight to registers.
inline void trace_rows(const GemmRoute& r, SmemTrace& trace) {
  const GemmArgs& g = r.args;
  const int64_t tiles = g.batch * ceil_div(g.n, kRowsBN);
  const int e = rows_elem_bytes(r.dtype), V = 16 / e, kWin = rows_window(e);
  const int64_t windows = tiles * ceil_div(g.k, kWin);  // over every rank of every tile
  with_layout(r.layout, [&](auto tag) {
    with_rows_tm(r.rows_tm, [&](auto tm) {
      constexpr int TM = decltype(tm)::value, R = kRowsPerWarp;
      const int chunks = TM * kWin / V;
      SmemInstr& cp = trace.instr("gemm_rows", "ldgsts x window <- rows of A", SmemOp::Ldgsts, 16, windows);
      cp.zero_fill = true;
      for (int c0 = 0; c0 < chunks; c0 += kRowsThreads)
        add_block(
            cp, kRowsThreads, [&](int t) { return c0 + t < chunks ? int64_t(c0 + t) * 16 : int64_t(-1); },
            [&](int t) {
              const int c = c0 + t;
              return (c / (kWin / V) * g.a_sm + c % (kWin / V) * V) * e;
            });
      SmemInstr& ld = trace.instr("gemm_rows", "lds.128 x window -> a lane's 16 bytes of each row", SmemOp::Ld, 16,
                                  windows);
      for (int u = 0; u < kRowsUnroll; ++u)
        for (int row = 0; row < TM; ++row)
          add_block(ld, kRowsThreads, [&](int t) { return int64_t(row * kWin + (u * 32 + t % 32) * V) * e; });
      using PTile = SplitTile<decltype(tag)::value, TM, kRowsBN>;
      SmemInstr& st = trace.instr("gemm_rows", "st.shared P <- a warp's sum (one lane each)", SmemOp::St, 4,
                                  tiles * r.split);
      for (int row = 0; row < R; ++row)
        for (int tok = 0; tok < TM; ++tok)
          add_block(st, kRowsThreads, [&](int t) {
            const bool mine = t % 32 == (row * TM + tok) % 32;
            return mine ? int64_t(PTile::offset(tok, t / 32 * R + row)) * 4 : int64_t(-1);
          });
      trace_split_loads<PTile>("gemm_rows", kRowsThreads, tiles, r.split, trace);
    });
  });
}

inline void trace_gemm(const GemmRoute& r, SmemTrace& trace) {
  if (r.family == GemmFamily::Ffma) trace_ffma(r, trace);
  else if (r.family == GemmFamily::Rows) trace_rows(r, trace);
  else trace_tensor_core(r, trace);
}

}  // namespace bankops
