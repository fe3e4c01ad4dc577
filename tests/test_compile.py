"""The operators as torch sees them: opcheck (schema, fake kernels, autograd registration,
dispatch) and torch.compile with no graph breaks and no recompilation per shape."""
import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.library import opcheck

import bankops
from conftest import DEVICES, LAYOUTS, requires_cuda


def sample_args(device):
    r = lambda *s, dtype=torch.float32: torch.randn(*s, device=device).to(dtype)  # noqa: E731
    return [
        (torch.ops.bankops.reduce_sum.default, (r(5, 7), None, False, "none")),
        (torch.ops.bankops.reduce_sum.default, (r(5, 7, 3), 1, True, "pad")),
        (torch.ops.bankops.reduce_sum.default, (torch.randint(0, 9, (4, 6), device=device, dtype=torch.int32), -1, False, "swizzle")),
        (torch.ops.bankops.reduce_sum.default, (r(3, 4, dtype=torch.bfloat16), 0, False, "swizzle")),
        (torch.ops.bankops.transpose.default, (r(5, 7), -2, -1, "none")),
        (torch.ops.bankops.transpose.default, (r(2, 3, 4, 5, dtype=torch.float16), 0, 2, "pad")),
        (torch.ops.bankops.transpose.default, (r(9, 4).t(), 0, 1, "swizzle")),
        (torch.ops.bankops.gemm.default, (r(5, 7), r(7, 3), "none")),
        (torch.ops.bankops.gemm.default, (r(2, 5, 7, dtype=torch.float16), r(2, 7, 3, dtype=torch.float16), "pad")),
        (torch.ops.bankops.gemm.default, (r(7, 5).t(), r(3, 7).t(), "swizzle")),
    ]


def grad_sample_args(device):
    """Inputs that require grad (opcheck then checks the autograd registration and runs the
    backward through AOT autograd), the integer and bool dtype rules, keepdim, 0-d inputs,
    float64 and batched gemm."""
    def r(*s, dtype=torch.float32, grad=True):
        return torch.randn(s, device=device).to(dtype).requires_grad_(grad and dtype.is_floating_point)

    i = lambda *s, dtype: torch.randint(0, 9, s, device=device).to(dtype)  # noqa: E731
    return [
        (torch.ops.bankops.reduce_sum.default, (r(5, 7), None, True, "none")),
        (torch.ops.bankops.reduce_sum.default, (r(4, 6, 3, dtype=torch.float64), -2, False, "pad")),
        (torch.ops.bankops.reduce_sum.default, (r(), 0, True, "swizzle")),
        (torch.ops.bankops.reduce_sum.default, (r(3, 4, dtype=torch.float16), 1, True, "swizzle")),
        (torch.ops.bankops.reduce_sum.default, (i(4, 6, dtype=torch.bool), 0, True, "none")),
        (torch.ops.bankops.reduce_sum.default, (i(4, 6, dtype=torch.uint8), None, False, "pad")),
        (torch.ops.bankops.reduce_sum.default, (i(4, 6, dtype=torch.int64), 1, False, "swizzle")),
        (torch.ops.bankops.transpose.default, (r(5, 7, dtype=torch.float64), 0, 1, "none")),
        (torch.ops.bankops.transpose.default, (r(2, 3, 4, dtype=torch.bfloat16).transpose(0, 1), 0, 2, "pad")),
        (torch.ops.bankops.transpose.default, (i(3, 8, dtype=torch.int8), -1, -2, "swizzle")),
        (torch.ops.bankops.gemm.default, (r(5, 7, dtype=torch.float64), r(7, 3, dtype=torch.float64), "none")),
        (torch.ops.bankops.gemm.default, (r(3, 5, 7), r(3, 4, 7).transpose(1, 2), "pad")),
        (torch.ops.bankops.gemm.default, (r(6, 4, dtype=torch.bfloat16), r(4, 9, dtype=torch.bfloat16, grad=False), "swizzle")),
    ]


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for op, args in sample_args(device) + grad_sample_args(device):
        opcheck(op, args)


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: torch.ops.bankops.gemm(torch.ones(4, 4, dtype=torch.int32), torch.ones(4, 4, dtype=torch.int32)), r"a has dtype torch.int32; expected float32"),
        (lambda: torch.ops.bankops.gemm(torch.ones(4, 4), torch.ones(4, 4, device="meta")), r"a is on cpu but b is on meta"),
        (lambda: torch.ops.bankops.reduce_sum(torch.ones(4, dtype=torch.complex64)), r"x has dtype torch.complex64; expected one of bool"),
        (lambda: torch.ops.bankops.reduce_sum(torch.ones(4, 4), -3), r"dim=-3 is out of range for a 2-d tensor"),
        (lambda: torch.ops.bankops.transpose(torch.ones(4, 4), 0, 2, "pad"), r"dim1=2 is out of range"),
        (lambda: torch.ops.bankops.transpose(torch.ones(4, 4), 0, 1, "tiles"), r"unknown layout 'tiles'"),
    ],
    ids=["gemm-int", "gemm-devices", "reduce-complex", "reduce-dim", "transpose-dim", "layout"],
)
def test_fake_refuses_what_eager_refuses(call, message):
    """A compiled graph fails at trace time, with eager's message, where eager would fail."""
    with FakeTensorMode(allow_non_fake_inputs=True), pytest.raises(RuntimeError, match=message):
        call()


def model(a, b, x, layout):
    """Uses all three operators and mixes them with ordinary torch ops."""
    y = bankops.gemm(a, b, layout)
    y = bankops.transpose(torch.relu(y), layout=layout)
    return bankops.reduce_sum(y * 2, dim=1, layout=layout) + bankops.reduce_sum(x, layout=layout)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_compile_fullgraph(device, layout):
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True)
    a, b, x = (torch.randn(s, device=device) for s in [(33, 20), (20, 17), (9,)])
    torch.testing.assert_close(compiled(a, b, x, layout), model(a, b, x, layout))


def batched_model(a, b, layout):
    """Batched gemm, a transpose of two outer dims, keepdim and full reductions."""
    y = bankops.transpose(bankops.gemm(a, b, layout), 0, 1, layout)
    return bankops.reduce_sum(y, -1, True, layout) * bankops.reduce_sum(torch.sin(y), None, False, layout)


def assert_grads_close(got, want, scales=()):
    # Inductor fuses the torch ops between bankops' and sums in another order: float32
    # rounding relative to each gradient's largest element, or to the scale of the terms it
    # sums where those may cancel to near zero (scales: one per gradient, or none).
    for i, (g, w) in enumerate(zip(got, want)):
        scale = max(float(w.abs().max()), scales[i] if i < len(scales) else 0.0)
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-4 * scale)


SHAPES = [(33, 20, 17), (64, 9, 5), (7, 31, 40)]  # (M, K, N): none is 0 or 1, which torch specializes


@pytest.mark.parametrize("device", DEVICES)
def test_compile_dynamic_shapes(device):
    """One compiled graph serves three shapes (no recompilation), forward and backward equal eager."""
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend=counter)
    for m, k, n in SHAPES:
        a, b, x = (torch.randn(s, device=device, requires_grad=True) for s in [(m, k), (k, n), (m,)])
        got, want = compiled(a, b, x, "swizzle"), model(a, b, x, "swizzle")
        torch.testing.assert_close(got, want)
        g = torch.randn_like(want)
        # x's gradient is g summed (every element the same), which can cancel to near zero
        x_scale = float(g.abs().sum())
        assert_grads_close(torch.autograd.grad(got, (a, b, x), g), torch.autograd.grad(want, (a, b, x), g),
                           (0.0, 0.0, x_scale))
    assert counter.frame_count == 1, f"compiled {counter.frame_count} graphs for {len(SHAPES)} shapes; expected 1"


@pytest.mark.parametrize("device", DEVICES)
def test_compile_dynamic_batched(device):
    torch._dynamo.reset()
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(batched_model, fullgraph=True, dynamic=True, backend=counter)
    for batch, (m, k, n) in zip((2, 3, 5), SHAPES):
        a = torch.randn(batch, m, k, device=device, requires_grad=True)
        b = torch.randn(batch, n, k, device=device).transpose(1, 2).requires_grad_()
        got, want = compiled(a, b, "pad"), batched_model(a, b, "pad")
        # Inductor's own sin differs from eager's by an ulp here and there, and the full sum
        # of sin(y) scales every element: float32 rounding relative to the terms the two sums
        # add (the sum of sin(y) can cancel to near zero, and with it every element: CI saw a
        # relative difference of 1.5e-6 against assert_close's default 1.3e-6, a CPU run once more
        # than 1e-5 of the largest element).
        y = bankops.transpose(bankops.gemm(a, b, "pad"), 0, 1, "pad").detach()
        scale = float(y.abs().sum(-1).max()) * float(torch.sin(y).abs().sum())
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5 * max(float(want.detach().abs().max()), scale))
        g = torch.randn_like(want)
        assert_grads_close(torch.autograd.grad(got, (a, b), g), torch.autograd.grad(want, (a, b), g))
    assert counter.frame_count == 1, f"compiled {counter.frame_count} graphs for 3 shapes; expected 1"


@requires_cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs (multi-GPU test)")
def test_second_device():
    """Operators run on their inputs' device, not on the current one."""
    a = torch.randn(40, 30, device="cuda:1")
    b = torch.randn(30, 20, device="cuda:1")
    got = bankops.transpose(bankops.gemm(a, b))
    assert got.device == a.device
    torch.testing.assert_close(got.cpu(), bankops.transpose(bankops.gemm(a.cpu(), b.cpu())))
    assert bankops.reduce_sum(a).device == a.device
