"""The few-rows kernel (kernels/gemm/rows.h, rows.cu): x (M, K) @ W.t(), and in float32 x @ W too, for M up
to 32 in float32 (64 below compute capability 9.0, blocks of 32 rows) and 16 in 16 bits, the weight streamed
once, into registers for FFMA (float32; 16-bit up to 4 rows) or through a ring in shared memory (float32's x @ W
and 16-row blocks of x @ W.t(); mma.sync's 16-bit products), split-K across a cluster on compute capability
9.0; 33-64 float32 rows there take the FFMA kernel's 64-row tiles split across a cluster; 16-bit x @ W through
mma.sync's KN form, a plan only a table or an option runs: every M, views and batches, the bias, the same bits
every run and on every layout, where the route sends it, and, each call launched early with its weight
prefetched (options.prefetch), chains of calls that read what the call before wrote."""
import pytest
import torch

import bankops
from conftest import LAYOUTS, assert_chain_reads_what_came_before, requires_cuda
from test_gemm_majors import check, operand
from test_gemm_route import A100, BF16, F16, F32, H100, fields, meta, route
from test_gemm_split import H100_ROOM


def rows_of(line):
    return line.split()[0] == "rows", int(fields(line).get("split", 1))


@pytest.mark.parametrize("dtype,m,tile", [(F32, 1, "1x32x256"), (F32, 3, "4x32x256"), (F32, 12, "16x32x256 ring"),
                                          (F32, 32, "32x32x256"), (BF16, 1, "1x32x512"), (F16, 4, "4x32x512"),
                                          (BF16, 5, "8x64x256"), (BF16, 9, "16x64x256"), (F16, 16, "16x64x256")])
def test_route(dtype, m, tile):
    """x @ W.t(): float32's weight into registers, but through the ring in blocks of 16 rows."""
    line = route(meta(m, 4096, dtype=dtype), meta(4096, 4096, dtype=dtype).t())
    tile, ring = tile.split()[0], tile.endswith("ring")
    assert line.startswith(f"rows {tile} a=mk b=nk {'ring ' if ring else ''}split="), line
    assert rows_of(route(meta(m, 4096, dtype=dtype), meta(4096, 4096, dtype=dtype).t(), device=A100)) == (True, 1)


@pytest.mark.parametrize("m,split", [(1, 2), (8, 2), (16, 2), (32, 1)])
def test_route_weight_along_n(m, split):
    """float32's x @ W with W stored (K, N): the FFMA kernel reads the weight along n (b=kn)
    through the ring, 32 columns a block, split 2 ways where 128 blocks of up to 16 rows (two an
    SM) would leave SMs idle."""
    line = route(meta(m, 4096, dtype=F32), meta(4096, 4096, dtype=F32), device=(*H100, H100_ROOM))
    tm = min(32, 1 << (m - 1).bit_length())
    assert line.startswith(f"rows {tm}x32x256 a=mk b=kn ring split={split} "), line
    assert fields(line)["blocks"] == str(128 * split), line


@pytest.mark.parametrize("w_kn", [False, True])
@pytest.mark.parametrize("m", [33, 48, 64])
def test_route_33_to_64_rows(m, w_kn):
    """33-64 float32 rows: on compute capability 9.0 the FFMA kernel's 64-row tiles, k split
    across a cluster (64 x 64, or 64 x 256 where its split grid keeps 1.5 blocks an SM: a
    (4096, 14336) weight); below it the few-rows kernel's two blocks of 32 side by side, where
    64x64 tiles would leave SMs idle (the blocks of 64x64 cover the weight's 4096 columns: 64)."""
    for (k, n), cfg in (((4096, 4096), "64x64x8 small"), ((4096, 14336), "64x256x8 flat"),
                        ((14336, 4096), "64x64x8 small")):
        w = meta(k, n, dtype=F32) if w_kn else meta(n, k, dtype=F32).t()
        line = route(meta(m, k, dtype=F32), w, device=(*H100, H100_ROOM))
        assert line.startswith(f"ffma {cfg} a=kvec b={'xasync' if w_kn else 'kvec'}"), line
        split, bn = int(fields(line)["split"]), int(cfg.split("x")[1])
        assert split > 1 and fields(line)["blocks"] == str(n // bn * split), line
        assert bn == 64 or 2 * int(fields(line)["blocks"]) >= 3 * 132, line
    line = route(meta(m, 4096, dtype=F32), meta(4096, 4096, dtype=F32) if w_kn else meta(4096, 4096, dtype=F32).t(),
                 device=A100)
    assert line.startswith(f"rows 32x32x256 a=mk b={'kn ring' if w_kn else 'nk'} split=1"), line
    assert fields(line)["blocks"] == "256", line


def test_mma_rows_split_to_one_block_an_sm():
    """mma.sync's few-rows splits count one block an SM, which takes the deep ring (4 stages of
    swizzled windows): 8 or 16 rows of a (4096, 4096) or (4096, 14336) weight split 2 ways (128
    blocks). A (14336, 4096) weight's 224 blocks run unsplit on the shallow ring, two blocks an
    SM (3 stages at 8 rows, 2 at 16), all resident. float32 counts its two blocks an SM."""
    dev = (*H100, H100_ROOM)
    for m, deep, shallow in ((8, 4, 3), (16, 4, 2)):
        for (n, k), split, stages in (((4096, 4096), 2, deep), ((4096, 14336), 2, deep), ((14336, 4096), 1, shallow)):
            line = route(meta(m, k, dtype=BF16), meta(n, k, dtype=BF16).t(), device=dev)
            assert rows_of(line) == (True, split) and fields(line)["blocks"] == str(n // 64 * split), line
            assert fields(line)["stages"] == str(stages), line
    f32 = route(meta(8, 4096, dtype=F32), meta(4096, 4096, dtype=F32).t(), device=dev)
    assert rows_of(f32) == (True, 2) and "stages" not in fields(f32), f32


def test_route_leaves_what_it_does_not_take():
    w = meta(4096, 4096, dtype=F32)
    assert route(meta(65, 4096, dtype=F32), w.t()).startswith("ffma"), "more rows than two blocks of 32"
    assert route(meta(65, 4096, dtype=F32), w).startswith("ffma")
    assert route(meta(33, 4096, dtype=F32), meta(14336, 4096, dtype=F32).t()).startswith("ffma"), "64x64 fill the SMs"
    assert route(meta(64, 4096, dtype=F32), meta(4096, 8448, dtype=F32)).startswith("ffma"), "132 blocks of 64x64"
    assert route(meta(64, 4096, dtype=F32), meta(4096, 6912, dtype=F32), device=A100).startswith("ffma"), "108 blocks"
    assert route(meta(64, 4096, dtype=F32), meta(4096, 6848, dtype=F32), device=A100).startswith("rows"), "107 blocks"
    assert not route(meta(17, 4096, dtype=BF16), meta(4096, 4096, dtype=BF16).t()).startswith("rows"), "16-bit: 17+"
    assert route(meta(4, 4096, dtype=BF16), meta(4096, 4096, dtype=BF16)).startswith("rows 8x64x256 a=mk b=kn split=")
    assert not route(meta(4, 4096, dtype=BF16), meta(4096, 4096, dtype=BF16), device=A100).startswith("rows"), "16-bit KN"
    assert route(meta(4, 4096, dtype=F32), meta(4096, 4100, dtype=F32)[:, :4094]).startswith("ffma"), "n: whole quads"
    assert route(meta(4, 4096, dtype=F32), meta(4096, 4099, dtype=F32)[:, :4096]).startswith("ffma"), "rows off 16 B"
    assert route(meta(4, 4096, dtype=F32).t().contiguous().t(), w).startswith("ffma"), "x: k contiguous"
    assert route(meta(4, 4095, dtype=F32), meta(4096, 4095, dtype=F32).t()).startswith("ffma"), "rows off 16 bytes"
    assert route(meta(4, 4096, dtype=torch.float64), meta(4096, 4096, dtype=torch.float64).t()).startswith("ffma")
    assert route(meta(4, 128, dtype=F32), meta(4096, 128, dtype=F32).t()).startswith("ffma"), "k below a window"
    # k off whole 16-byte vectors, rows still 16-byte aligned (slices of wider rows; one row of x
    # has no row stride): a vector load would take elements past k
    for dtype, k in [(F32, 4094), (BF16, 4092), (F16, 1030)]:
        wk = meta(4096, 4104, dtype=dtype)[:, :k]
        assert not route(meta(1, 4104, dtype=dtype)[:, :k], wk.t()).startswith("rows"), (dtype, k)
        assert not route(meta(4, 4104, dtype=dtype)[:, :k], wk.t()).startswith("rows"), (dtype, k)
    with bankops.options(split_k=False):
        assert route(meta(4, 4096, dtype=F32), w.t()).startswith("ffma")


def test_explain_partial_tile_per_layout():
    """The warps' sums meet by halving exchanges (each lane keeps half of what it holds and adds its
    partner's copy), and each lane stores the sums it ends with: a store a warp covers 8 rows of
    x by its 4 weight rows. The partial tile's 32-float rows put those on 4 banks under none
    (8-way); pad and swizzle spread them over 16 (2-way). Past 32 sums a lane stores several."""
    for m, stores in ((8, 1), (32, 4)):
        for layout, ways in (("none", 8), ("pad", 2), ("swizzle", 2)):
            rep = bankops.explain("gemm", layout, F32, m=m, n=4096, k=4096, b_transposed=True)
            assert rep.route.startswith(f"rows {m}x32x256"), rep.route
            store = [r for r in rep.rows if r["instruction"].startswith("st.shared P")]
            assert len(store) == 1 and store[0]["count"] == 8 * stores, (m, layout, store)  # 8 warps
            assert store[0]["ideal"] == store[0]["count"], (m, layout, store)
            assert store[0]["wavefronts"] == ways * store[0]["ideal"], (m, layout, store)
    one = bankops.explain("gemm", "none", F32, m=1, n=4096, k=4096, b_transposed=True)
    store = [r for r in one.rows if r["instruction"].startswith("st.shared P")][0]
    assert store["count"] == store["wavefronts"] == 8, store  # 4 sums a warp, 4 lanes: no conflict


def test_explain_weight_along_n():
    """x @ W in float32: lane (q, c) copies and reads 16 bytes of 4 weight rows a round (a warp
    four whole 128-byte rows of the dense window), reads x's 16 bytes at k 4q.. of each row (a
    warp's four q lanes 64 contiguous bytes, one wavefront), the warps lay their sums in a dense
    tile (32 consecutive columns a store), and the sums are added in warp order into the partial
    tile along its rows: every layout conflict-free, 2 rounds of 4 weight rows and 8 rows of x a
    window, 8 sums a warp, each element's 8 warps read once."""
    m, n, k = 8, 4096, 4096
    for layout in LAYOUTS:
        rep = bankops.explain("gemm", layout, F32, m=m, n=n, k=k)
        assert rep.route.startswith("rows 8x32x256 a=mk b=kn"), rep.route
        rows = {r["instruction"].split(" <-")[0].split(" ->")[0]: r for r in rep.rows}
        assert rows["lds.128 x window"]["count"] == 8 * 2 * m  # 8 warps, 2 rounds of m rows
        assert rows["ldgsts w window"]["count"] == rows["lds.128 w window"]["count"] == 8 * 2 * 4
        assert rows["st.shared sums"]["count"] == 8 * m
        assert rows["ld.shared sums"]["count"] == 8 * m * 32 // 256 * 8  # 8 warps' sums of m x 32 elements
        assert rows["st.shared P"]["count"] == 8 * m * 32 // 256
        for name in ("ldgsts w window", "lds.128 w window", "lds.128 x window", "st.shared sums", "ld.shared sums",
                     "st.shared P"):
            assert rows[name]["wavefronts"] == rows[name]["ideal"], (layout, rows[name])
        assert rows["lds.128 x window"]["iterations"] == n // 32 * (k // 256)


def test_explain_weight_along_k_ring():
    """x @ W.t() in float32, 16 rows: the ring takes the weight's window, a warp copying 512
    contiguous bytes of a row (4 wavefronts, any layout but pad, whose 16-byte shifted rows
    straddle lines), and lane (q, c) reads 16 bytes at k 4q.. of rows c, c + 8, ..: 8 rows a
    phase, 1 KB apart, on the same banks under none (8-way); pad's 16 bytes a row and
    swizzle's XOR spread them. x's reads and the sums as along n."""
    m, n, k = 16, 4096, 4096
    for layout, ways in (("none", 8), ("pad", 1), ("swizzle", 1)):
        rep = bankops.explain("gemm", layout, F32, m=m, n=n, k=k, b_transposed=True)
        assert rep.route.startswith("rows 16x32x256 a=mk b=nk ring"), rep.route
        rows = {r["instruction"].split(" <-")[0].split(" ->")[0]: r for r in rep.rows}
        cw, lw = rows["ldgsts w window"], rows["lds.128 w window"]
        assert cw["count"] == 8 * 32 * 64 // 256 and lw["count"] == 8 * 2 * 4  # 32 rows x 64 chunks; 2 rounds x 4
        assert lw["wavefronts"] == ways * lw["ideal"], (layout, lw)
        if layout != "pad":
            assert cw["wavefronts"] == cw["ideal"], (layout, cw)
        for name in ("lds.128 x window", "st.shared sums", "ld.shared sums", "st.shared P"):
            assert rows[name]["wavefronts"] == rows[name]["ideal"], (layout, rows[name])
        assert rows["lds.128 x window"]["count"] == 8 * 2 * m


@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_explain_stages_x_by_windows(dtype):
    """The rows of x go through shared memory a window at a time: explain lists the cp.async of
    each window (16 bytes a thread) and the warps' 16-byte reads, once per window of every
    block; 16-bit stages the weight's window (64 rows of 512 bytes) the same way, and reads
    it as it reads x. float32's warps read 512 contiguous bytes of a row (conflict-free on any
    layout); 16-bit's lanes (g, t) read rows g and g + 8 at k 8t.. of each 32-k chunk, two
    rows an 8-lane phase: pad and swizzle are conflict-free, none takes two wavefronts where
    one would do. pad's odd rows start 64 bytes past a 128-byte line, and the bank model
    charges a copy there a second wavefront per global line, as the probe of plain cp.async
    measures (its copies in half again; bench/results/<gpu>.md's Nsight Compute table has what
    Nsight Compute counts in this kernel)."""
    m, n, k = 8, 4096, 4096
    window, bn = (256, 32) if dtype == F32 else (256, 64)
    reads = 8 * 2 * m if dtype == F32 else 8 * 8  # a window: each warp's loads (16-bit: 8 chunks, rows g)
    for layout in LAYOUTS:
        rep = bankops.explain("gemm", layout, dtype, m=m, n=n, k=k, b_transposed=True)
        rows = {r["instruction"].split(" <-")[0].split(" ->")[0]: r for r in rep.rows}
        for name in ("ldgsts x window", "lds.128 x window"):
            assert name in rows, (layout, list(rows))
            assert rows[name]["iterations"] == n // bn * (k // window)
        cp = rows["ldgsts x window"]
        assert cp["wavefronts"] == (1.5 if dtype != F32 and layout == "pad" else 1) * cp["ideal"], (layout, cp)
        lds = rows["lds.128 x window"]
        assert lds["count"] == reads
        conflicts = dtype != F32 and layout == "none"
        assert lds["wavefronts"] == (2 if conflicts else 1) * lds["ideal"], (layout, lds)
        if dtype == F32:
            assert "ldgsts w window" not in rows, "float32's weight goes straight to registers"
            continue
        # 16-bit: the weight's window too, 8 copies and 8 reads a warp, read as x's rows are
        cw, lw = rows["ldgsts w window"], rows["lds.128 w window"]
        assert cw["count"] == lw["count"] == 8 * 8 and cw["iterations"] == lw["iterations"] == n // bn * (k // window)
        assert cw["wavefronts"] == (1.5 if layout == "pad" else 1) * cw["ideal"], (layout, cw)
        assert lw["wavefronts"] == (2 if conflicts else 1) * lw["ideal"], (layout, lw)


@requires_cuda
@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=str)
@pytest.mark.parametrize("m", [1, 4])
def test_cuda_k_off_whole_vectors(m, dtype):
    """K = 4094 / 4092 (not whole 16-byte vectors) in rows 16-byte aligned, the columns past K
    holding NaN: no route may read them (the rows kernel's vector loads did)."""
    k = {F32: 4094, BF16: 4092, F16: 4092}[dtype]
    x = torch.full((m, 4104), float("nan"), device="cuda", dtype=dtype)
    w = torch.full((1000, 4104), float("nan"), device="cuda", dtype=dtype)
    x[:, :k] = torch.randn(m, k, device="cuda", dtype=dtype)
    w[:, :k] = torch.randn(1000, k, device="cuda", dtype=dtype)
    x, w = x[:, :k], w[:, :k].t()
    for layout in LAYOUTS:
        check(bankops.gemm(x, w, layout), x, w)


@requires_cuda
@pytest.mark.parametrize("dtype,w_kn", [(F32, False), (F32, True), (BF16, False), (F16, False)], ids=str)
def test_cuda_every_m(dtype, w_kn):
    """M from 1 to the kernel's largest call and past it, N off the 32-row blocks; float32's
    weight stored (K, N) too. float32 up to 66 rows: past 32 the FFMA kernel's split 64-row tiles
    on compute capability 9.0 (two blocks of 32 rows below it), past 64 two of its tiles."""
    top = 66 if dtype == F32 else 18
    w = operand(2048, 1000 if not w_kn else 1004, None, dtype, not w_kn)  # W.t(): k contiguous, or W
    for m in range(1, top + 1):
        x = operand(m, 2048, None, dtype, False)
        if m <= (32 if dtype == F32 else 16):
            assert bankops.gemm_route(x, w).startswith("rows"), (m, bankops.gemm_route(x, w))
        check(bankops.gemm(x, w), x, w)


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("m,n,k", [(1, 4096, 4096), (7, 36, 1032), (2, 4100, 8192), (16, 640, 14336),
                                   (32, 640, 14336), (40, 4000, 1040), (64, 4096, 2056)])
def test_cuda_weight_along_n(layout, m, n, k):
    """float32's x @ W on the kernel that reads W along n (40 and 64 rows: the FFMA kernel's split
    64-row tiles on compute capability 9.0): against the reference, bit-equal over runs and
    layouts, and batched against a broadcast weight."""
    x, w = operand(m, k, None, F32, False), operand(k, n, None, F32, False)
    if m <= 32:
        assert bankops.gemm_route(x, w, layout).startswith("rows"), bankops.gemm_route(x, w, layout)
        assert fields(bankops.gemm_route(x, w, layout))["b"] == "kn"
    got = bankops.gemm(x, w, layout)
    check(got, x, w)
    assert torch.equal(got, bankops.gemm(x, w, layout)), "the same bits every run"
    assert torch.equal(got, bankops.gemm(x, w, "swizzle" if layout != "swizzle" else "none")), "every layout"
    xb = operand(m, k, 3, F32, False)
    check(bankops.gemm(xb, w.expand(3, k, n), layout), xb, w.expand(3, k, n))


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
@pytest.mark.parametrize("m,n,k", [(1, 4096, 4096), (7, 33, 1032), (2, 4100, 8192), (16, 640, 14336),
                                   (32, 640, 14336), (8, 8500, 1024), (16, 8500, 1040)])
def test_cuda_shapes_and_bits(layout, dtype, m, n, k):
    """Each shape against the reference, bit-equal over runs and layouts. In 16 bits, 8500
    weight rows (133 blocks of 64) take mma.sync's shallow ring on an H100, the rest its deep
    one."""
    if m > 16 and dtype != F32:
        pytest.skip("16-bit rows past 16 take the mma.sync kernel's split (test_gemm_split.py)")
    x, w = operand(m, k, None, dtype, False), operand(k, n, None, dtype, True)
    assert bankops.gemm_route(x, w, layout).startswith("rows"), bankops.gemm_route(x, w, layout)
    got = bankops.gemm(x, w, layout)
    check(got, x, w)
    assert torch.equal(got, bankops.gemm(x, w, layout)), "the same bits every run"
    assert torch.equal(got, bankops.gemm(x, w, "swizzle" if layout != "swizzle" else "none")), "every layout"


@requires_cuda
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_cuda_batched_views_and_bias(dtype):
    w = operand(4096, 512, None, dtype, True)
    x = torch.randn(3, 4, 4096, device="cuda", dtype=dtype)
    check(bankops.gemm(x, w.expand(3, 4096, 512)), x, w.expand(3, 4096, 512))  # a broadcast weight
    xs = torch.randn(6, 4096 + 8, device="cuda", dtype=dtype)[:, 8:]  # rows 16 bytes apart, offset
    assert bankops.gemm_route(xs, w).startswith("rows")
    check(bankops.gemm(xs, w), xs, w)
    lin = torch.nn.Linear(4096, 300, device="cuda", dtype=dtype)
    got = bankops.linear(x, lin.weight, lin.bias)
    ref = x.double() @ lin.weight.double().t() + lin.bias.double()
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got.double(), ref, rtol=2e-2, atol=2e-2 if dtype == BF16 else 1e-4)


@requires_cuda
@pytest.mark.parametrize("dtype", [F32, BF16, F16], ids=str)
def test_cuda_chain_reads_what_the_call_before_wrote(dtype):
    """Back to back on one stream, each call's weight or x the output of the call before it: on
    compute capability 9.0 each launches while the one before ends and asks L2 for its weight
    meanwhile (options.prefetch), so every step must still read what the one before wrote.
    Eager and replayed in a CUDA graph over fresh inputs, against the reference, and the same
    bits with the prefetch off."""
    # each operand scaled by 1 / sqrt(its K), so that float16's products stay near 1
    scale = {"x0": 1.0, "a": 1024 ** -0.5, "c": 4096 ** -0.5, "x1": 2048 ** -0.5}
    x0, a = operand(8, 1024, None, dtype, False), operand(1024, 4096, None, dtype, True).mul_(scale["a"])
    c = operand(4096, 2048, None, dtype, True).mul_(scale["c"])
    x1 = operand(4, 2048, None, dtype, False).mul_(scale["x1"])

    def chain():
        h = bankops.gemm(x0, a)       # (8, 4096): the next call's x
        y = bankops.gemm(h, c)        # (8, 2048): the next call's weight, (N, K)
        return [(h, x0, a), (y, h, c), (bankops.gemm(x1, y.t()), x1, y.t())]

    inputs = {"x0": (x0, scale["x0"]), "a": (a, scale["a"]), "c": (c, scale["c"]), "x1": (x1, scale["x1"])}
    assert_chain_reads_what_came_before(chain, inputs, "rows", check)


def test_candidates_other_splits_and_forms():
    """The router takes the plan rows_candidates lists first; the others are for a measured table
    (bankops.tune): every other split count of the same form where the cluster fits, and for
    16-bit rows on FFMA (up to 4) the mma.sync form at every split; each key once."""
    dev = dict(num_sms=132, cc=90)
    for dtype, m in ((BF16, 1), (F16, 4), (BF16, 8), (F32, 2)):
        r = bankops.gemm_route(meta(m, 4096, dtype=dtype), meta(14336, 4096, dtype=dtype).t(), **dev)
        rows = [c for c in r.candidates if c.tier == "rows"]
        assert rows[0].chosen and rows[0].route == r, rows
        assert len({c.key for c in r.candidates}) == len(r.candidates), r.candidates
        forms = {c.route.fields["tile"] for c in rows}
        ffma16 = dtype != F32 and m <= 4
        assert len(forms) == (2 if ffma16 else 1), forms
        for tile in forms:
            splits = sorted(c.route.fields["split"] for c in rows
                            if c.route.fields["tile"] == tile and "persistent" not in c.route.fields)
            assert splits == list(range(1, 9)), (tile, splits)
        if ffma16:
            assert "8x64x256" in forms, forms
        # mma.sync's persistent form, once, where its 224 tiles outnumber the SMs
        persistent = [c for c in rows if "persistent" in c.route.fields]
        assert len(persistent) == (0 if dtype == F32 else 1), persistent
        for c in persistent:
            f = c.route.fields
            assert (f["tile"], f["split"], f["blocks"]) == ("8x64x256", 1, 132) and not c.chosen, c.route
    a100 = bankops.gemm_route(meta(1, 4096, dtype=BF16), meta(14336, 4096, dtype=BF16).t(), num_sms=108, cc=80)
    assert [c.route.fields["split"] for c in a100.candidates if c.tier == "rows"] == [1], "no clusters below 9.0"


@requires_cuda
@pytest.mark.parametrize("dtype,m", [(BF16, 1), (F16, 3), (BF16, 4), (BF16, 8), (F16, 13), (F32, 2), (F32, 16)], ids=str)
def test_cuda_every_rows_plan(dtype, m):
    """Every rows candidate the tuner may time, forced by its key: against the reference, N off the
    blocks, K off the windows, and each plan's bits the same on a second call."""
    x, w = operand(m, 2056, None, dtype, False), operand(2056, 1000, None, dtype, True)
    for c in [c for c in bankops.gemm_route(x, w).candidates if c.tier == "rows"]:
        with bankops.options(plan=c.key):
            assert bankops.gemm_route(x, w) == c.route
            got = bankops.gemm(x, w)
            check(got, x, w)
            assert torch.equal(got, bankops.gemm(x, w)), c.route


def test_persistent_plan_fields_and_trace():
    """mma.sync's persistent form: one block an SM (at most the tiles), split 1, the ring as deep as
    227 KB a block fits beside its own partial tile (6 stages of 8 rows unpadded, 5 under pad, 4
    of 16 rows under pad); only where the tiles outnumber the SMs. explain traces the same
    shared-memory accesses as the plan of one block a tile (the partial tile moves, its banks
    do not)."""
    for layout, m, stages in (("swizzle", 8, 6), ("pad", 8, 5), ("none", 16, 5), ("pad", 16, 4)):
        a, w = meta(m, 4096, dtype=BF16), meta(14336, 4096, dtype=BF16).t()
        r = bankops.gemm_route(a, w, layout, num_sms=132, cc=90)
        (p,) = [c for c in r.candidates if c.tier == "rows" and "persistent" in c.route.fields]
        assert (p.route.fields["stages"], p.route.fields["blocks"], p.route.fields["split"]) == (stages, 132, 1), p
        (one,) = [c for c in r.candidates if c.tier == "rows" and c.route.fields["split"] == 1
                  and "persistent" not in c.route.fields]
        reps = []
        for c in (p, one):
            with bankops.options(plan=c.key):
                reps.append(bankops.explain("gemm", layout, BF16, m=m, n=14336, k=4096, b_transposed=True,
                                            num_sms=132, cc=90))
        assert "persistent" in reps[0].route and "persistent" not in reps[1].route, [x.route for x in reps]
        keep = ("instruction", "count", "wavefronts", "ideal")
        assert [{k: row[k] for k in keep} for row in reps[0].rows] == [{k: row[k] for k in keep} for row in reps[1].rows]
    few = bankops.gemm_route(meta(8, 4096, dtype=BF16), meta(8192, 4096, dtype=BF16).t(), num_sms=132, cc=90)
    assert not [c for c in few.candidates if c.tier == "rows" and "persistent" in c.route.fields], "128 tiles"
    batched = bankops.gemm_route(meta(3, 8, 4096, dtype=BF16), meta(3, 4096, 4096, dtype=BF16).transpose(-1, -2),
                                 num_sms=132, cc=90)
    assert [c.route.fields["blocks"] for c in batched.candidates
            if c.tier == "rows" and "persistent" in c.route.fields] == [132]


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype,m", [(BF16, 3), (F16, 8), (BF16, 13), (BF16, 16)], ids=str)
def test_cuda_persistent(layout, dtype, m):
    """mma.sync's persistent form on tiles past the SMs (n: a tile of 64 an SM and 3 more, the
    last one partial; k off its windows; a batch of 3 against a broadcast weight): against the
    reference, its bits the same on a second call and the same as one block a tile's (the same
    sums in the same order)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for batch, n, k in ((None, 64 * sms + 180, 1040), (3, 64 * (sms // 3 + 4) - 5, 2056)):
        x, w = operand(m, k, batch, dtype, False), operand(k, n, batch, dtype, True, expand=batch is not None)
        cands = [c for c in bankops.gemm_route(x, w, layout).candidates if c.tier == "rows"]
        (p,) = [c for c in cands if "persistent" in c.route.fields]
        (one,) = [c for c in cands if c.route.fields["split"] == 1 and c.route.fields["tile"] == p.route.fields["tile"]
                  and "persistent" not in c.route.fields]
        with bankops.options(plan=p.key):
            got = bankops.gemm(x, w, layout)
            check(got, x, w)
            assert torch.equal(got, bankops.gemm(x, w, layout)), p.route
        with bankops.options(plan=one.key):
            assert torch.equal(got, bankops.gemm(x, w, layout)), (p.route, one.route)


def test_kn_plans_are_the_routers_for_x_at_w():
    """16-bit x @ W (W stored (K, N), n contiguous) up to 16 rows on compute capability 9.0: the
    few-rows kernel's mma.sync form, its weight's window read by ldmatrix.trans, is the router's
    plan (its split as x @ W.t()'s mma.sync form counts it), the other split counts and, where its
    tiles outnumber the SMs, the persistent form listed after it in the same tier. None past 16
    rows, with n off 16-byte vectors, below compute capability 9.0, in float32 (its FFMA ring reads
    W along n) or for W.t() (the x @ W.t() form)."""
    dev = dict(num_sms=132, cc=90)
    for dtype, m, tile in ((BF16, 1, "8x64x256"), (F16, 4, "8x64x256"), (BF16, 9, "16x64x256"), (F16, 16, "16x64x256")):
        for n in (1000, 4096, 14336):
            r = bankops.gemm_route(meta(m, 4096, dtype=dtype), meta(4096, n, dtype=dtype), **dev)
            kn = [c for c in r.candidates if c.route.fields.get("b") == "kn" and c.route.fields["family"] == "rows"]
            assert kn and kn[0].chosen and {c.tier for c in kn} == {"rows"}, r.candidates
            assert r.fields["tile"] == tile and r.fields["b"] == "kn", r
            assert all(c.predicted_us is None for c in kn), kn
            assert {c.route.fields["tile"] for c in kn} == {tile}, kn
            splits = sorted(c.route.fields["split"] for c in kn if "persistent" not in c.route.fields)
            assert splits == list(range(1, 9)), splits
            nk = bankops.gemm_route(meta(m, 4096, dtype=dtype), meta(n, 4096, dtype=dtype).t(), **dev)
            if nk.fields["tile"] == tile:  # the same rows on mma.sync: the same split
                assert nk.fields["split"] == r.fields["split"] and nk.fields["stages"] == r.fields["stages"], (nk, r)
            persistent = [c for c in kn if "persistent" in c.route.fields]
            assert len(persistent) == (1 if -(-n // 64) > 132 else 0), persistent
            for c in kn:
                with bankops.options(plan=c.key):
                    assert bankops.gemm_route(meta(m, 4096, dtype=dtype), meta(4096, n, dtype=dtype), **dev) == c.route
    for a, b, d in ((meta(17, 4096), meta(4096, 4096), dev), (meta(8, 4096), meta(4096, 1001), dev),
                    (meta(8, 4096), meta(4096, 4096), dict(num_sms=108, cc=80)),
                    (meta(8, 4096, dtype=F32), meta(4096, 4096, dtype=F32), dev),
                    (meta(8, 4096), meta(4096, 4096).t(), dev)):
        r = bankops.gemm_route(a, b, **d)
        assert not [c for c in r.candidates if c.route.fields["family"] == "rows" and c.route.fields["b"] == "kn"
                    and c.route.fields.get("stages")], (a.shape, b.stride(), d)


def test_explain_kn_window():
    """The KN form's weight window: a warp's copies write 128 bytes of n of four rows k, each from
    one 128-byte global line (conflict-free where a row lies on one shared line: none, swizzle;
    pad's 16 bytes a row split its lines' sectors); each ldmatrix.trans reads its warp's 16 bytes
    of 8 rows a phase, on the same banks under none (8-way), spread by pad's 16 bytes a row and by
    swizzle's XOR (conflict-free). The x window and the partial tile are the x @ W.t() form's."""
    for layout, ld_ways, cp_ideal in (("none", 8, True), ("pad", 1, False), ("swizzle", 1, True)):
        reps = []
        for b_t in (False, True):
            r = bankops.gemm_route(meta(8, 4096), meta(14336, 4096).t() if b_t else meta(4096, 14336),
                                   layout, num_sms=132, cc=90)
            (one,) = [c for c in r.candidates if c.tier == "rows" and c.route.fields["split"] == 1
                      and "persistent" not in c.route.fields and c.route.fields["tile"] == "8x64x256"]
            with bankops.options(plan=one.key):
                reps.append(bankops.explain("gemm", layout, BF16, m=8, n=14336, k=4096, b_transposed=b_t,
                                            num_sms=132, cc=90))
        kn, nk = reps
        assert "b=kn" in kn.route and "b=nk" in nk.route, (kn.route, nk.route)
        (ld,) = [row for row in kn.rows if row["instruction"].startswith("ldmatrix.x4.trans w window")]
        assert ld["count"] == 8 * 8 and ld["wavefronts"] == ld_ways * ld["ideal"], ld  # 8 warps, 8 chunks
        (cp,) = [row for row in kn.rows if row["instruction"].startswith("ldgsts w window")]
        assert cp["count"] == 8 * 8 and (cp["wavefronts"] == cp["ideal"]) == cp_ideal, cp  # 8 warps, 8 passes
        keep = ("instruction", "count", "wavefronts", "ideal")
        rest = [[{k: row[k] for k in keep} for row in rep.rows if " w window " not in row["instruction"]]
                for rep in (kn, nk)]
        assert rest[0] == rest[1] and len(rest[0]) == len(kn.rows) - 2, rest


@requires_cuda
@pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] < 9,
                    reason="the KN form runs on compute capability 9.0")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype,m", [(BF16, 1), (F16, 4), (BF16, 8), (F16, 13), (BF16, 16)], ids=str)
def test_cuda_kn_every_plan(layout, dtype, m):
    """Every KN plan by its key (x @ W, W stored (K, N)): against the reference with n off the
    64-column tiles and k off the windows, a (K, N) slice of a wider weight (rows farther apart
    than n), a batch of 3 against a broadcast weight, tiles past the SMs (the persistent form);
    each plan's bits the same on a second call, and the persistent form's the same as one block
    a tile's (the same sums in the same order)."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for batch, n, k, wide in ((None, 1000, 2056, 0), (None, 64 * sms + 136, 1040, 8), (3, 520, 4104, 24)):
        x = operand(m, k, batch, dtype, False)
        w = operand(k, n + wide, batch, dtype, False, expand=batch is not None)[..., :n]
        kn = [c for c in bankops.gemm_route(x, w, layout).candidates
              if c.route.fields["family"] == "rows" and c.route.fields["b"] == "kn"]
        assert kn, (batch, n, k)
        bits = {}
        for c in kn:
            with bankops.options(plan=c.key):
                assert bankops.gemm_route(x, w, layout) == c.route
                got = bankops.gemm(x, w, layout)
                check(got, x, w)
                assert torch.equal(got, bankops.gemm(x, w, layout)), c.route
            if c.route.fields["split"] == 1:
                bits["persistent" in c.route.fields] = got
        assert (True in bits) == (-(-n // 64) > sms), kn
        if True in bits:
            assert torch.equal(bits[True], bits[False]), (n, k)
