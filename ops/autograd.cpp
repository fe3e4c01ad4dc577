// Autograd of the four operators: one torch::autograd::Function each, at the Autograd key. In C++
// because torch.library.register_autograd ran a Python function on every call, grad or not
// (bench/design_notes.md, "Per-call overhead"). Each backward calls bankops' own operators through the
// dispatcher with the forward's layout, so torch.compile traces it, and the calls are
// differentiable again (double backward).
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace bankops {
namespace {

using at::Tensor;
using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using OptTensor = std::optional<Tensor>;

bool requires_grad(const Tensor& t) { return t.requires_grad(); }
bool requires_grad(const OptTensor& t) { return t.has_value() && t->requires_grad(); }
template <class T>
bool requires_grad(const T&) {
  return false;
}

// An operator's three entry points, for its Function Fn (Fn::Sig: the schema's C++ signature).
template <class Fn, class Sig = typename Fn::Sig>
struct Op;
template <class Fn, class... Args>
struct Op<Fn, Tensor(Args...)> {
  // The whole operator, autograd included: what a backward calls.
  static Tensor call(Args... args) {
    static const auto op =
        c10::Dispatcher::singleton().findSchemaOrThrow(Fn::name, "").template typed<Tensor(Args...)>();
    return op.call(args...);
  }
  // The kernels (CPU, CUDA, fake...) under autograd: what a forward runs.
  static Tensor below(Args... args) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return call(args...);
  }
  // The Autograd kernel. With no graph to record (grad mode off, or no input requiring grad)
  // it skips the Function and its node: the common inference call costs one redispatch.
  static Tensor autograd(Args... args) {
    if (at::GradMode::is_enabled() && (requires_grad(args) || ...)) return Fn::apply(args...);
    return below(args...);
  }
};

// A Function whose backward compiled autograd may trace (torch.compile of a backward): it reads
// only its grads, saved tensors, saved_data and needs_input_grad, which compiled autograd tracks.
template <class T>
struct Traceable : torch::autograd::Function<T> {
  static constexpr bool is_traceable = true;
};

std::string_view layout_of(AutogradContext* ctx) { return ctx->saved_data.at("layout").toStringRef(); }

struct Transpose : Traceable<Transpose> {
  using Sig = Tensor(const Tensor&, int64_t, int64_t, std::string_view);
  static constexpr const char* name = "bankops::transpose";

  static Tensor forward(AutogradContext* ctx, const Tensor& x, int64_t dim0, int64_t dim1, std::string_view layout) {
    ctx->saved_data["dim0"] = dim0;
    ctx->saved_data["dim1"] = dim1;
    ctx->saved_data["layout"] = std::string(layout);
    return Op<Transpose>::below(x, dim0, dim1, layout);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    // Swapping two dims is its own inverse.
    const int64_t dim0 = ctx->saved_data.at("dim0").toInt(), dim1 = ctx->saved_data.at("dim1").toInt();
    return {Op<Transpose>::call(grads[0], dim0, dim1, layout_of(ctx)), Tensor(), Tensor(), Tensor()};
  }
};

struct ReduceSum : Traceable<ReduceSum> {
  using Sig = Tensor(const Tensor&, std::optional<int64_t>, bool, std::string_view);
  static constexpr const char* name = "bankops::reduce_sum";

  static Tensor forward(AutogradContext* ctx, const Tensor& x, std::optional<int64_t> dim, bool keepdim,
                        std::string_view layout) {
    Tensor out = Op<ReduceSum>::below(x, dim, keepdim, layout);  // refuses a bad dim before it is wrapped
    ctx->saved_data["shape"] = x.sym_sizes();                     // symbolic under torch.compile(dynamic=True)
    ctx->saved_data["dim"] = dim ? std::optional<int64_t>(c10::maybe_wrap_dim(*dim, x.dim())) : std::nullopt;
    ctx->saved_data["keepdim"] = keepdim;
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    // Every summed element receives the output's gradient: a broadcast view, as torch.sum's
    // backward gives (no memory is written for it).
    const std::vector<c10::SymInt> shape = ctx->saved_data.at("shape").toSymIntVector();
    const auto dim = ctx->saved_data.at("dim").toOptional<int64_t>();
    Tensor g = grads[0];
    if (!dim) {
      g = g.reshape(at::IntArrayRef{});  // keepdim's [1] * ndim as well as the 0-d result
    } else if (!ctx->saved_data.at("keepdim").toBool() && !shape.empty()) {
      g = g.unsqueeze(*dim);
    }
    return {g.expand_symint(shape), Tensor(), Tensor(), Tensor()};
  }
};

struct Gemm : Traceable<Gemm> {
  using Sig = Tensor(const Tensor&, const Tensor&, std::string_view);
  static constexpr const char* name = "bankops::gemm";

  static Tensor forward(AutogradContext* ctx, const Tensor& a, const Tensor& b, std::string_view layout) {
    // dA reads B and dB reads A: keep only what a needed gradient reads.
    ctx->save_for_backward({b.requires_grad() ? a : Tensor(), a.requires_grad() ? b : Tensor()});
    ctx->saved_data["layout"] = std::string(layout);
    return Op<Gemm>::below(a, b, layout);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    // C = A @ B: dA = dC @ B^T, dB = A^T @ dC. gemm reads the transposed views in place, so
    // neither operand is copied.
    const variable_list saved = ctx->get_saved_variables();
    const Tensor &a = saved[0], &b = saved[1];
    Tensor da, db;
    if (ctx->needs_input_grad(0)) da = Op<Gemm>::call(grads[0], b.transpose(-1, -2), layout_of(ctx));
    if (ctx->needs_input_grad(1)) db = Op<Gemm>::call(a.transpose(-1, -2), grads[0], layout_of(ctx));
    return {da, db, Tensor()};
  }
};

struct Linear : Traceable<Linear> {
  using Sig = Tensor(const Tensor&, const Tensor&, const OptTensor&, std::string_view);
  static constexpr const char* name = "bankops::linear";

  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& weight, const OptTensor& bias,
                        std::string_view layout) {
    // dW reads x (kept only when W needs it); the weight is alive anyway.
    ctx->save_for_backward({weight.requires_grad() ? x : Tensor(), weight});
    ctx->saved_data["layout"] = std::string(layout);
    ctx->saved_data["has_bias"] = bias.has_value() && bias->defined();
    return Op<Linear>::below(x, weight, bias, layout);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    // y = x @ W.t() + b over x's rows: dx = dy @ W, dW = dy.t() @ x (written in W's own
    // (out, in) layout: no transposed copy of an (in, out) product), db = dy summed over rows.
    const variable_list saved = ctx->get_saved_variables();
    const Tensor &x = saved[0], &weight = saved[1];
    const std::string_view layout = layout_of(ctx);
    const Tensor dy = grads[0].reshape_symint({-1, weight.sym_size(0)});
    Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      std::vector<c10::SymInt> x_shape = grads[0].sym_sizes().vec();
      x_shape.back() = weight.sym_size(1);
      dx = Op<Gemm>::call(dy, weight, layout).reshape_symint(x_shape);
    }
    if (ctx->needs_input_grad(1)) dw = Op<Gemm>::call(dy.t(), x.reshape_symint({-1, weight.sym_size(1)}), layout);
    // (The bias's edge exists only when a bias was given.)
    if (ctx->saved_data.at("has_bias").toBool() && ctx->needs_input_grad(2)) {
      db = Op<ReduceSum>::call(dy, 0, false, layout);
    }
    return {dx, dw, db, Tensor()};
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(bankops, Autograd, m) {
  m.impl("transpose", &Op<Transpose>::autograd);
  m.impl("reduce_sum", &Op<ReduceSum>::autograd);
  m.impl("gemm", &Op<Gemm>::autograd);
  m.impl("linear", &Op<Linear>::autograd);
}

}  // namespace bankops
