// gemm on CUDA: strides straight from the inputs (transposed views need no copy), launch.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include "../kernels/gemm_repack.h"
#include "../kernels/launch.h"
#include "common.h"
#include "gemm.h"

namespace bankops {
namespace {

at::Tensor gemm_cuda(const at::Tensor& a, const at::Tensor& b, std::string_view layout) {
  const Layout l = parse_layout(layout, "gemm");
  const GemmGeometry g = gemm_geometry(a, b);
  const c10::cuda::CUDAGuard guard(a.device());
  at::Tensor out = new_output(g.out_sizes, a.options());
  if (out.numel() == 0) return out;
  const auto [asb, asm_, ask] = gemm_strides(a);
  const auto [bsb, bsk, bsn] = gemm_strides(b);
  const GemmArgs args{g.batch, g.m, g.n, g.k, a.const_data_ptr(), asb, asm_, ask,
                      b.const_data_ptr(), bsb, bsk, bsn, out.mutable_data_ptr()};
  const DType dtype = to_dtype(a.scalar_type());
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  // float16/bfloat16 on tensor cores (any strides; wgmma on compute capability 9.0 when the
  // build has sm_90a); the FFMA kernel for float32/float64.
  if (dtype == DType::F16 || dtype == DType::BF16) {
    check_gemm_mma(dtype, args, "gemm");
    const cudaDeviceProp* prop = at::cuda::getDeviceProperties(a.get_device());
    const bool hopper = wgmma_enabled() && gemm_wgmma_built() && prop->major == 9 && prop->minor == 0;
    // Misaligned rows on the Hopper route: the copies live in scratch from the caching
    // allocator, freed (for this stream's later work) once both launches are queued.
    GemmRepack r;
    at::Tensor scratch;
    const bool hopper_swizzle = hopper && l == Layout::Swizzle;
    const bool a16 = mma_aligned16(args.a), b16 = mma_aligned16(args.b);
    if (repack_enabled() && gemm_repack_plan(args, a16, b16, hopper_swizzle, r)) {
      scratch = new_output({r.bytes}, a.options().dtype(at::kByte));
      r.place(scratch.mutable_data_ptr());
      C10_CUDA_CHECK(launch_repack(r.job, r.jobs, stream));
    }
    C10_CUDA_CHECK(launch_gemm_mma(l, dtype, scratch.defined() ? r.args : args, hopper, stream));
  } else {
    // float32's stream-K blocks keep their partial sums in scratch from the caching allocator.
    const int64_t bytes = stream_k_enabled() ? gemm_workspace_bytes(dtype, args) : 0;
    const at::Tensor scratch = bytes > 0 ? new_output({bytes}, a.options().dtype(at::kByte)) : at::Tensor();
    C10_CUDA_CHECK(launch_gemm(l, dtype, args, scratch.defined() ? scratch.mutable_data_ptr() : nullptr, stream));
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(bankops, CUDA, m) { m.impl("gemm", &gemm_cuda); }

}  // namespace bankops
