"""Split-K across a thread-block cluster (kernels/gemm/split_k.h, split_k.cuh): on compute
capability 9.0 each tile's k tiles are shared by the blocks of a cluster, whose partial sums
meet in distributed shared memory in rank order. The mma.sync kernel splits a few rows
against a weight (decode, M 17 to 64 a batch in 16 bits, or fewer with B n-major or rows off
16 bytes; the rest take the few-rows kernel, test_gemm_rows.py; and 65 to 128 rows off the
Hopper route); the Hopper kernel splits where its plan (route.h's wgmma_tma_plan) finds the
tiles alone leave SMs idle: 65 rows and more against a weight, a weight gradient's few tiles
over a long k. Tested: every M around the tile and split boundaries, odd K (the realigning
fill), both operand majors, batches, the bias, the same bits every run and on every layout."""
import pytest
import torch

import bankops
from conftest import LAYOUTS, requires_cuda
from test_gemm_majors import check, operand
from test_gemm_route import F32, H100, A100, fields, meta, route

BF16, F16 = torch.bfloat16, torch.float16


@pytest.mark.parametrize("m,b_t", [(17, False), (17, True), (32, True), (33, True), (64, True), (64, False)])
def test_decode_routes_split(m, b_t):
    """x (M, 4096) @ W.t() and x @ W with W (4096, 4096) past the few-rows kernel's 16 rows: up
    to 32 rows mma.sync's 32 x 128 tile, its 32 n tiles split 4 ways (132 slots of one block an
    SM); 33 to 64 the Hopper kernel's thin 64 x 64 tile, its 64 tiles split 2 ways (as many
    blocks as 32 of 64 x 128 split 4 ways, a shorter sum). Off the Hopper route (pad) 33-64 rows
    take mma.sync's 64 x 128 tile split 8 ways (264 slots of two an SM)."""
    w = meta(4096, 4096)
    b, major = (w.t(), "nk") if b_t else (w, "kn")
    line = route(meta(m, 4096), b)
    want = "mma 32x128x128 fill=cp.async" if m <= 32 else "wgmma 64x64x64 producer=tma"
    assert line.startswith(f"{want} a=mk b={major}") and split_of(line) == (4 if m <= 32 else 2), line
    assert fields(line)["blocks"] == "128", line
    if m > 32:
        line = route(meta(m, 4096), b, "pad")
        assert line.startswith(f"mma 64x128x64 fill=cp.async a=mk b={major} split=8"), line


def test_thin_route_takes_what_it_can():
    """The thin tile: 33-64 rows a batch (65: the Hopper plan's 128-row tiles), and 1-32 where
    mma.sync's split tiles find no split (a (14336, 4096) weight's 112 tiles), x k-major (an
    m-major A: split_route), rows 16 bytes apart (odd k: the realigning fills), the swizzle
    layout on compute capability 9.0 with the Hopper kernel on, a grid of half the SMs or more
    (k = 256: 32 tiles of 128 columns are too few, 64 of 64 columns enough). Its split: up to a
    block an SM within the room of one a SM (an H100 holds 120 in clusters of 3, 110 of 4:
    64 x 128 tiles split 3 ways, 96 blocks, where 64 x 64 ones split 2 ways fill 128 SMs and
    come first); a batch of x against one weight counts each batch's tiles (3 x 32 blocks of
    64 x 128, or 3 x 64 of 64 x 64 in two waves: as full, so the wider tile)."""
    w, dev = meta(4096, 4096).t(), (*H100, H100_ROOM)
    thin = "wgmma 64x128x64 producer=tma a=mk b=nk repack=none"
    narrow = "wgmma 64x64x64 producer=tma a=mk b=nk repack=none"
    line = route(meta(64, 4096), w, device=dev)
    assert line.startswith(narrow) and split_of(line) == 2 and fields(line)["blocks"] == "128", line
    # 3072 columns: 24 tiles of 128 split 4 ways (room 110 in clusters of 4) fill 96 SMs as 48 of 64
    # split 2 ways do: the shorter sum; 16 tiles of 128 against 2048 columns and split 6 ways (room
    # 102) as 32 of 64 split 3 ways: likewise.
    line = route(meta(64, 4096), meta(3072, 4096).t(), device=dev)
    assert line.startswith(narrow) and split_of(line) == 2 and fields(line)["blocks"] == "96", line
    line = route(meta(64, 2048), meta(2048, 2048).t(), device=dev)
    assert line.startswith(narrow) and split_of(line) == 3 and fields(line)["blocks"] == "96", line
    # 1024 columns: 8 tiles of 128 split 8 ways, 64 blocks, against 16 of 64 split 6 ways (room 102).
    line = route(meta(64, 4096), meta(1024, 4096).t(), device=dev)
    assert line.startswith(narrow) and split_of(line) == 6 and fields(line)["blocks"] == "96", line
    assert route(meta(32, 4096), w, device=dev).startswith("mma 32x128x128"), "32 rows: mma.sync's split"
    assert route(meta(32, 4096), meta(14336, 4096).t(), device=dev).startswith(thin + " split=1")
    assert route(meta(17, 4096), meta(4096, 14336), device=dev).startswith(thin.replace("b=nk", "b=kn"))
    assert not route(meta(65, 4096), w).startswith(thin)
    assert not route(meta(4096, 48).t(), w).startswith(thin), "A m-major"
    assert not route(meta(48, 4095), meta(4096, 4095).t()).startswith(thin), "rows off 16 bytes"
    assert route(meta(48, 256), meta(4096, 256).t()).startswith(narrow + " split=1"), "32 blocks of 64 x 128"
    assert not route(meta(48, 4096), w, "pad").startswith(thin)
    assert not route(meta(48, 4096), w, device=A100).startswith(thin)
    with bankops.options(wgmma=False):
        assert route(meta(48, 4096), w).startswith("mma ")
    line = route(meta(3, 48, 4096), w.expand(3, 4096, 4096), device=dev)
    assert line.startswith(thin + " split=1") and fields(line)["blocks"] == "96", line
    with bankops.options(split_k=False):
        assert route(meta(48, 4096), meta(8192, 4096).t()).startswith(narrow + " split=1"), "128 tiles, not 64"


def split_of(line):
    return int(fields(line).get("split", 1))


def test_split_needs_a_cluster_a_short_grid_and_a_long_k():
    x, w = meta(16, 4096), meta(4096, 4096).t()
    assert split_of(route(x, w, device=A100)) == 1, "no clusters below compute capability 9.0"
    with bankops.options(split_k=False):
        assert split_of(route(x, w)) == 1
    assert split_of(route(meta(16, 256), meta(256, 4096))) == 1, "k too short to share"
    assert route(meta(129, 4096), meta(4096, 4096)).startswith("wgmma"), "more than a few rows"
    assert split_of(route(meta(16, 4096), meta(65536, 4096).t())) == 1, "tiles fill the SMs"
    assert route(meta(8, 4096, dtype=F32), meta(4096, 4096, dtype=F32).t()).startswith("rows"), "float32: rows"


def ideal_room(num_sms=132, short=None):
    """DeviceInfo::room as if every SM slot took a cluster's block, with `short` {(blocks an
    SM, cluster): blocks} entries in place of those."""
    room = {(b, c): num_sms * b // c * c for b in range(1, 5) for c in range(2, 9)}
    room.update(short or {})
    return [room[b, c] for b in range(1, 5) for c in range(2, 9)]


def test_splits_fit_the_clusters_a_gpu_holds():
    """An H100 holds 30 clusters of 8 blocks at 2 blocks an SM (its GPCs leave SMs over), not
    the 33 its 264 slots would: 64 rows against a (4096, 4096) weight split 8 ways would run a
    second wave of 16 blocks, so it splits 7 ways (224 blocks, one wave). A room of every slot
    plans as no room at all."""
    x, w = meta(64, 4096), meta(4096, 4096).t()
    assert route(x, w, "pad") == route(x, w, "pad", device=(*H100, ideal_room()))
    assert split_of(route(x, w, "pad")) == 8
    line = route(x, w, "pad", device=(*H100, ideal_room(short={(2, 8): 240})))
    assert split_of(line) == 7 and fields(line)["blocks"] == str(32 * 7), line
    # The few-rows kernel plans the same way: 64 rows of (4096, 4096) float32 at 2 blocks an SM.
    xf, wf = meta(8, 4096, dtype=F32), meta(4096, 4096, dtype=F32).t()
    assert split_of(route(xf, wf)) == 2
    line = route(xf, wf, device=(*H100, ideal_room(short={(2, 2): 2, (2, 3): 3, (2, 4): 4})))
    assert split_of(line) == 1, "one cluster at a time: no split"


# An H100's room (torch.ops.bankops._device_room on one, rows: 1..4 blocks an SM, clusters of 2..8).
H100_ROOM = [132, 117, 120, 110, 102, 105, 120, 264, 237, 248, 235, 234, 224, 240,
             396, 372, 368, 345, 372, 329, 360, 528, 489, 496, 470, 474, 483, 496]


def test_few_rows_of_a_wide_weight_take_the_thin_tile_unsplit():
    """32 rows against a (14336, 4096) weight: its 112 thin tiles give most SMs a block
    unsplit, as does the same call with a batch of 2 (224 blocks, two an SM); 65 rows take the
    Hopper plan's 128 x 128 tile. Off the Hopper route (pad, an
    A100, the wgmma option off) it stays on mma.sync's tiles."""
    w = meta(14336, 4096).t()
    dev = (*H100, H100_ROOM)
    line = route(meta(32, 4096), w, device=dev)
    assert line.startswith("wgmma 64x128x64 producer=tma a=mk b=nk repack=none split=1"), line
    line = route(meta(2, 32, 4096), w.expand(2, 4096, 14336), device=dev)
    assert line.startswith("wgmma 64x128x64") and fields(line)["blocks"] == "224", line
    assert route(meta(65, 4096), w, device=dev).startswith("wgmma 128x128x64"), "65 rows"
    assert route(meta(32, 4096), w, "pad", device=dev).startswith("mma 64x128x64 fill=cp.async a=mk b=nk split=1")
    assert route(meta(32, 4096), w, device=A100).startswith("mma "), "no Hopper kernel below 9.0"
    with bankops.options(split_k=False):
        assert route(meta(65, 4096), w).startswith("wgmma")
        assert route(meta(64, 4096), w).startswith("wgmma 64x128x64"), "no split: the thin tile, unsplit"
    with bankops.options(wgmma=False):
        assert route(meta(32, 4096), w, device=dev).startswith("mma 64x128x64")


# A few rows that no split helps, k = 256 (two of the Rows tile's k tiles: too short to share).
SHORT_K_ROWS = [(1, False), (9, False), (17, False), (17, True), (32, True), (33, False), (64, True)]


@pytest.mark.parametrize("m,b_t", SHORT_K_ROWS)
def test_few_rows_over_a_short_k_take_the_hopper_plan(m, b_t):
    """k = 256 leaves split_route nothing to split, and one batch of 64 rows or fewer takes the
    thin 64 x 64 tiles (64 blocks) on an H100, mma.sync's elsewhere; up to 16 rows of x @ W the
    few-rows kernel's KN form on every layout, one window a block."""
    x, w = meta(m, 256), meta(4096, 256).t() if b_t else meta(256, 4096)
    line = route(x, w, device=(*H100, H100_ROOM))
    if m <= 16 and not b_t:
        for layout in ("swizzle", "pad"):
            line = route(x, w, layout, device=(*H100, H100_ROOM))
            assert line.startswith(f"rows {8 if m <= 8 else 16}x64x256 a=mk b=kn split=1"), line
        return
    assert line.startswith(f"wgmma 64x64x64 producer=tma a=mk b={'nk' if b_t else 'kn'} repack=none split=1"), line
    assert route(x, w, "pad", device=(*H100, H100_ROOM)).startswith("mma "), line


@requires_cuda
@pytest.mark.parametrize("m,b_t", SHORT_K_ROWS)
def test_cuda_few_rows_over_a_short_k(m, b_t):
    """The same calls against the reference on every layout, the same bits every run."""
    x, w = split_operands(m, 4096, 256, BF16, b_t=b_t)
    for layout in LAYOUTS:
        got = bankops.gemm(x, w, layout)
        check(got, x, w)
        assert torch.equal(got, bankops.gemm(x, w, layout)), (layout, bankops.gemm_route(x, w, layout))


def test_hopper_plans_split_k():
    """The Hopper kernel's plans on an H100's room: 65 to 128 rows against a (4096, 4096)
    weight split its 32 tiles of 128 x 64 two ways (128 blocks, one wave), where mma.sync's
    split tiles ran at half the speed; a (14336, 4096) weight's 112 tiles of 128 x 128 fill
    the GPU unsplit; a weight gradient (3072 x 768, k 16384) runs 96 persistent blocks of
    128 x 192, one a tile (split 3 ways on 128 x 256 without persistent blocks: 216 blocks, two
    waves of clusters of 3 against one of 72 blocks, each a third as long); 1536^3 one wave of
    96 of 128 x 192 unsplit (the split's sums cost more than its second wave saves). 128 rows
    against a (4096, 14336) weight read it at the rate of the blocks
    streaming it: 128 blocks of 128 x 64 split two ways, not 96 of 128 x 256 split six ways
    (fewer k steps a block, but a third fewer TMA rings pulling the 117 MB). Off the Hopper
    route (pad; split_k off) the rows split on mma.sync or not at all."""
    dev, w = (*H100, H100_ROOM), meta(4096, 4096).t()
    for m in (65, 128):
        line = route(meta(m, 4096), w, device=dev)
        assert line.startswith("wgmma 128x64x64 producer=tma a=mk b=nk repack=none split=2"), line
        assert fields(line)["blocks"] == "128", line
    assert split_of(route(meta(128, 4096), meta(14336, 4096).t(), device=dev)) == 1
    long_k = route(meta(128, 14336), meta(4096, 14336).t(), device=dev)
    assert long_k.startswith("wgmma 128x64x64 producer=tma a=mk b=nk repack=none split=2"), long_k
    wgrad = route(meta(16384, 3072).t(), meta(16384, 768), device=dev)
    assert wgrad.startswith("wgmma 128x192x64 producer=tma a=km b=kn repack=none split=1 persistent=1"), wgrad
    assert fields(wgrad)["blocks"] == "96", wgrad
    with bankops.options(persistent=False):
        wgrad = route(meta(16384, 3072).t(), meta(16384, 768), device=dev)
    assert wgrad.startswith("wgmma 128x256x64 producer=tma a=km b=kn repack=none split=3"), wgrad
    assert fields(wgrad)["blocks"] == "216", wgrad
    cube = route(meta(1536, 1536), meta(1536, 1536), device=dev)
    assert cube.startswith("wgmma 128x192x64") and split_of(cube) == 1 and fields(cube)["blocks"] == "96", cube
    assert route(meta(128, 4096), w, "pad", device=dev).startswith("mma 128x128x32 fill=cp.async a=mk b=nk split=7")
    with bankops.options(split_k=False):
        assert split_of(route(meta(16384, 3072).t(), meta(16384, 768), device=dev)) == 1


def test_hopper_plans_keep_their_rules():
    """Over a grid of shapes (rows, columns and k from a few tiles to many, batches, both
    majors of B) on an H100's room and on every slot: a Hopper plan gives 64 blocks or more,
    splits at most 8 ways, leaves each rank 4 k tiles or more, and its blocks are its tiles
    times its split (an unsplit plan of more tiles than SMs, or of 128 x 192, 144, 192 x 96 or 192 x 192 tiles, runs
    persistent blocks: one an SM, m tiles in pairs that share B where wgmma_clusters says);
    split_k off never splits."""
    tiles = {"128x256x64": (128, 256), "128x192x64": (128, 192), "128x144x64": (128, 144), "128x128x64": (128, 128),
             "128x64x64": (128, 64), "192x96x64": (192, 96), "192x192x64": (192, 192)}
    for dev in ((*H100, H100_ROOM), H100):
        for batch in (1, 3):
            for m in (65, 128, 200, 1024, 1536, 4096):
                for n in (64, 768, 1000, 4096, 14336):
                    for k in (64, 512, 4096, 16384):
                        for b_t in (False, True):
                            b = meta(batch, n, k).transpose(1, 2) if b_t else meta(batch, k, n)
                            line = route(meta(batch, m, k), b, device=dev)
                            if not line.startswith("wgmma"):
                                continue
                            f, (bm, bn) = fields(line), tiles[line.split()[1]]
                            split, blocks = int(f["split"]), int(f["blocks"])
                            tiles_split = batch * -(-m // bm) * -(-n // bn) * split
                            persistent = split == 1 and (tiles_split > 132 or bn in (96, 144, 192))
                            assert f["persistent"] == str(int(persistent)), line
                            tiles_m, pair = -(-m // bm), f["multicast"] == "2"
                            assert pair == (persistent and bn >= 128 and (b_t or bn % 128 == 0) and tiles_m >= 2
                                            and (tiles_m % 2 == 0 or tiles_m >= 9)), line
                            cluster_tiles = batch * -(-tiles_m // 2) * 2 * -(-n // bn) if pair else tiles_split
                            assert blocks == (min(cluster_tiles, 132) if persistent else tiles_split), line
                            assert tiles_split >= 64 and 1 <= split <= 8, line
                            assert split == 1 or -(-k // 64) >= 4 * split, line
    with bankops.options(split_k=False):
        assert split_of(route(meta(128, 16384), meta(16384, 4096), device=(*H100, H100_ROOM))) == 1


def test_explain_shows_the_hopper_partial_tile():
    """A split Hopper call: its consumers' partial tile stores and the cluster's loads, both
    conflict-free on the swizzled partial tile (no epilogue C tile: the sums store C)."""
    rep = bankops.explain("gemm", "swizzle", BF16, m=128, n=4096, k=4096, b_transposed=True, hopper=True)
    assert rep.route.startswith("wgmma") and split_of(rep.route) > 1, rep.route
    names = {r["kernel"]: [] for r in rep.rows}
    for r in rep.rows:
        names[r["kernel"]].append(r["instruction"])
    assert list(names) == ["gemm_wgmma"], str(rep)
    assert [n.split(" P")[0] for n in names["gemm_wgmma"]] == ["st.shared.v2"] + ["ld.shared::cluster.v4"] * 2, str(rep)
    assert rep.conflicts == 0, str(rep)


@pytest.mark.parametrize("dtype,m", [(BF16, 128), (BF16, 16), (torch.float32, 8), (torch.float32, 64)])
def test_explain_marks_the_peers_shared_memory(dtype, m):
    """Split-K's sums read the rank's rows from its own partial tile and, through distributed
    shared memory, from each peer's: two rows, the second marked peer (its banks are the peer
    SM's, and Nsight Compute's shared-memory counters count it on neither), splits - 1 times
    as many a tile; every other instruction stays in the block's own shared memory."""
    rep = bankops.explain("gemm", "swizzle", dtype, m=m, n=4096, k=4096, b_transposed=True, hopper=True)
    split = split_of(rep.route)
    assert split > 1, rep.route
    own, peers = [r for r in rep.rows if r["instruction"].startswith("ld.shared::cluster")]
    assert not own["peer"] and peers["peer"] and own["instruction"].endswith("its own partial"), (own, peers)
    assert peers["iterations"] == own["iterations"] and peers["count"] == (split - 1) * own["count"]
    assert peers["wavefronts"] == (split - 1) * own["wavefronts"]
    assert [r["instruction"] for r in rep.rows if r["peer"]] == [peers["instruction"]]


@pytest.mark.parametrize("room,match", [([264] * 27, "room must hold 28"), ([-2] * 28, "multiple of 2"),
                                        ([10**6] * 28, r"in \[0, num_sms"), ([3] * 28, "multiple of 2")])
def test_room_is_checked(room, match):
    with pytest.raises(RuntimeError, match=match):
        route(meta(8, 64), meta(64, 64), device=(*H100, room))


@requires_cuda
def test_cuda_device_room():
    """The GPU's own room (whole clusters, at most its slots, measured at 1 and 2 blocks an SM
    on compute capability 9.0) is what the launcher and bankops.gemm_route plan with."""
    d = torch.cuda.current_device()
    room, sms = torch.ops.bankops._device_room(d), torch.cuda.get_device_properties(d).multi_processor_count
    assert len(room) == 28
    for i, v in enumerate(room):
        b, c = i // 7 + 1, i % 7 + 2
        assert v % c == 0 and 0 <= v <= sms * b, (b, c, v)
    if torch.cuda.get_device_capability(d) >= (9, 0):
        assert all(v > 0 for v in room[:14]), room
    x, w = split_operands(65, 4096, 4096, BF16)
    cc = 10 * torch.cuda.get_device_capability(d)[0] + torch.cuda.get_device_capability(d)[1]
    assert bankops.gemm_route(x, w) == torch.ops.bankops._gemm_route(x, w, "swizzle", sms, cc, room)
    assert bankops.explain("gemm", "swizzle", BF16, m=65, n=4096, k=4096, b_transposed=True).route == \
        bankops.gemm_route(x, w)
    with pytest.raises(RuntimeError, match="device must be in"):
        torch.ops.bankops._device_room(torch.cuda.device_count())


def test_explain_shows_the_partial_tile():
    """explain() traces the partial tile's stores and the cluster's loads (split 4 ways on an
    H100 by its SM count; its measured room, on the GPU itself, may give another count)."""
    for layout in LAYOUTS:
        rep = bankops.explain("gemm", layout, BF16, m=16, n=4096, k=4096, b_transposed=True)
        assert split_of(rep.route) > 1, rep.route
        names = [r["instruction"] for r in rep.rows]
        assert any("st.shared.v2 P" in n for n in names) and any("ld.shared::cluster" in n for n in names), names


def split_operands(m, n, k, dtype, b_t=True, a_t=False, batch=None):
    return operand(m, k, batch, dtype, a_t), operand(k, n, batch, dtype, b_t)


@requires_cuda
@pytest.mark.parametrize("b_t", [True, False], ids=["W.t()", "W"])
@pytest.mark.parametrize("dtype", [BF16, F16], ids=str)
def test_cuda_every_m(dtype, b_t):
    """M = 1 .. 130 against a (512, 1024) weight read as W.t() or stored (K, N) (x @ W): the
    few-rows kernel up to 16 (its KN form for x @ W on compute capability 9.0;
    test_gemm_rows.py), the Rows, Narrow and Small tiles, each split 8 ways, and none past
    128 rows; the same bits on a second call."""
    w = operand(1024, 512, None, dtype, b_t)
    for m in range(1, 131):
        x = operand(m, 1024, None, dtype, False)
        got = bankops.gemm(x, w)
        check(got, x, w)
        assert torch.equal(got, bankops.gemm(x, w)), (m, bankops.gemm_route(x, w))


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("majors", ["NT", "NN", "TT", "TN"])
@pytest.mark.parametrize("m,n,k", [(1, 4096, 2048), (7, 640, 4095), (33, 1000, 3001), (96, 392, 2048),
                                   (128, 2056, 1040)])
def test_cuda_majors_odd_k(layout, majors, m, n, k):
    a, b = split_operands(m, n, k, BF16, b_t=majors[1] == "T", a_t=majors[0] == "T")
    line = bankops.gemm_route(a, b, layout)
    got = bankops.gemm(a, b, layout)
    check(got, a, b)
    assert torch.equal(got, bankops.gemm(a, b, layout)), "the same bits every run"
    if line.startswith("mma") and k >= 2048:
        assert split_of(line) > 1, line


@requires_cuda
@pytest.mark.parametrize("dtype", [BF16, F16], ids=str)
def test_cuda_layouts_and_runs_same_bits(dtype):
    x, w = split_operands(24, 4096, 4096, dtype)
    first = bankops.gemm(x, w, "swizzle")
    for layout in LAYOUTS:
        for _ in range(3):
            assert torch.equal(bankops.gemm(x, w, layout), first), layout


@requires_cuda
def test_cuda_batched_and_bias():
    x, w = split_operands(13, 384, 2048, BF16, batch=3)
    check(bankops.gemm(x, w), x, w)
    lin = torch.nn.Linear(2048, 4096, device="cuda", dtype=BF16)
    xs = torch.randn(2, 7, 2048, device="cuda", dtype=BF16)
    assert split_of(bankops.gemm_route(xs.reshape(14, 2048), lin.weight.t())) > 1
    got = bankops.linear(xs, lin.weight, lin.bias)
    ref = (xs.double() @ lin.weight.double().t() + lin.bias.double())
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got.double(), ref, rtol=2e-2, atol=2e-2)


@requires_cuda
def test_cuda_split_off_matches():
    """bankops.options(split_k=False) takes the unsplit route: the same values within rounding."""
    x, w = split_operands(12, 2048, 4096, BF16)
    on = bankops.gemm(x, w)
    with bankops.options(split_k=False):
        off = bankops.gemm(x, w)
    torch.testing.assert_close(on.float(), off.float(), rtol=1e-2, atol=1e-2)


@requires_cuda
@pytest.mark.parametrize("case", ["decode-128", "decode-long-k", "rows-129", "rows-200-odd-n", "wgrad", "batch-broadcast"])
def test_cuda_hopper_split(case):
    """Calls the Hopper kernel splits on an H100 (its plan on the live GPU): against float64,
    the same bits every run; m and n edges past whole tiles, A m-major (a weight gradient, split
    with persistent blocks off: with them it runs 128x192 tiles unsplit), a broadcast batch."""
    x = lambda *s: torch.randn(*s, device="cuda", dtype=BF16)  # noqa: E731
    a, b = {
        "decode-128": lambda: (x(128, 4096), x(4096, 4096).t()),
        "decode-long-k": lambda: (x(128, 14336), x(4096, 14336).t()),
        "rows-129": lambda: (x(129, 4096), x(4096, 4096).t()),
        "rows-200-odd-n": lambda: (x(200, 8192), x(1000, 8192).t()),
        "wgrad": lambda: (x(16384, 3072).t(), x(16384, 768)),
        "batch-broadcast": lambda: (x(2, 128, 4096), x(4096, 2048).expand(2, 4096, 2048)),
    }[case]()
    with bankops.options(persistent=case != "wgrad"):
        line = bankops.gemm_route(a, b)
        got = bankops.gemm(a, b)
        check(got, a, b)
        assert torch.equal(got, bankops.gemm(a, b)), "the same bits every run"
    if torch.cuda.get_device_capability() == (9, 0):
        assert line.startswith("wgmma") and split_of(line) > 1, line


@requires_cuda
def test_cuda_hopper_split_bias():
    """bankops.linear's bias, added once in the split sums: 128 rows (2 x 64) against (4096, 8192)."""
    lin = torch.nn.Linear(8192, 4096, device="cuda", dtype=BF16)
    xs = torch.randn(2, 64, 8192, device="cuda", dtype=BF16)
    if torch.cuda.get_device_capability() == (9, 0):
        assert split_of(bankops.gemm_route(xs.reshape(128, 8192), lin.weight.t())) > 1
    got = bankops.linear(xs, lin.weight, lin.bias)
    ref = xs.double() @ lin.weight.double().t() + lin.bias.double()
    assert not torch.isnan(got).any()
    torch.testing.assert_close(got.double(), ref, rtol=2e-2, atol=2e-2)


@requires_cuda
def test_cuda_hopper_every_m():
    """M = 65 .. 130 and past 256 against a (4096, 4096) weight read as W.t(): the Hopper
    kernel's split tiles around the 128-row tile's edges, against float64."""
    w = operand(4096, 4096, None, BF16, True)
    for m in list(range(65, 131)) + [192, 255, 256, 257]:
        x = operand(m, 4096, None, BF16, False)
        check(bankops.gemm(x, w), x, w)
