// The bank model: wavefronts one warp-wide shared-memory instruction needs (host C++).
//
// Shared memory has 32 banks of 4 bytes. Lanes are served in phases of 128 bytes of
// requests: all 32 lanes for accesses up to 4 bytes, half-warps for 8-byte accesses,
// quarter-warps for 16-byte accesses (and ldmatrix rows). Inside a phase, lanes that
// touch the same 4-byte word share it (broadcast), and a bank delivers one word per
// wavefront, so a phase takes as many wavefronts as its busiest bank has distinct words.
//
// One more rule, measured on the H100 with the bank probe (bench/ncu.py) and stated by
// NVIDIA for the LDS ".U" hint since Volta: a load of 8 or 16 bytes whose lanes pair up, every
// active lane asking for the address of its partner lane ^ 1 (or every one lane ^ 2's), is
// served as if each pair were one lane, in a phase twice as long (8 bytes: the whole warp;
// 16 bytes: a half-warp). The test is per double-length phase: a half-warp that pairs up takes
// one phase even if the other does not. Lanes that share an address further apart do not
// count (lane i and i+16 reading the same 8 bytes still take two phases), and stores never
// pair (STS of 16 bytes: four quarter-warps, whatever the addresses).
#pragma once
#include <cstdint>

namespace bankops {

constexpr int kWarpLanes = 32, kBanks = 32, kBankBytes = 4;

// One warp-wide access: each lane's byte address, the active lanes, the bytes per lane.
struct WarpAccess {
  uint32_t addr[kWarpLanes];
  uint32_t active;
  int width;          // 1, 2, 4, 8 or 16
  bool load = true;   // the pair rule packs what a load returns; stores never pair
  bool copy = false;  // a cp.async: src holds each lane's global byte address
  bool zfill = false; // ...in the zero-filling form (source size in a register)
  int64_t src[kWarpLanes] = {};
};

struct BankCost {
  int wavefronts;  // what the model predicts
  int ideal;       // with no conflict: one per phase that has an active lane (cp.async: what
                   // it costs with the shared side laid out like the global side)
};

// True when in lanes [first, first + n) no active lane asks for another address than its
// active partner lane ^ x.
inline bool pairs_share(const WarpAccess& a, int first, int n, int x) {
  for (int lane = first; lane < first + n; ++lane)
    if ((a.active >> lane & 1u) && (a.active >> (lane ^ x) & 1u) && a.addr[lane] != a.addr[lane ^ x]) return false;
  return true;
}

// Lanes in the phase that starts at `first`: 128 bytes of requests, twice that for a load
// whose lanes pair up.
inline int phase_lanes(const WarpAccess& a, int first) {
  if (a.width <= kBankBytes) return kWarpLanes;
  const int lanes = 128 / a.width;
  const bool pairs = a.load && first % (2 * lanes) == 0 &&
                     (pairs_share(a, first, 2 * lanes, 1) || pairs_share(a, first, 2 * lanes, 2));
  return pairs ? 2 * lanes : lanes;
}

// cp.async (LDGSTS), measured with the probe (bench/ncu.py): a phase's shared-memory write
// is also split by the 128-byte global lines it reads. The lanes of one global line take a
// wavefront per 128-byte shared-memory line they write, and one more when a 32-byte global
// sector of theirs lands in two 32-byte sectors of one shared line (data moved by 16 bytes
// mod 32; 16-byte chunks permuted inside a sector, as a swizzle does, cost nothing). The
// zero-filling form (cp.async with a source size) takes one more wavefront per global line.
// 4-byte copies (probed with the 128x256 gemm tile's transposing copies) do not pay for the
// shared lines: the global lines stream in one wavefront each and the phase's bank conflicts
// (busiest: the most words any bank holds) add to them, whichever lines the conflicting lanes
// read, at most one wavefront per lane.
// Returns that count for the phase of lanes [first, first + n); *ideal gets the phase's cost
// when the shared side is laid out like the global one (its ideal).
inline int copy_split(const WarpAccess& a, int first, int n, int busiest, int* ideal) {
  int64_t done[kWarpLanes];
  int groups = 0, total = 0, lanes = 0;
  for (int lane = first; lane < first + n; ++lane) {
    if (!(a.active >> lane & 1u)) continue;
    ++lanes;
    const int64_t line = a.src[lane] / 128;
    int g = 0;
    while (g < groups && done[g] != line) ++g;
    if (g < groups) continue;
    done[groups++] = line;
    if (a.width <= kBankBytes) continue;
    uint32_t smem_lines[kWarpLanes];
    int distinct = 0, split_sector = 0;
    for (int l = lane; l < first + n; ++l) {
      if (!(a.active >> l & 1u) || a.src[l] / 128 != line) continue;
      int i = 0;
      while (i < distinct && smem_lines[i] != a.addr[l] / 128) ++i;
      if (i == distinct) smem_lines[distinct++] = a.addr[l] / 128;
      for (int o = lane; o < l; ++o)
        if ((a.active >> o & 1u) && a.src[o] / 32 == a.src[l] / 32 && a.addr[o] / 128 == a.addr[l] / 128 &&
            a.addr[o] / 32 != a.addr[l] / 32)
          split_sector = 1;
    }
    total += distinct + split_sector + (a.zfill ? 1 : 0);
  }
  *ideal = a.zfill ? 2 * groups : groups;
  if (a.width <= kBankBytes) {
    const int streamed = groups + busiest - 1;
    return (streamed < lanes ? streamed : lanes) + (a.zfill ? groups : 0);
  }
  return total;
}

// Serves an access word by word: calls visit(wavefront, phase, bank, lane) for every word
// every active lane touches, where `wavefront` counts from 0 over the whole instruction (a
// phase's k-th distinct word in a bank is served in the phase's k-th wavefront). Returns
// the cost; bank_cost and the bank maps (bankops.plot_banks) both come from here.
template <class Visit>
BankCost bank_schedule(const WarpAccess& a, Visit&& visit) {
  const int words_per_lane = a.width <= kBankBytes ? 1 : a.width / kBankBytes;
  BankCost cost{0, 0};
  for (int p = 0, phase = 0, lanes_per_phase = 0; p < kWarpLanes; p += lanes_per_phase, ++phase) {
    lanes_per_phase = phase_lanes(a, p);
    uint32_t words[kWarpLanes];  // distinct words of this phase (at most 128 bytes' worth)...
    int rank[kWarpLanes];        // ...and each one's place in its bank's queue
    int per_bank[kBanks] = {};
    int n = 0, busiest = 0;
    for (int lane = p; lane < p + lanes_per_phase; ++lane) {
      if (!(a.active >> lane & 1u)) continue;
      for (int w = 0; w < words_per_lane; ++w) {
        const uint32_t word = a.addr[lane] / kBankBytes + w;
        int i = 0;
        while (i < n && words[i] != word) ++i;
        if (i == n) {
          words[n] = word;
          rank[n++] = per_bank[word % kBanks]++;
          busiest = per_bank[word % kBanks] > busiest ? per_bank[word % kBanks] : busiest;
        }
        visit(cost.wavefronts + rank[i], phase, static_cast<int>(word % kBanks), lane);
      }
    }
    if (n == 0) continue;
    int ideal = 1;
    const int split = a.copy ? copy_split(a, p, lanes_per_phase, busiest, &ideal) : 0;
    cost.wavefronts += busiest > split ? busiest : split;
    cost.ideal += ideal;
  }
  return cost;
}

inline BankCost bank_cost(const WarpAccess& a) {
  return bank_schedule(a, [](int, int, int, int) {});
}

}  // namespace bankops
