"""The operators as torch sees them: opcheck (schema, fake kernels, dispatch) and
torch.compile with no graph breaks."""
import pytest
import torch
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


@pytest.mark.parametrize("device", DEVICES)
def test_opcheck(device):
    for op, args in sample_args(device):
        opcheck(op, args)


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


@pytest.mark.parametrize("device", DEVICES)
def test_compile_dynamic_shapes(device):
    torch._dynamo.reset()
    compiled = torch.compile(model, fullgraph=True, dynamic=True)
    for m, k, n in [(33, 20, 17), (64, 9, 5), (7, 31, 40)]:
        a, b, x = (torch.randn(s, device=device) for s in [(m, k), (k, n), (m,)])
        torch.testing.assert_close(compiled(a, b, x, "swizzle"), model(a, b, x, "swizzle"))


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
