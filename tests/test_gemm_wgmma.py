"""The Hopper gemm kernel (kernels/gemm/wgmma.h): which calls take it, the bank model's
account of its copies and epilogue, and its results against float64 on a compute capability
9.0 GPU: both B orientations, m / n / k edges, batches, sliced views; rows off 16-byte
boundaries (odd K or N, offset pointers) copied into aligned rows first on matrices of
256 x 256 or more, through the realigning producer on smaller ones (and on any with
`bankops.options(repack=False)`); operands TMA cannot map (rows of stride 0) on the mma.sync kernel."""
import warnings

import pytest
import torch

import bankops
from conftest import requires_cuda, torch_warns, with_room_for
from test_gemm_mma import DTYPES, HOPPER, check_against_float64, gemm, offset_operand, operand, shape_ids
from test_gemm_route import fields

requires_hopper = pytest.mark.skipif(not HOPPER, reason="the wgmma kernel needs compute capability 9.0")


def _kernels(rep):
    return {row["kernel"] for row in rep.rows}


C_ROWS, C_ELEMENTS = "lds C tile -> 16-byte rows of C", "lds C tile -> elements of C (rows off 16 bytes)"
C_PAIRS, C_TMA = "sts C tile <- accumulator pairs", "sts C tile <- accumulator pairs, for TMA stores"
EDGE = ", edge tiles (reads past C skipped)"  # the epilogue's reads on tiles that reach past C


def _tile(rep):
    """The block tile (128, BN) of a Hopper kernel call, from its route line."""
    (kernel,) = _kernels(rep)
    assert kernel.startswith("gemm_wgmma") and rep.route.startswith("wgmma "), str(rep)
    bm, bn, _ = rep.route.split()[1].split("x")
    return int(bm), int(bn)


def _count(rep, instruction):
    return sum(row["count"] for row in rep.rows if row["instruction"] == instruction)


def repack(on):
    """Calls (and explain) with the copy of misaligned operands on or off."""
    return bankops.options(repack=on)


@pytest.mark.parametrize("b_t", [False, True], ids=["b", "b^T"])
def test_explain_route(b_t):
    """swizzle with 16-byte aligned rows takes the Hopper kernel, on the tile and split whose
    waves end soonest (route.h's wgmma_tma_plan): 128 x 256 tiles on grids of whole waves, and
    on ragged ones where the smaller tiles' extra waves cost more (2048 x 1792: one wave of
    112, where 224 of 128 x 128 take two); 128 x 128 and 128 x 64 tiles where the larger ones
    leave half the SMs idle; k split across a cluster where the tiles alone leave SMs idle
    and k is long, at any k, with either operand transposed; grids of fewer than 64 blocks,
    split or not, none and pad, grids past 65535 batches and other GPUs (hopper=False) keep
    the mma.sync kernel. Misaligned rows (odd K) on matrices of 256 x 256 or more are copied
    into aligned rows first and take the aligned routes (4095 x 4097: 544 tiles of 128 x
    256); on smaller ones, or with the copy switched off, the realigning producer with B
    row-major on grids of whole waves of 128 x 256 tiles (512 tiles: 3.88 waves of 132 SMs),
    else of 128 x 128 tiles with two producers (4095 x 4097: 544 and 1056 tiles, 4.12 and 8
    waves; 255 x 8192: 128 tiles), and the mma.sync kernel's realigning path as B^T or on a
    grid ragged for both (2047 x 2049: 144 and 272 tiles)."""
    ex = lambda layout, **kw: _kernels(bankops.explain("gemm", layout, torch.float16, b_transposed=b_t, **kw))  # noqa: E731
    tile = lambda **kw: _tile(bankops.explain("gemm", "swizzle", torch.float16, b_transposed=b_t, hopper=True, **kw))  # noqa: E731
    assert ex("swizzle", m=4096, n=4096, k=4096, hopper=True) == {"gemm_wgmma"}
    assert tile(m=4096, n=4096, k=4096) == (128, 256)
    assert ex("swizzle", m=2048, n=2048, k=64, hopper=True) == {"gemm_wgmma"}
    assert ex("swizzle", m=512, n=512, k=64, batch=32, hopper=True) == {"gemm_wgmma"}
    assert tile(m=512, n=512, k=64, batch=32) == (128, 256)
    assert tile(m=2048, n=1792, k=64) == (128, 256)  # 112 tiles: one wave, where 224 of 128 x 128 take two
    assert tile(m=1024, n=2048, k=1024) == (128, 128)  # 64 and 128
    assert tile(m=256, n=256, k=64, batch=32) == (128, 128)
    assert tile(m=1024, n=1024, k=1024) == (128, 64)  # 64 of 128 x 128, 128 of 128 x 64
    assert tile(m=512, n=512, k=512, batch=4) == (128, 64)
    assert tile(m=1024, n=1024, k=8) == (128, 64)
    assert tile(m=512, n=1024, k=1024) == (128, 64)  # 64 of 128 x 64: half the SMs
    assert ex("swizzle", m=128, n=512, k=256, hopper=True) == {"gemm_mma/cp.async"}  # 8, k too short to split
    assert ex("swizzle", m=1024, n=2048, k=1024, hopper=False) == {"gemm_mma/cp.async"}
    for layout in ("none", "pad"):
        assert ex(layout, m=4096, n=4096, k=4096, hopper=True) == {"gemm_mma/cp.async"}
    assert ex("swizzle", m=4096, n=4096, k=4096, hopper=False) == {"gemm_mma/cp.async"}
    for m, n in ((4096, 4096), (4095, 4097), (2047, 2049)):
        assert ex("swizzle", m=m, n=n, k=4093, hopper=True) == {"gemm_wgmma/repacked"}
    assert ex("swizzle", m=512, n=512, k=4093, batch=4, hopper=True) == {"gemm_wgmma/repacked"}
    assert ex("swizzle", m=512, n=512, k=4093, hopper=True) == {"gemm_wgmma/repacked"}  # 16 tiles, k split
    assert ex("swizzle", m=256, n=256, k=1021, hopper=True) == {"gemm_mma/realign"}  # too few tiles for any
    assert tile(m=4095, n=4097, k=4093) == (128, 256)
    assert tile(m=1024, n=1023, k=1021) == (128, 64)
    assert ex("swizzle", m=4096, n=4096, k=4093, hopper=False) == {"gemm_mma/realign"}
    assert ex("pad", m=4096, n=4096, k=4093, hopper=True) == {"gemm_mma/realign"}
    assert ex("swizzle", m=511, n=4096, k=4093, hopper=True) == {"gemm_wgmma/repacked"}
    # A 255-row matrix: each operand read by too few block tiles to pay for a copy.
    assert ex("swizzle", m=255, n=8192, k=4093, hopper=True) == {"gemm_mma/realign" if b_t else "gemm_wgmma/realign"}
    with repack(False):
        assert ex("swizzle", m=4096, n=4096, k=4093, hopper=True) == {"gemm_mma/realign" if b_t else "gemm_wgmma/realign"}
        assert ex("swizzle", m=4095, n=4097, k=4093, hopper=True) == {"gemm_mma/realign" if b_t else "gemm_wgmma/realign"}
        if not b_t:
            assert tile(m=4095, n=4097, k=4093) == (128, 128)
        assert ex("swizzle", m=2047, n=2049, k=4093, hopper=True) == {"gemm_mma/realign"}
    assert ex("swizzle", m=4096, n=4096, k=4096, a_transposed=True, hopper=True) == {"gemm_wgmma"}
    assert ex("swizzle", m=8, n=8, k=8, batch=70_000, hopper=True) == {"gemm_mma/cp.async"}


@pytest.mark.parametrize("b_t", [False, True], ids=["b", "b^T"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,n,k,bn", [(4096, 4096, 4096, 256), (1024, 2048, 1024, 128), (1024, 1024, 1024, 64)],
                         ids=["128x256", "128x128", "128x64"])
def test_explain_epilogue(m, n, k, bn, dtype, b_t):
    """Aligned rows: TMA fills the tiles and the tensor cores read them, neither through the
    warps' shared-memory instructions, so the epilogue is all there is: per tile the 8
    consumer warps write the C tile as pairs (BN / 8 n8 tiles, 2 rows each), conflict-free.
    Persistent blocks (grids of more than a wave: 4096^2) write each consumer's own 128-byte
    swizzled tile and TMA stores it; a block a tile (one wave, or the persistent option off) reads
    its tile back in 16-byte rows, conflict-free too."""
    rep = bankops.explain("gemm", "swizzle", dtype, m=m, n=n, k=k, b_transposed=b_t, hopper=True)
    assert _kernels(rep) == {"gemm_wgmma"} and _tile(rep) == (128, bn), str(rep)
    if (m // 128) * (n // bn) > 132:
        assert [r["instruction"] for r in rep.rows] == [C_TMA], str(rep)
        assert _count(rep, C_TMA) == 8 * bn // 8 * 2
        assert rep.conflicts == 0, str(rep)
        assert {r["iterations"] for r in rep.rows} == {(m // 128) * (n // bn)}
    with bankops.options(persistent=False):
        rep = bankops.explain("gemm", "swizzle", dtype, m=m, n=n, k=k, b_transposed=b_t, hopper=True)
    assert [r["instruction"] for r in rep.rows] == [C_PAIRS, C_ROWS], str(rep)
    assert _count(rep, C_PAIRS) == 8 * bn // 8 * 2
    assert _count(rep, C_ROWS) == 128 * bn // 8 // 32
    assert rep.conflicts == 0, str(rep)
    assert {r["iterations"] for r in rep.rows} == {(m // 128) * (n // bn)}


def test_explain_slim_dense_c_tile():
    """128 x 144 tiles (1156x3712x1000 x @ W.t(): 260 of them) write each consumer's C tile dense, 288-byte
    rows that one unswizzled TMA box stores (a swizzled third 64-column block would store over
    the next tile's columns): rows r and r + 4 of a warp's pairs share banks, 2 wavefronts per
    store, where the 64-column blocks of the other tiles take 1."""
    rep = bankops.explain("gemm", "swizzle", torch.bfloat16, m=1156, n=3712, k=1000, b_transposed=True, hopper=True)
    assert _kernels(rep) == {"gemm_wgmma"} and _tile(rep) == (128, 144), str(rep)
    assert [r["instruction"] for r in rep.rows] == [C_TMA], str(rep)
    assert _count(rep, C_TMA) == 8 * 144 // 8 * 2
    assert rep.rows[0]["per_instruction"] == 2.0 and rep.rows[0]["iterations"] == 260, str(rep)


def test_explain_tall_c_tile():
    """192 x 96 tiles (1536^3 x @ W.t(): 128 of them, three consumers) write each consumer's C
    tile as three 32-column blocks in TMA's 64-byte swizzle, one box each: conflict-free, where
    dense 192-byte rows would put rows r, r + 2, r + 4 and r + 6 of a warp's pairs on the same
    banks."""
    rep = bankops.explain("gemm", "swizzle", torch.bfloat16, m=1536, n=1536, k=1536, b_transposed=True, hopper=True)
    assert _kernels(rep) == {"gemm_wgmma"} and _tile(rep) == (192, 96), str(rep)
    assert [r["instruction"] for r in rep.rows] == [C_TMA], str(rep)
    assert _count(rep, C_TMA) == 12 * 96 // 8 * 2
    assert rep.conflicts == 0 and rep.rows[0]["iterations"] == 128, str(rep)


def tall_broad_key(a, b, **device):
    """The plan key of the call's 192 x 192 candidate."""
    (key,) = [c.key for c in bankops.gemm_route(a, b, **device).candidates if c.route.split()[1] == "192x192x64"]
    return key


def test_explain_tall_broad_c_tile():
    """192 x 192 tiles (1152x4096x1024: 132 of them, three consumers; the plan forced by its key)
    write each consumer's 64 x 192 through one 64-column block of the 128-byte swizzle, three
    passes of one box each: conflict-free."""
    a = torch.empty(1152, 1024, dtype=torch.bfloat16, device="meta")
    b = torch.empty(1024, 4096, dtype=torch.bfloat16, device="meta")
    with bankops.options(plan=tall_broad_key(a, b, num_sms=132, cc=90)):
        rep = bankops.explain("gemm", "swizzle", torch.bfloat16, m=1152, n=4096, k=1024, hopper=True)
    assert _kernels(rep) == {"gemm_wgmma"} and _tile(rep) == (192, 192), str(rep)
    assert [r["instruction"] for r in rep.rows] == [C_TMA], str(rep)
    assert _count(rep, C_TMA) == 12 * 192 // 8 * 2
    assert rep.conflicts == 0 and rep.rows[0]["iterations"] == 132, str(rep)


@pytest.mark.parametrize("b_t", [False, True], ids=["b", "b^T"])
def test_explain_thin_tile(b_t):
    """The thin tiles (64 x 128 and 64 x 64, one consumer warpgroup of 4 warps). 64 rows against
    a (14336, 4096) weight, unsplit (112 tiles of 128 columns): the C tile written as pairs and
    read back in 16-byte rows, conflict-free (40 rows: those read back). Against a (3072, 4096)
    weight split 5 ways (24 tiles: 120 blocks, where 48 of 64 columns split 2 ways fill 96): each
    block's partial tile stored as pairs, summed through the cluster once a tile, conflict-free;
    the 64 x 64 tile likewise."""
    rep = bankops.explain("gemm", "swizzle", torch.bfloat16, m=64, n=14336, k=4096, b_transposed=b_t, hopper=True)
    assert _tile(rep) == (64, 128) and fields(rep.route)["split"] == "1", str(rep)
    assert [r["instruction"] for r in rep.rows] == [C_PAIRS, C_ROWS], str(rep)
    assert _count(rep, C_PAIRS) == 4 * 128 // 8 * 2 and _count(rep, C_ROWS) == 64 * 128 // 8 // 32
    assert rep.conflicts == 0 and {r["iterations"] for r in rep.rows} == {112}, str(rep)
    rep = bankops.explain("gemm", "swizzle", torch.bfloat16, m=40, n=14336, k=4096, b_transposed=b_t, hopper=True)
    assert rep.rows[-1]["instruction"] == C_ROWS + EDGE and rep.rows[-1]["count"] == 112 * 20, str(rep)  # 40 of 64
    rep = bankops.explain("gemm", "swizzle", torch.bfloat16, m=64, n=3072, k=4096, b_transposed=b_t, hopper=True)
    assert _tile(rep) == (64, 128) and fields(rep.route)["split"] == "5", str(rep)
    assert [r["instruction"].split(" P")[0] for r in rep.rows] == ["st.shared.v2"] + ["ld.shared::cluster.v4"] * 2
    assert rep.conflicts == 0 and [r["iterations"] for r in rep.rows] == [120, 24, 24], str(rep)  # blocks, tiles
    # Against 1024 columns the 64 x 64 tile: 16 tiles split 8 ways fill 128 SMs, 64 x 128's 8 only 64.
    rep = bankops.explain("gemm", "swizzle", torch.bfloat16, m=64, n=1024, k=4096, b_transposed=b_t, hopper=True)
    assert _tile(rep) == (64, 64) and fields(rep.route)["split"] == "8", str(rep)
    assert rep.conflicts == 0 and [r["iterations"] for r in rep.rows] == [128, 16, 16], str(rep)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("m,n,k,bn", [(4096, 4096, 4093, 256), (4095, 4097, 4093, 128)], ids=["128x256", "128x128"])
def test_explain_realigned_stores(m, n, k, bn, dtype):
    """Rows off 16-byte boundaries: per k-tile the producers' warps store every chunk they
    cut in registers once (A 32 warp instructions, B BN / 4), conflict-free, beside the same
    epilogue; 128 x 128 tiles with two producer warpgroups, each warp's 32 lanes on 4 rows
    of 8 chunks as with one (the copy of misaligned operands switched off)."""
    with repack(False):
        rep = bankops.explain("gemm", "swizzle", dtype, m=m, n=n, k=k, hopper=True)
    assert _kernels(rep) == {"gemm_wgmma/realign"}, str(rep)
    assert _count(rep, "sts As[m][k] <- A (realigned)") == 32
    assert _count(rep, "sts Bs[k][n] <- B (realigned)") == bn // 4
    assert _tile(rep) == (128, bn)
    assert set(rep.totals) == {"ld", "st"}, str(rep)
    assert rep.conflicts == 0, str(rep)
    assert rep.rows[0]["iterations"] == -(-m // 128) * -(-n // bn) * -(-k // 64)


@pytest.mark.parametrize("b_t", [False, True], ids=["b", "b^T"])
@pytest.mark.parametrize("m,n,k,bn", [(4096, 4096, 4093, 256), (4095, 4097, 4093, 256), (1023, 1025, 509, 128),
                                      (1024, 1023, 1021, 64)], ids=["128x256", "misaligned", "128x128", "128x64"])
def test_explain_repacked(m, n, k, bn, b_t):
    """Misaligned rows copied into aligned ones: the kernel that runs on the copies is the
    aligned one (TMA, no shared-memory instruction of the warps but the epilogue's, at the
    aligned shape's tile), and the copy itself uses no shared memory. C's rows 16 bytes
    apart: persistent blocks, TMA stores of C. Odd N: a block a tile, whose epilogue reads the
    C tile an element a lane, lanes along a row, conflict-free too, and on the tiles that reach
    past C's last row or column only what lies inside C."""
    rep = bankops.explain("gemm", "swizzle", torch.bfloat16, m=m, n=n, k=k, b_transposed=b_t, hopper=True)
    assert _kernels(rep) == {"gemm_wgmma/repacked"}, str(rep)
    epilogue = [C_TMA] if n % 8 == 0 else [C_PAIRS, C_ELEMENTS, C_ELEMENTS + EDGE]
    assert [r["instruction"] for r in rep.rows] == epilogue, str(rep)
    assert fields(rep.route)["persistent"] == str(int(n % 8 == 0)), rep.route
    assert _tile(rep) == (128, bn)
    assert rep.conflicts == 0, str(rep)
    assert rep.rows[0]["iterations"] == -(-m // 128) * -(-n // bn), str(rep)
    if n % 8:  # the reads of the whole tiles, then those of the edge tiles, counted a launch at a time
        assert (rep.rows[1]["iterations"], rep.rows[2]["iterations"]) == ((m // 128) * (n // bn), 1), str(rep)


def launched_kernels(fn):
    """Names of the CUDA kernels fn() launches (None without a profiler: the route is then
    not checked)."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = [e.name for e in prof.events() if "bankops" in e.name]
    if not names:
        warnings.warn("the profiler recorded no bankops kernel: the route is not checked")
        return None
    return names


# Grids of 128 or more 128 x 256 tiles: whole tiles, m and n edges (one row past whole
# tiles too), a k tail of 8 past whole 64-wide k-tiles, k below one k-tile, more k-tiles than
# the 4-stage ring, batches that reach the tile count only together (200 one-tile matrices
# of a row or a few: every chunk an edge; matrices of 64 rows or fewer take the thin tile).
# The 128 x 128 tiles (grids of 128 or more, too few 128 x 256 ones): 8 k-tiles that wrap its
# 6-stage ring, m and n edges, a batch, one-row matrices (the thin tile).
WGMMA_SHAPES = [
    (None, 2048, 2048, 128), (None, 2040, 2056, 200), (None, 2049, 4096, 72), (None, 2048, 2048, 8),
    (4, 512, 2048, 520), (200, 1, 8, 8), (130, 33, 136, 40),
    (None, 1024, 2048, 456), (None, 2040, 1016, 200), (16, 256, 520, 72), (64, 3, 136, 24),
]
WGMMA_IDS = shape_ids(WGMMA_SHAPES)
WGMMA_VIEWS = [("contiguous", "contiguous"), ("contiguous", "transposed"), ("sliced", "sliced")]


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("persistent", [True, False], ids=["persistent", "block_a_tile"])
@pytest.mark.parametrize("batch,m,n,k", WGMMA_SHAPES, ids=WGMMA_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("views", WGMMA_VIEWS, ids="-".join)
def test_cuda_wgmma(views, dtype, batch, m, n, k, persistent):
    """Every shape on persistent blocks where its grid is more than a wave (C's rows are 16
    bytes apart in all of them) and, with the persistent option off, a block a tile."""
    with bankops.options(persistent=persistent):
        check_wgmma_call(views, dtype, batch, m, n, k, "gemm_wgmma", persistent=persistent)


# Persistent blocks that walk several tiles each, in clusters of 2 that share B's tiles: 561
# tiles of 128 x 256 with m and n edges and 3 k-tiles (the 4-stage ring wraps across tiles;
# 33 m tiles: the last cluster's second lies past C); 252 of 128 x 192 over 7 batches (a
# block's tiles in different batches; pairs where B is k-major); 260 of 128 x 128 with an n
# edge and 9 k-tiles (the 6-stage ring wraps inside a tile).
PERSISTENT_SHAPES = [(None, 4100, 4104, 136), (7, 700, 1000, 264), (None, 6600, 600, 520)]


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("batch,m,n,k", PERSISTENT_SHAPES, ids=shape_ids(PERSISTENT_SHAPES))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_persistent_walks_tiles(dtype, batch, m, n, k):
    """gemm and linear (bias in the epilogue, B = weight.t() k-major) on persistent blocks that
    take several tiles each, in pairs that share B (gemm's n-major B on 128 x 192 tiles: each
    block its own): the same bits as a block a tile on the same tile (128 x 192 runs persistent
    blocks only), and float64's values."""
    a = operand(m, k, batch, dtype, "contiguous")
    b = operand(k, n, batch, dtype, "contiguous")
    x = operand(m, k, batch, dtype, "contiguous")
    w = torch.randn(n, k, device="cuda").to(dtype)
    bias = torch.randn(n, device="cuda").to(dtype)
    line = bankops.gemm_route(a, b)
    broad = line.split()[1] == "128x192x64"
    assert fields(line)["persistent"] == "1" and int(fields(line)["blocks"]) == 132, line
    assert fields(line)["multicast"] == ("1" if broad else "2"), line
    assert fields(bankops.gemm_route(x.reshape(-1, k), w.t()))["multicast"] == "2"
    with bankops.options(split_k=False):  # whole tiles only (a split last wave sums in another order)
        got = bankops.gemm(a, b), bankops.linear(x, w, bias)
    with bankops.options(persistent=False):
        assert fields(bankops.gemm_route(a, b))["persistent"] == "0"
        want = bankops.gemm(a, b), bankops.linear(x, w, bias)
    if not broad:
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    check_against_float64(got[0], a, b)
    ref = x.double() @ w.double().t() + bias.double()
    bound = 2 * torch.finfo(torch.float32).eps * k ** 0.5 * (x.double().abs() @ w.double().abs().t() + 1)
    assert ((got[1].double() - ref).abs() <= bound + torch.finfo(dtype).eps * ref.abs()).all()


# Persistent walks whose ragged last wave runs on pairs of blocks, half of k each (route.h's
# wgmma_tail): 128 x 192 tiles over m, n and k edges with 17 k-tiles (halves a k-tile apart), in
# every operand major (pairs that share B where it is k-major); batches of 8, 4 and 3 m tiles;
# 128 x 144 in pairs; 128 x 256 in pairs and unpaired.
VIEW = {"c": "contiguous", "t": "transposed"}
TAIL_CASES = [((None, 2000, 2296, 1030), v) for v in ("cc", "tc", "tt")] + [((None, 1000, 4600, 1030), "ct"),
    ((2, 1024, 2304, 1032), "cc"), ((2, 1024, 2304, 1032), "tt"), ((2, 500, 4600, 1030), "ct"),
    ((3, 300, 4000, 1024), "tc"), ((None, 1408, 1728, 1024), "ct"), ((None, 4352, 4096, 1032), "cc"),
    ((None, 896, 7168, 1032), "tc")]
TAIL_IDS = [f"{i}-{v}" for i, (_, v) in zip(shape_ids([c[0] for c in TAIL_CASES]), TAIL_CASES)]


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("shape,views", TAIL_CASES, ids=TAIL_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_split_last_wave(dtype, shape, views):
    """The split last wave: the same bits on every call (each sum in the same order), float64's
    values (an element a pair leaves unwritten stays NaN), and with the split_k option off a walk of
    whole tiles. The model's plan where it splits its last wave, else a candidate that does, 128 x 192
    first (192 x 192 tiles, which never split one, take some of these grids in one wave)."""
    batch, m, n, k = shape
    a = operand(m, k, batch, dtype, VIEW[views[0]])
    b = operand(k, n, batch, dtype, VIEW[views[1]])
    model = bankops.gemm_route(a, b)
    tail = next(c for c in sorted(model.candidates, key=lambda c: (not c.chosen, c.route.fields["tile"] != "128x192x64"))
                if c.route.fields["family"] == "wgmma" and c.route.fields["tail"] > 0)
    with bankops.options(plan=tail.key):
        line = bankops.gemm_route(a, b)
        assert fields(line)["persistent"] == "1" and int(fields(line)["tail"]) > 0, line
        got = bankops.gemm(a, b)
        assert torch.equal(got, bankops.gemm(a, b))
        check_against_float64(got, a, b)
        check_route(lambda: bankops.gemm(a, b), fields(line)["repack"] != "none", True)  # k = 1030: rows copied first
    with bankops.options(plan=tail.key, split_k=False):
        assert fields(bankops.gemm_route(a, b))["tail"] == "0"
        check_against_float64(bankops.gemm(a, b), a, b)


def check_wgmma_call(views, dtype, batch, m, n, k, route, tile=None, persistent=None):
    """The call takes `route` (and the block tile `tile`, persistent blocks or not, when
    given) and matches float64."""
    a = operand(m, k, batch, dtype, views[0])
    b = operand(k, n, batch, dtype, views[1])
    rep = bankops.explain("gemm", "swizzle", dtype, m=m, n=n, k=k, batch=batch or 1,
                          b_transposed=views[1] == "transposed")
    assert _kernels(rep) == {route}, str(rep)
    assert tile is None or _tile(rep) == tile, str(rep)
    if persistent is not None:  # on: where the grid is more than a wave of 132 SMs, or 128 x 192, 144, 192 x 96
        bm, bn = _tile(rep)
        persistent = persistent and bm > 64 and ((batch or 1) * -(-m // bm) * -(-n // bn) > 132 or bn in (96, 144, 192))
        assert fields(rep.route)["persistent"] == str(int(persistent)), rep.route
    check_route(lambda: bankops.gemm(a, b), False, persistent)
    check_against_float64(bankops.gemm(a, b), a, b)


# The 128 x 192 tiles (persistent blocks only), where 128 x 256 ones end in a ragged wave: m and n
# edges with a k tail; batches; 2 k-tiles, the ring wrapping across 384 tiles.
WGMMA_BROAD_SHAPES = [(None, 2900, 3000, 1000), (2, 1500, 2000, 520), (None, 3000, 3064, 72)]


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("batch,m,n,k", WGMMA_BROAD_SHAPES, ids=shape_ids(WGMMA_BROAD_SHAPES))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("views", WGMMA_VIEWS, ids="-".join)
def test_cuda_wgmma_broad(views, dtype, batch, m, n, k):
    check_wgmma_call(views, dtype, batch, m, n, k, "gemm_wgmma", tile=(128, 192), persistent=True)


# The tiles for A and B k-major (persistent blocks), where wider ones leave SMs idle. 128 x 144:
# m and n edges with a k tail, in pairs; 7 m tiles, unpaired; 3 batches of 4 m tiles; 2 k-tiles,
# C's last tile column whole. 192 x 96 (three consumers, unpaired): m, n and k edges over 79
# k-tiles; batches of 4 x 4 x 8 and 2 x 8 x 8 tiles; 2 k-tiles; a walk of 255 tiles over 132
# blocks with m, n and k edges.
WGMMA_K_MAJOR_SHAPES = [((128, 144), s) for s in ((None, 1156, 3712, 1000), (None, 856, 2512, 1000),
                                                  (3, 456, 1512, 1000), (None, 1536, 1584, 72))] + \
                       [((192, 96), s) for s in ((None, 3000, 760, 5000), (4, 760, 760, 1000), (2, 1500, 760, 1000),
                                                 (None, 1500, 1536, 72), (None, 2768, 1600, 520))]


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("tile,shape", WGMMA_K_MAJOR_SHAPES,
                         ids=[f"{t[0]}x{t[1]}-" + shape_ids([s])[0] for t, s in WGMMA_K_MAJOR_SHAPES])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_wgmma_k_major_tiles(dtype, tile, shape):
    check_wgmma_call(("contiguous", "transposed"), dtype, *shape, "gemm_wgmma", tile=tile, persistent=True)


# The 192 x 192 tiles (three consumers of 64 x 192, persistent blocks), forced through their
# plan key: a wave of 132 tiles with m and n edges; a batch; 2 k-tiles with a k tail; walks of
# 256 tiles over 132 blocks, 16 k-tiles (the 4-stage ring wraps within a tile) and 3 (across tiles).
WGMMA_TALL_BROAD_SHAPES = [(None, 1150, 4088, 1000), (2, 1000, 1904, 520), (None, 1540, 1544, 72),
                           (None, 2900, 3000, 1000), (None, 3000, 3064, 136)]
WGMMA_MAJOR_VIEWS = [("contiguous", "contiguous"), ("contiguous", "transposed"), ("transposed", "contiguous"),
                     ("transposed", "transposed"), ("sliced", "sliced")]


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("batch,m,n,k", WGMMA_TALL_BROAD_SHAPES, ids=shape_ids(WGMMA_TALL_BROAD_SHAPES))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("views", WGMMA_MAJOR_VIEWS, ids="-".join)
def test_cuda_wgmma_tall_broad(views, dtype, batch, m, n, k):
    """Every operand major on 192 x 192 tiles (k-major B in pairs sharing it where the plan pairs
    them; an m-major A of rows off 16 bytes copied first), against float64, the same bits on a
    second call; linear's bias in their epilogue."""
    a = operand(m, k, batch, dtype, views[0])
    b = operand(k, n, batch, dtype, views[1])
    with bankops.options(plan=tall_broad_key(a, b)):
        line = bankops.gemm_route(a, b)
        assert line.split()[1] == "192x192x64" and fields(line)["persistent"] == "1", line
        check_route(lambda: bankops.gemm(a, b), views[0] == "transposed" and m % 8 != 0, True)
        got = bankops.gemm(a, b)
        assert torch.equal(got, bankops.gemm(a, b))
    check_against_float64(got, a, b)
    if batch is None and views == ("contiguous", "transposed"):
        w, bias = b.t(), torch.randn(n, device="cuda").to(dtype)
        with bankops.options(plan=tall_broad_key(a, b)):
            y = bankops.linear(a, w, bias)
        ref = a.double() @ w.double().t() + bias.double()
        bound = 2 * torch.finfo(torch.float32).eps * k ** 0.5 * (a.double().abs() @ w.double().abs().t() + 1)
        assert ((y.double() - ref).abs() <= bound + torch.finfo(dtype).eps * ref.abs()).all()


# The 128 x 64 tiles (grids of 128 or more, too few 128 x 128 ones): 1024^3; m and n edges
# with a k tail; k below one k-tile; a batch; 80-row matrices whose second tile holds 8
# columns (17-row ones take the thin tile). (65 k-tiles that wrap the 8-stage ring:
# test_cuda_wgmma_narrow_long_k.)
WGMMA_NARROW_SHAPES = [
    (None, 1024, 1024, 1024), (None, 1000, 1000, 1032), (None, 1024, 1024, 24), (4, 512, 512, 1024),
    (64, 80, 72, 520),
]
WGMMA_NARROW_IDS = shape_ids(WGMMA_NARROW_SHAPES)


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("batch,m,n,k", WGMMA_NARROW_SHAPES, ids=WGMMA_NARROW_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("views", WGMMA_VIEWS, ids="-".join)
def test_cuda_wgmma_narrow(views, dtype, batch, m, n, k):
    check_wgmma_call(views, dtype, batch, m, n, k, "gemm_wgmma", tile=(128, 64))


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("views", WGMMA_VIEWS, ids="-".join)
def test_cuda_wgmma_narrow_long_k(views, dtype):
    """65 k-tiles that wrap the 8-stage ring, unsplit (a split would take 128 x 128 tiles)."""
    with bankops.options(split_k=False):
        check_wgmma_call(views, dtype, None, 1024, 1024, 4160, "gemm_wgmma", tile=(128, 64))


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_wgmma_expanded_batch(dtype):
    """B broadcast over the batch (batch stride 0), and the wgmma switch off and on again."""
    a = torch.randn(128, 64, 40, device="cuda").to(dtype)
    b = torch.randn(1, 40, 264, device="cuda").to(dtype).expand(128, 40, 264)
    check_route(lambda: bankops.gemm(a, b), False)
    check_against_float64(bankops.gemm(a, b), a, b)
    kernels = launched_kernels(lambda: gemm(a, b, "swizzle/mma.sync"))
    assert kernels is None or all("::mma_kernel<" in name for name in kernels), kernels
    check_against_float64(gemm(a, b, "swizzle/mma.sync"), a, b)


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_wgmma_broadcast_rows(dtype):
    """A row broadcast down A (row stride 0) has 16-byte aligned rows but no tensor map: the
    call keeps the mma.sync kernel, and its result."""
    a = torch.randn(1, 72, device="cuda").to(dtype).expand(2048, 72)
    b = torch.randn(72, 2048, device="cuda").to(dtype)
    kernels = launched_kernels(lambda: bankops.gemm(a, b))
    assert kernels is None or all("::mma_kernel<" in name for name in kernels), kernels
    check_against_float64(bankops.gemm(a, b), a, b)


# The realigning producer (rows off 16-byte boundaries, B row-major), on grids of whole waves
# (wgmma_whole_waves): odd K (every row offset in A), odd N too with m / n edges, a batch
# whose 9 k-tiles wrap the ring, one-tile matrices of a row or a few (every chunk an edge: K
# and the matrix's bytes both end inside a chunk), and data pointers at odd offsets. The last
# two take 128 x 128 tiles with two producers (one wave of them, too few 128 x 256 ones): odd
# m, n and K with 9 k-tiles that wrap its 6-stage ring, and a batch of one-tile-row matrices.
# With the copy on, the matrices of 256 x 256 or more are copied into aligned rows first
# (their bits: the pad layout's, as every route's).
WGMMA_REALIGN_SHAPES = [
    (None, 2048, 4096, 77), (None, 2047, 4095, 130), (4, 512, 2048, 519), (250, 1, 9, 9), (130, 33, 137, 41),
    (None, 1407, 1535, 519), (12, 128, 1408, 67),
]
WGMMA_REALIGN_IDS = shape_ids(WGMMA_REALIGN_SHAPES)


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("batch,m,n,k", WGMMA_REALIGN_SHAPES, ids=WGMMA_REALIGN_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("off_a,off_b", [(0, 0), (1, 3), (7, 6)], ids=["offsets0-0", "offsets1-3", "offsets7-6"])
@pytest.mark.parametrize("copy", [False, True], ids=["realign", "repack"])
def test_cuda_wgmma_realign(copy, off_a, off_b, dtype, batch, m, n, k):
    copied = copy and m >= 256 and n >= 256
    a = offset_operand(m, k, batch, dtype, off_a)
    b = offset_operand(k, n, batch, dtype, off_b)
    with repack(copy):
        if (off_a, off_b) == (0, 0):
            rep = bankops.explain("gemm", "swizzle", dtype, m=m, n=n, k=k, batch=batch or 1)
            assert _kernels(rep) == {"gemm_wgmma/repacked" if copied else "gemm_wgmma/realign"}, str(rep)
        check_route(lambda: bankops.gemm(a, b), copied)
        got = bankops.gemm(a, b)
    check_against_float64(got, a, b)
    if copied:
        assert torch.equal(got.view(torch.int16), bankops.gemm(a, b, "pad").view(torch.int16))


def check_route(fn, copied, persistent=None):
    """fn() launches the Hopper kernel (its persistent form or a block a tile, when given),
    after one copy kernel if `copied`."""
    kernels = launched_kernels(fn)
    if kernels is None:
        return
    forms = {None: ("::wgmma_kernel<", "::wgmma_persistent_kernel<"), True: ("::wgmma_persistent_kernel<",),
             False: ("::wgmma_kernel<",)}[persistent]
    assert all(any(f in name for f in forms) or "repack_rows_kernel" in name for name in kernels), kernels
    assert sum("repack_rows_kernel" in name for name in kernels) == int(copied), kernels


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(None, 1023, 4095, 67), (2, 1023, 2047, 35)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("copy", [False, True], ids=["realign", "repack"])
def test_cuda_wgmma_realign_exact_allocations(copy, shape, dtype):
    """Operands that end where their allocations do (under compute-sanitizer memcheck, which
    runs without the caching allocator): A starts 2 bytes past its allocation's start, B at
    its own, and the aligned 16 bytes under their last rows' tails reach past both ends: the
    realigning producer, or the copy, must read those element by element."""
    batch, m, n, k = shape
    lead = () if batch is None else (batch,)
    a = torch.randn((batch or 1) * m * k + 1, device="cuda").to(dtype)[1:].view(*lead, m, k)
    b = torch.randn(*lead, k, n, device="cuda").to(dtype)
    with repack(copy):
        check_route(lambda: bankops.gemm(a, b), copy)
        got = bankops.gemm(a, b)
    check_against_float64(got, a, b)


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", ["sliced-transposed", "broadcast-batch", "only-b", "offset-batch"])
def test_cuda_wgmma_repacked_views(case, dtype):
    """The copy takes views as they are: A a slice starting mid-row with rows K + 3 apart and
    B^T of odd K (its rows n, k contiguous); a batch of misaligned A beside B broadcast over
    it (batch stride 0: one batch copied); an aligned A beside a misaligned B (only B is
    copied); batches whose data starts 1 and 3 elements in and whose matrices are M K and K N
    elements apart, off 16 bytes. Bits as pad's."""
    make = lambda *s: torch.randn(*s, device="cuda").to(dtype)  # noqa: E731
    m, n, k = 1030, 1100, 517
    if case == "sliced-transposed":
        a, b = make(m, k + 3)[:, 1 : k + 1], make(n, k).t()
    elif case == "broadcast-batch":
        a, b = make(3, m, k), make(1, k, n + 1)[..., :n].expand(3, k, n)
    elif case == "only-b":
        a, b = make(m, 520)[:, :k], make(k, n + 1)  # A's rows 16-byte aligned, B's 1101 halves apart
    else:
        a, b = make(2 * m * k + 1)[1:].view(2, m, k), make(2 * k * n + 3)[3:].view(2, k, n)
    check_route(lambda: bankops.gemm(a, b), True)
    got = bankops.gemm(a, b)
    check_against_float64(got, a, b)
    assert torch.equal(got.view(torch.int16), bankops.gemm(a, b, "pad").view(torch.int16))


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("n", [1024, 2048], ids=["128x64", "128x256"])
def test_cuda_wgmma_back_to_back(n):
    """Programmatic dependent launch: each call may be scheduled while the one before it still
    runs, so every global read and write must wait for it. A chain of calls, each reading the
    one before's output, queued with no sync gives the bits of the same calls run one at a time."""
    a = torch.randn(n, n, device="cuda").half()
    b = (torch.randn(n, n, device="cuda") / n**0.5).half()  # keeps the chain's magnitudes
    assert _kernels(bankops.explain("gemm", "swizzle", torch.float16, m=n, n=n, k=n)) == {"gemm_wgmma"}
    one_at_a_time = [a]
    for _ in range(4):
        one_at_a_time.append(bankops.gemm(one_at_a_time[-1], b))
        torch.cuda.synchronize()
    chained = [a]
    for _ in range(4):
        chained.append(bankops.gemm(chained[-1], b))
    torch.cuda.synchronize()
    for got, want in zip(chained[1:], one_at_a_time[1:]):
        assert torch.equal(got, want)
    assert one_at_a_time[-1].abs().max() > 0.1  # the chain did not decay to zeros


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_repack_without_scratch_memory(dtype, capfd):
    """The copies of misaligned operands take as much memory as both operands. Where the
    caching allocator cannot give it (a memory fraction with room for the output only), the
    call takes the route that needs none (the realigning producer: the route with the copy
    switched off, and its bits) and says so in a warning, instead of raising."""
    m, n, k = 4096, 4096, 4095
    a, b = offset_operand(m, k, None, dtype, 1), offset_operand(k, n, None, dtype, 3)
    assert "repack=a,b" in bankops.gemm_route(a, b)
    with repack(False):
        want = bankops.gemm(a, b)
    with torch_warns(capfd, r"no memory for the \d+ bytes of scratch.*fallback=no_scratch"):
        got = with_room_for(m * n * 2 + (8 << 20), lambda: bankops.gemm(a, b))  # the output, not the 64 MB of copies
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case", ["tma", "repacked"])
def test_cuda_tma_refused_falls_back(case, dtype, capfd):
    """Where the driver refuses a tensor map (bankops.options(refuse_tma=True) acts as if it
    did), the launcher has launched nothing, not even the copies, and the call runs the route
    without TMA, with a warning naming it (every time): aligned operands on mma.sync, misaligned ones
    through the realigning producer; the bits of those routes."""
    if case == "tma":
        a, b = operand(1024, 1024, None, dtype, "contiguous"), operand(1024, 1024, None, dtype, "transposed")
        want = gemm(a, b, "swizzle/mma.sync")
    else:
        a, b = offset_operand(1030, 517, None, dtype, 1), offset_operand(517, 1100, None, dtype, 3)
        with repack(False):
            want = bankops.gemm(a, b)
    assert bankops.gemm_route(a, b).startswith("wgmma") and "producer=tma" in bankops.gemm_route(a, b)
    with bankops.options(refuse_tma=True):
        kernels = launched_kernels(lambda: bankops.gemm(a, b))
        with torch_warns(capfd, r"refused the Hopper kernel's tensor maps.*fallback=no_tma"):
            got = bankops.gemm(a, b)
    assert kernels is None or not any("repack_rows_kernel" in name for name in kernels), kernels
    if case == "tma":
        assert kernels is None or all("::mma_kernel<" in name for name in kernels), kernels
    assert torch.equal(got.view(torch.int16), want.view(torch.int16))


def _layout_cases():
    """[M, N, K] of the bench's 16-bit squares and misaligned shapes, and a Linear layer's
    three products (x @ W.t(), dy @ W, dy.t() @ x) at two of the bench's model shapes."""
    cases = [("square", s) for s in [(8192, 8192, 8192), (4096, 4096, 4096), (1536, 1536, 1536), (1024, 1024, 1024),
                                     (4095, 4097, 4093), (8191, 8193, 8189)]]
    for tokens, d_in, d_out in [(4096, 1024, 4096), (16384, 768, 3072)]:
        cases += [("x@W.t()", (tokens, d_out, d_in)), ("dy@W", (tokens, d_in, d_out)), ("dy.t()@x", (d_out, d_in, tokens))]
    return cases


LAYOUT_CASES = _layout_cases()


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("case,shape", LAYOUT_CASES, ids=[f"{c}-{'x'.join(map(str, s))}" for c, s in LAYOUT_CASES])
def test_cuda_layouts_give_the_same_bits(case, shape, dtype):
    """swizzle runs the Hopper kernel (wgmma) where none and pad run mma.sync. Both add the
    k-tiles into float32 accumulators in k order, but how the tensor cores add the products
    inside an instruction is not documented: this test, on the bench's shapes and a Linear
    layer's operand majors, is the evidence for the README's claim that the layouts give the
    same bits, except where the Hopper kernel splits k across a cluster (split=, or its last
    wave's tiles: tail=) and mma.sync does not (its partial sums add in another order: there the
    layouts agree to rounding)."""
    m, n, k = shape
    make = lambda *s: torch.randn(*s, device="cuda").to(dtype)  # noqa: E731
    if case == "x@W.t()":
        a, b = make(m, k), make(n, k).t()
    elif case == "dy.t()@x":
        a, b = make(k, m).t(), make(k, n)
    else:
        a, b = make(m, k), make(k, n)
    got = {layout: bankops.gemm(a, b, layout) for layout in ("none", "pad", "swizzle")}
    line = bankops.gemm_route(a, b)
    assert line.startswith("wgmma"), line
    for layout in ("none", "pad"):
        if fields(line)["split"] != fields(bankops.gemm_route(a, b, layout))["split"] or fields(line)["tail"] != "0":
            scale = float(got["swizzle"].abs().max())
            torch.testing.assert_close(got[layout], got["swizzle"], rtol=2e-2, atol=2e-2 * scale)
            continue
        same = got[layout].view(torch.int16) == got["swizzle"].view(torch.int16)
        assert same.all(), f"{layout} vs swizzle: {int((~same).sum())} of {same.numel()} elements differ"


# The thin tiles (64 x 128 and 64 x 64, one consumer warpgroup; wgmma_plan.h's
# wgmma_thin_candidates): a few rows against a weight, split across a cluster where its tiles
# alone leave SMs idle, the width that fills more SMs first.
THIN = ("wgmma 64x128x64", "wgmma 64x64x64")


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("b_view", ["contiguous", "transposed"])
@pytest.mark.parametrize("k,n", [(1032, 13000), (2048, 4200)], ids=["unsplit", "split"])
def test_cuda_thin_every_m(k, n, dtype, b_view):
    """Every m from 1 to 65 against a (k, n) B: 13000 columns (102 n tiles of 128, the last of
    72 columns; 16 k-tiles and a tail of 8) on the thin tile unsplit up to 64 rows (16 rows or
    fewer: the few-rows kernel, x @ W in its KN form); 4200 from 33 rows (fewer: mma.sync's split tiles),
    split: on an H100 66 tiles of 64 columns 2 ways (132 blocks) before 33 of 128 3 ways;
    float64's values, the same bits every run."""
    b = operand(k, n, None, dtype, b_view)
    for m in range(1, 66):
        a = operand(m, k, None, dtype, "contiguous")
        line = bankops.gemm_route(a, b)
        if m > 32 or (n == 13000 and m > 16):
            assert line.startswith(THIN) == (m <= 64), line
            assert m > 64 or (int(fields(line)["split"]) > 1) == (n == 4200), line
        elif n == 13000 and m <= 16:
            assert line.startswith("rows ") and ("b=kn" in line) == (b_view == "contiguous"), line
        got = bankops.gemm(a, b)
        check_against_float64(got, a, b)
        assert torch.equal(got, bankops.gemm(a, b)), ("the same bits every run", line)


# k under one k-tile (102 tiles, unsplit); a k tail past 32 k-tiles (112 tiles); batches of x
# against batched B (99 and 112 tiles); 32 tiles split, with a k tail; 2 batches of 16 tiles, split.
THIN_SHAPES = [(None, 48, 13000, 40), (None, 33, 14336, 2056), (3, 20, 4200, 1024), (16, 64, 896, 512),
               (None, 40, 4096, 2056), (2, 64, 2048, 1024)]


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("batch,m,n,k", THIN_SHAPES, ids=shape_ids(THIN_SHAPES))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("views", WGMMA_VIEWS, ids="-".join)
def test_cuda_wgmma_thin(views, dtype, batch, m, n, k):
    """The call on the thin tile its route takes, then on each thin tile forced by its plan's key
    (split as its plan splits): float64's values, the same bits every run."""
    check_wgmma_call(views, dtype, batch, m, n, k, "gemm_wgmma", persistent=False)
    a, b = operand(m, k, batch, dtype, views[0]), operand(k, n, batch, dtype, views[1])
    assert bankops.gemm_route(a, b).startswith(THIN), bankops.gemm_route(a, b)
    assert torch.equal(bankops.gemm(a, b), bankops.gemm(a, b)), "the same bits every run"
    thin = [c for c in bankops.gemm_route(a, b).candidates if c.route.startswith(THIN)]
    assert thin, bankops.gemm_route(a, b).candidates
    for c in thin:
        with bankops.options(plan=c.key):
            assert str(bankops.gemm_route(a, b)) == c.route
            got = bankops.gemm(a, b)
            check_against_float64(got, a, b)
            assert torch.equal(got, bankops.gemm(a, b)), ("the same bits every run", c.route)


@requires_cuda
@requires_hopper
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cuda_thin_linear_and_broadcast(dtype):
    """bankops.linear's bias, added once in the split sums (48 rows against a (4200, 2048)
    weight: 33 tiles, split), and a batch of x against one weight (a B batch stride of 0; 99
    tiles, unsplit)."""
    x = torch.randn(2, 24, 2048, device="cuda").to(dtype)
    w = torch.randn(4200, 2048, device="cuda").to(dtype)
    bias = torch.randn(4200, device="cuda").to(dtype)
    line = bankops.gemm_route(x.reshape(48, 2048), w.t())
    assert line.startswith(THIN) and int(fields(line)["split"]) > 1, line
    got = bankops.linear(x, w, bias)
    ref = x.double() @ w.double().t() + bias.double()
    bound = 2 * torch.finfo(torch.float32).eps * 2048 ** 0.5 * (x.double().abs() @ w.double().abs().t() + 1)
    assert ((got.double() - ref).abs() <= bound + torch.finfo(dtype).eps * ref.abs()).all()
    xs, wb = torch.randn(3, 20, 2048, device="cuda").to(dtype), w.t().expand(3, 2048, 4200)
    assert bankops.gemm_route(xs, wb).startswith(THIN)
    check_against_float64(bankops.gemm(xs, wb), xs, wb)
