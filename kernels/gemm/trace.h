// The shared-memory instructions a gemm route issues, for bankops.explain: the same plan the
// launcher runs (route.h), replayed on the host by its family's trace.
#pragma once
#include <type_traits>
#include <variant>

#include "ffma_trace.h"
#include "mma_trace.h"
#include "route.h"
#include "rows_trace.h"
#include "wgmma_trace.h"

namespace bankops {

inline void trace_gemm(const GemmRoute& r, SmemTrace& trace) {
  std::visit(
      [&](const auto& p) {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, FfmaPlan>) trace_ffma(r.call, p, trace);
        else if constexpr (std::is_same_v<P, MmaPlan>) trace_mma(r.call, p, trace);
        else if constexpr (std::is_same_v<P, WgmmaPlan>) trace_wgmma(r.call, p, trace);
        else trace_rows(r.call, p, trace);
      },
      r.plan());
}

}  // namespace bankops
