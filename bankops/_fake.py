"""Fake (meta) implementations: output shape and dtype of each operator, for torch.compile."""
import torch

from ._layouts import LAYOUTS, unknown_layout
# The dtypes ops/ admits, so a compiled graph refuses at trace time what eager refuses.
_REDUCE_DTYPES = (
    torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
    torch.float16, torch.bfloat16, torch.float32, torch.float64,
)
_GEMM_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def _check_layout(op, layout):
    torch._check(
        layout in LAYOUTS,
        lambda: unknown_layout(op, layout),
    )


def _wrap_dim(op, arg, dim, ndim):
    n = max(ndim, 1)
    torch._check(-n <= dim < n, lambda: f"{op}: {arg}={dim} is out of range for a {ndim}-d tensor (expected {-n} to {n - 1})")
    return dim % n


@torch.library.register_fake("bankops::reduce_sum")
def _reduce_sum(x, dim=None, keepdim=False, layout="swizzle"):
    _check_layout("reduce_sum", layout)
    torch._check(
        x.dtype in _REDUCE_DTYPES,
        lambda: f"reduce_sum: x has dtype {x.dtype}; expected one of bool, uint8, int8, int16, int32, int64, "
        "float16, bfloat16, float32, float64",
    )
    dtype = x.dtype if x.dtype.is_floating_point else torch.int64
    if dim is None:
        shape = [1] * x.dim() if keepdim else []
    elif x.dim() == 0:
        _wrap_dim("reduce_sum", "dim", dim, 0)
        shape = []
    else:
        d = _wrap_dim("reduce_sum", "dim", dim, x.dim())
        shape = list(x.shape)
        if keepdim:
            shape[d] = 1
        else:
            del shape[d]
    return x.new_empty(shape, dtype=dtype)


@torch.library.register_fake("bankops::transpose")
def _transpose(x, dim0=-2, dim1=-1, layout="swizzle"):
    _check_layout("transpose", layout)
    torch._check(
        x.element_size() in (1, 2, 4, 8, 16),
        lambda: f"transpose: x has dtype {x.dtype} of {x.element_size()} bytes; expected elements of 1, 2, 4, 8 or 16 bytes",
    )
    shape = list(x.shape)
    d0 = _wrap_dim("transpose", "dim0", dim0, x.dim())
    d1 = _wrap_dim("transpose", "dim1", dim1, x.dim())
    if x.dim() > 0:
        shape[d0], shape[d1] = shape[d1], shape[d0]
    return x.new_empty(shape)


@torch.library.register_fake("bankops::gemm")
def _gemm(a, b, layout="swizzle"):
    _check_layout("gemm", layout)
    torch._check(a.dim() in (2, 3), lambda: f"gemm: expected a to be 2-D (M, K) or 3-D (B, M, K), got {a.dim()}-D")
    torch._check(b.dim() == a.dim(), lambda: f"gemm: expected b to be {a.dim()}-D like a, got {b.dim()}-D")
    torch._check(
        a.dtype in _GEMM_DTYPES, lambda: f"gemm: a has dtype {a.dtype}; expected float32, float16, bfloat16 or float64"
    )
    torch._check(b.dtype == a.dtype, lambda: f"gemm: b has dtype {b.dtype} but a has {a.dtype}")
    torch._check(a.device == b.device, lambda: f"gemm: a is on {a.device} but b is on {b.device}")
    torch._check(a.shape[-1] == b.shape[-2], lambda: f"gemm: a's columns ({a.shape[-1]}) must equal b's rows ({b.shape[-2]})")
    if a.dim() == 3:
        torch._check(a.shape[0] == b.shape[0], lambda: f"gemm: a has batch size {a.shape[0]} but b has {b.shape[0]}")
        return a.new_empty((a.shape[0], a.shape[1], b.shape[2]))
    return a.new_empty((a.shape[0], b.shape[1]))


@torch.library.register_fake("bankops::linear")
def _linear(x, weight, bias=None, layout="swizzle"):
    _check_layout("linear", layout)
    torch._check(weight.dim() == 2,
                 lambda: f"linear: expected weight to be 2-D (out_features, in_features), got {weight.dim()}-D")
    out, k = weight.shape
    torch._check(x.dim() >= 1 and x.shape[-1] == k,
                 lambda: f"linear: x has shape {tuple(x.shape)}; expected its last dim to be weight's in_features = {k}")
    torch._check(x.dtype in _GEMM_DTYPES,
                 lambda: f"linear: x has dtype {x.dtype}; expected float32, float16, bfloat16 or float64")
    torch._check(weight.dtype == x.dtype, lambda: f"linear: x has dtype {x.dtype} but weight has {weight.dtype}")
    torch._check(x.device == weight.device, lambda: f"linear: x is on {x.device} but weight is on {weight.device}")
    if bias is not None:
        torch._check(bias.dim() == 1 and bias.shape[0] == out,
                     lambda: f"linear: bias has shape {tuple(bias.shape)}; expected (out_features,) = ({out},)")
        torch._check(bias.dtype == x.dtype, lambda: f"linear: bias has dtype {bias.dtype} but x has {x.dtype}")
        torch._check(bias.device == x.device, lambda: f"linear: bias is on {bias.device} but x is on {x.device}")
    return x.new_empty((*x.shape[:-1], out))
