"""bankops.nn.Linear against torch.nn.Linear: outputs and gradients, any leading dims,
bias or not, every float dtype, state dicts, compile."""
import math

import pytest
import torch

import bankops
from conftest import DEVICES, LAYOUTS, assert_close_bound, eps


def pair(in_f, out_f, bias, dtype, device, layout):
    ref = torch.nn.Linear(in_f, out_f, bias=bias, device=device, dtype=dtype)
    mine = bankops.nn.Linear(in_f, out_f, bias=bias, device=device, dtype=dtype, layout=layout)
    mine.load_state_dict(ref.state_dict())
    return mine, ref


def linear_bound(x, w, ref, terms, bias=None):
    """x @ w.t() (+ bias) against torch's result: both accumulate `terms` products in
    float32 (float64 for float64), and bankops rounds x @ w.t() to dtype once more before
    adding the bias (torch fuses it), which costs up to an ulp of |x| @ |w.t()|."""
    acc = torch.float64 if ref.dtype == torch.float64 else torch.float32
    mag = torch.atleast_2d(x.detach().double().abs()).flatten(0, -2) @ w.detach().double().abs().t()
    mag = mag.reshape(ref.shape).to(ref.device)
    if bias is not None:
        mag = mag + bias.detach().double().abs()
    return 4 * eps(acc) * math.sqrt(terms) * mag + 2 * eps(ref.dtype) * (mag + ref.double().abs())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("lead", [(), (6,), (2, 3, 5), (0,)], ids=["1d", "2d", "4d", "empty"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no-bias"])
def test_linear_matches_torch(device, dtype, lead, bias):
    mine, ref = pair(19, 11, bias, dtype, device, "pad")
    x = torch.randn(*lead, 19, device=device).to(dtype)
    xm, xr = x.clone().requires_grad_(), x.clone().requires_grad_()
    ym, yr = mine(xm), ref(xr)
    assert ym.shape == yr.shape == (*lead, 11)
    assert_close_bound(ym, yr, linear_bound(x, ref.weight, yr, 19, ref.bias), "output")
    g = torch.randn_like(yr)
    ym.backward(g)
    yr.backward(g)
    rows = max(math.prod(lead), 1)
    gx = linear_bound(g, ref.weight.t(), xr.grad, 11)
    assert_close_bound(xm.grad, xr.grad, gx, "grad input")
    x2, g2 = x.reshape(-1, 19), g.reshape(-1, 11)
    gw = linear_bound(g2.t(), x2.t(), ref.weight.grad, rows)
    assert_close_bound(mine.weight.grad, ref.weight.grad, gw, "grad weight")
    if bias:
        torch.testing.assert_close(mine.bias.grad, ref.bias.grad)
    assert mine.weight.grad.is_contiguous()


def test_linear_is_a_torch_linear():
    ref = torch.nn.Linear(4, 3)
    mine = bankops.nn.Linear.from_torch(ref, layout="none")
    assert isinstance(mine, torch.nn.Linear)
    assert mine.weight is ref.weight and mine.bias is ref.bias
    assert "layout='none'" in repr(mine)
    assert set(mine.state_dict()) == set(ref.state_dict())
    assert bankops.nn.Linear.from_torch(torch.nn.Linear(4, 3, bias=False)).bias is None


def test_linear_refuses_bad_arguments():
    with pytest.raises(ValueError, match=r"unknown layout 'wide' for argument layout; expected one of: none, pad, swizzle"):
        bankops.nn.Linear(4, 3, layout="wide")
    lin = bankops.nn.Linear(4, 3)
    with pytest.raises(RuntimeError, match=r"input has shape \(2, 6\); expected its last dim to be in_features=4"):
        lin(torch.randn(2, 6))  # (2, 6) would reshape to (3, 4) rows without the check
    with pytest.raises(RuntimeError, match=r"x has dtype torch.float64 but weight has torch.float32"):
        lin(torch.randn(2, 4, dtype=torch.float64))


def mlp(cls, layout=None):
    kw = {} if layout is None else {"layout": layout}
    return torch.nn.Sequential(cls(12, 16, **kw), torch.nn.GELU(), cls(16, 16, bias=False, **kw), torch.nn.ReLU(), cls(16, 5, **kw))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_compiled_mlp_matches_torch(device, layout):
    """A compiled MLP of bankops Linears: forward and parameter gradients equal an eager
    torch.nn.Linear MLP with the same weights, over two batch sizes without recompiling."""
    torch._dynamo.reset()
    ref = mlp(torch.nn.Linear).to(device)
    mine = mlp(bankops.nn.Linear, layout).to(device)
    mine.load_state_dict(ref.state_dict())
    compiled = torch.compile(mine, fullgraph=True, dynamic=True)
    for batch in (7, 30):
        x = torch.randn(batch, 3, 12, device=device)
        got, want = compiled(x), ref(x)
        torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
        got.square().mean().backward()
        want.square().mean().backward()
        for (name, p), q in zip(mine.named_parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-5, msg=lambda m: f"{name}: {m}")
            p.grad = q.grad = None


def test_example_runs(capsys):
    """examples/train_mlp.py end to end, eagerly and tiny (the compiled run is the README's); with
    --tune it first lists one step's gemm calls as bankops.tune.record() names them."""
    import importlib.util
    import os

    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "train_mlp.py")
    spec = importlib.util.spec_from_file_location("train_mlp", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    args = ["--device", "cpu", "--steps", "4", "--warmup", "1", "--batch", "8", "--sizes", "8,16,4", "--no-compile"]
    assert example.main(args) == 0
    assert example.main(args + ["--tune"]) == 0
    # Two layers: each one's x @ W.t() and dW = dy.t() @ x, the second's dx = dy @ W (x needs none).
    assert "float32: a step makes 5 distinct gemm calls: 8x16x8t, 8x4x16t, 8x16x4, t4x16x8, t16x8x8" \
        in capsys.readouterr().out
