"""gemm: 2-D and batched, every dtype, odd sizes and strided views against the CPU reference."""
import math
import re
import warnings

import pytest
import torch

import bankops
from conftest import LAYOUTS, assert_close_bound, eps, requires_cuda, the_model_alone, torch_warns, with_room_for
from test_gemm_route import fields

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


def case_ids(cases):
    """Test ids of (shape, views, ...) cases: 2x1000x1000x1028-batch-inner-transposed."""
    return [f"{'x'.join(str(v) for v in c[0] if v is not None)}-{'-'.join(c[1])}" for c in cases]


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
@pytest.mark.parametrize("shape,views", LARGE, ids=case_ids(LARGE))
def test_cuda_float32_relative_error(shape, views, layout):
    batch, m, n, k = shape
    a = operand(m, k, batch, torch.float32, "cuda", views[0])
    b = operand(k, n, batch, torch.float32, "cuda", views[1])
    got = bankops.gemm(a, b, layout)
    want = a.double() @ b.double()
    err = relative_error(got, want)
    assert err <= F32_BOUND, f"relative error {err:.3g} > {F32_BOUND:g}"


def route(batch, m, n, k, views, layout="swizzle", num_sms=None):
    """The block configuration bankops.explain traces for a float32 call (the launcher's
    choice for num_sms SMs, by default the current GPU's)."""
    rep = bankops.explain("gemm", layout, torch.float32, num_sms=num_sms, m=m, n=n, k=k, batch=batch or 1,
                          a_transposed=views[0] == "transposed", b_transposed=views[1] == "transposed")
    kernels = {r["kernel"] for r in rep.rows}
    assert len(kernels) == 1, kernels
    return kernels.pop()


# gemm_config's rule on an H100's 132 SMs (kernels/gemm/route.h): Wide (128x256, one block per SM) where
# its grid fills at least 7/8 of its waves or stream-K evens out its last wave (a wave at
# least, or fewer tiles where Big's blocks would leave most SMs one block; and enough k), Big
# (128x128, two per SM) on other ragged grids.
ROUTES = [
    ((None, 2048, 2048, 2048), "gemm/128x256"),  # 128 blocks: 97% of one wave
    ((None, 4096, 4096, 4096), "gemm/128x256"),
    ((None, 8192, 8192, 8192), "gemm/128x256"),
    ((None, 8192, 1024, 8192), "gemm/128x256"),
    ((8, 1024, 1024, 1024), "gemm/128x256"),
    ((None, 4096, 4352, 4096), "gemm/128x256"),  # 544 blocks: 82% of 5 waves, stream-K shares 16
    ((None, 4096, 4352, 260), "gemm/128x128"),   # 16 tiles of 33 k tiles: too little to share
    ((None, 4095, 4097, 4093), "gemm/128x256"),  # 512 blocks and a strip of one column
    ((None, 2048, 2065, 2048), "gemm/128x256"),  # 17 columns past whole tiles: no strip, stream-K
    ((None, 1536, 1536, 72), "gemm/128x128"),    # 72 blocks
    ((None, 1600, 1430, 1029), "gemm/128x256"),  # 78 tiles shared by k: Big's 156 blocks fill 59% of 264
    ((None, 3072, 768, 16384), "gemm/128x256"),  # a weight gradient: 72 tiles, 2048 k tiles each
    ((None, 1024, 1024, 1024), "gemm/64x64"),    # 64 128x128 blocks: fewer than the SMs
    ((None, 48, 4096, 4096), "gemm/64x64"),      # 33-64 rows: 64-row tiles split across a cluster, 64x64
    ((None, 64, 14336, 4096), "gemm/64x256"),    # or 64x256 where its split grid keeps 1.5 blocks an SM
    ((None, 32, 4096, 4096), "gemm_rows"),       # 32 or fewer: the few-rows kernel
]


# Transposed views whose contiguous dim has odd rows stage element by element through
# registers (the 128x128 tile of 256 threads): explain traces the route the call takes. A
# transposed x (m contiguous) leaves few rows to the FFMA kernel: up to 64 rows take its 64-row
# tiles split across a cluster (48 x 4096: 64 blocks of 64x64, split 8 ways).
TRANSPOSED_ROUTES = {(None, 4095, 4097, 4093): "gemm/128x128/256", (None, 1600, 1430, 1029): "gemm/128x128/256",
                     (None, 48, 4096, 4096): "gemm/64x64", (None, 32, 4096, 4096): "gemm/64x64"}


@pytest.mark.parametrize("shape,kernel", ROUTES, ids=["x".join(str(v) for v in s if v is not None) for s, _ in ROUTES])
def test_route_on_132_sms(shape, kernel):
    assert route(*shape, ("contiguous", "contiguous"), num_sms=132) == kernel
    assert route(*shape, ("transposed", "transposed"), num_sms=132) == TRANSPOSED_ROUTES.get(shape, kernel)


def test_route_without_stream_k():
    """bankops.options(stream_k=False) gives ragged grids back to the 128x128 tile."""
    with bankops.options(stream_k=False):
        assert route(None, 4096, 4352, 4096, ("contiguous", "contiguous"), num_sms=132) == "gemm/128x128"
        assert route(None, 4096, 4096, 4096, ("contiguous", "contiguous"), num_sms=132) == "gemm/128x256"


@pytest.mark.parametrize("b_transposed", [False, True], ids=["B", "Bt"])
@pytest.mark.parametrize("a_transposed", [False, True], ids=["A", "At"])
def test_model_wide_tile(a_transposed, b_transposed):
    """The 128x256 tile's trace: A's staging (128 columns) and B's (256) each follow their
    own tile, 8 warps read 4 A and 2 B vectors per k row, a k-major A beside a row-major B is
    copied one element per cp.async (a k-major B, and A beside it, are stored from registers,
    as the 128x128 tile stores every k-major operand), and swizzle keeps every other
    instruction conflict-free."""
    kw = dict(m=4096, n=4096, k=4096, a_transposed=a_transposed, b_transposed=b_transposed, num_sms=132)
    wide = bankops.explain("gemm", "swizzle", torch.float32, **kw)
    big = bankops.explain("gemm", "swizzle", torch.float32, **dict(kw, n=4352, k=260))
    assert {r["kernel"] for r in wide.rows} == {"gemm/128x256"}
    assert {r["kernel"] for r in big.rows} == {"gemm/128x128"}
    count = lambda rep, what: sum(r["count"] for r in rep.rows if what in r["instruction"])  # noqa: E731
    # Per k tile of 8 rows: warps x quadrants x rows.
    assert count(wide, "lds.128 As") == 8 * 4 * 8 and count(wide, "lds.128 Bs") == 8 * 2 * 8
    assert count(big, "lds.128 As") == 4 * 4 * 8 and count(big, "lds.128 Bs") == 4 * 2 * 8
    # Staging: 8 x 128 floats of A and 8 x 256 of B per k tile, 32 lanes x 4 floats per warp
    # instruction (a k-major vector takes 4 instructions, one per element).
    copies = not a_transposed and not b_transposed
    for rep, cols_a, cols_b, k_major in ((wide, 128, 256, "cp.async" if copies else "sts"), (big, 128, 128, "sts")):
        assert count(rep, "sts As" if k_major == "cp.async" else "(transposed, one element)") == 0
        a_rows = count(rep, "cp.async As[k][") + count(rep, k_major + " As[k+") // 4
        b_rows = count(rep, "cp.async Bs[k][") + count(rep, k_major + " Bs[k+") // 4
        assert a_rows == 8 * cols_a // 128 and b_rows == 8 * cols_b // 128, str(rep)
    for r in wide.rows:
        assert r["wavefronts"] == r["ideal"], r


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("views", [("contiguous", "contiguous"), ("transposed", "misaligned")], ids="-".join)
def test_cuda_float64_relative_error(views, layout):
    a = operand(700, 1029, None, torch.float64, "cuda", views[0])
    b = operand(1029, 515, None, torch.float64, "cuda", views[1])
    err = relative_error(bankops.gemm(a, b, layout).cpu(), a.cpu() @ b.cpu())
    assert err <= 1e-13, f"relative error {err:.3g}"


def launched(fn):
    """(GemmShape arguments, staging mode of A, of B) of every ffma_kernel fn() launches, read
    from the kernel names the profiler records (modes: ffma.cu's compile-time modes, -1 read at
    run time, 4 / 5 the 4-byte cp.async ones); None where the profiler saw no kernel."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if "ffma_kernel<" in e.name]
    if not names:  # no CUPTI (or a sanitizer holds it): the numbers are still checked
        warnings.warn("the profiler recorded no ffma_kernel launch: the route is not checked")
        return None
    out = []
    for name in names:
        found = re.search(r"GemmShape<([-\d, ]+)>.*, (-?\d+), (-?\d+)>\(", name)
        assert found, name
        out.append((found.group(1), int(found.group(2)), int(found.group(3))))
    return out


WIDE_SHAPE, BIG_SHAPE = "4, 4, 2, 2, 4, 1, 8, 3", "4, 4, 2, 2, 2, 2, 8, 4"  # GemmWide, GemmBig<4>


# The 128x256 tile (GemmWide) on the current GPU: shapes whose grid fills its SMs (route.h's
# rule; every one routes to it on an H100 or H200, 132 SMs), with m and n edges (2000 = 15
# 128-row tiles + 80, 7 256-column tiles + 208), k tails (1028: half a k tile; 1029: a partial
# 16-byte vector, zero-filled by cp.async or read by the predicated k-vector path), batches and
# transposed views, each staging pair of the specialized kernels. Checked element by element
# against float64 as well as in norm, so that one wrong edge vector cannot hide.
WIDE = [
    ((None, 2048, 2048, 2048), ("contiguous", "contiguous")),  # whole tiles only
    ((None, 2048, 2048, 40), ("contiguous", "contiguous")),    # whole tiles, 5 k tiles (sanitizers)
    ((None, 2000, 2000, 44), ("contiguous", "contiguous")),    # edges, 5.5 k tiles (sanitizers)
    ((None, 2000, 2000, 1028), ("contiguous", "contiguous")),
    ((None, 2000, 2000, 1029), ("transposed", "contiguous")),
    ((None, 1992, 2008, 1028), ("transposed", "transposed")),
    ((None, 2000, 2000, 1028), ("contiguous", "transposed")),
    ((4, 1000, 1000, 516), ("contiguous", "contiguous")),
    ((4, 1000, 1000, 1029), ("padded", "padded")),
    ((4, 1000, 1000, 1028), ("batch-inner", "transposed")),
]


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape,views", WIDE, ids=case_ids(WIDE))
def test_cuda_wide_tile(shape, views, layout):
    batch, m, n, k = shape
    skip_unless_132_sms("shapes chosen for the 128x256 tile on 132 SMs")
    assert route(batch, m, n, k, views, layout) == "gemm/128x256"
    a, b, kernels = float32_launch(shape, views, layout)
    assert kernels is None or {kernel[0] for kernel in kernels} == {WIDE_SHAPE}, kernels
    check_against_float64(bankops.gemm(a, b, layout), a, b)


def skip_unless_132_sms(reason):
    if torch.cuda.get_device_properties(0).multi_processor_count != 132:
        pytest.skip(reason)


def float32_launch(shape, views, layout):
    """float32 operands (batch, m, n, k) of the given views on the GPU, and the kernels one
    gemm launches (None when the profiler recorded none)."""
    batch, m, n, k = shape
    a = operand(m, k, batch, torch.float32, "cuda", views[0])
    b = operand(k, n, batch, torch.float32, "cuda", views[1])
    return a, b, launched(lambda: bankops.gemm(a, b, layout))


def check_against_float64(got, a, b):
    """In norm (F32_BOUND) and element by element (gemm_bound's float32 terms, on the GPU)."""
    want = a.double() @ b.double()
    err = relative_error(got, want)
    assert err <= F32_BOUND, f"relative error {err:.3g} > {F32_BOUND:g}"
    f32 = eps(torch.float32)
    bound = 2 * f32 * math.sqrt(max(a.shape[-1], 1)) * (a.double().abs() @ b.double().abs()) + f32 * want.abs()
    bad = ((got.double() - want).abs() > bound).nonzero()
    assert len(bad) == 0, f"{len(bad)} elements off, first at {bad[:4].tolist()}"


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cuda_big_tile_beside_wide(layout):
    """A ragged grid keeps the 128x128 tile at sizes where the 128x256 one takes over."""
    m, n, k = 4096, 4352, 260
    views = ("contiguous", "contiguous")
    skip_unless_132_sms("a shape chosen for 132 SMs")
    assert route(None, m, n, k, views, layout) == "gemm/128x128"
    a, b, kernels = float32_launch((None, m, n, k), views, layout)
    assert kernels is None or kernels == [(BIG_SHAPE, 0, 2)], kernels
    check_against_float64(bankops.gemm(a, b, layout), a, b)


# Row-major operands whose rows are not 16-byte aligned (odd row lengths, a storage offset):
# the 128x128 tile with 4-byte cp.async copies of those (GemmStaging::Async4), each of the
# three staging pairs, m/n edges and k tails (1003 = 125 k tiles + 3), batches. 144 blocks
# or more, so that none routes to the 64x64 tile. bankops.explain takes operands as aligned,
# so the route is read from the launched kernel's name.
ASYNC4 = [
    ((None, 1500, 1501, 1003), ("contiguous", "contiguous"), (4, 5)),  # A and B rows misaligned
    ((None, 1500, 1504, 1003), ("contiguous", "contiguous"), (4, 2)),  # A's only
    ((None, 1500, 1501, 1004), ("contiguous", "contiguous"), (0, 5)),  # B's only
    ((None, 1536, 1536, 72), ("misaligned", "misaligned"), (4, 5)),    # whole tiles only (sanitizers)
    ((4, 700, 700, 1001), ("misaligned", "contiguous"), (4, 2)),       # B's rows aligned (700 floats)
    ((2, 1500, 1501, 1003), ("contiguous", "contiguous"), (4, 5)),
]


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape,views,modes", ASYNC4, ids=case_ids(ASYNC4))
def test_cuda_async4_staging(shape, views, modes, layout):
    # Stream-K off: these sub-wave grids would share Wide's tiles by k (test_route_on_132_sms).
    with bankops.options(stream_k=False):
        a, b, kernels = float32_launch(shape, views, layout)
        assert kernels is None or kernels == [(BIG_SHAPE, *modes)], kernels
        check_against_float64(bankops.gemm(a, b, layout), a, b)


# The strip (kernels/gemm/ffma_strip.h): 1 to 16 columns past whole 256-column tiles where the 128x256
# grid fills 132 SMs without them and not with them; kStripBlocks more columns of blocks compute them
# as a matrix-vector product. Vector and Async4 staging (modes as in ASYNC4; the 128x256 tile
# copies an aligned k-major A beside a row-major B element by element too, mode 4, and stages
# a k-major B through registers, mode 0), m edges, k tails past
# the 256-row chunks, batches and a transposed B (its strip read along k).
STRIP = [
    ((None, 2048, 2049, 2048), ("contiguous", "contiguous"), (4, 5)),
    ((None, 2048, 2063, 300), ("contiguous", "contiguous"), (4, 5)),    # 15 columns
    ((None, 2047, 2064, 301), ("contiguous", "contiguous"), (4, 2)),    # 16, an m edge, A's rows misaligned
    ((None, 4095, 4097, 4093), ("contiguous", "contiguous"), (4, 5)),   # the benchmark's misaligned shape
    ((None, 2048, 2050, 1000), ("transposed", "transposed"), (2, 0)),   # B^T through registers
    ((4, 1024, 1025, 500), ("contiguous", "contiguous"), (4, 5)),
    ((None, 2048, 2049, 40), ("misaligned", "misaligned"), (4, 5)),    # one k chunk (sanitizers)
]


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape,views,modes", STRIP, ids=case_ids(STRIP))
def test_cuda_strip(shape, views, modes, layout):
    skip_unless_132_sms("shapes chosen for the 128x256 tile on 132 SMs")
    a, b, kernels = float32_launch(shape, views, layout)
    assert kernels is None or kernels == [(WIDE_SHAPE, *modes)], kernels
    check_against_float64(bankops.gemm(a, b, layout), a, b)


# Stream-K (kernels/gemm/ffma_work.h) on 132 SMs: the first tiles % 132 tiles of the 128x256 grid are
# shared out. Every tile shared (2048^3: 128 tiles), a batch, an m edge (a shared edge tile
# stays in place) with a k tail, the strip beside it, 16 tiles split 8 ways (940 tiles: 7
# waves and 16; 544 tiles, which take the 128x256 tile only because of it), 32 k tiles a
# block (sanitizers).
STREAM_K = [
    ((None, 2048, 2048, 2048), ("contiguous", "contiguous")),
    ((8, 1024, 1024, 1024), ("contiguous", "transposed")),
    ((None, 2000, 2048, 1003), ("transposed", "contiguous")),
    ((None, 2048, 2049, 2048), ("misaligned", "misaligned")),
    ((None, 2560, 12032, 2053), ("contiguous", "contiguous")),
    ((None, 4096, 4352, 2048), ("contiguous", "contiguous")),  # Wide only with stream-K
    ((None, 2048, 2048, 264), ("contiguous", "contiguous")),
]


def shared_tiles(batch, m, n, k, sms=132):
    """(batch, tile m, tile n) of the tiles stream-K shares (ffma_work.h's plan; n past whole
    256-column tiles by 1-16 columns is the strip's, as in the cases here)."""
    tiles_m, tiles_n, tiles_k = -(-m // 128), -(-(n - n % 256 if 0 < n % 256 <= 16 else n) // 256), -(-k // 8)
    tiles = batch * tiles_m * tiles_n
    rest = tiles % sms
    if rest == 0 or rest * tiles_k < min(sms, rest * 8) * 32:
        return []
    return [(i // (tiles_m * tiles_n), i // tiles_n % tiles_m, i % tiles_n) for i in range(rest)]


@requires_cuda
def test_cuda_stream_k_without_scratch_memory(capfd):
    """Stream-K's partial sums take scratch memory. Where the caching allocator has none (a
    memory fraction with room for the output only), the call runs Wide's per-tile blocks
    alone, which need none (the route with stream-K off, and its bits), with a warning."""
    skip_unless_132_sms("a shape chosen for stream-K on 132 SMs")
    m = n = k = 2048
    a, b = (torch.randn(m, m, device="cuda") for _ in range(2))
    assert "stream_k=" in bankops.gemm_route(a, b) and " scratch=0" not in bankops.gemm_route(a, b)
    with bankops.options(stream_k=False):
        want = bankops.gemm(a, b)
    # A small tensor alive in a segment of its own with room for the partial sums (as one left
    # by another test would be): with_room_for takes that room too.
    small = torch.empty(2 << 20, dtype=torch.uint8, device="cuda")  # noqa: F841
    with torch_warns(capfd, r"no memory for the \d+ bytes of scratch.*fallback=no_scratch"):
        got = with_room_for(m * n * 4 + (1 << 20), lambda: bankops.gemm(a, b))  # the output, not the partial sums
    assert torch.equal(got.view(torch.int32), want.view(torch.int32))


@requires_cuda
@pytest.mark.parametrize("a_view", ["contiguous", "transposed"])
@pytest.mark.parametrize("b_view", ["contiguous", "transposed"])
@pytest.mark.parametrize("m,n", [(40, 4096), (64, 4096), (33, 14336), (64, 14336)])
def test_cuda_few_rows_split(m, n, a_view, b_view):
    """33-64 rows take the FFMA kernel's 64-row tiles, k split across a cluster whose partial
    tiles are summed in rank order (64x64 against 4096 columns, 64x256 against 14336): most of
    each tile's rows lie past m, computed and never stored (poisoned outputs), every layout and
    every run the same bits, batched against a broadcast weight too; a transposed x of 33 rows
    (rows off 16 bytes) stages element by element and runs unsplit."""
    skip_unless_132_sms("shapes chosen for the split tiles on 132 SMs")
    with the_model_alone():  # the model's tiles (a measured table may take other splits: its own test)
        few_rows_split(m, n, a_view, b_view)


def few_rows_split(m, n, a_view, b_view):
    # Only 16-byte vector staging splits: 33 rows of a transposed x stage element by element.
    vector = not (a_view == "transposed" and m % 4)
    assert route(None, m, n, 2056, (a_view, b_view)) == ("gemm/64x256" if n == 14336 and vector else "gemm/64x64")
    a = operand(m, 2056, None, torch.float32, "cuda", a_view)
    b = operand(2056, n, None, torch.float32, "cuda", b_view)
    assert (int(fields(bankops.gemm_route(a, b))["split"]) > 1) == vector, bankops.gemm_route(a, b)
    got = {layout: bankops.gemm(a, b, layout) for layout in LAYOUTS}
    check_against_float64(got["swizzle"], a, b)
    for layout in LAYOUTS:
        assert torch.equal(got[layout].view(torch.int32), got["swizzle"].view(torch.int32)), layout
    assert torch.equal(bankops.gemm(a, b).view(torch.int32), got["swizzle"].view(torch.int32)), "every run"
    ab = operand(m, 2056, 3, torch.float32, "cuda", a_view)
    check_against_float64(bankops.gemm(ab, b.expand(3, 2056, n)), ab, b.expand(3, 2056, n))
    if b_view == "transposed":  # a Linear layer's weight, and its bias added by the rank that stores
        bias = torch.randn(n, device="cuda")
        want = a.double() @ b.double() + bias.double()
        torch.testing.assert_close(bankops.linear(a, b.t(), bias).double(), want, rtol=1e-4, atol=1e-3)


def test_few_rows_split_candidates_for_the_tuner():
    """Past the router's list (which ends at Big), a call that may split lists for the tuner the
    split tiles (64x256 flat, 64x128 mid, 64x64 small; 32x64 short up to 32 rows) at every other
    split whose ranks keep costs' least k tiles and whose cluster fits: each key once; the route
    unchanged. None where the call may not split (compute capability 8.0, the split_k option off,
    more than 64 rows)."""
    dev = dict(num_sms=132, cc=90)
    x, w = torch.empty(64, 4096, device="meta"), torch.empty(4096, 4096, device="meta").t()
    r = bankops.gemm_route(x, w, **dev)
    ffma = [c for c in r.candidates if c.tier == "ffma"]
    assert ffma[0].chosen and ffma[0].route == r and len({c.key for c in r.candidates}) == len(r.candidates)
    big = [c.route.fields["tile"] for c in ffma].index("128x128x8")
    assert [c.route.fields["tile"] for c in ffma[:big]] == ["64x64x8"], "the router's list is as it was"
    splits = {}
    for c in ffma[big + 1:]:
        splits.setdefault(c.route.fields["tile"], []).append(c.route.fields["split"])
    assert splits == {"64x256x8": list(range(1, 9)), "64x128x8": list(range(1, 9)),
                      "64x64x8": [s for s in range(1, 9) if s != ffma[0].route.fields["split"]]}, splits
    shallow = bankops.gemm_route(x[:, :256], w[:256], **dev)  # 32 k tiles: 2 ranks at most
    assert {c.route.fields.get("split", 1) for c in shallow.candidates if c.tier == "ffma"} <= {1, 2}, shallow.candidates
    for m in (1, 17, 32):  # the rows kernel's calls: Short last, at every split
        r = bankops.gemm_route(x[:m], w, **dev)
        assert r.startswith("rows") and r.candidates[0].chosen, r
        tiles = [(c.route.fields["tile"], c.route.fields.get("split")) for c in r.candidates if c.tier == "ffma"]
        assert tiles[-8:] == [("32x64x8", s) for s in range(1, 9)], tiles
        assert str(bankops.gemm_route(x[:m], w, "none", **dev)).startswith("rows")
    x65 = torch.empty(65, 4096, device="meta")
    for off in (bankops.gemm_route(x, w, num_sms=108, cc=80), bankops.gemm_route(x65, w, **dev)):
        assert [c.route.fields["tile"] for c in off.candidates if c.tier == "ffma"][-1] == "128x128x8", off.candidates
    with bankops.options(split_k=False):
        tiles = [c.route.fields["tile"] for c in bankops.gemm_route(x, w, **dev).candidates if c.tier == "ffma"]
        assert tiles[-1] == "128x128x8", tiles  # nothing past Big


@requires_cuda
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9,
                    reason="split tiles need clusters (compute capability 9.0)")
@pytest.mark.parametrize("m,n", [(64, 4096), (40, 1000), (32, 4096), (17, 1000)])
def test_cuda_few_rows_every_split_plan(m, n):
    """Every FFMA plan a few rows list (the router's and the tuner's), forced by its key: against
    float64, the same bits on a second call."""
    a = operand(m, 2056, None, torch.float32, "cuda", "contiguous")
    b = operand(2056, n, None, torch.float32, "cuda", "transposed")
    plans = [c for c in bankops.gemm_route(a, b).candidates if c.tier == "ffma"]
    assert len(plans) > 8, plans
    for c in plans:
        with bankops.options(plan=c.key):
            assert bankops.gemm_route(a, b) == c.route
            got = bankops.gemm(a, b)
            check_against_float64(got, a, b)
            assert torch.equal(got.view(torch.int32), bankops.gemm(a, b).view(torch.int32)), c.route


def test_explain_few_rows_split_partial():
    """The split tile's partial sums: each thread stores its 8 accumulator rows as 16-byte
    vectors, a warp 4 rows 4 apart, two of them a quarter-warp phase (64 bytes each): on the same
    banks under none (2-way), apart under pad and swizzle. Then every rank's rows are read back
    from its own partial and, through distributed shared memory, the peers'."""
    for layout, ways in (("none", 2), ("pad", 1), ("swizzle", 1)):
        with the_model_alone():  # on an H200 its table takes another tile here
            rep = bankops.explain("gemm", layout, torch.float32, m=64, n=4096, k=4096, b_transposed=True)
        split = int(fields(rep.route).get("split", 1))
        assert rep.route.startswith("ffma 64x64x8 small") and split > 1, rep.route
        st = [r for r in rep.rows if r["instruction"].startswith("st.shared.v4 P")][0]
        assert st["count"] == 4 * 8 and st["iterations"] == 64 * split, st  # 4 warps x 8 rows; tiles x ranks
        assert st["wavefronts"] == ways * st["ideal"], (layout, st)
        own, peers = [r for r in rep.rows if r["instruction"].startswith("ld.shared::cluster")]
        assert own["iterations"] == peers["iterations"] == 64, (own, peers)  # an iteration: a tile's cluster
        assert peers["count"] == (split - 1) * own["count"], (own, peers)
        assert own["wavefronts"] == own["ideal"] and peers["peer"], (layout, own, peers)


def test_explain_short_split():
    """The tuner's 32x64 tile (two warps of 32x32, 8x4 a thread) on 32 rows against a (4096, 4096)
    weight, split 7 ways (448 blocks) as its plan's key forces: the k-major operands' transposed
    stores collide 2-way under none alone; the inner loop's LDS.128 reads and the cluster's reads
    of the partial tiles run at their ideal in every layout; the partial tile's stores collide
    2-way under none, as Small's do."""
    x, w = torch.empty(32, 4096, device="meta"), torch.empty(4096, 4096, device="meta").t()
    plans = bankops.gemm_route(x, w, num_sms=132, cc=90).candidates
    (plan,) = [c for c in plans if c.route.fields["tile"] == "32x64x8" and c.route.fields.get("split") == 7]
    assert plan.route.startswith("ffma 32x64x8 short") and plan.route.fields["blocks"] == 448, plan.route
    for layout, ways in (("none", 2), ("pad", 1), ("swizzle", 1)):
        with bankops.options(plan=plan.key):
            rep = bankops.explain("gemm", layout, torch.float32, num_sms=132, cc=90, m=32, n=4096, k=4096,
                                  b_transposed=True)
        assert rep.route.startswith("ffma 32x64x8 short") and fields(rep.route)["split"] == "7", rep.route
        for r in rep.rows:
            bound = ways if "transposed store" in r["instruction"] or r["instruction"].startswith("st.shared.v4 P") else 1
            assert r["wavefronts"] == bound * r["ideal"], (layout, r)
        (st,) = [r for r in rep.rows if r["instruction"].startswith("st.shared.v4 P")]
        assert st["count"] == 2 * 8 and st["iterations"] == 64 * 7, st  # 2 warps x 8 rows; tiles x ranks


def test_explain_flat_split():
    """64 rows against a (4096, 14336) weight: 56 tiles of 64x256 split 4 ways (224 blocks, 1.5
    an SM and more). The 16x8 micro-tile reads 4 A and 2 B vectors a row (LDS.128, conflict-free
    in every layout); the transposed stores of the k-major weight collide under none alone; the
    partial tile's 32 rows x 2 vectors a thread collide 2-way under none, as Small's do."""
    for layout, ways in (("none", 2), ("pad", 1), ("swizzle", 1)):
        rep = bankops.explain("gemm", layout, torch.float32, m=64, n=14336, k=4096, b_transposed=True)
        assert rep.route.startswith("ffma 64x256x8 flat") and fields(rep.route)["split"] == "4", rep.route
        assert fields(rep.route)["blocks"] == "224", rep.route
        rows = {r["instruction"]: r for r in rep.rows}
        a, b = rows["lds.128 As[kk][m..] (inner loop)"], rows["lds.128 Bs[kk][n..] (inner loop)"]
        assert a["count"] == 2 * b["count"] and a["wavefronts"] == a["ideal"] and b["wavefronts"] == b["ideal"]
        st = rows["st.shared.v4 P <- a thread's accumulator rows (split-K partial)"]
        assert st["count"] == 4 * 16 * 2 and st["iterations"] == 56 * 4, st  # 4 warps x 16 rows x 2 vectors
        assert st["wavefronts"] == ways * st["ideal"], (layout, st)
        sts = rows["sts Bs[k+0][x] (transposed store)"]
        assert sts["wavefronts"] == ways * sts["ideal"], (layout, sts)


@requires_cuda
@pytest.mark.parametrize("shape,views", STREAM_K, ids=case_ids(STREAM_K))
def test_cuda_stream_k(shape, views):
    """Against float64, the layouts bit for bit, and against the same call without stream-K:
    the tiles it does not share are the same bits, each shared one differs (its sums are
    added in another order)."""
    skip_unless_132_sms("shapes chosen for the 128x256 tile on 132 SMs")
    batch, m, n, k = shape
    assert route(batch, m, n, k, views) == "gemm/128x256"
    a = operand(m, k, batch, torch.float32, "cuda", views[0])
    b = operand(k, n, batch, torch.float32, "cuda", views[1])
    got = {layout: bankops.gemm(a, b, layout) for layout in LAYOUTS}
    with bankops.options(stream_k=False):
        alone = bankops.gemm(a, b).reshape(-1, m, n)
    check_against_float64(got["swizzle"], a, b)
    for layout in LAYOUTS:
        assert torch.equal(got[layout].view(torch.int32), got["swizzle"].view(torch.int32)), layout
    shared = shared_tiles(batch or 1, m, n, k)
    assert shared
    c = got["swizzle"].reshape(-1, m, n)
    same = (c.view(torch.int32) == alone.view(torch.int32)).cpu()
    mine = torch.zeros_like(same)
    for bz, tm, tn in shared:
        tile = (bz, slice(tm * 128, tm * 128 + 128), slice(tn * 256, tn * 256 + 256))
        assert not same[tile].all(), (bz, tm, tn)
        mine[tile] = True
    assert same[~mine].all()


@pytest.mark.parametrize("cols", [1, 16])
def test_model_strip(cols):
    """The strip's copy and reads are conflict-free in every layout: per 32 rows and 256 k,
    8 warps store each column once and read it 8 times; the 128x256 tile's instructions are
    those of n - cols columns."""
    kw = dict(m=2048, n=2048 + cols, k=2048, num_sms=132)
    for layout in LAYOUTS:
        rep = bankops.explain("gemm", layout, torch.float32, **kw)
        plain = bankops.explain("gemm", layout, torch.float32, **dict(kw, n=2048))
        strip = [r for r in rep.rows if "strip" in r["instruction"]]
        assert {r["kernel"] for r in rep.rows} == {"gemm/128x256"}
        assert [r["count"] for r in strip] == [8 * cols, 64 * cols]
        assert all(r["wavefronts"] == r["ideal"] == r["count"] for r in strip), strip
        tile = lambda rows: [(r["instruction"], r["count"]) for r in rows if "strip" not in r["instruction"]]  # noqa: E731
        assert tile(rep.rows) == tile(plain.rows)
    assert not [r for r in bankops.explain("gemm", "swizzle", torch.float32, **dict(kw, n=2048 + 17)).rows
                if "strip" in r["instruction"]]


@requires_cuda
def test_cuda_scalar_staging_keeps_its_tile():
    """Strided or transposed misaligned operands still go through registers (BigScalar)."""
    a = operand(1500, 1003, None, torch.float32, "cuda", "sliced")
    b = operand(1003, 1501, None, torch.float32, "cuda", "transposed")
    kernels = launched(lambda: bankops.gemm(a, b))
    assert kernels is None or kernels == [("4, 2, 2, 4, 2, 2, 8, 4", -1, -1)], kernels
    check_against_float64(bankops.gemm(a, b), a, b)


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
    only (its rows leave the 128-byte lines the copy reads). The 128x256 tile (float32 at
    4096) copies a k-major A beside an n-major B one element per cp.async instead: the same
    conflict under `none`, added to the copy's wavefront per global line (bank_model.h)."""
    kw = dict(m=m, n=m, k=m, a_transposed=a_transposed, b_transposed=b_transposed, num_sms=132)
    k_major = int(not a_transposed) + int(b_transposed)  # operands staged by the transposed store
    wide = m == 4096 and dtype == torch.float32
    copied = wide and not a_transposed and not b_transposed  # A's elements by cp.async
    for layout in LAYOUTS:
        rep = bankops.explain("gemm", layout, dtype, **kw)
        assert ({r["kernel"] for r in rep.rows} == {"gemm/128x256"}) == wide
        what = "(transposed, one element)" if copied else "transposed store"
        transposed = [r for r in rep.rows if what in r["instruction"]]
        assert len(transposed) == k_major * 16 // (4 if dtype == torch.float32 else 8)
        for r in rep.rows:
            if r in transposed and layout == "none":
                assert r["wavefronts"] > r["ideal"], (layout, r)
            elif r["op"] == "ldgsts" and layout == "pad" and r not in transposed:
                assert r["wavefronts"] > r["ideal"], (layout, r)
            else:
                assert r["wavefronts"] == r["ideal"], (layout, r)
        assert sum(r["count"] for r in rep.rows if r["op"] == "ld") > 0


def test_swizzle_parameters():
    """GemmSwizzle XORs the row bits the transposed store touches (row bit 2 for float32's
    4-float vectors, row bits 1-2 for float64's pairs) above the columns of one warp phase."""
    assert torch.ops.bankops._tile_info("gemm/4", "swizzle").tolist()[4:] == [1, 4, 5]
    assert torch.ops.bankops._tile_info("gemm/8", "swizzle").tolist()[4:] == [2, 2, 5]


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16], ids=str)
def test_cuda_k_zero_writes_zeros_on_every_route(dtype):
    """K = 0 on a grid that would take each family's largest tile (float32 takes a block a
    tile for it, gemm_config; the Hopper and mma.sync kernels run no k tile): C is zeros (plus
    the bias through linear) in every element of the poisoned output, and an empty batch's
    Linear backward gives zero weight and bias gradients."""
    a = torch.zeros(2048, 0, device="cuda", dtype=dtype)
    b = torch.zeros(0, 2048, device="cuda", dtype=dtype)
    for layout in LAYOUTS:
        assert torch.equal(bankops.gemm(a, b, layout), torch.zeros(2048, 2048, device="cuda", dtype=dtype)), layout
    bias = torch.randn(2048, device="cuda").to(dtype)
    w = torch.zeros(2048, 0, device="cuda", dtype=dtype)
    assert torch.equal(bankops.linear(a, w, bias), bias.expand(2048, 2048))
    lin = bankops.nn.Linear(2048, 2048, device="cuda", dtype=dtype)
    lin(torch.zeros(0, 2048, device="cuda", dtype=dtype, requires_grad=True)).sum().backward()
    assert torch.equal(lin.weight.grad, torch.zeros_like(lin.weight))
    assert torch.equal(lin.bias.grad, torch.zeros_like(lin.bias))
