"""Property tests (hypothesis): random shapes, strided views, dtypes and layouts for reduce_sum,
transpose, gemm and linear against torch in float64 (int64 for integer sums, bytes for
transpose). Sizes are 0, 1, small primes and around the tiles (31-33, 63-65, 127-129); views
are permuted in memory (transposed), read with steps, expanded (stride 0) and start at an
element offset into their storage. Float results must lie within the worst-case rounding bound
of a sum of n terms in the accumulator (n * eps, any order of additions, which also covers
inputs whose repeated values make rounding errors add up) plus one rounding to the output
dtype; NaN never passes (outputs start as NaN, conftest.poisoned_outputs).

The budget is fixed and the examples derandomized, so a run is reproducible (BUDGET): on the
CPU (the C++ reference; CI) 150 examples per operator of up to 2^15 elements an input, a few
seconds in all; on CUDA 300 of up to 2^20."""
import math

import pytest
import torch

import bankops
from conftest import LAYOUTS, as_bytes, assert_close_bound, eps, random_tensor, requires_cuda

hypothesis = pytest.importorskip("hypothesis", reason="hypothesis is not installed (scripts/prepare.sh installs it)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

# device: (examples per operator, largest number of elements of one input)
BUDGET = {"cpu": (150, 1 << 15), "cuda": (300, 1 << 20)}
DEVICES = ["cpu", pytest.param("cuda", marks=requires_cuda)]
SIZES = [1, 2, 3, 5, 0, 7, 13, 31, 32, 33, 63, 64, 65, 127, 128, 129]
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
SUMMABLE = FLOATS + [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]
ANY_DTYPE = SUMMABLE + [torch.complex64, torch.complex128]  # transpose: 1, 2, 4, 8 and 16-byte elements


def run(prop, device):
    """Runs prop(data, device, max_numel) on the device's fixed budget of derandomized examples."""
    examples, max_numel = BUDGET[device]

    @settings(max_examples=examples, deadline=None, derandomize=True, database=None, print_blob=False,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def check(data):
        torch.manual_seed(data.draw(st.integers(0, 2**31 - 1), label="seed"))
        prop(data, device, max_numel)

    check()


def draw_shape(data, ndim, max_numel, label="shape"):
    """ndim sizes from SIZES whose product stays within max_numel."""
    sizes = []
    for _ in range(ndim):
        room = max_numel // max(math.prod(sizes), 1)
        sizes.append(data.draw(st.sampled_from([s for s in SIZES if s <= room])))
    data.draw(st.just(tuple(sizes)), label=label)
    return sizes


def draw_view(data, shape, dtype, device, label="x"):
    """A tensor of `shape` as a view of a random storage: its dims stored in a random order, each
    read with a step of 1-3 or expanded from one element, starting 0-3 elements into the storage."""
    n = len(shape)
    steps = data.draw(st.lists(st.sampled_from([1, 1, 2, 3]), min_size=n, max_size=n), label=f"{label} steps")
    expanded = data.draw(st.lists(st.sampled_from([False, False, False, True]), min_size=n, max_size=n),
                         label=f"{label} expanded")
    order = data.draw(st.permutations(range(n)), label=f"{label} storage order")
    offset = data.draw(st.integers(0, 3), label=f"{label} offset")
    base = [1 if e else (s - 1) * k + 1 if s else 0 for s, k, e in zip(shape, steps, expanded)]
    stored = [base[i] for i in order]
    flat = random_tensor((math.prod(stored) + offset,), dtype, device)[offset:]
    x = flat.view(stored).permute([order.index(i) for i in range(n)])
    return x[tuple(slice(None, None, k) for k in steps)].expand(shape)


def sum_bound(terms_abs, n, acc, ref):
    """Worst case of n additions in `acc` (|error| <= n * eps * the sum of |terms|), plus one
    rounding to ref's dtype."""
    return (n + 1) * eps(acc) * terms_abs + eps(ref.dtype) * ref.abs()


def acc_dtype(dtype):
    return torch.float64 if dtype == torch.float64 else torch.float32


def torch_sum(x, dim, keepdim):
    if dim is None:
        return x.sum(dim=tuple(range(x.dim())), keepdim=True) if keepdim else x.sum()
    return x.sum(dim=dim, keepdim=keepdim)


def reduce_sum_property(data, device, max_numel):
    ndim = data.draw(st.integers(0, 4), label="ndim")
    shape = draw_shape(data, ndim, max_numel)
    dtype = data.draw(st.sampled_from(SUMMABLE), label="dtype")
    x = draw_view(data, shape, dtype, device)
    dim = data.draw(st.sampled_from([None, *range(-max(ndim, 1), max(ndim, 1))]), label="dim")
    keepdim = data.draw(st.booleans(), label="keepdim")
    layout = data.draw(st.sampled_from(LAYOUTS), label="layout")
    got = bankops.reduce_sum(x, dim, keepdim, layout)
    assert got.device == x.device and got.is_contiguous()
    xc = x.cpu()
    if not dtype.is_floating_point:
        want = torch_sum(xc, dim, keepdim)
        assert got.dtype == torch.int64 and torch.equal(got.cpu(), want)
        return
    want = torch_sum(xc.double(), dim, keepdim)
    n = xc.numel() if dim is None or ndim == 0 else xc.shape[dim]
    bound = sum_bound(torch_sum(xc.double().abs(), dim, keepdim), n, acc_dtype(dtype), want.to(dtype))
    assert_close_bound(got.double(), want, bound, "reduce_sum")
    assert got.dtype == dtype


def transpose_property(data, device, max_numel):
    ndim = data.draw(st.integers(0, 4), label="ndim")
    shape = draw_shape(data, ndim, max_numel)
    dtype = data.draw(st.sampled_from(ANY_DTYPE), label="dtype")
    x = draw_view(data, shape, dtype, device)
    dims = st.integers(-max(ndim, 1), max(ndim, 1) - 1)
    dim0, dim1 = data.draw(dims, label="dim0"), data.draw(dims, label="dim1")
    layout = data.draw(st.sampled_from(LAYOUTS), label="layout")
    got = bankops.transpose(x, dim0, dim1, layout)
    # a fresh tensor, strides canonical even along size-1 dims (as_bytes views it as bytes)
    want = (x.cpu().transpose(dim0, dim1) if ndim else x.cpu()).clone(memory_format=torch.contiguous_format)
    assert got.shape == want.shape and got.dtype == dtype and got.device == x.device and got.is_contiguous()
    assert torch.equal(as_bytes(got.cpu()), as_bytes(want))  # bytes: NaN compares too


def product_bound(a, b, ref, bias=None):
    """|a| @ |b| (+ |bias|) under sum_bound of K products."""
    mag = a.cpu().double().abs() @ b.cpu().double().abs()
    if bias is not None:
        mag = mag + bias.cpu().double().abs()
    return sum_bound(mag, a.shape[-1], acc_dtype(a.dtype), ref.to(a.dtype))


def gemm_property(data, device, max_numel):
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
    batch = data.draw(st.sampled_from([None, 0, 1, 2, 3]), label="batch")
    m, n, k = draw_shape(data, 3, max_numel * 8, label="m, n, k")
    lead = [] if batch is None else [batch]
    a = draw_view(data, [*lead, m, k], dtype, device, "a")
    b = draw_view(data, [*lead, k, n], dtype, device, "b")
    layout = data.draw(st.sampled_from(LAYOUTS), label="layout")
    got = bankops.gemm(a, b, layout)
    want = a.cpu().double() @ b.cpu().double()
    assert got.dtype == dtype and got.device == a.device and got.is_contiguous()
    assert_close_bound(got.double(), want, product_bound(a, b, want), "gemm")


def linear_property(data, device, max_numel):
    dtype = data.draw(st.sampled_from(FLOATS), label="dtype")
    lead = draw_shape(data, data.draw(st.integers(0, 2), label="lead dims"), 64, label="lead")
    n_in, n_out = draw_shape(data, 2, max_numel, label="in, out")
    x = draw_view(data, [*lead, n_in], dtype, device, "x")
    w = draw_view(data, [n_out, n_in], dtype, device, "weight")
    bias = draw_view(data, [n_out], dtype, device, "bias") if data.draw(st.booleans(), label="has bias") else None
    layout = data.draw(st.sampled_from(LAYOUTS), label="layout")
    got = bankops.linear(x, w, bias, layout)
    want = x.cpu().double() @ w.cpu().double().t()
    if bias is not None:
        want = want + bias.cpu().double()
    assert got.dtype == dtype and got.device == x.device
    assert_close_bound(got.double(), want, product_bound(x, w.t(), want, bias), "linear")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("prop", [reduce_sum_property, transpose_property, gemm_property, linear_property],
                         ids=["reduce_sum", "transpose", "gemm", "linear"])
def test_operator(prop, device):
    run(prop, device)
