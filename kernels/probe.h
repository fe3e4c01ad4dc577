// The bank probe: one warp issues one shared-memory access at lane addresses the caller
// chooses, so Nsight Compute can measure what the hardware makes of any pattern and the
// bank model (bank_model.h) can be checked against it, pattern by pattern.
#pragma once

namespace bankops {

constexpr int kProbeSharedBytes = 48 * 1024;  // the default per-block limit: no opt-in needed

}  // namespace bankops
