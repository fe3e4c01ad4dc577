// gemm's torch glue shared by the CPU reference, the CUDA op, _gemm_route and explain: the
// checks, the kernels' view of the operands (GemmArgs) and the calling thread's options.
#pragma once
#include <ATen/ATen.h>

#include <array>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "../kernels/gemm/route_line.h"

namespace bankops {

struct GemmGeometry {
  int64_t batch, m, n, k;
  bool batched;  // 3-D inputs
  std::vector<int64_t> out_sizes;
};

// Checks a and b (ndim, shapes, dtypes, devices), naming them in errors.
GemmGeometry gemm_geometry(const at::Tensor& a, const at::Tensor& b);

// The operands as the kernels see them (c: the output's data, or null). Data pointers count
// for their alignment only until launch; a meta tensor's is its storage offset in bytes.
GemmArgs gemm_args(const GemmGeometry& g, const at::Tensor& a, const at::Tensor& b, void* c);

// linear's operands as one 2-D gemm with a bias: x's rows (M, K) (a view where x's strides
// allow), B = weight.t() read in place, the bias contiguous (or undefined); checks name
// linear's arguments.
struct LinearCall {
  at::Tensor rows, wt, bias;
  std::vector<int64_t> out_sizes;  // (*x.shape[:-1], out_features)
};
LinearCall linear_call(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias);

// A device named by the caller (_gemm_route, explain): num_sms in [1, 65536], cc = 10 * major +
// minor in [10, 255], or an error naming the argument.
// A device given by its SM count and compute capability, and the blocks it holds in clusters
// (room: DeviceInfo::room's 28 values row after row, as _device_room gives them; none: every
// slot counts).
DeviceInfo checked_device(int64_t num_sms, int64_t cc, at::OptionalIntArrayRef room, const char* op);
// _device_room's CUDA side (set by the CUDA build): the room of GPU `device`, measured once.
using DeviceRoomFn = DeviceInfo (*)(int64_t device);
DeviceRoomFn& device_room_hook();

// gemm_route after the checks every caller needs: float16/bfloat16 run on the tensor-core
// kernels only, which refuse shapes their int tile counters cannot hold (no tensor that fits a
// GPU comes near them).
GemmRoute checked_route(const GemmCall& call, const char* op);

// The calling thread's options (bankops.options, torch.ops.bankops._gemm_options; all on by
// default), read once per call: whether 16-bit swizzle may take the Hopper kernel, whether that
// route copies misaligned operands into aligned rows first, whether the float32 128x256 kernel
// deals its short last wave's tiles out by k, whether a few rows against a weight split k across
// a cluster (and the Hopper kernel's persistent walk its short last wave's tiles across pairs of
// blocks), whether the Hopper kernel's unsplit TMA plans run persistent blocks (off: a block a
// tile). A thread's options are its own: autograd's backward runs on threads of its own, with
// the defaults.
GemmOptions gemm_options();
// The measured tables registered so far (torch.ops.bankops._gemm_tuning; bankops.tune loads
// them), a snapshot that stays valid while held, and the one of a GPU (its name and SM count),
// or null.
using TunedTables = std::shared_ptr<const std::vector<TunedTable>>;
TunedTables tuned_tables();
const TunedTable* find_tuned(const TunedTables& tables, std::string_view gpu, int num_sms);
// The kind of GPU a device name is (costs.h's tables): H100, H200, or Other.
GpuKind gpu_kind(std::string_view name);

// While bankops.tune.record() records (_gemm_record), counts the call as the router keys it:
// dtype, layout, majors, batch, m, n, k (calls with a dim of 0 need no plan and are left out).
void record_gemm_call(const GemmArgs& g, DType dtype, Layout layout);

// Test hook (option refuse_tma): the Hopper launcher acts as if the driver refused every tensor
// map, so that the fallback to a route without TMA runs.
bool refuse_tma();

}  // namespace bankops
