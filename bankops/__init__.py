"""bankops: PyTorch operators that stage data through shared memory with a selectable tile layout.

Every operator takes ``layout``, one of :data:`LAYOUTS`:

- ``"none"``: dense row-major tiles (bank conflicts where a warp walks a tile column);
- ``"pad"``: each tile row padded by one access width;
- ``"swizzle"``: CuTe's XOR ``Swizzle<B,M,S>`` on the tile offset (no extra memory).

The three layouts compute identical results; they differ in speed and in the bank
conflicts the profiler reports. CPU tensors run the C++ reference implementation.
The operators are ``torch.ops.bankops.*``; the functions here only forward to them.
"""
import torch

try:
    from . import _C  # noqa: F401  (loading the library registers torch.ops.bankops.*)
except ImportError as e:  # a checkout never built (Python calls that a circular import), or built for another torch
    import glob as _glob
    import os as _os

    _built = _glob.glob(_os.path.join(_os.path.dirname(__file__), "_C.*"))
    raise ImportError(
        ("bankops: " + (f"bankops/_C did not load ({e})" if _built else "the compiled library bankops/_C is not built"))
        + ". In a checkout, build it: python setup.py build_ext --inplace (or bash scripts/test.sh); "
        "to install: pip install --no-build-isolation ."
    ) from None
from . import _fake  # noqa: F401  (shape functions for torch.compile)
from . import _tuning
from ._layouts import LAYOUTS
from ._options import options
from .explain import GemmRoute, explain, gemm_route
from .plot import plot_banks

__all__ = ["LAYOUTS", "reduce_sum", "transpose", "gemm", "linear", "options", "gemm_route", "GemmRoute", "tune",
           "nn", "explain", "plot_banks"]

_tuning.load_all()  # the measured tables of plans, shipped and the user's (bankops.tune)


def __getattr__(name):
    # bankops.tune, on first use (python -m bankops.tune runs that module apart from the package).
    if name == "tune":
        import importlib

        return importlib.import_module(".tune", __name__)
    raise AttributeError(f"module 'bankops' has no attribute {name!r}")

# The overloads themselves: calling torch.ops.bankops.<op> resolves its overload in Python on
# every call (about a microsecond, a tenth of a small call's time). The functions below pass
# only the arguments a call sets apart from the schema's defaults: the op converts each argument
# it is given on every call, the layout string most (about 0.5 us of a tiny call's 9 on an H100).
_reduce_sum = torch.ops.bankops.reduce_sum.default
_transpose = torch.ops.bankops.transpose.default
_gemm = torch.ops.bankops.gemm.default
_linear = torch.ops.bankops.linear.default


def _argument_error(op, tensors, ints):
    """A clearer error than the dispatcher's where it could not convert an argument (a tensor
    argument that is no tensor, an int past 64 bits), or None: the error as it was."""
    for name, value in tensors.items():
        if not isinstance(value, torch.Tensor):
            return TypeError(f"{op}: expected {name} to be a tensor, got {'None' if value is None else type(value).__name__}")
    for name, value in ints.items():
        if isinstance(value, int) and not -(2**63) <= value < 2**63:
            return ValueError(f"{op}: expected {name} to fit in 64 bits, got {value}")
    return None


def reduce_sum(x, dim=None, keepdim=False, layout="swizzle"):
    """Sum of ``x`` over ``dim`` (every element when ``dim`` is None), like ``torch.sum``.

    float16, bfloat16 and float32 keep their dtype and accumulate in float32, float64 in
    float64; integer and bool inputs give int64. The result is deterministic: the same
    input gives the same bits on every run.
    """
    try:
        if keepdim is not False or layout != "swizzle":
            return _reduce_sum(x, dim, keepdim, layout)
        return _reduce_sum(x) if dim is None else _reduce_sum(x, dim)
    except (RuntimeError, TypeError) as e:
        clearer = _argument_error("reduce_sum", {"x": x}, {"dim": dim})
        if clearer is None:
            raise
        raise clearer from e


def transpose(x, dim0=-2, dim1=-1, layout="swizzle"):
    """``x.transpose(dim0, dim1).contiguous()`` as a new tensor, for any dtype and dims."""
    try:
        return _transpose(x, dim0, dim1) if layout == "swizzle" else _transpose(x, dim0, dim1, layout)
    except (RuntimeError, TypeError) as e:
        clearer = _argument_error("transpose", {"x": x}, {"dim0": dim0, "dim1": dim1})
        if clearer is None:
            raise
        raise clearer from e


def gemm(a, b, layout="swizzle"):
    """``a @ b`` for 2-D (M, K) @ (K, N) or batched 3-D (B, M, K) @ (B, K, N) inputs.

    float32 runs FFMA (no TF32), float16 and bfloat16 accumulate in float32, float64 in
    float64. Inputs may be transposed or otherwise strided views; they are not copied.
    """
    return _gemm(a, b) if layout == "swizzle" else _gemm(a, b, layout)


def linear(x, weight, bias=None, layout="swizzle"):
    """``torch.nn.functional.linear``: ``x @ weight.t() + bias`` over x's last dim, for any
    leading dims; weight (out_features, in_features) is read in place and the bias is added
    in the gemm's epilogue. Differentiable in x, weight and bias."""
    if layout != "swizzle":
        return _linear(x, weight, bias, layout)
    return _linear(x, weight) if bias is None else _linear(x, weight, bias)


from . import nn  # noqa: E402  (after linear, which bankops.nn.Linear calls)
