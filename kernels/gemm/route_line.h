// A route as one line (torch.ops.bankops._gemm_route, bankops.explain): the family and its block
// tile, its plan's fields, then the call's.
#pragma once
#include <string>
#include <type_traits>
#include <variant>

#include "route.h"

namespace bankops {

// Blocks the route launches.
inline int64_t gemm_route_blocks(const GemmRoute& r) {
  const GemmCall& c = r.call;
  return std::visit(
      [&](const auto& p) -> int64_t {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, FfmaPlan>) return ffma_blocks(c, p);
        else if constexpr (std::is_same_v<P, MmaPlan>) return mma_blocks(c, p);
        else if constexpr (std::is_same_v<P, WgmmaPlan>) return wgmma_blocks(c, p);
        else return rows_blocks(c, p);
      },
      r.plan());
}

// The route as one line (torch.ops.bankops._gemm_route, bankops.explain), e.g. "wgmma
// 128x256x64 producer=tma a=mk b=kn repack=none split=1 persistent=1 multicast=2 tail=0
// layout=swizzle blocks=132 sms=132 cc=90 scratch=0": the family and its block tile, its plan's
// fields, then the call's.
inline std::string gemm_route_line(const GemmRoute& r) {
  const GemmCall& c = r.call;
  const std::string plan = std::visit(
      [&](const auto& p) {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, FfmaPlan>) return ffma_describe(c, p);
        else if constexpr (std::is_same_v<P, MmaPlan>) return mma_describe(p);
        else if constexpr (std::is_same_v<P, WgmmaPlan>) return wgmma_describe(p);
        else return rows_describe(c, p);
      },
      r.plan());
  return plan + " layout=" + kLayoutNames[int(c.layout)] + " blocks=" + std::to_string(gemm_route_blocks(r)) +
         " sms=" + std::to_string(c.device.num_sms) + " cc=" + std::to_string(c.device.cc) +
         " scratch=" + std::to_string(r.scratch_bytes) + (r.fallback ? std::string(" fallback=") + r.fallback : "");
}

}  // namespace bankops
