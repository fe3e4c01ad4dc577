// Test hooks: the shared-memory tiles the kernels declare, the bank model, readable from
// Python, and the switch that poisons new outputs.
#include <torch/library.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "../kernels/bank_model.h"
#include "../kernels/gemm/ffma.h"
#include "../kernels/reduce.h"
#include "../kernels/transpose.h"
#include "common.h"

namespace bankops {
namespace {

// Seed note 000's 8x8 table: 128-byte rows of eight 16-byte units, Swizzle<3,0,3>.
template <Layout L, int E>
using Seed000Tile = TileLayout<L, 8, 8, E>;
// Seed note 003's ldmatrix rows: 128-byte rows of 16-bit elements read 16 bytes at a time,
// Swizzle<3,3,3>.
template <Layout L, int E>
using Seed003Tile = TileLayout<L, 8, 128 / E, E, 16>;

template <class T>
struct SwizzleBits {
  static constexpr int b = -1, m = -1, s = -1;
};
template <int R, int C, class Swz>
struct SwizzleBits<Swizzled<R, C, Swz>> {
  static constexpr int b = Swz::kBits, m = Swz::kBase, s = Swz::kShift;
};

struct TileDescription {
  at::Tensor map;   // int64 [rows, cols]: element offset of each logical (row, col)
  at::Tensor info;  // int64 [rows, cols, storage elements, element bytes, B, M, S] (-1: no swizzle)
};

template <template <Layout, int> class TileOf, int E>
TileDescription describe(Layout layout) {
  return with_layout(layout, [](auto tag) {
    using Tile = TileOf<decltype(tag)::value, E>;
    at::Tensor map = at::empty({Tile::kRows, Tile::kCols}, at::kLong);
    auto acc = map.accessor<int64_t, 2>();
    for (int r = 0; r < Tile::kRows; ++r)
      for (int c = 0; c < Tile::kCols; ++c) acc[r][c] = Tile::offset(r, c);
    using Bits = SwizzleBits<Tile>;
    at::Tensor info = at::tensor(std::vector<int64_t>{Tile::kRows, Tile::kCols, Tile::kSize, E, Bits::b, Bits::m, Bits::s});
    return TileDescription{map, info};
  });
}

struct NamedTile {
  const char* name;
  TileDescription (*describe)(Layout);
};

// Every tile a kernel declares, by kernel and element (accumulator) bytes.
constexpr NamedTile kTiles[] = {
    {"transpose/1", describe<TransposeTile, 1>},   {"transpose/2", describe<TransposeTile, 2>},
    {"transpose/4", describe<TransposeTile, 4>},   {"transpose/8", describe<TransposeTile, 8>},
    {"transpose/16", describe<TransposeTile, 16>}, {"reduce_tree/4", describe<ReduceTreeTile, 4>},
    {"reduce_tree/8", describe<ReduceTreeTile, 8>}, {"reduce_cols/4", describe<ReduceColsTile, 4>},
    {"reduce_cols/8", describe<ReduceColsTile, 8>}, {"gemm/4", describe<GemmTile, 4>},
    {"gemm/8", describe<GemmTile, 8>},             {"seed000/16", describe<Seed000Tile, 16>},
    {"seed003/2", describe<Seed003Tile, 2>},
};

TileDescription find_tile(std::string_view tile, std::string_view layout, const char* op) {
  const Layout l = parse_layout(layout, op);
  std::string names;
  for (const NamedTile& t : kTiles) {
    if (tile == t.name) return t.describe(l);
    names += names.empty() ? "" : ", ";
    names += t.name;
  }
  TORCH_CHECK(false, op, ": unknown tile '", tile, "'; expected one of: ", names);
}

at::Tensor tile_map(std::string_view tile, std::string_view layout) { return find_tile(tile, layout, "_tile_map").map; }
at::Tensor tile_info(std::string_view tile, std::string_view layout) {
  return find_tile(tile, layout, "_tile_info").info;
}

// The process switch that poisons new outputs: 0 or 1 (True / False), or an error naming it.
void set_poison_op(int64_t on) {
  TORCH_CHECK(on == 0 || on == 1, "_set_poison: expected on to be True or False (1 or 0), got ", on);
  set_poison(on == 1);
}

// A tensor of lane addresses: integers (a float or complex tensor would pass NaN or fractions).
at::Tensor lane_addresses(const at::Tensor& t, const char* op, const char* arg) {
  TORCH_CHECK(t.dim() == 1 && t.numel() == kWarpLanes, op, ": expected ", arg, " to hold 32 lane addresses, got shape ",
              t.sizes());
  TORCH_CHECK(at::isIntegralType(t.scalar_type(), /*includeBool=*/false), op, ": expected ", arg,
              " to hold integer byte addresses, got dtype ", dtype_name(t.scalar_type()));
  return t.to(at::kCPU, at::kLong).contiguous();
}

// One warp-wide access from Python: addr holds the 32 lanes' byte addresses.
// Shared-memory addresses are 32-bit (a block has at most 227 KB); active: a mask of 32 lanes,
// -1 for all of them.
WarpAccess access_of(const at::Tensor& addr, int64_t width, int64_t active, bool store, const char* op) {
  const at::Tensor a = lane_addresses(addr, op, "addr");
  TORCH_CHECK(width == 1 || width == 2 || width == 4 || width == 8 || width == 16, op,
              ": expected width 1, 2, 4, 8 or 16 bytes, got ", width);
  TORCH_CHECK(active >= -1 && active <= int64_t(UINT32_MAX), op,
              ": expected active to be a 32-lane mask (0 to 2^32 - 1, or -1 for every lane), got ", active);
  WarpAccess access{{}, static_cast<uint32_t>(active), static_cast<int>(width), !store};
  for (int lane = 0; lane < kWarpLanes; ++lane) {
    const int64_t v = a.const_data_ptr<int64_t>()[lane];
    TORCH_CHECK(v >= 0 && v <= int64_t(UINT32_MAX), op, ": lane ", lane, " address ", v,
                " is outside [0, 2^32) (shared-memory addresses are 32-bit)");
    TORCH_CHECK(v % width == 0, op, ": lane ", lane, " address ", v, " is not ", width, "-byte aligned");
    access.addr[lane] = static_cast<uint32_t>(v);
  }
  return access;
}

// [wavefronts, ideal] of one warp-wide access.
// src (a cp.async): each lane's global byte address; zfill: the zero-filling cp.async.
at::Tensor bank_cost_of(const at::Tensor& addr, int64_t width, int64_t active, bool store,
                        const std::optional<at::Tensor>& src, bool zfill) {
  WarpAccess access = access_of(addr, width, active, store, "_bank_cost");
  TORCH_CHECK(src || !zfill, "_bank_cost: zfill describes a cp.async; expected src with it");
  if (src) {
    const at::Tensor s = lane_addresses(*src, "_bank_cost", "src");
    access.copy = true;
    access.zfill = zfill;
    access.load = false;
    for (int lane = 0; lane < kWarpLanes; ++lane) {
      access.src[lane] = s.const_data_ptr<int64_t>()[lane];
      TORCH_CHECK(!(access.active >> lane & 1u) || access.src[lane] >= 0, "_bank_cost: src[", lane, "] = ",
                  access.src[lane], " is negative");
    }
  }
  const BankCost cost = bank_cost(access);
  return at::tensor(std::vector<int64_t>{cost.wavefronts, cost.ideal});
}

// Which lane each bank serves in each wavefront of one access (the bank maps of
// bankops.plot_banks): lane [wavefronts, 32] (the lowest lane reading that word, -1: the
// bank idles), sharers [wavefronts, 32] (lanes served by that word), phase [wavefronts].
std::tuple<at::Tensor, at::Tensor, at::Tensor> bank_map(const at::Tensor& addr, int64_t width, int64_t active,
                                                        bool store) {
  const WarpAccess access = access_of(addr, width, active, store, "_bank_map");
  const int n = bank_cost(access).wavefronts;
  at::Tensor lane = at::full({n, kBanks}, -1, at::kLong), sharers = at::zeros({n, kBanks}, at::kLong);
  at::Tensor phase = at::zeros({n}, at::kLong);
  auto l = lane.accessor<int64_t, 2>();
  auto s = sharers.accessor<int64_t, 2>();
  auto p = phase.accessor<int64_t, 1>();
  std::vector<uint32_t> seen(static_cast<size_t>(n) * kBanks, 0u);  // per cell: lanes counted, as a mask
  bank_schedule(access, [&](int wave, int ph, int bank, int ln) {
    p[wave] = ph;
    if (l[wave][bank] < 0 || ln < l[wave][bank]) l[wave][bank] = ln;
    uint32_t& mask = seen[static_cast<size_t>(wave) * kBanks + bank];
    if (!(mask >> ln & 1u)) s[wave][bank] += 1;
    mask |= 1u << ln;
  });
  return {lane, sharers, phase};
}

}  // namespace

TORCH_LIBRARY_IMPL(bankops, CPU, m) {
  m.impl("_bank_cost", &bank_cost_of);
  m.impl("_bank_map", &bank_map);
}

TORCH_LIBRARY_IMPL(bankops, CompositeExplicitAutograd, m) {
  m.impl("_tile_map", &tile_map);
  m.impl("_tile_info", &tile_info);
  m.impl("_set_poison", &set_poison_op);
}

}  // namespace bankops
