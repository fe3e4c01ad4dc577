"""Gradients of the four operators (ops/autograd.cpp): equal to torch's own to dtype tolerance,
gradcheck and gradgradcheck in float64 on the CPU reference, the backward runs bankops with the
forward's layout and only for the inputs that need grad, no Python on the call path, and the
backward traced by torch.compile, compiled autograd and vmap's callers."""
import math
import os
import sys

import pytest
import torch
from functorch.compile import make_boxed_func
from torch._dynamo.backends.common import aot_autograd
from torch._library.utils import fill_defaults
from torch.utils._python_dispatch import TorchDispatchMode

import bankops
from conftest import DEVICES, LAYOUTS, assert_close_bound, eps

FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]


def leaf(shape, dtype, device, transposed=False):
    """A random leaf that requires grad; `transposed` makes it a transposed view of its storage."""
    if transposed:
        t = torch.randn((*shape[:-2], shape[-1], shape[-2]), device=device).to(dtype).transpose(-1, -2)
    else:
        t = torch.randn(shape, device=device).to(dtype)
    return t.detach().requires_grad_()


def grads(fn, inputs, grad_out):
    out = fn(*inputs)
    return out, torch.autograd.grad(out, inputs, grad_out)


def gemm_bound(mag, k, ref, dtype):
    """A k-term dot product (`mag` = sum of |products|, in float64) accumulated in the
    kernel's accumulator (random signs: sqrt(k) growth), plus one rounding to dtype."""
    acc = torch.float64 if dtype == torch.float64 else torch.float32
    return 2 * eps(acc) * math.sqrt(max(k, 1)) * mag + eps(dtype) * ref.double().abs()


GEMM_CASES = [((13, 9), (9, 11), False), ((2, 7, 5), (2, 5, 6), False), ((6, 10), (10, 3), True), ((1, 4), (4, 1), False)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("a_shape,b_shape,transposed", GEMM_CASES, ids=["2d", "batched", "transposed-views", "1x1"])
def test_gemm_gradients(device, dtype, a_shape, b_shape, transposed):
    a, b = leaf(a_shape, dtype, device, transposed), leaf(b_shape, dtype, device, transposed)
    g = torch.randn(*a_shape[:-1], b_shape[-1], device=device).to(dtype)
    out, (da, db) = grads(lambda a, b: bankops.gemm(a, b, "pad"), (a, b), g)
    # torch's own gradients, exact: in float64 from the same rounded inputs.
    a64, b64, g64 = a.detach().double(), b.detach().double(), g.double()
    want_a, want_b = g64 @ b64.transpose(-1, -2), a64.transpose(-1, -2) @ g64
    mag_a = g64.abs() @ b64.abs().transpose(-1, -2)
    mag_b = a64.abs().transpose(-1, -2) @ g64.abs()
    assert_close_bound(da, want_a.to(dtype), gemm_bound(mag_a, b_shape[-1], want_a, dtype), "grad a")
    assert_close_bound(db, want_b.to(dtype), gemm_bound(mag_b, a_shape[-2], want_b, dtype), "grad b")
    assert out.shape == (*a_shape[:-1], b_shape[-1])


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32, torch.bool], ids=str)
@pytest.mark.parametrize("dims", [(-2, -1), (0, 2), (1, 1)], ids=["last-two", "0-2", "same"])
def test_transpose_gradients(device, dtype, dims):
    shape = (3, 5, 4)
    if not dtype.is_floating_point:
        # Not differentiable: the result must not require grad, and the op still runs.
        x = torch.ones(shape, device=device, dtype=dtype)
        assert not bankops.transpose(x, *dims).requires_grad
        return
    x = leaf(shape, dtype, device)
    out = bankops.transpose(x, *dims, layout="none")
    g = torch.randn_like(out)
    (dx,) = torch.autograd.grad(out, x, g)
    (want,) = torch.autograd.grad(x.transpose(*dims).contiguous(), x, g)
    assert torch.equal(dx, want)  # moves values: bit exact


REDUCE_CASES = [((4, 6, 5), None, False), ((4, 6, 5), None, True), ((4, 6, 5), 1, False), ((4, 6, 5), -1, True),
                ((4, 6, 5), 0, False), ((), None, False), ((), 0, True), ((7,), 0, False)]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("shape,dim,keepdim", REDUCE_CASES, ids=[f"{s}-{d}-{k}" for s, d, k in REDUCE_CASES])
def test_reduce_sum_gradients(device, dtype, shape, dim, keepdim):
    x = leaf(shape, dtype, device)
    out = bankops.reduce_sum(x, dim, keepdim, "swizzle")
    want_out = x.sum() if dim is None and not keepdim else x.sum(dim=() if dim is None else dim, keepdim=keepdim)
    assert out.shape == want_out.shape
    g = torch.randn_like(out)
    (dx,) = torch.autograd.grad(out, x, g)
    (want,) = torch.autograd.grad(want_out, x, g)
    assert torch.equal(dx, want)  # a broadcast of g: bit exact


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.int32, torch.bool], ids=str)
def test_reduce_sum_integers_are_not_differentiable(device, dtype):
    x = torch.ones(3, 4, device=device, dtype=dtype)
    out = bankops.reduce_sum(x, 1)
    assert out.dtype == torch.int64 and not out.requires_grad


def composition(gemm, transpose, reduce_sum, a, b, w):
    """gemm -> transpose -> weighted reduce over one dim -> reduce over all: the gradients
    reaching gemm and transpose are broadcast (stride-0) views."""
    y = transpose(torch.tanh(gemm(a, b)))
    return reduce_sum(reduce_sum(y * w, 0) ** 2)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_composition_gradients(device, layout, dtype):
    a, b = leaf((2, 33, 20), dtype, device), leaf((2, 20, 17), dtype, device, transposed=True)
    w = torch.randn(2, 17, 33, device=device).to(dtype)
    mine = composition(
        lambda a, b: bankops.gemm(a, b, layout),
        lambda x: bankops.transpose(x, layout=layout),
        lambda x, d=None: bankops.reduce_sum(x, d, layout=layout),
        a, b, w,
    )
    theirs = composition(torch.matmul, lambda x: x.transpose(-2, -1), lambda x, d=None: x.sum(d) if d is not None else x.sum(), a, b, w)
    got, want = torch.autograd.grad(mine, (a, b)), torch.autograd.grad(theirs, (a, b))
    # Both sides round in dtype at every step; the chain is short, so a few ulps of the
    # largest gradient bound the difference.
    tol = {torch.float32: 1e-4, torch.bfloat16: 4e-2}[dtype]
    for name, x, y in zip("ab", got, want):
        assert not torch.isnan(x).any(), f"grad {name} has NaN"
        scale = y.double().abs().max().item()
        torch.testing.assert_close(x.double(), y.double(), rtol=tol, atol=tol * scale, msg=lambda m: f"grad {name}: {m}")


def test_gemm_one_operand_requires_grad():
    a = leaf((5, 4), torch.float64, "cpu")
    b = torch.randn(4, 3, dtype=torch.float64)
    bankops.gemm(a, b).sum().backward()
    assert b.grad is None
    torch.testing.assert_close(a.grad, torch.ones(5, 3, dtype=torch.float64) @ b.t())


@pytest.mark.parametrize("layout", LAYOUTS)
def test_gradcheck_float64_cpu(layout):
    gc = lambda f, *xs: torch.autograd.gradcheck(f, xs, eps=1e-6, atol=1e-7)  # noqa: E731
    x = lambda *s: torch.randn(*s, dtype=torch.float64).requires_grad_()  # noqa: E731
    assert gc(lambda a, b: bankops.gemm(a, b, layout), x(3, 4), x(4, 2))
    assert gc(lambda a, b: bankops.gemm(a, b, layout), x(2, 2, 3), x(2, 4, 3).transpose(1, 2))
    assert gc(lambda t: bankops.transpose(t, 0, 2, layout), x(2, 3, 4))
    assert gc(lambda t: bankops.transpose(t, layout=layout), x(3, 5).t())
    assert gc(lambda t: bankops.reduce_sum(t, 1, True, layout), x(2, 3, 4))
    assert gc(lambda t: bankops.reduce_sum(t, None, False, layout), x(3, 4))


def test_gradgradcheck_float64_cpu():
    # The backward formulas are built from differentiable ops, so second derivatives work.
    a = torch.randn(3, 4, dtype=torch.float64, requires_grad=True)
    b = torch.randn(4, 2, dtype=torch.float64, requires_grad=True)
    f = lambda a, b: bankops.reduce_sum(bankops.transpose(bankops.gemm(a, b) ** 2), 0)  # noqa: E731
    assert torch.autograd.gradgradcheck(f, (a, b), eps=1e-6, atol=1e-7)


class OpLog(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func.namespace == "bankops":
            # The dispatcher drops arguments equal to their default ("swizzle"): read them by name.
            args_, kwargs_ = fill_defaults(func._schema, args, kwargs or {})
            names = [a.name for a in func._schema.arguments]
            self.calls.append((func._opname, {**dict(zip(names, args_)), **kwargs_}["layout"]))
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_backward_runs_bankops_with_the_forward_layout(layout):
    a = torch.randn(4, 3, requires_grad=True)
    b = torch.randn(3, 5, requires_grad=True)
    loss = bankops.reduce_sum(bankops.transpose(bankops.gemm(a, b, layout), layout=layout) ** 2, layout=layout)
    with OpLog() as log:
        loss.backward()
    assert sorted(log.calls) == [("gemm", layout), ("gemm", layout), ("transpose", layout)]


r64 = lambda *s: torch.randn(s, dtype=torch.float64).requires_grad_()  # noqa: E731
SECOND_ORDER = {
    "gemm-2d": (lambda a, b: bankops.gemm(a, b, "pad"), lambda: (r64(3, 4), r64(4, 2))),
    "gemm-batched-views": (lambda a, b: bankops.gemm(a, b), lambda: (r64(2, 4, 3).transpose(1, 2), r64(2, 4, 2))),
    "linear-bias": (lambda x, w, b: bankops.linear(x, w, b, "none"), lambda: (r64(2, 3, 4), r64(5, 4), r64(5))),
    "linear-1d-no-bias": (lambda x, w: bankops.linear(x, w), lambda: (r64(4), r64(5, 4))),
    "transpose": (lambda x: bankops.transpose(x, 0, 2, "pad"), lambda: (r64(2, 3, 4),)),
    **{f"reduce_sum-{s}-{d}-{k}": (lambda x, d=d, k=k: bankops.reduce_sum(x, d, k, "none"), lambda s=s: (r64(*s),))
       for s, d, k in REDUCE_CASES},
}


@pytest.mark.parametrize("case", SECOND_ORDER)
def test_gradgradcheck_each_op(case):
    # Each backward is built from differentiable calls (bankops' own, through the dispatcher).
    fn, inputs = SECOND_ORDER[case]
    assert torch.autograd.gradgradcheck(fn, inputs(), eps=1e-6, atol=1e-7)


@pytest.mark.parametrize("needs", ["x", "w", "b", "xwb"])
def test_linear_backward_computes_only_what_is_needed(needs):
    x, w, b = (torch.randn(*s).requires_grad_(n in needs) for s, n in (((3, 4), "x"), ((5, 4), "w"), ((5,), "b")))
    y = bankops.linear(x, w, b, "pad")
    with OpLog() as log:
        y.backward(torch.randn(3, 5))
    want = [("gemm", "pad")] * (("x" in needs) + ("w" in needs)) + [("reduce_sum", "pad")] * ("b" in needs)
    assert sorted(log.calls) == want
    assert [t.grad is not None for t in (x, w, b)] == [n in needs for n in "xwb"]


def python_files_run(fn):
    """The source files of every Python function that runs inside fn()."""
    files = set()
    sys.setprofile(lambda frame, event, arg: files.add(frame.f_code.co_filename) if event == "call" else None)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return files


@pytest.mark.parametrize("grad", [False, True], ids=["no-grad", "requires-grad"])
def test_no_python_autograd_layer(grad):
    """The autograd kernels are C++: a call, and its backward, run no torch.library Python kernel
    (torch/_library) and no bankops Python (issue 32: that layer cost about 3 us a call)."""
    ops = torch.ops.bankops
    x, w, b = (torch.randn(*s, requires_grad=grad) for s in ((4, 4), (4, 4), (4,)))
    calls = [lambda: ops.transpose(x, 0, 1, "pad"), lambda: ops.reduce_sum(x, 0, False, "pad"),
             lambda: ops.gemm(x, w, "pad"), lambda: ops.linear(x, w, b, "pad")]
    for call in calls:
        call()  # first calls may import or cache
        outs = []
        files = python_files_run(lambda: outs.append(call()))
        if grad:
            files |= python_files_run(lambda: outs[0].backward(torch.ones_like(outs[0])))
        assert outs[0].requires_grad == grad
        torch_library = os.path.join("torch", "_library") + os.sep
        bankops_dir = os.path.dirname(bankops.__file__)
        assert not [f for f in files if torch_library in f or f.startswith(bankops_dir)], files


def all_ops(x, w, b, layout="pad"):
    return [bankops.transpose(x, 0, 1, layout), bankops.reduce_sum(x, 1, True, layout), bankops.gemm(x, w, layout),
            bankops.linear(x, w, b, layout)]


@pytest.mark.parametrize("device", DEVICES)
def test_no_grad_and_inference_mode(device):
    """Without a graph to record the autograd kernel goes straight to the kernels: same results,
    no grad_fn, and inference tensors under inference_mode (also as inputs outside it)."""
    x, w, b = (torch.randn(*s, device=device, requires_grad=True) for s in ((4, 4), (4, 4), (4,)))
    want = all_ops(x, w, b)
    assert all(t.grad_fn is not None for t in want)
    with torch.no_grad():
        got = all_ops(x, w, b)
    assert all(not g.requires_grad and torch.equal(g, t) for g, t in zip(got, want))
    with torch.inference_mode():
        got = all_ops(x, w, b)
        xi, wi, bi = x.detach().clone(), w.detach().clone(), b.detach().clone()
    assert all(g.is_inference() and not g.requires_grad and torch.equal(g, t) for g, t in zip(got, want))
    assert all(torch.equal(g, t) for g, t in zip(all_ops(xi, wi, bi), want))


def test_backward_under_deterministic_algorithms():
    x, w, b = (torch.randn(*s, requires_grad=True) for s in ((6, 5), (5, 5), (5,)))
    torch.use_deterministic_algorithms(True)
    try:
        runs = [torch.autograd.grad(sum(t.sum() for t in all_ops(x, w, b)), (x, w, b)) for _ in range(2)]
    finally:
        torch.use_deterministic_algorithms(False)
    assert all(torch.equal(p, q) for p, q in zip(*runs))


def test_vmap():
    """vmap runs each op per sample (functorch's fallback: no batching rule), and a vmapped call
    on an input that requires grad backpropagates through the per-sample calls."""
    x = torch.randn(3, 4, 4, dtype=torch.float64, requires_grad=True)
    w, b = torch.randn(4, 4, dtype=torch.float64), torch.randn(4, dtype=torch.float64)
    got = torch.vmap(lambda t: all_ops(t, w, b))(x)
    want = [x.transpose(1, 2), x.sum(2, keepdim=True), x @ w, torch.nn.functional.linear(x, w, b)]
    for g, t in zip(got, want):
        torch.testing.assert_close(g, t)
    loss = lambda outs: sum((o * (i + 1)).sum() for i, o in enumerate(outs))  # noqa: E731
    torch.testing.assert_close(torch.autograd.grad(loss(got), x), torch.autograd.grad(loss(want), x))


def graph_ops(graphs):
    return sorted(str(n.target) for gm in graphs for n in gm.graph.nodes if str(n.target).startswith("bankops."))


def recording_backend():
    """An AOTAutograd backend that keeps its forward and backward graphs (run as traced)."""
    graphs = {"fw": [], "bw": []}

    def compiler(kind):
        def compile(gm, example_inputs):
            graphs[kind].append(gm)
            return make_boxed_func(gm.forward)
        return compile

    return aot_autograd(fw_compiler=compiler("fw"), bw_compiler=compiler("bw")), graphs


def composite(a, b, x, w, bias):
    y = bankops.transpose(bankops.gemm(a, b, "pad"), layout="pad")
    z = bankops.linear(x, w, bias, "pad")
    return bankops.reduce_sum(y, 0, False, "pad").sum() + bankops.reduce_sum(z, layout="pad")


BACKWARD_OPS = ["bankops.gemm.default"] * 4 + ["bankops.reduce_sum.default", "bankops.transpose.default"]


def test_compile_traces_the_backward_through_bankops():
    """torch.compile (fullgraph, dynamic) records the C++ backward's calls, not an opaque node:
    two gemms each for gemm and linear, linear's bias sum, transpose's transpose."""
    torch._dynamo.reset()
    backend, graphs = recording_backend()
    compiled = torch.compile(composite, backend=backend, fullgraph=True, dynamic=True)
    for m in (5, 9):
        args = (r64(m, 7), r64(7, 3), r64(2, m, 6), r64(8, 6), r64(8))
        got, want = torch.autograd.grad(compiled(*args), args), torch.autograd.grad(composite(*args), args)
        for g, t in zip(got, want):
            torch.testing.assert_close(g, t)
    assert len(graphs["fw"]) == len(graphs["bw"]) == 1  # one graph for both shapes
    assert graph_ops(graphs["bw"]) == BACKWARD_OPS


def test_compiled_autograd_traces_the_backward():
    """Compiled autograd (torch.compile of an eager forward's backward) traces into the C++
    Functions (is_traceable) down to bankops' calls, in one graph."""
    from torch._dynamo import compiled_autograd

    torch._dynamo.reset()
    backend, graphs = recording_backend()
    args = (r64(5, 7), r64(7, 3), r64(2, 4, 6), r64(8, 6), r64(8))
    want = torch.autograd.grad(composite(*args), args)
    loss = composite(*args)
    with compiled_autograd._enable(torch.compile(backend=backend, fullgraph=True)):
        loss.backward()
    for t, g in zip(args, want):
        torch.testing.assert_close(t.grad, g)
    assert len(graphs["fw"]) == 1 and graph_ops(graphs["fw"]) == BACKWARD_OPS
