"""reduce_sum: the CPU reference against torch in float64, the CUDA kernels against the reference."""
import math

import pytest
import torch

import bankops
from conftest import LAYOUTS, assert_close_bound, eps, random_tensor, requires_cuda

FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
INTS = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]

# (shape, dim, keepdim): 0-d, empty, one element, around the 256-thread tree and the
# 32-column tile, long rows and columns that split into a second pass, grids past 65535.
CASES = [
    ((), None, False), ((), 0, False), ((), -1, True),
    ((0,), None, False), ((1,), None, False), ((7,), None, True),
    ((255,), None, False), ((256,), None, False), ((257,), None, False), ((4097,), None, False),
    ((100_003,), None, False),
    ((3, 0, 5), None, False), ((3, 0, 5), 1, False), ((3, 0, 5), 0, True),
    ((1, 1), 0, False), ((33, 65), 0, False), ((33, 65), 1, False), ((33, 65), -1, True),
    ((2, 3, 5, 7), 2, False), ((2, 3, 5, 7), 0, True), ((31, 33, 2), 1, False),
    ((7, 40_000), 1, False), ((5_000, 40), 0, False),
    ((70_000, 3), 1, False), ((70_000, 3, 2), 1, False),
]
CASE_IDS = [f"{'x'.join(map(str, s)) or 'scalar'}-dim{d}{'-keep' if k else ''}" for s, d, k in CASES]


def torch_sum(x, dim, keepdim):
    if dim is None:
        return x.sum(dim=tuple(range(x.dim())), keepdim=True) if keepdim else x.sum()
    return x.sum(dim=dim, keepdim=keepdim)


def sum_bound(x, dim, ref):
    """Rounding bound for a float sum: accumulator error growing like sqrt(n) times the
    slice's 2-norm (random inputs), plus one rounding to the output dtype."""
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    x64 = x.cpu().double()
    if dim is None or x.dim() == 0:
        n, norm = x.numel(), torch.linalg.vector_norm(x64)
    else:
        n, norm = x.shape[dim], torch.linalg.vector_norm(x64, dim=dim)
    return 8 * eps(acc) * math.sqrt(max(n, 1)) * norm.reshape(ref.shape) + eps(ref.dtype) * ref.double().abs()


def check_against_reference(x, dim, keepdim, layout):
    got = bankops.reduce_sum(x, dim, keepdim, layout)
    ref = bankops.reduce_sum(x.cpu(), dim, keepdim, layout)
    assert got.device == x.device
    if x.dtype.is_floating_point:
        assert_close_bound(got, ref, sum_bound(x, dim, ref), "reduce_sum")
    else:
        assert got.dtype == torch.int64 and torch.equal(got.cpu(), ref)


@pytest.mark.parametrize("shape,dim,keepdim", CASES, ids=CASE_IDS)
def test_reference_matches_torch_float64(shape, dim, keepdim):
    x = torch.randn(shape, dtype=torch.float64)
    ref = bankops.reduce_sum(x, dim, keepdim)
    expected = torch_sum(x, dim, keepdim)
    assert_close_bound(ref, expected, sum_bound(x, dim, expected), "reference vs torch.sum")


@pytest.mark.parametrize("dtype", INTS + [torch.float16, torch.bfloat16])
def test_reference_dtypes_match_torch(dtype):
    x = random_tensor((37, 41), dtype)
    for dim in (None, 0, 1):
        ref = bankops.reduce_sum(x, dim)
        expected = torch_sum(x, dim, False)
        if dtype.is_floating_point:
            # torch.sum rounds its own float32 sum: allow both roundings
            assert_close_bound(ref, expected, 2 * sum_bound(x, dim, expected), "reference vs torch.sum")
        else:
            assert torch.equal(ref, expected)


@requires_cuda
@pytest.mark.parametrize("shape,dim,keepdim", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cuda_matches_reference(layout, dtype, shape, dim, keepdim):
    check_against_reference(random_tensor(shape, dtype, "cuda"), dim, keepdim, layout)


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "make,dim",
    [
        (lambda: torch.randn(40, 70, device="cuda")[:, ::3], 1),
        (lambda: torch.randn(40, 70, device="cuda").t(), 0),
        (lambda: torch.randn(5, 1, 3, device="cuda").expand(5, 64, 3), 1),
        (lambda: torch.randn(6, 7, 8, device="cuda").permute(2, 0, 1), None),
    ],
    ids=["sliced", "transposed", "expanded", "permuted"],
)
def test_cuda_noncontiguous(layout, make, dim):
    check_against_reference(make(), dim, False, layout)


@requires_cuda
@pytest.mark.parametrize("shape,dim", [((3_000_001,), None), ((257, 3000), 0), ((3000, 257), 1), ((64, 50, 33), 1)])
def test_deterministic_and_layout_independent(shape, dim):
    """The same input gives the same bits on every run, and under every layout: the layout
    changes where partial sums sit in shared memory, never the order they are added in."""
    x = torch.randn(shape, device="cuda")
    first = bankops.reduce_sum(x, dim, layout="none")
    for layout in LAYOUTS:
        for _ in range(3):
            assert torch.equal(bankops.reduce_sum(x, dim, layout=layout), first)


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cuda_beyond_int32_elements(layout):
    """More than 2^31 elements (int8, 2 GiB): 64-bit indexing in every kernel path."""
    n = 3 * 715_827_883  # 2^31 + 1
    if torch.cuda.mem_get_info()[0] < 3 * n:
        pytest.skip("needs about 7 GB of free GPU memory")
    x = torch.randint(-100, 100, (n,), dtype=torch.int8, device="cuda")
    assert bankops.reduce_sum(x, layout=layout).item() == x.sum().item()
    x2 = x.view(3, -1)
    assert torch.equal(bankops.reduce_sum(x2, 1, layout=layout), x2.sum(1))
    assert torch.equal(bankops.reduce_sum(x2, 0, layout=layout), x2.sum(0))
