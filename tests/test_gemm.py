"""gemm: 2-D and batched, every dtype, odd sizes and strided views against the CPU reference."""
import math

import pytest
import torch

import bankops
from conftest import LAYOUTS, assert_close_bound, eps, requires_cuda

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64]

# (batch or None, M, N, K): ones, empties, K = 0, around the 64x64 and 128x128 tiles and the
# 8-deep k tile (K % 8 = 4: half a tile; K % 4 != 0: partial 16-byte vectors), and odd sizes.
SHAPES = [
    (None, 1, 1, 1), (None, 1, 7, 1), (None, 7, 1, 13), (None, 0, 5, 3), (None, 5, 0, 3), (None, 5, 3, 0),
    (None, 63, 65, 31), (None, 64, 64, 64), (None, 65, 63, 33), (None, 128, 96, 257), (None, 100, 200, 300),
    (None, 129, 136, 12), (None, 257, 131, 45), (3, 33, 17, 65), (0, 4, 4, 4), (2, 1, 1, 1),
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
    if how == "padded":  # rows 16-byte aligned for float32 (vector loads), with a partial last vector
        return make(*lead, rows, (cols + 3) // 4 * 4 + 4)[..., :cols]
    if how == "misaligned":  # one element into the storage: no 16-byte aligned vector anywhere
        return make(math.prod((*lead, rows, cols)) + 1)[1:].view(*lead, rows, cols)
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
                                   ("sliced", "transposed"), ("batch-inner", "sliced"), ("padded", "padded"),
                                   ("transposed", "misaligned")], ids="-".join)
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


def relative_error(got, want):
    """Frobenius-norm error relative to the float64 result (NaN compares false)."""
    want = want.double()
    return float((got.double() - want).norm() / want.norm().clamp_min(1e-300))


# float32 (FFMA, no TF32) against a float64 reference: the bound, at the benchmark's
# sizes, odd and misaligned ones, skinny ones, transposed views and batches.
F32_BOUND = 1e-5
LARGE = [
    ((None, 1024, 1024, 1024), ("contiguous", "contiguous")),
    ((None, 2048, 2048, 2048), ("contiguous", "contiguous")),
    ((None, 4096, 4096, 4096), ("contiguous", "contiguous")),
    ((None, 8192, 8192, 8192), ("contiguous", "contiguous")),
    ((None, 8192, 1024, 8192), ("contiguous", "contiguous")),
    ((None, 4095, 4097, 4093), ("contiguous", "contiguous")),
    ((None, 1536, 1536, 72), ("contiguous", "contiguous")),  # 144 128x128 tiles: the big tile, briefly (sanitizers)
    ((None, 1000, 1536, 2052), ("transposed", "transposed")),
    ((None, 2048, 129, 4099), ("padded", "transposed")),
    ((None, 33, 4096, 3000), ("misaligned", "contiguous")),
    ((3, 513, 257, 1000), ("contiguous", "sliced")),
    ((16, 256, 256, 512), ("transposed", "contiguous")),
    # 156 128x128 blocks (the big tile): whole tiles (plain cp.async, unpredicated loads) next
    # to a k tail and m/n edge blocks, for each of the four specialized staging pairs.
    ((None, 1600, 1430, 1029), ("contiguous", "contiguous")),
    ((None, 1430, 1600, 1029), ("transposed", "contiguous")),
    ((None, 1600, 1430, 1029), ("contiguous", "transposed")),
    ((None, 1430, 1600, 1029), ("transposed", "transposed")),
]


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape,views", LARGE, ids=[f"{'x'.join(str(v) for v in s if v is not None)}-{'-'.join(v)}"
                                                     for s, v in LARGE])
def test_cuda_float32_relative_error(shape, views, layout):
    batch, m, n, k = shape
    a = operand(m, k, batch, torch.float32, "cuda", views[0])
    b = operand(k, n, batch, torch.float32, "cuda", views[1])
    got = bankops.gemm(a, b, layout)
    want = a.double() @ b.double()
    err = relative_error(got, want)
    assert err <= F32_BOUND, f"relative error {err:.3g} > {F32_BOUND:g}"


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("views", [("contiguous", "contiguous"), ("transposed", "misaligned")], ids="-".join)
def test_cuda_float64_relative_error(views, layout):
    a = operand(700, 1029, None, torch.float64, "cuda", views[0])
    b = operand(1029, 515, None, torch.float64, "cuda", views[1])
    err = relative_error(bankops.gemm(a, b, layout).cpu(), a.cpu() @ b.cpu())
    assert err <= 1e-13, f"relative error {err:.3g}"


def _conflicts(report, kind):
    return sum(r["wavefronts"] - r["ideal"] for r in report.rows if r["op"] == kind)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("b_transposed", [False, True], ids=["B", "Bt"])
@pytest.mark.parametrize("a_transposed", [False, True], ids=["A", "At"])
@pytest.mark.parametrize("m", [1024, 4096])
def test_model_conflicts_only_in_the_transposed_store_under_none(m, a_transposed, b_transposed, dtype):
    """The bank model on the kernel's own coordinate functions: the inner loop's LDS.128 and the
    row stores are conflict-free in every layout; the transposed store (A row-major, or B a
    transposed view) conflicts under `none` only; cp.async row copies cost extra under `pad`
    only (its rows leave the 128-byte lines the copy reads)."""
    kw = dict(m=m, n=m, k=m, a_transposed=a_transposed, b_transposed=b_transposed, num_sms=132)
    k_major = int(not a_transposed) + int(b_transposed)  # operands staged by the transposed store
    for layout in LAYOUTS:
        rep = bankops.explain("gemm", layout, dtype, **kw)
        transposed = [r for r in rep.rows if "transposed store" in r["instruction"]]
        assert len(transposed) == k_major * 16 // (4 if dtype == torch.float32 else 8)
        for r in rep.rows:
            if r in transposed and layout == "none":
                assert r["per_instruction"] >= 2, (layout, r)
            elif r["op"] == "ldgsts" and layout == "pad":
                assert r["wavefronts"] > r["ideal"], (layout, r)
            else:
                assert r["wavefronts"] == r["ideal"], (layout, r)
        assert sum(r["count"] for r in rep.rows if r["op"] == "ld") > 0


def test_swizzle_parameters():
    """GemmSwizzle XORs the row bits the transposed store touches (row bit 2 for float32's
    4-float vectors, row bits 1-2 for float64's pairs) above the columns of one warp phase."""
    assert torch.ops.bankops._tile_info("gemm/4", "swizzle").tolist()[4:] == [1, 4, 5]
    assert torch.ops.bankops._tile_info("gemm/8", "swizzle").tolist()[4:] == [2, 2, 5]
