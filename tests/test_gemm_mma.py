"""gemm on tensor cores (float16/bfloat16): against float64, every layout, odd sizes (odd K
takes the register path, aligned rows the cp.async path), transposed and sliced views,
batches; and the bank model's account of its ldmatrix / cp.async instructions. On a compute
capability 9.0 GPU the swizzle layout's aligned calls run the Hopper (wgmma) kernel;
"swizzle/mma.sync" runs them on the mma.sync kernel instead, as other GPUs do."""
import math

import pytest
import torch

import bankops
from conftest import LAYOUTS, assert_close_bound, eps, requires_cuda

DTYPES = [torch.float16, torch.bfloat16]
# The layouts, plus swizzle kept off the Hopper kernel (bankops.options(wgmma=False)).
MMA_SYNC = "swizzle/mma.sync"
GEMM_LAYOUTS = LAYOUTS + (MMA_SYNC,)
HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)


def gemm(a, b, layout):
    """bankops.gemm under one of GEMM_LAYOUTS."""
    if layout != MMA_SYNC:
        return bankops.gemm(a, b, layout)
    with bankops.options(wgmma=False):
        return bankops.gemm(a, b, "swizzle")


def explain(layout, dtype, **shape):
    """bankops.explain of a gemm under one of GEMM_LAYOUTS."""
    if layout == MMA_SYNC:
        return bankops.explain("gemm", "swizzle", dtype, hopper=False, **shape)
    return bankops.explain("gemm", layout, dtype, **shape)


# The bound on the normwise error against float64.
REL_ERR = {torch.float16: 5e-3, torch.bfloat16: 1e-2}

# (batch or None, M, N, K): ones, empties, K = 0, odd K / N / M, whole 128 x 256 x 32 tiles,
# several k tiles past the 4-stage ring, batches.
SHAPES = [
    (None, 1, 1, 1), (None, 0, 5, 3), (None, 5, 0, 3), (None, 5, 3, 0), (None, 1, 9, 8),
    (None, 129, 257, 33), (None, 127, 255, 31), (None, 128, 256, 32), (None, 256, 512, 64),
    (None, 100, 200, 300), (None, 300, 72, 520), (None, 257, 264, 1000),
    (3, 65, 130, 72), (2, 128, 264, 40), (2, 33, 17, 65), (0, 4, 4, 4),
]


def shape_ids(shapes):
    """pytest ids of (batch or None, m, n, k) shapes: [BxMxNxK | MxNxK]."""
    return [("" if b is None else f"{b}x") + f"{m}x{n}x{k}" for b, m, n, k in shapes]


SHAPE_IDS = shape_ids(SHAPES)


def operand(rows, cols, batch, dtype, how):
    """A (batch,) rows x cols CUDA operand stored as `how` says: a view, never a copy."""
    lead = () if batch is None else (batch,)
    make = lambda *s: torch.randn(*s, device="cuda").to(dtype)  # noqa: E731
    if how == "contiguous":
        return make(*lead, rows, cols)
    if how == "transposed":
        return make(*lead, cols, rows).transpose(-2, -1)
    if how == "sliced":  # rows 16-byte aligned (a multiple of 8 halves apart), cols cut short
        return make(*lead, rows, (cols + 7) // 8 * 8 + 8)[..., :cols]
    if how == "strided":  # no dim contiguous
        return make(*lead, rows, 2 * cols + 1)[..., 1::2]
    raise ValueError(how)


def check_against_float64(got, a, b):
    """Elementwise: float32 accumulation over K terms plus one rounding to the dtype;
    normwise: the issue's relative error."""
    ref = a.double() @ b.double()
    k = a.shape[-1]
    bound = 2 * eps(torch.float32) * math.sqrt(max(k, 1)) * (a.double().abs() @ b.double().abs()) + eps(got.dtype) * ref.abs()
    assert got.is_contiguous()
    assert_close_bound(got.double(), ref, bound, "gemm vs float64")
    if ref.numel():
        rel = float((got.double() - ref).norm() / ref.norm().clamp_min(1e-30))
        assert rel <= REL_ERR[got.dtype], f"relative error {rel:.3g} > {REL_ERR[got.dtype]}"


@requires_cuda
@pytest.mark.parametrize("batch,m,n,k", SHAPES, ids=SHAPE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", GEMM_LAYOUTS)
@pytest.mark.parametrize("views", [("contiguous", "contiguous"), ("contiguous", "transposed"),
                                   ("transposed", "contiguous"), ("sliced", "sliced"), ("strided", "transposed")],
                         ids="-".join)
def test_cuda_matches_float64(views, layout, dtype, batch, m, n, k):
    a = operand(m, k, batch, dtype, views[0])
    b = operand(k, n, batch, dtype, views[1])
    check_against_float64(gemm(a, b, layout), a, b)


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(4095, 4097, 4093), (1024, 1024, 1024)], ids=["misaligned", "1024"])
def test_cuda_bench_shapes(dtype, shape):
    m, n, k = shape
    # On compute capability 9.0 the Hopper kernel: 1024^3 as 128 x 64 tiles, the misaligned
    # shape on copies of its operands in aligned rows (128 x 256 tiles).
    if HOPPER:
        route = "gemm_wgmma/repacked" if k % 8 or n % 8 else "gemm_wgmma"
    else:
        route = "gemm_mma/realign" if k % 8 or n % 8 else "gemm_mma/cp.async"
    assert {row["kernel"] for row in bankops.explain("gemm", "swizzle", dtype, m=m, n=n, k=k).rows} == {route}
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = torch.randn(k, n, device="cuda").to(dtype)
    got = bankops.gemm(a, b, "swizzle")
    # float64 on the GPU: the CPU would take minutes at this size.
    ref = a.double() @ b.double()
    bound = 2 * eps(torch.float32) * math.sqrt(k) * (a.double().abs() @ b.double().abs()) + eps(dtype) * ref.abs()
    assert not torch.isnan(got).any()
    assert bool(((got.double() - ref).abs() <= bound).all())
    assert float((got.double() - ref).norm() / ref.norm()) <= REL_ERR[dtype]


# Enough 128 x 256 tiles (kMmaLargeMinTiles) for the 8-warp block shape, with an m edge,
# an n edge and a k tail past whole 64-wide k-tiles, and a batch that reaches the count only
# together.
LARGE_SHAPES = [(None, 2040, 4096, 72), (None, 1920, 4000, 264), (4, 512, 2048, 128)]


@requires_cuda
@pytest.mark.parametrize("batch,m,n,k", LARGE_SHAPES, ids=[f"{b}x{m}x{n}x{k}" for b, m, n, k in LARGE_SHAPES])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", GEMM_LAYOUTS)
@pytest.mark.parametrize("views", [("contiguous", "contiguous"), ("contiguous", "transposed"), ("sliced", "sliced")],
                         ids="-".join)
def test_cuda_large_tiles(views, layout, dtype, batch, m, n, k):
    a = operand(m, k, batch, dtype, views[0])
    b = operand(k, n, batch, dtype, views[1])
    check_against_float64(gemm(a, b, layout), a, b)


# The two middle block shapes, each with an m edge, an n edge, a k tail past whole k-tiles and
# a batch that reaches the tile count only together. MmaNarrow (64 x 128 x 64) runs grids of
# fewer than 128 tiles of 128 x 128, with fewer k-tiles than the ring and the 16-byte aligned
# views too; MmaSmall (128 x 128 x 32) runs 128 or more of them but fewer than 128 tiles of
# 128 x 256. B fragments per k-tile tell the shapes apart: 4 warps x 4 n8 pairs x 4 k16 steps
# (narrow), x 2 k16 steps (small).
MID_SHAPES = [(None, 1000, 1000, 1000, 64), (None, 65, 136, 8, 64), (None, 200, 392, 136, 64), (3, 130, 264, 200, 64),
              (None, 64, 128, 2048, 64), (None, 1032, 2056, 72, 32), (2, 1024, 1024, 96, 32)]


@requires_cuda
@pytest.mark.parametrize("batch,m,n,k,b_fragments", MID_SHAPES,
                         ids=[f"{b}x{m}x{n}x{k}-{'narrow' if f == 64 else 'small'}" for b, m, n, k, f in MID_SHAPES])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", GEMM_LAYOUTS)
@pytest.mark.parametrize("views", [("contiguous", "contiguous"), ("contiguous", "transposed"), ("sliced", "sliced")],
                         ids="-".join)
def test_cuda_mid_tiles(views, layout, dtype, batch, m, n, k, b_fragments):
    a = operand(m, k, batch, dtype, views[0])
    b = operand(k, n, batch, dtype, views[1])
    mma_layout = MMA_SYNC if layout == "swizzle" else layout  # the fragments are mma.sync's
    rep = explain(mma_layout, dtype, m=m, n=n, k=k, batch=batch or 1, b_transposed=views[1] == "transposed")
    b_kind = "ldmatrix.x4.trans B fragments" if views[1] != "transposed" else "ldmatrix.x4 B fragments"
    assert _count(rep, b_kind) == b_fragments, str(rep)
    check_against_float64(gemm(a, b, layout), a, b)


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(200, 300, 130), (1024, 2048, 96), (1024, 1024, 1024), (1023, 2049, 517)],
                         ids=["registers", "cp.async-small", "cp.async-narrow", "realign-repacked"])
def test_cuda_layouts_same_bits(dtype, shape):
    """The layout moves where values sit in shared memory, never the order they are summed
    in; the Hopper kernel's k16 products and float32 sums come out the same as mma.sync's
    (1024^3: its 128 x 64 tiles on Hopper; 1023 x 2049 x 517: on copies of the operands in
    aligned rows, beside mma.sync's realigning path)."""
    m, n, k = shape
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = torch.randn(k, n, device="cuda").to(dtype)
    outs = {layout: gemm(a, b, layout) for layout in GEMM_LAYOUTS}
    first, *rest = outs.values()
    for out in rest:
        assert torch.equal(out.view(torch.int16), first.view(torch.int16))


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cuda_expanded_batch(layout):
    a = torch.randn(5, 33, 40, device="cuda").half()
    b = torch.randn(1, 40, 24, device="cuda").half().expand(5, 40, 24)  # batch stride 0
    check_against_float64(bankops.gemm(a, b, layout), a, b)


@requires_cuda
def test_cuda_many_batches_and_tall():
    """Grids past 65535 in y and z: the kernel loops over the rest."""
    a = torch.randn(70_000, 2, 3, device="cuda").bfloat16()
    b = torch.randn(70_000, 3, 2, device="cuda").bfloat16()
    check_against_float64(bankops.gemm(a, b), a, b)
    a = torch.randn(128 * 65_536 + 5, 8, device="cuda").half()
    b = torch.randn(8, 3, device="cuda").half()
    check_against_float64(bankops.gemm(a, b), a, b)


def _ops(report):
    return {r["op"] for r in report.rows}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_explain_ldmatrix_and_cp_async(dtype):
    """swizzle: ldmatrix and the cp.async writes conflict-free; none: ldmatrix conflicts
    (rows of one 8x8 matrix share banks); pad: ldmatrix free, the cp.async writes of the
    64-byte A rows conflict (seed 003)."""
    rep = {layout: bankops.explain("gemm", layout, dtype, m=1024, n=1024, k=1024, hopper=False) for layout in LAYOUTS}
    for layout, r in rep.items():
        assert {"ldsm", "ldgsts"} <= _ops(r), f"{layout}: {r}"
        assert all(row["kernel"] == "gemm_mma/cp.async" for row in r.rows)
    sw = rep["swizzle"]
    for kind in ("ldsm", "ldgsts", "ld", "st"):
        t = sw.totals[kind]
        assert t["instructions"] > 0 and t["wavefronts"] == t["ideal"], f"swizzle {kind}: {t}"
    none = rep["none"].totals
    assert none["ldsm"]["wavefronts"] >= 4 * none["ldsm"]["ideal"]
    assert none["ldgsts"]["wavefronts"] == none["ldgsts"]["ideal"]
    pad = rep["pad"].totals
    assert pad["ldsm"]["wavefronts"] == pad["ldsm"]["ideal"]
    assert pad["ldgsts"]["wavefronts"] > pad["ldgsts"]["ideal"]
    assert rep["pad"].conflicts < rep["none"].conflicts


@pytest.mark.parametrize("a_t,b_t", [(False, True), (True, False), (True, True)], ids=["b^T", "a^T", "both^T"])
def test_explain_views_and_odd_k(a_t, b_t):
    """Transposed views and odd K (aligned rows: cp.async; odd K: the realigning path, whose
    rows are each operand's contiguous dim): swizzle stays conflict-free on every instruction
    (on the shared-memory side of the realigning path's cp.async of misaligned rows), none
    does not."""
    for k in (1024, 1023):
        sw = bankops.explain("gemm", "swizzle", torch.bfloat16, m=512, n=512, k=k, a_transposed=a_t, b_transposed=b_t,
                             hopper=False)
        none = bankops.explain("gemm", "none", torch.bfloat16, m=512, n=512, k=k, a_transposed=a_t, b_transposed=b_t)
        if _kernels(sw) == {"gemm_mma/realign"}:
            _assert_smem_side_conflict_free(sw)
        else:
            assert sw.conflicts == 0, str(sw)
        assert none.conflicts > 0
        assert {"ldsm", "ldgsts"} <= _ops(sw), str(sw)
        a_frags = "ldmatrix.x4.trans A fragments" if a_t else "ldmatrix.x4 A fragments"
        assert _count(sw, a_frags) > 0, str(sw)


def test_explain_float32_stays_on_ffma():
    r = bankops.explain("gemm", "swizzle", torch.float32, m=256, n=256, k=256)
    assert "ldsm" not in _ops(r)
    assert all(not row["kernel"].startswith("gemm_mma") for row in r.rows)


def _count(report, instruction):
    return sum(row["count"] for row in report.rows if row["instruction"] == instruction)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_explain_block_shapes(layout):
    """The trace follows the launcher's block shape: 4 warps x 4 m16 tiles x 2 k16 steps of
    A fragments per 128 x 128 x 32 k-tile, 8 warps x 4 x 4 per 128 x 256 x 64 k-tile, and
    4 warps x 2 x 4 per 64 x 128 x 64 k-tile. On the large tiles swizzle stays conflict-free
    everywhere; pad's ldmatrix is free but its cp.async phases still straddle the padded
    rows (the probe's rule, seed 003); none's ldmatrix conflicts."""
    small = bankops.explain("gemm", layout, torch.float16, m=1024, n=2048, k=1024, hopper=False)
    large = bankops.explain("gemm", layout, torch.float16, m=4096, n=4096, k=4096, hopper=False)
    narrow = bankops.explain("gemm", layout, torch.float16, m=1024, n=1024, k=1024, hopper=False)
    assert _count(small, "ldmatrix.x4 A fragments") == 32
    assert _count(small, "ldmatrix.x4.trans B fragments") == 32
    assert _count(narrow, "ldmatrix.x4 A fragments") == 32
    assert _count(narrow, "ldmatrix.x4.trans B fragments") == 64
    assert _count(narrow, "sts C tile <- accumulator pairs") == 4 * 2 * 8 * 2
    if layout == "swizzle":
        assert narrow.conflicts == 0, str(narrow)
    assert _count(large, "ldmatrix.x4 A fragments") == 128
    assert _count(large, "ldmatrix.x4.trans B fragments") == 128
    assert _count(large, "ldgsts Bs[k][n] <- B") == 64
    t = large.totals
    if layout == "swizzle":
        assert large.conflicts == 0, str(large)
    elif layout == "pad":
        assert t["ldsm"]["wavefronts"] == t["ldsm"]["ideal"], str(large)
        assert t["ldgsts"]["wavefronts"] > t["ldgsts"]["ideal"], str(large)
    else:
        assert t["ldsm"]["wavefronts"] > t["ldsm"]["ideal"], str(large)


# The realigning path: rows contiguous but off 16-byte boundaries (odd K or N, offset data
# pointers). Odd M / N / K with every row offset (K odd: row r of A starts 2 r K bytes in, so
# every even residue mod 16 occurs), fewer k-tiles than the 4-stage ring, 1-row / 1-col edges,
# tiles whose last row ends just at (or 1 before) the 8-element margin of the whole-tile
# test (K = 40 with N = 137, K = 39, 71; N = 136), m-tile and k-tile interiors, batches.
REALIGN_SHAPES = [
    (None, 1, 9, 33), (None, 37, 1, 35), (None, 2, 1, 17), (None, 130, 131, 33), (None, 200, 264, 95),
    (None, 65, 70, 9), (None, 257, 263, 1001), (None, 256, 137, 40), (None, 256, 136, 39), (None, 128, 128, 71),
    (None, 384, 392, 515), (None, 130, 263, 65), (3, 65, 130, 73), (2, 300, 257, 129), (None, 128, 136, 7),
]
REALIGN_IDS = shape_ids(REALIGN_SHAPES)


def _kernels(report):
    return {row["kernel"] for row in report.rows}


def offset_operand(rows, cols, batch, dtype, off, transposed=False):
    """A contiguous operand (or the transposed view of one) whose data starts `off` elements
    past a 16-byte boundary: rows shifted by 2 * off bytes on top of their stride's offsets."""
    lead = () if batch is None else (batch,)
    shape = lead + ((cols, rows) if transposed else (rows, cols))
    n = math.prod(shape)
    t = torch.randn(n + 8, device="cuda").to(dtype)[off : off + n].view(shape)
    return t.transpose(-2, -1) if transposed else t


@pytest.mark.parametrize("batch,m,n,k", REALIGN_SHAPES, ids=REALIGN_IDS)
@pytest.mark.parametrize("b_t", [False, True], ids=["b", "b^T"])
def test_explain_realign_route(batch, m, n, k, b_t):
    """The shapes below take the realigning path with A and B either way (a transposed A's
    tile is As[BK][BM], its rows m-contiguous, unless M = 1)."""
    if b_t and k % 8 == 0:
        pytest.skip("B^T rows K apart: aligned (the N = 137 case is for row-major B)")
    for layout in LAYOUTS:
        rep = bankops.explain("gemm", layout, torch.float16, m=m, n=n, k=k, batch=batch or 1, b_transposed=b_t)
        assert _kernels(rep) == {"gemm_mma/realign"}, str(rep)
        assert {"ldgsts", "ld", "st", "ldsm"} <= _ops(rep), str(rep)
        if layout == "swizzle":
            _assert_smem_side_conflict_free(rep)
    if m > 1 and m % 8:
        rep = bankops.explain("gemm", "swizzle", torch.float16, m=m, n=n, k=k, batch=batch or 1, a_transposed=True,
                              b_transposed=b_t, hopper=False)
        assert _kernels(rep) == {"gemm_mma/realign"}, str(rep)
        assert any(row["instruction"].startswith("ldgsts As[k][m]") for row in rep.rows), str(rep)


def _assert_smem_side_conflict_free(rep):
    """lds, sts and ldmatrix at their ideal; cp.async of misaligned rows may pay for global
    sectors that land across shared-memory sectors (the data moves by 16 bytes mod 32)."""
    for kind in ("ld", "st", "ldsm"):
        t = rep.totals[kind]
        assert t["wavefronts"] == t["ideal"], f"{kind}: {t}\n{rep}"


@pytest.mark.parametrize("b_t", [False, True], ids=["b", "b^T"])
def test_explain_realign_stages(b_t):
    """The realigning path per 128 x 128 x 32 k-tile: cp.async of the aligned chunks under
    each tile row (5 per 32-element row: 640 for A, 20 warp instructions; B's 32 rows of 17
    chunks take 17, or 20 as Bs[n][k]), two lds.128 of raw chunks per tile chunk (32 per
    operand), and the realigned sts on cp.async's lanes (16 per operand), all conflict-free
    on the shared-memory side in swizzle."""
    rep = bankops.explain("gemm", "swizzle", torch.bfloat16, m=4095, n=4097, k=4093, b_transposed=b_t, hopper=False)
    bn = "Bs[n][k] <- B" if b_t else "Bs[k][n] <- B"
    assert _kernels(rep) == {"gemm_mma/realign"}
    assert _count(rep, "ldgsts As[m][k] <- A (raw chunks)") == 20
    assert _count(rep, f"ldgsts {bn} (raw chunks)") == (20 if b_t else 17)
    assert _count(rep, "lds As[m][k] <- A (raw chunks j, j + 1)") == 32
    assert _count(rep, f"lds {bn} (raw chunks j, j + 1)") == 32
    assert _count(rep, "sts As[m][k] <- A (realigned)") == 16
    assert _count(rep, f"sts {bn} (realigned)") == 16
    assert _count(rep, "ldmatrix.x4 A fragments") == 32
    _assert_smem_side_conflict_free(rep)
    stores = [r for r in rep.rows if "realigned" in r["instruction"]]
    assert len(stores) == 2 and all(r["op"] == "st" and r["width"] == 16 for r in stores)
    assert all(r["wavefronts"] == r["ideal"] == 4 * r["count"] for r in stores), str(rep)
    loads = [r for r in rep.rows if "raw chunks j" in r["instruction"]]
    assert len(loads) == 2 and all(r["op"] == "ld" and r["width"] == 16 for r in loads)
    assert all(r["wavefronts"] == r["ideal"] == 4 * r["count"] for r in loads), str(rep)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_explain_realign_edge_k_tiles(layout):
    """K = 2047 ends 31 columns into the last 32-wide k-tile, and B's last k-tile has a row
    past K: there the fill stores zeros for the raw chunks past each row's end (sts) and
    copies the rest in cp.async's zero-filling form; the other 63 k-tiles copy every chunk.
    Nsight Compute counted 599296 shared stores for this launch on the H100 (2026-11-25), 9472
    more than the whole k-tiles and the realign pass and epilogue alone."""
    rep = bankops.explain("gemm", layout, torch.float16, m=2048, n=2048, k=2047, hopper=False)
    assert _kernels(rep) == {"gemm_mma/realign"}
    tiles = 16 * 16
    for operand, chunks in (("As[m][k] <- A", 20), ("Bs[k][n] <- B", 17)):
        whole = [r for r in rep.rows if r["instruction"] == f"ldgsts {operand} (raw chunks)"]
        assert len(whole) == 1 and whole[0]["iterations"] == tiles * 63 and whole[0]["count"] == chunks
        edge = [r for r in rep.rows if r["instruction"].startswith(("ldgsts", "sts")) and operand in r["instruction"]
                and "edge k-tiles" in r["instruction"]]
        assert [r["op"] for r in edge] == ["ldgsts", "st"] and all(r["iterations"] == 1 for r in edge), str(rep)
        assert edge[0]["count"] == tiles * chunks  # no warp of the last k-tile is all zeros
    assert rep.totals["st"]["instructions"] == 599296
    assert rep.totals["ldgsts"]["instructions"] == tiles * 64 * (20 + 17)
    if layout == "swizzle":
        _assert_smem_side_conflict_free(rep)


@requires_cuda
@pytest.mark.parametrize("batch,m,n,k", REALIGN_SHAPES, ids=REALIGN_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("b_t", [False, True], ids=["b", "b^T"])
def test_cuda_realign(b_t, layout, dtype, batch, m, n, k):
    if b_t and k % 8 == 0:
        pytest.skip("B^T rows K apart: aligned (the N = 137 case is for row-major B)")
    rep = bankops.explain("gemm", layout, dtype, m=m, n=n, k=k, batch=batch or 1, b_transposed=b_t)
    assert _kernels(rep) == {"gemm_mma/realign"}, str(rep)
    a = offset_operand(m, k, batch, dtype, 0)
    b = offset_operand(k, n, batch, dtype, 0, transposed=b_t)
    check_against_float64(bankops.gemm(a, b, layout), a, b)


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("off_a,off_b", [(o, (3 * o + 1) % 8) for o in range(8)], ids=lambda o: str(o))
@pytest.mark.parametrize("shape", [(None, 300, 264, 200), (2, 257, 136, 1001), (None, 256, 392, 40)],
                         ids=lambda s: "x".join(str(v) for v in s if v is not None))
def test_cuda_realign_offsets(shape, off_a, off_b, dtype):
    """Data pointers at every 2-byte offset in 16 (aligned strides too: the rows start where
    the pointer does), both B orientations; the route is the realigning kernel on K % 8 != 0
    (the explain route), and on aligned K it is still realigning once the pointers are off."""
    batch, m, n, k = shape
    for b_t in (False, True):
        if k % 8:
            rep = bankops.explain("gemm", "swizzle", dtype, m=m, n=n, k=k, batch=batch or 1, b_transposed=b_t)
            assert _kernels(rep) == {"gemm_mma/realign"}, str(rep)
        a = offset_operand(m, k, batch, dtype, off_a)
        b = offset_operand(k, n, batch, dtype, off_b, transposed=b_t)
        for layout in LAYOUTS:
            check_against_float64(bankops.gemm(a, b, layout), a, b)


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_realign_sliced_unit_stride(dtype):
    """Unit-stride slices whose rows are 8 or more elements apart but not 16 bytes: the
    realigning kernel (the explain route of the same sizes with odd K), including a slice
    that starts mid-row; layouts agree bit for bit."""
    m, n, k = 260, 200, 77
    a = torch.randn(m, k + 3, device="cuda").to(dtype)[:, 1 : k + 1]
    b = torch.randn(k, n + 5, device="cuda").to(dtype)[:, 2 : n + 2]
    assert _kernels(bankops.explain("gemm", "swizzle", dtype, m=m, n=n, k=k)) == {"gemm_mma/realign"}
    outs = [bankops.gemm(a, b, layout) for layout in LAYOUTS]
    check_against_float64(outs[0], a, b)
    for out in outs[1:]:
        assert torch.equal(out.view(torch.int16), outs[0].view(torch.int16))


@requires_cuda
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", [(1, 3, 9), (3, 5, 7), (37, 41, 35), (130, 133, 67), (2, 129, 9, 131)],
                         ids=lambda s: "x".join(map(str, s)))
def test_cuda_realign_exact_allocations(shape, layout, dtype):
    """Operands that fill their allocations exactly (run under compute-sanitizer memcheck):
    the aligned chunks that cover the first row of a data pointer off 16 bytes, and the last
    row's tail, must not be read past the matrix (the partial chunks there are loaded
    element by element). A starts 2 bytes in, B at its allocation (and one element in as
    B^T); the route is the realigning kernel (N > 1: a 1-column B^T counts as aligned)."""
    batch, (m, n, k) = (None, shape) if len(shape) == 3 else (shape[0], shape[1:])
    lead = () if batch is None else (batch,)
    numel = (batch or 1) * m * k
    a = torch.randn(numel + 1, device="cuda").to(dtype)[1:].view(*lead, m, k)
    for b_t in (False, True):
        rep = bankops.explain("gemm", layout, dtype, m=m, n=n, k=k, batch=batch or 1, b_transposed=b_t)
        assert _kernels(rep) == {"gemm_mma/realign"}, str(rep)
        if b_t:
            b = torch.randn((batch or 1) * n * k + 1, device="cuda").to(dtype)[1:].view(*lead, n, k).transpose(-2, -1)
        else:
            b = torch.randn(*lead, k, n, device="cuda").to(dtype)
        check_against_float64(bankops.gemm(a, b, layout), a, b)
