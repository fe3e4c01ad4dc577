// The bank probe: one warp issues one shared-memory access at lane addresses the caller
// chooses, so Nsight Compute can measure what the hardware makes of any pattern and the
// bank model (bank_model.h) can be checked against it, pattern by pattern.
#pragma once

namespace bankops {

constexpr int kProbeSharedBytes = 48 * 1024;  // the default per-block limit: no opt-in needed
// cp.async probes copy from a global buffer of this size whose 4-byte words hold their own
// index, so each lane can check what arrived.
constexpr int kProbeGlobalBytes = 1 << 20;

}  // namespace bankops
