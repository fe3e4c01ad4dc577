// gemm on CUDA: the route for the calling device (kernels/gemm/route.h), its scratch from the
// caching allocator, the launch of its plan. Strides come straight from the inputs: views are
// not copied.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <mutex>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "../kernels/gemm/launch.h"
#include "common.h"
#include "gemm_op.h"

namespace bankops {
namespace {

// The device a call runs on, its cluster room measured once per device, and its name.
struct Device {
  DeviceInfo info;
  std::string name;
};
const Device& device_of(int64_t device) {
  static std::vector<std::once_flag> once(c10::cuda::device_count());
  static std::vector<Device> info(once.size());
  TORCH_CHECK(device >= 0 && device < static_cast<int64_t>(once.size()), "_device_room: device must be in [0, ",
              once.size(), "), got ", device);
  std::call_once(once[device], [&] {
    const cudaDeviceProp* prop = at::cuda::getDeviceProperties(device);
    DeviceInfo d{prop->multiProcessorCount, prop->major * 10 + prop->minor};
    d.kind = gpu_kind(prop->name);
    const c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    C10_CUDA_CHECK(measure_cluster_room(static_cast<int>(device), d));
    info[device] = Device{d, prop->name};
  });
  return info[device];
}
DeviceInfo device_info(int64_t device) { return device_of(device).info; }
[[maybe_unused]] const bool kRoomHooked = (device_room_hook() = &device_info, true);

// The scratch a route takes (copies of misaligned operands, stream-K's partial sums; poisoned
// like outputs in test mode), or, where the caching allocator has none, the route that needs
// none in `route`. The scratch goes back to the allocator once the launches are queued: later
// work on this stream runs after them.
at::Tensor route_scratch(GemmRoute& route, const at::TensorOptions& device) {
  if (route.scratch_bytes == 0) return at::Tensor();
  try {
    return new_output({route.scratch_bytes}, device.dtype(at::kByte));
  } catch (const c10::OutOfMemoryError&) {
    const int64_t bytes = route.scratch_bytes;
    GemmCall call = route.call;
    call.options.scratch = false;
    route = checked_route(call, "gemm");
    TORCH_WARN("gemm: no memory for the ", bytes, " bytes of scratch its route takes; such calls run `",
               gemm_route_line(route), "` instead");
    return at::Tensor();
  }
}

// Runs the route's plan; scratch: route.scratch_bytes bytes (null when 0), free to reuse once
// the launches are queued on this stream. tma false acts out the driver refusing every tensor
// map (the test option refuse_tma).
cudaError_t launch_route(const GemmRoute& r, void* scratch, cudaStream_t stream, bool tma) {
  if (r.scratch_bytes > 0 && scratch == nullptr) return cudaErrorInvalidValue;
  return std::visit(
      [&](const auto& p) {
        using P = std::decay_t<decltype(p)>;
        if constexpr (std::is_same_v<P, FfmaPlan>) return launch_ffma(r.call, p, scratch, stream);
        else if constexpr (std::is_same_v<P, MmaPlan>) return launch_mma(r.call, p, stream);
        else if constexpr (std::is_same_v<P, RowsPlan>) return launch_rows(r.call, p, stream);
        else {
          WgmmaPlan placed = p;
          if (p.repack.jobs > 0) placed.repack = p.repack.placed(scratch);
          return launch_wgmma(r.call, placed, stream, tma);
        }
      },
      r.plan());
}

// a @ b (+ bias, in the kernels' epilogue).
at::Tensor gemm_run(const at::Tensor& a_in, const at::Tensor& b_in, const at::Tensor& bias, Layout l) {
  const GemmGeometry g = gemm_geometry(a_in, b_in);
  const at::Tensor a = element_aligned(a_in), b = element_aligned(b_in);
  const c10::cuda::CUDAGuard guard(a.device());
  at::Tensor out = new_output(g.out_sizes, a.options());
  if (out.numel() == 0) return out;
  GemmArgs args = gemm_args(g, a, b, out.mutable_data_ptr());
  record_gemm_call(args, to_dtype(a.scalar_type()), l);
  if (bias.defined()) args.bias = bias.const_data_ptr();
  const Device& device = device_of(a.get_device());
  const TunedTables tables = tuned_tables();
  GemmCall call{args, to_dtype(a.scalar_type()), l, device.info, gemm_options()};
  call.options.wgmma = call.options.wgmma && gemm_wgmma_built();
  call.tuned = find_tuned(tables, device.name, device.info.num_sms);
  GemmRoute route = checked_route(call, "gemm");
  const at::Tensor scratch = route_scratch(route, a.options());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  cudaError_t err = launch_route(route, scratch.defined() ? scratch.mutable_data_ptr() : nullptr, stream, !refuse_tma());
  if (err == cudaErrorNotSupported && std::holds_alternative<WgmmaPlan>(route.plan())) {
    // The driver refused a tensor map and nothing was launched: the route without TMA needs no
    // scratch (the copies feed TMA only).
    call = route.call;
    call.options.tma = false;
    route = checked_route(call, "gemm");
    TORCH_WARN("gemm: the driver refused the Hopper kernel's tensor maps; such calls run `",
               gemm_route_line(route), "` instead");
    err = launch_route(route, nullptr, stream, false);
  }
  C10_CUDA_CHECK(err);
  return out;
}

at::Tensor gemm_cuda(const at::Tensor& a, const at::Tensor& b, std::string_view layout) {
  return gemm_run(a, b, at::Tensor(), parse_layout(layout, "gemm"));
}

at::Tensor linear_cuda(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                       std::string_view layout) {
  const Layout l = parse_layout(layout, "linear");
  const LinearCall call = linear_call(x, weight, bias);
  return gemm_run(call.rows, call.wt, call.bias, l).view(call.out_sizes);
}

}  // namespace

TORCH_LIBRARY_IMPL(bankops, CUDA, m) {
  m.impl("gemm", &gemm_cuda);
  m.impl("linear", &linear_cuda);
}

}  // namespace bankops
