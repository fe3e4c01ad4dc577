#include "common.h"

#include <atomic>
#include <cctype>
#include <cstdint>
#include <cstdio>
#include <string>

namespace bankops {
namespace {
std::atomic<bool> g_poison{false};
}

namespace {
// name with every byte outside printable ASCII as \xNN: a NUL would end the message early.
std::string printable(std::string_view name) {
  std::string out;
  for (const unsigned char c : name) {
    if (std::isprint(c)) {
      out += static_cast<char>(c);
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    }
  }
  return out;
}
}  // namespace

Layout parse_layout(std::string_view name, const char* op) {
  for (int i = 0; i < kLayouts; ++i)
    if (name == kLayoutNames[i]) return static_cast<Layout>(i);
  std::string names;
  for (int i = 0; i < kLayouts; ++i) names += std::string(i ? ", " : "") + kLayoutNames[i];
  TORCH_CHECK(false, op, ": unknown layout '", printable(name), "' for argument layout; expected one of: ", names);
}

DType to_dtype(at::ScalarType t) {
  switch (t) {
    case at::kBool: return DType::Bool;
    case at::kByte: return DType::U8;
    case at::kChar: return DType::I8;
    case at::kShort: return DType::I16;
    case at::kInt: return DType::I32;
    case at::kLong: return DType::I64;
    case at::kHalf: return DType::F16;
    case at::kBFloat16: return DType::BF16;
    case at::kFloat: return DType::F32;
    case at::kDouble: return DType::F64;
    default: TORCH_CHECK(false, "bankops: no kernel type for dtype ", dtype_name(t));
  }
}

std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kByte: return "torch.uint8";
    case at::kChar: return "torch.int8";
    case at::kShort: return "torch.int16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kHalf: return "torch.float16";
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kComplexHalf: return "torch.complex32";
    case at::kComplexFloat: return "torch.complex64";
    case at::kComplexDouble: return "torch.complex128";
    default: break;
  }
  // The other names are c10's in lower case: bool, bfloat16, qint8, float8_e4m3fn, uint16...
  std::string name = c10::toString(t);
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return "torch." + name;
}

at::Tensor new_output(at::IntArrayRef sizes, const at::TensorOptions& options) {
  if (!g_poison.load(std::memory_order_relaxed)) return at::empty(sizes, options);
  const int64_t nbytes = c10::multiply_integers(sizes) * c10::elementSize(c10::typeMetaToScalarType(options.dtype()));
  return at::empty({nbytes}, options.dtype(at::kByte)).fill_(0xFF).view(options.dtype().toScalarType()).view(sizes);
}

at::Tensor element_aligned(const at::Tensor& t) {
  const bool aligned = reinterpret_cast<uintptr_t>(t.const_data_ptr()) % t.element_size() == 0;
  if (aligned || t.numel() == 0) return t;
  // torch's own copy kernels read such a tensor an element at a time, misaligned too (a fault on
  // the GPU): copy the bytes under the view instead, and view the copy with the same strides.
  int64_t span = 1;
  for (int64_t d = 0; d < t.dim(); ++d) span += (t.size(d) - 1) * t.stride(d);
  const int64_t nbytes = span * int64_t(t.element_size());
  const at::Tensor bytes = at::from_blob(const_cast<void*>(t.const_data_ptr()), {nbytes}, t.options().dtype(at::kByte));
  return bytes.clone().view(t.scalar_type()).as_strided(t.sizes(), t.strides());
}

void check_dense(const at::Tensor& x, const char* op, const char* arg) {
  TORCH_CHECK(x.defined(), op, ": expected ", arg, " to be a tensor, got None");
  TORCH_CHECK(x.layout() == at::kStrided, op, ": expected ", arg, " to be a dense (strided) tensor, got layout ",
              x.layout());
  TORCH_CHECK(!x.is_quantized(), op, ": expected ", arg, " to be a plain tensor, got a quantized one");
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op, const char* arg) {
  const int64_t n = ndim > 0 ? ndim : 1;  // a 0-d tensor accepts dim -1 and 0, as in torch
  TORCH_CHECK(dim >= -n && dim < n, op, ": ", arg, "=", dim, " is out of range for a ", ndim,
              "-d tensor (expected ", -n, " to ", n - 1, ")");
  return dim < 0 ? dim + n : dim;
}

void set_poison(bool on) { g_poison.store(on); }

}  // namespace bankops
