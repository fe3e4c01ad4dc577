// Element types as the kernels see them (kernels/ knows nothing of torch's ScalarType).
#pragma once

namespace bankops {

enum class DType : int { Bool, U8, I8, I16, I32, I64, F16, BF16, F32, F64 };

}  // namespace bankops
