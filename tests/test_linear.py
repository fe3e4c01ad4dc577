"""torch.ops.bankops.linear (torch.nn.functional.linear's semantics: x (..., in) @ weight.t()
+ bias, the bias added in the gemm's epilogue) and its backward (dx = dy @ W, dW = dy.t() @ x,
db = dy summed over rows), against float64, on the CPU reference and every kernel family."""
import math

import pytest
import torch

import bankops
from conftest import DEVICES, LAYOUTS, eps, requires_cuda

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def reference(x, w, b):
    y = x.double() @ w.double().t()
    return y if b is None else y + b.double()


def check(got, x, w, b):
    """Elementwise: the accumulator's rounding over K terms plus one rounding to the dtype (the
    bias is added to the unrounded sum); NaN (an unwritten element of a poisoned output) fails."""
    ref = reference(x, w, b)
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    k = x.shape[-1]
    scale = x.double().abs() @ w.double().abs().t() + (0 if b is None else b.double().abs())
    bound = 2 * eps(acc) * math.sqrt(max(k, 1)) * scale + eps(got.dtype) * ref.abs()
    assert got.shape == ref.shape and got.dtype == x.dtype
    assert not torch.isnan(got).any()
    assert bool(((got.double() - ref).abs() <= bound + 1e-300).all()), float(((got.double() - ref).abs() - bound).max())


def make(shape, dtype, device):
    return torch.randn(shape, device=device).to(dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("lead", [(), (7,), (2, 3), (0,)], ids=["1d", "rows", "batched", "empty"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_matches_float64(bias, lead, dtype, device):
    x, w = make((*lead, 37), dtype, device), make((45, 37), dtype, device)
    b = make((45,), dtype, device) if bias else None
    for layout in LAYOUTS:
        check(bankops.linear(x, w, b, layout), x, w, b)


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(2048, 1024, 2048), (4095, 1029, 4097), (3072, 16384, 768), (1000, 264, 520)],
                         ids=["2048", "misaligned-strip", "stream-k", "small"])
def test_cuda_bias_in_every_epilogue(shape, dtype):
    """The bias on each route's epilogue: float32's 128x256 tile (with strip columns and with
    stream-K's shared tiles), 128x128 and 64x64, the Hopper kernel (TMA; repacked misaligned
    rows) and mma.sync (pad, none), float64's DFMA."""
    m, k, n = shape
    x, w, b = make((m, k), dtype, "cuda"), make((n, k), dtype, "cuda"), make((n,), dtype, "cuda")
    for layout in LAYOUTS:
        check(bankops.linear(x, w, b, layout), x, w, b)


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    """The schema, fake function, autograd registration and dispatch agree (torch.library.opcheck)."""
    x = make((3, 5, 24), torch.float32, device).requires_grad_()
    w = make((16, 24), torch.float32, device).requires_grad_()
    b = make((16,), torch.float32, device).requires_grad_()
    torch.library.opcheck(torch.ops.bankops.linear.default, (x, w, b, "swizzle"))
    torch.library.opcheck(torch.ops.bankops.linear.default, (x, w, None, "pad"))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_backward_matches_torch(dtype, device):
    """dx, dW and db against torch.nn.functional.linear's, on x with leading dims."""
    x = make((4, 33, 40), dtype, device).requires_grad_()
    w = make((24, 40), dtype, device).requires_grad_()
    b = make((24,), dtype, device).requires_grad_()
    dy = make((4, 33, 24), dtype, device)
    bankops.linear(x, w, b).backward(dy)
    got = (x.grad, w.grad, b.grad)
    x.grad = w.grad = b.grad = None
    torch.nn.functional.linear(x.double(), w.double(), b.double()).backward(dy.double())
    tol = 1e-5 if dtype == torch.float32 else 2e-2
    for g, (name, ref) in zip(got, (("x", x.grad), ("weight", w.grad), ("bias", b.grad))):
        assert g.dtype == dtype and g.shape == ref.shape and g.is_contiguous(), name
        ref = ref.double()
        assert torch.allclose(g.double(), ref, rtol=tol, atol=tol * ref.abs().max().item()), name


def test_gradcheck():
    x = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *t: bankops.linear(*t), (x, w, b))


@pytest.mark.parametrize(
    "args,match",
    [
        (((3, 5), (4, 6), (4,)), "expected its last dim to be weight's in_features = 6"),
        (((3, 6), (4, 6, 1), (4,)), "expected weight to be 2-D"),
        (((3, 6), (4, 6), (5,)), r"bias has shape \[5\]"),
        (((), (4, 6), None), "expected its last dim"),
    ],
)
def test_errors_name_the_argument(args, match):
    xs, ws, bs = args
    x, w = torch.randn(xs), torch.randn(ws)
    b = None if bs is None else torch.randn(bs)
    with pytest.raises(RuntimeError, match=match):
        bankops.linear(x, w, b)
    with pytest.raises(RuntimeError, match="bias has dtype"):
        bankops.linear(torch.randn(3, 6), torch.randn(4, 6), torch.randn(4, dtype=torch.float64))


def test_compile_fullgraph():
    """torch.compile traces linear (fake function) and its backward without a graph break."""
    lin = bankops.nn.Linear(12, 8)
    f = torch.compile(lambda x: lin(x).sum(), fullgraph=True)
    x = torch.randn(5, 12, requires_grad=True)
    f(x).backward()
    ref = torch.nn.functional.linear(x.detach(), lin.weight.detach(), lin.bias.detach()).sum()
    assert torch.allclose(f(x), ref, rtol=1e-5)
    assert x.grad is not None and lin.weight.grad is not None and lin.bias.grad is not None


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_cuda_autocast_like_torch(dtype):
    """Under torch.autocast("cuda", dtype) linear and gemm cast float32 operands to the autocast
    dtype, as torch's linear and matmul do: a float32 bankops.nn.Linear returns `dtype` from
    the tensor-core kernel, with torch.nn.Linear's dtype and the bits of the same call on
    operands cast by hand; its gradients reach the float32 parameters. float64 is not cast, and
    outside autocast float32 stays float32."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(256, 192, device="cuda")
    mine = bankops.nn.Linear.from_torch(lin)
    x = torch.randn(64, 256, device="cuda", requires_grad=True)
    with torch.autocast("cuda", dtype=dtype):
        y, want = mine(x), lin(x)
        c = bankops.gemm(x, lin.weight.t())
        d = bankops.gemm(x.double(), x.double().t())
    assert y.dtype == want.dtype == c.dtype == dtype and d.dtype == torch.float64
    by_hand = bankops.linear(x.to(dtype), lin.weight.to(dtype), lin.bias.to(dtype))
    assert torch.equal(y, by_hand)
    assert torch.allclose(y.float(), want.float(), rtol=2e-2, atol=2e-2 * float(want.abs().max()))
    y.float().sum().backward()
    assert lin.weight.grad.dtype == torch.float32 and lin.bias.grad.dtype == torch.float32 and x.grad is not None
    assert mine(x).dtype == torch.float32
