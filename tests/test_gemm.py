"""gemm: 2-D and batched, every dtype, odd sizes and strided views against the CPU reference."""
import math

import pytest
import torch

import bankops
from conftest import LAYOUTS, assert_close_bound, eps, requires_cuda

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]

# (batch or None, M, N, K): ones, empties, K = 0, around the 64x64x32 tile, and odd sizes.
SHAPES = [
    (None, 1, 1, 1), (None, 1, 7, 1), (None, 7, 1, 13), (None, 0, 5, 3), (None, 5, 0, 3), (None, 5, 3, 0),
    (None, 63, 65, 31), (None, 64, 64, 64), (None, 65, 63, 33), (None, 128, 96, 257), (None, 100, 200, 300),
    (3, 33, 17, 65), (0, 4, 4, 4), (2, 1, 1, 1),
]
SHAPE_IDS = [("" if b is None else f"{b}x") + f"{m}x{n}x{k}" for b, m, n, k in SHAPES]


def operand(rows, cols, batch, dtype, device, how):
    """A (batch,) rows x cols operand stored as `how` says: a view, never a copy."""
    lead = () if batch is None else (batch,)
    make = lambda *s: torch.randn(*s, device=device).to(dtype)  # noqa: E731
    if how == "contiguous":
        return make(*lead, rows, cols)
    if how == "transposed":
        return make(*lead, cols, rows).transpose(-2, -1)
    if how == "sliced":
        return make(*lead, rows, 2 * cols + 1)[..., 1::2]
    if how == "batch-inner":  # the batch dim is not the outermost in memory
        return make(rows, *lead, cols).movedim(0, -2) if batch is not None else make(rows, cols)
    raise ValueError(how)


def gemm_bound(a, b, ref):
    """|A|@|B| scaled by the accumulator's rounding over K terms (random signs), plus one
    rounding to the output dtype."""
    acc = torch.float64 if a.dtype == torch.float64 else torch.float32
    k = a.shape[-1]
    mag = a.cpu().double().abs() @ b.cpu().double().abs()
    return 2 * eps(acc) * math.sqrt(max(k, 1)) * mag + eps(ref.dtype) * ref.double().abs()


@pytest.mark.parametrize("batch,m,n,k", SHAPES, ids=SHAPE_IDS)
def test_reference_matches_torch_float64(batch, m, n, k):
    a = operand(m, k, batch, torch.float64, "cpu", "contiguous")
    b = operand(k, n, batch, torch.float64, "cpu", "transposed")
    ref = bankops.gemm(a, b)
    want = a @ b
    assert_close_bound(ref, want, gemm_bound(a, b, want), "reference vs torch.matmul")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_reference_dtypes(dtype):
    a = operand(37, 29, None, dtype, "cpu", "sliced")
    b = operand(29, 41, None, dtype, "cpu", "contiguous")
    got = bankops.gemm(a, b)
    want = (a.double() @ b.double()).to(dtype)
    assert_close_bound(got, want, gemm_bound(a, b, want), "reference")


@requires_cuda
@pytest.mark.parametrize("batch,m,n,k", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("views", [("contiguous", "contiguous"), ("transposed", "transposed"),
                                   ("sliced", "transposed"), ("batch-inner", "sliced")], ids="-".join)
def test_cuda_matches_reference(views, layout, dtype, batch, m, n, k):
    a = operand(m, k, batch, dtype, "cuda", views[0])
    b = operand(k, n, batch, dtype, "cuda", views[1])
    got = bankops.gemm(a, b, layout)
    ref = bankops.gemm(a.cpu(), b.cpu(), layout)
    assert got.is_contiguous()
    assert_close_bound(got, ref, gemm_bound(a, b, ref), "gemm")


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cuda_expanded_batch(layout):
    a = torch.randn(5, 33, 40, device="cuda")
    b = torch.randn(1, 40, 21, device="cuda").expand(5, 40, 21)  # batch stride 0
    got = bankops.gemm(a, b, layout)
    ref = bankops.gemm(a.cpu(), b.cpu())
    assert_close_bound(got, ref, gemm_bound(a, b, ref), "gemm")


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("batch,m,n,k", [(None, 4_194_305, 1, 1), (70_000, 2, 2, 2)], ids=["tall", "many-batches"])
def test_cuda_grids_past_65535(layout, batch, m, n, k):
    a = operand(m, k, batch, torch.float32, "cuda", "contiguous")
    b = operand(k, n, batch, torch.float32, "cuda", "contiguous")
    got = bankops.gemm(a, b, layout)
    ref = bankops.gemm(a.cpu(), b.cpu())
    assert_close_bound(got, ref, gemm_bound(a, b, ref), "gemm")


@requires_cuda
def test_cuda_beyond_int32_elements():
    """A has more than 2^31 elements: 64-bit offsets in the tile loads."""
    m, k, n = 2_100_000, 1024, 8
    if torch.cuda.mem_get_info()[0] < 4 * (m * k + k * n + m * n) * 2:
        pytest.skip("needs about 18 GB of free GPU memory")
    a = torch.randn(m, k, device="cuda")
    b = torch.randn(k, n, device="cuda")
    got = bankops.gemm(a, b)
    # The CPU reference of all 2.1M rows is slow: check a random sample, the last row included.
    rows = torch.cat([torch.randint(0, m, (2000,)), torch.tensor([m - 1])]).cuda()
    a_rows = a[rows].cpu()
    ref = bankops.gemm(a_rows, b.cpu())
    assert_close_bound(got[rows], ref, gemm_bound(a_rows, b, ref), "gemm")
