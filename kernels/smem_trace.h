// What a kernel asks of shared memory, instruction by instruction (host C++).
//
// Each kernel header exposes the lane -> tile-coordinate functions its kernel calls
// (BANKOPS_HD), and a `trace_<op>` function replays them on the host: for every warp of a
// block and every shared-memory instruction of one iteration of the kernel's main loop it
// builds the 32 lane addresses through the same layout functor and asks the bank model
// what they cost. Change a kernel's pattern and its trace changes with it.
#pragma once
#include <cstdint>
#include <deque>
#include <string>
#include <type_traits>
#include <utility>

#include "bank_model.h"

namespace bankops {

// What kind of shared-memory access an instruction is; Nsight Compute counts each kind
// apart (op_ld, op_st, op_ldsm, op_ldgsts).
enum class SmemOp : int {
  Ld = 0,      // lds
  St = 1,      // sts
  Ldsm = 2,    // ldmatrix: each lane gives one 16-byte row address
  Ldgsts = 3,  // cp.async: the write into shared memory
};

// One shared-memory instruction of a kernel (an `lds`, `sts`, `ldmatrix` or `cp.async`).
struct SmemInstr {
  std::string kernel;       // which launch of the operator, e.g. "transpose", "reduce_rows/pass2"
  std::string name;         // what the instruction does, e.g. "sts tile[r][lane] <- in rows"
  SmemOp op = SmemOp::Ld;
  int width = 4;            // bytes per lane
  bool zero_fill = false;   // a cp.async in the zero-filling form (source size in a register)
  // Another block's shared memory (distributed shared memory, cluster peers): the accesses
  // land on that SM's banks, and Nsight Compute's shared-memory counters count them on neither.
  bool peer = false;
  int64_t count = 0;        // warp-level executions per iteration (all warps of a block)
  int64_t wavefronts = 0;   // predicted, summed over those executions
  int64_t ideal = 0;        // with no bank conflict
  int64_t iterations = 0;   // iterations per launch (blocks x loop trips) for the given problem
  int64_t bytes = 0;        // bytes the active lanes move, summed over the executions (per iteration)
  WarpAccess worst{};       // the costliest warp access seen, for bank maps
  int worst_wavefronts = -1;
};

// Builds a kernel's instruction list: open an instruction, then add one warp access per
// warp (and per unrolled repetition) of an iteration.
class SmemTrace {
 public:
  SmemInstr& instr(std::string kernel, std::string name, SmemOp op, int width, int64_t iterations) {
    rows_.push_back(SmemInstr{});
    SmemInstr& row = rows_.back();
    row.kernel = std::move(kernel);
    row.name = std::move(name);
    row.op = op;
    row.width = width;
    row.iterations = iterations;
    return row;
  }
  const std::deque<SmemInstr>& rows() const { return rows_; }

 private:
  std::deque<SmemInstr> rows_;  // a deque: instr() references stay valid as rows are added
};

// Adds one warp's access: `byte_of(thread)` gives the byte address thread `thread` of the
// block touches, or a negative value when it does not execute this instruction; for a
// cp.async, `src_of(thread)` the global byte address it copies from (the 128-byte lines
// count: see copy_split). Warps whose lanes are all inactive skip the instruction and are
// not counted. `times`: the access happens that many times (identical block tiles).
template <class F, class G>
void add_warp(SmemInstr& row, int warp, F&& byte_of, G&& src_of, int64_t times = 1) {
  WarpAccess a{{}, 0u, row.width, row.op == SmemOp::Ld, row.op == SmemOp::Ldgsts, row.zero_fill};
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    const int64_t addr = byte_of(warp * kWarpLanes + lane);
    if (addr < 0) continue;
    a.addr[lane] = static_cast<uint32_t>(addr);
    a.active |= 1u << lane;
    if (a.copy) a.src[lane] = src_of(warp * kWarpLanes + lane);
  }
  if (a.active == 0) return;
  const BankCost cost = bank_cost(a);
  row.count += times;
  row.bytes += times * __builtin_popcount(a.active) * row.width;
  row.wavefronts += times * cost.wavefronts;
  row.ideal += times * cost.ideal;
  if (cost.wavefronts > row.worst_wavefronts) {
    row.worst = a;
    row.worst_wavefronts = cost.wavefronts;
  }
}

// Adds every warp of a block of `threads` threads (src_of: as for add_warp, cp.async only),
// `times` times.
template <class F, class G>
void add_block(SmemInstr& row, int threads, F&& byte_of, G&& src_of, int64_t times = 1) {
  for (int w = 0; w * kWarpLanes < threads; ++w)
    add_warp(row, w, [&](int t) { return t < threads ? byte_of(t) : int64_t(-1); }, src_of, times);
}
template <class F>
void add_block(SmemInstr& row, int threads, F&& byte_of) {
  add_block(row, threads, byte_of, [](int) { return int64_t(0); });
}

// The host side of with_bytes: f(std::integral_constant<int, E>{}) for E in 1, 2, 4, 8, 16.
template <class F>
decltype(auto) with_elem_bytes(int elem_bytes, F&& f) {
  switch (elem_bytes) {
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 8: return f(std::integral_constant<int, 8>{});
    case 16:
    default: return f(std::integral_constant<int, 16>{});
  }
}

}  // namespace bankops
