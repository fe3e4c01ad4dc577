// The shared-memory instructions a gemm route issues, for bankops.explain: the same route the
// launcher runs (route.h), replayed on the host.
#pragma once
#include "route.h"
#include "trace_ffma.h"
#include "trace_mma.h"

namespace bankops {

// The few-rows kernel (rows.cu): each warp's stores of its sums into the partial tile (lane l
// those of index l mod 32), then split-K's loads. Its weight and rows of A go straight to
// registers: no other shared-memory instruction.
inline void trace_rows(const GemmRoute& r, SmemTrace& trace) {
  const int64_t tiles = r.args.batch * ceil_div(r.args.n, kRowsBN);
  with_layout(r.layout, [&](auto tag) {
    with_rows_tm(r.rows_tm, [&](auto tm) {
      constexpr int TM = decltype(tm)::value, R = kRowsPerWarp;
      using PTile = SplitTile<decltype(tag)::value, TM, kRowsBN>;
      SmemInstr& st = trace.instr("gemm_rows", "st.shared P <- the warps' sums", SmemOp::St, 4, tiles * r.split);
      for (int i = 0; i * 32 < R * TM; ++i)
        add_block(st, kRowsThreads, [&](int t) {
          const int e = t % 32 + 32 * i;
          return e < R * TM ? int64_t(PTile::offset(e % TM, t / 32 * R + e / TM)) * 4 : int64_t(-1);
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
