// The shared-memory instructions a gemm route issues, for bankops.explain: the same route the
// launcher runs (route.h), replayed on the host.
#pragma once
#include "route.h"
#include "trace_ffma.h"
#include "trace_mma.h"

namespace bankops {

inline void trace_gemm(const GemmRoute& r, SmemTrace& trace) {
  if (r.family == GemmFamily::Ffma) trace_ffma(r, trace);
  else trace_tensor_core(r, trace);
}

}  // namespace bankops
