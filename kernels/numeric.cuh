// Element <-> accumulator conversions and the accumulator type of each element type.
#pragma once
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "dtype.h"

namespace bankops {

// Sums of 16-bit and 32-bit floats accumulate in float, float64 in double, integers and
// bool in int64 (torch.sum's promotion).
template <class T> struct AccOf { using type = int64_t; };
template <> struct AccOf<__half> { using type = float; };
template <> struct AccOf<__nv_bfloat16> { using type = float; };
template <> struct AccOf<float> { using type = float; };
template <> struct AccOf<double> { using type = double; };
template <class T> using acc_t = typename AccOf<T>::type;

template <class Acc, class T> __device__ __forceinline__ Acc to_acc(T v) { return static_cast<Acc>(v); }
template <> __device__ __forceinline__ float to_acc<float, __half>(__half v) { return __half2float(v); }
template <> __device__ __forceinline__ float to_acc<float, __nv_bfloat16>(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T, class Acc> __device__ __forceinline__ T from_acc(Acc v) { return static_cast<T>(v); }
template <> __device__ __forceinline__ __half from_acc<__half, float>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_acc<__nv_bfloat16, float>(float v) { return __float2bfloat16_rn(v); }

// Calls f(T{}) with the C++ type of a DType.
template <class F>
decltype(auto) with_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Bool: return f(bool{});
    case DType::U8: return f(uint8_t{});
    case DType::I8: return f(int8_t{});
    case DType::I16: return f(int16_t{});
    case DType::I32: return f(int32_t{});
    case DType::I64: return f(int64_t{});
    case DType::F16: return f(__half{});
    case DType::BF16: return f(__nv_bfloat16{});
    case DType::F32: return f(float{});
    case DType::F64:
    default: return f(double{});
  }
}

}  // namespace bankops
