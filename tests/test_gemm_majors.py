"""gemm on every operand major: A k-major (row-major) or m-major (A = X.t(), every weight
gradient's dy.t()), B n-major (row-major) or k-major (B = W.t(), every forward's weight), the
four NN / NT / TN / TT combinations, on every layout and dtype, odd sizes, misaligned rows,
batches and broadcast batches, against float64. Each tensor-core tile follows its operand's
contiguous dim (route.h's a_km, b_kn): the Hopper kernel maps MN-major boxes and sets
wgmma's transpose bits, mma.sync reads them with ldmatrix.trans, and the route says so."""
import math

import pytest
import torch

import bankops
from conftest import LAYOUTS, eps, requires_cuda
from test_gemm_mma import MMA_SYNC, gemm, shape_ids  # gemm under a layout or "swizzle/mma.sync"
from test_gemm_route import fields, meta, route

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
MAJORS = {"NN": (False, False), "NT": (False, True), "TN": (True, False), "TT": (True, True)}

# (batch or None, M, N, K): one element, odd sizes (the realigning and register fills), whole
# tiles, edges past them, k tails, a batch, and grids large enough for the Hopper kernel's
# 128 x 256 (2048^2), 128 x 128 and 128 x 64 (1024^2) tiles.
SHAPES = [
    (None, 1, 1, 1), (None, 37, 45, 29), (None, 128, 256, 64), (None, 300, 264, 520), (3, 65, 136, 72),
    (None, 2040, 2056, 200), (None, 2048, 2048, 128), (None, 1024, 2048, 456), (None, 1000, 1032, 1032),
]
SHAPE_IDS = shape_ids(SHAPES)


def layouts_for(dtype):
    """The layouts, plus swizzle on mma.sync for the 16-bit dtypes (on a Hopper GPU swizzle
    takes the wgmma kernel)."""
    return LAYOUTS + ((MMA_SYNC,) if dtype.itemsize == 2 else ())


def operand(rows, cols, batch, dtype, transposed, offset=0, expand=False):
    """A (batch,) rows x cols CUDA operand, stored transposed (its rows contiguous) if asked,
    starting `offset` elements into its allocation (rows off 16-byte boundaries for odd
    offsets and odd row lengths), one batch expanded over `batch` if asked (stride 0)."""
    stored = (cols, rows) if transposed else (rows, cols)
    count = (1 if expand or batch is None else batch) * math.prod(stored)
    t = torch.randn(count + offset, device="cuda").to(dtype)[offset:]
    t = t.view(*(() if batch is None else (1 if expand else batch,)), *stored)
    if expand:
        t = t.expand(batch, *stored)
    return t.transpose(-2, -1) if transposed else t


def check(got, a, b):
    """Elementwise against float64: the accumulator's rounding over K terms (float32 for the
    16-bit dtypes) plus one rounding to the output dtype; NaN (an unwritten element of the
    poisoned output) fails."""
    ref = a.double() @ b.double()
    acc = torch.float64 if a.dtype == torch.float64 else torch.float32
    k = a.shape[-1]
    bound = 2 * eps(acc) * math.sqrt(max(k, 1)) * (a.double().abs() @ b.double().abs()) + eps(got.dtype) * ref.abs()
    assert got.shape == ref.shape and got.dtype == a.dtype
    assert not torch.isnan(got).any()
    err = (got.double() - ref).abs()
    assert bool((err <= bound + 1e-300).all()), f"largest excess {float((err - bound).max())}"


@requires_cuda
@pytest.mark.parametrize("batch,m,n,k", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("majors", MAJORS)
def test_cuda_majors(majors, dtype, batch, m, n, k):
    a_t, b_t = MAJORS[majors]
    a = operand(m, k, batch, dtype, a_t)
    b = operand(k, n, batch, dtype, b_t)
    for layout in layouts_for(dtype):
        check(gemm(a, b, layout), a, b)


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("majors", MAJORS)
@pytest.mark.parametrize("shape", [(None, 300, 264, 201), (2, 257, 136, 1001), (None, 1030, 1100, 517)],
                         ids=["300x264x201", "2x257x136x1001", "1030x1100x517"])
def test_cuda_majors_misaligned(shape, majors, dtype):
    """Data pointers an odd number of elements into their allocations and odd row lengths:
    the realigning fills (or, on Hopper, copies into aligned rows first), each major."""
    a_t, b_t = MAJORS[majors]
    batch, m, n, k = shape
    a = operand(m, k, batch, dtype, a_t, offset=3)
    b = operand(k, n, batch, dtype, b_t, offset=5)
    for layout in layouts_for(dtype):
        check(gemm(a, b, layout), a, b)


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("majors", MAJORS)
def test_cuda_majors_broadcast_batch(majors, dtype):
    """One operand expanded over the batch (batch stride 0), the other batched, each major."""
    a_t, b_t = MAJORS[majors]
    a = operand(264, 136, 6, dtype, a_t)
    b = operand(136, 520, 6, dtype, b_t, expand=True)
    for layout in layouts_for(dtype):
        check(gemm(a, b, layout), a, b)
    a = operand(2048, 72, 3, dtype, a_t, expand=True)
    b = operand(72, 1024, 3, dtype, b_t)
    check(gemm(a, b, "swizzle"), a, b)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_cuda_majors_same_bits(dtype):
    """A transposed operand is read in place, and the product is summed in the same order as
    on its row-major copy: the same bits for every major, on each kernel family."""
    x = torch.randn(1024, 2048, device="cuda").to(dtype)
    w = torch.randn(1536, 2048, device="cuda").to(dtype)
    dy = torch.randn(1024, 1536, device="cuda").to(dtype)
    for layout in (*LAYOUTS, MMA_SYNC):
        for a, b in ((x, w.t()), (dy.t(), x), (dy, w)):
            want = gemm(a.contiguous(), b.contiguous(), layout)
            assert torch.equal(gemm(a, b, layout).view(torch.int16), want.view(torch.int16)), layout


# A Linear layer's three products (tokens M, in K, out N) as (a, b) shapes and majors, and the
# route each takes on an H100 in bfloat16 swizzle.
LINEAR = (8192, 4096, 14336)


def linear_products(m, k, n, dtype=torch.bfloat16):
    x, w, dy = meta(m, k, dtype=dtype), meta(n, k, dtype=dtype), meta(m, n, dtype=dtype)
    return {"x@W.t()": (x, w.t()), "dy@W": (dy, w), "dy.t()@x": (dy.t(), x)}


def test_linear_products_route_natively():
    """Each of a Linear layer's products takes the Hopper kernel's TMA producer with no copy,
    each operand in its own major: the weight gradient's A = dy.t() as As[BK][BM]."""
    want = {"x@W.t()": ("mk", "nk"), "dy@W": ("mk", "kn"), "dy.t()@x": ("km", "kn")}
    for case, (a, b) in linear_products(*LINEAR).items():
        line = route(a, b)
        f = fields(line)
        assert line.startswith("wgmma 128x256x64 producer=tma"), (case, line)
        assert (f["a"], f["b"], f["repack"], f["scratch"]) == (*want[case], "none", "0"), (case, line)
        mma = route(a, b, device=(108, 80))
        assert mma.startswith("mma 128x256x64 fill=cp.async"), (case, mma)
        assert (fields(mma)["a"], fields(mma)["b"]) == want[case], (case, mma)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_explain_m_major_a(layout):
    """explain's mma.sync trace of an m-major A: As[k][m] tiles filled by cp.async and read
    with ldmatrix.trans. Its 8-row matrices sit a whole tile row apart: the same banks in
    `none`, a 16-byte step apart in `pad`, XOR-permuted chunks in `swizzle`."""
    rep = bankops.explain("gemm", layout, torch.bfloat16, m=2048, n=2048, k=2048, a_transposed=True, hopper=False)
    names = {row["instruction"] for row in rep.rows}
    assert "ldgsts As[k][m] <- A" in names and "ldmatrix.x4.trans A fragments" in names, names
    frags = [r for r in rep.rows if r["instruction"] == "ldmatrix.x4.trans A fragments"]
    conflicted = any(r["wavefronts"] > r["ideal"] for r in frags)
    assert conflicted == (layout == "none"), str(rep)
