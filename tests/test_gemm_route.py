"""gemm's route (kernels/gemm/route.h): the one place that decides which kernel runs a call.

torch.ops.bankops._gemm_route prints it for any device (SM count, compute capability) from
meta tensors, without a GPU; explain() traces the same route, and on a GPU the launcher runs
the kernel it names (checked through the kernel names the profiler records)."""
import glob
import json
import os
import re
import sys
import threading
import warnings

import pytest
import torch

import bankops
from conftest import requires_cuda

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "data"))
import make_gemm_routes as corpus  # noqa: E402

H100, H200, A100 = (132, 90), (132, 90), (108, 80)
BF16, F16, F32, F64 = torch.bfloat16, torch.float16, torch.float32, torch.float64


def meta(*shape, dtype=BF16):
    return torch.empty(*shape, dtype=dtype, device="meta")


def route(a, b, layout="swizzle", device=H100):
    return torch.ops.bankops._gemm_route(a, b, layout, *device)


def fields(line):
    """The route line's key=value fields."""
    return dict(f.split("=", 1) for f in line.split() if "=" in f)


def tile_fields(a, b):
    """The H100 route's fields for a @ b, with its block tile as "tile"."""
    line = route(a, b)
    return dict(fields(line), tile=line.split()[1])


def test_routes_match_the_golden_corpus():
    """Every call of tests/data/gemm_routes.txt (the bench's gemm cases and a seeded sweep of
    dtypes, shapes, operand majors, batches, layouts, misaligned rows, devices and options) takes
    the route written beside it. A change that moves routes regenerates the corpus
    (tests/data/make_gemm_routes.py) and says in its message which moved and why."""
    with open(corpus.CORPUS) as f:
        lines = f.read().splitlines()
    assert len(lines) >= 2000
    moved = [(line, got) for line in lines if (got := corpus.route_of(line)) != line.split(" | ")[1]]
    assert not moved, f"{len(moved)} of {len(lines)} routes moved; the first: {moved[0][0]} -> {moved[0][1]}"


@pytest.mark.parametrize("dtype", [BF16, F16], ids=str)
def test_16bit_square_per_device(dtype):
    """4096^3 swizzle: the Hopper kernel's 128x256 tile on an H100 and an H200 (132 SMs,
    cc 90), its 512 tiles walked by 132 persistent blocks in clusters of 2 that share B's
    tiles (512 blocks, one a tile, with the persistent option off), the mma.sync kernel's 128x256
    tile on an A100 (108 SMs, cc 80); none and pad stay on mma.sync everywhere (their bank
    conflicts are the point of them)."""
    a, b = meta(4096, 4096, dtype=dtype), meta(4096, 4096, dtype=dtype)
    for device in (H100, H200):
        line = route(a, b, device=device)
        assert line.startswith("wgmma 128x256x64 producer=tma a=mk b=kn repack=none split=1 persistent=1 multicast=2"), line
        assert fields(line)["blocks"] == "132" and fields(line)["scratch"] == "0", line
        with bankops.options(persistent=False):
            line = route(a, b, device=device)
        assert fields(line)["persistent"] == "0" and fields(line)["multicast"] == "1", line
        assert fields(line)["blocks"] == "512", line
    assert route(a, b, device=A100).startswith("mma 128x256x64 fill=cp.async a=mk b=kn"), route(a, b, device=A100)
    for layout in ("none", "pad"):
        assert route(a, b, layout, H100).startswith("mma 128x256x64 fill=cp.async"), layout


def test_persistent_clusters_share_b():
    """Grids of more tiles than SMs run persistent Hopper blocks, one an SM (one wave or less:
    a block a tile, persistent=0). They pair up on m tiles 2i, 2i + 1 to share B's tile
    (multicast=2) where the tiles are 128 columns or wider, there are two m tiles or more and
    an odd count wastes at most a ninth (the last pair's second tile lies past C), and each
    block's half of B is whole 64-column blocks (n-major B) or half its rows (k-major B): a
    128 x 192 tile's n-major B tile, three blocks, does not halve. Else each block loads its
    own (multicast=1)."""
    def f(m, n, k, batch=1):
        line = route(meta(batch, m, k), meta(batch, k, n))
        return dict(fields(line), tile=line.split()[1])
    assert f(4096, 4096, 4096)["multicast"] == "2"
    assert f(256, 32768, 1024)["multicast"] == "2"  # 2 m tiles
    line = f(128, 65536, 1024)  # 1 m tile
    assert line["persistent"] == "1" and line["multicast"] == "1", line
    line = f(384, 16384, 1024)  # 3 m tiles: a wasted third
    assert line["persistent"] == "1" and line["multicast"] == "1", line
    line = f(1152, 4096, 4096)  # 9 m tiles of 128 x 192 x 22 n tiles, B n-major: no halves
    assert line["tile"] == "128x192x64" and line["multicast"] == "1" and line["blocks"] == "132", line
    line = tile_fields(meta(1024, 2048), meta(4608, 2048).t())  # B k-major: 4 pairs x 24 n tiles
    assert (line["tile"], line["multicast"], line["blocks"]) == ("128x192x64", "2", "132"), line
    # 15 m tiles of 128 x 128 (the candidate; 192 x 192 is the route): 8 pairs x 17 n tiles
    (line,) = [fields(c.route) for c in bankops.gemm_route(meta(1920, 520), meta(520, 2112), num_sms=132, cc=90).candidates
               if c.route.split()[1] == "128x128x64" and fields(c.route)["split"] == "1"]
    assert line["multicast"] == "2" and line["blocks"] == "132", line
    line = f(2048, 2048, 2048)  # 128 tiles: one wave
    assert line["persistent"] == "0" and line["multicast"] == "1" and line["blocks"] == "128", line
    assert f(1024, 1024, 1024)["persistent"] == "0"
    with bankops.options(persistent=False):
        assert f(4096, 4096, 4096)["multicast"] == "1"


def test_broad_tiles_where_128x256_leave_a_ragged_wave():
    """128x192 tiles (persistent blocks only) where 128x256 ones end in a short last wave:
    3072^3 is 384 of them (2.9 waves of 132) against 288 of 128x256 (2.2), 1536^3 96 against
    72 in its one wave. Pairs share B's tile where it halves: a k-major B's rows, not an
    n-major B's three 64-column blocks. Without persistent blocks, 128x256; 4096^3 (512 tiles
    of 128x256, 3.9 waves) keeps 128x256."""
    line = tile_fields(meta(3072, 3072), meta(3072, 3072))
    assert (line["tile"], line["persistent"], line["multicast"], line["blocks"]) == ("128x192x64", "1", "1", "132"), line
    line = tile_fields(meta(3072, 3072), meta(3072, 3072).t())
    assert (line["tile"], line["multicast"]) == ("128x192x64", "2"), line
    line = tile_fields(meta(1536, 1536), meta(1536, 1536))
    assert (line["tile"], line["persistent"], line["blocks"]) == ("128x192x64", "1", "96"), line
    assert tile_fields(meta(4096, 4096), meta(4096, 4096))["tile"] == "128x256x64"
    with bankops.options(persistent=False):
        assert tile_fields(meta(3072, 3072), meta(3072, 3072))["tile"] == "128x256x64"


def test_split_last_wave_after_whole_ones():
    """A persistent walk whose last wave needs half the blocks or fewer runs each of its tiles on
    a pair of blocks, half of k each (tail=: the tiles so split): 2048x2304x4096 is 192 tiles of
    128x192, 132 whole and 60 split (at k = 2048: 132 tiles of 192x192, one wave); x @ W.t() at
    1024x4608x2048 in pairs sharing B, 30 pairs left split; 128x256 tiles alike (4352x4096x1032: 544 tiles in pairs, 528 whole and 16
    split). None where the last wave is more than half (3072^3: 384 tiles of 128x192, 120 left;
    4096^3), where a half would have fewer than 8 k-tiles (the sum costs about what a few do),
    with the split_k option off, or without persistent blocks. explain() shows the halves' partials
    through shared memory: one warpgroup of each block stores its partial into the peer's, whose
    matching warpgroup reads it, conflict-free."""
    line = tile_fields(meta(2048, 4096), meta(4096, 2304))
    assert (line["tile"], line["multicast"], line["tail"], line["blocks"]) == ("128x192x64", "1", "60", "132"), line
    line = tile_fields(meta(1024, 2048), meta(4608, 2048).t())
    assert (line["tile"], line["multicast"], line["tail"]) == ("128x192x64", "2", "60"), line
    line = tile_fields(meta(4352, 1032), meta(1032, 4096))
    assert (line["tile"], line["multicast"], line["tail"]) == ("128x256x64", "2", "16"), line
    assert tile_fields(meta(3072, 3072), meta(3072, 3072))["tail"] == "0"
    assert tile_fields(meta(4096, 4096), meta(4096, 4096))["tail"] == "0"
    assert tile_fields(meta(2048, 960), meta(960, 2304))["tail"] == "0"  # 15 k-tiles
    with bankops.options(split_k=False):
        assert tile_fields(meta(2048, 4096), meta(4096, 2304))["tail"] == "0"
    with bankops.options(persistent=False):
        assert tile_fields(meta(2048, 4096), meta(4096, 2304))["tail"] == "0"
    rep = bankops.explain("gemm", "swizzle", torch.bfloat16, m=2048, n=2304, k=4096)
    rows = {row["instruction"]: row for row in rep.rows}
    for name in ("st.shared::cluster half-k partial -> peer (split last wave)", "lds peer's half-k partial"):
        # two warpgroups a tile (one a block), 24 quads of 192 columns a thread: 4 warps x 24 a tile
        assert (rows[name]["iterations"], rows[name]["count"], rows[name]["conflicts"]) == (2 * 60, 4 * 24, 0), str(rep)


def test_slim_tiles_where_wider_ones_leave_sms_idle():
    """128x144 tiles (persistent blocks, A and B k-major: x @ W.t()) where the wider ones leave
    SMs idle or end in a ragged wave: 1156x3712x1000 is 260 of them (10 x 26: 130 pairs over 66
    clusters, two waves) against 200 of 128x192 (1.5 waves), its B's 144 rows halved between a pair. An
    n-major B tile of 144 columns would be three 64-column blocks, the third partly the next
    tile's (measured slower than 128x192): row-major B and an m-major A take other tiles.
    3072^3 keeps 128x192 (528 tiles of 128x144 in 4 waves against 384 in 2.9); without
    persistent blocks, none."""
    line = tile_fields(meta(1156, 1000), meta(3712, 1000).t())
    assert (line["tile"], line["persistent"], line["multicast"], line["blocks"]) == ("128x144x64", "1", "2", "132"), line
    assert tile_fields(meta(1156, 1000), meta(1000, 3712))["tile"] != "128x144x64"
    assert tile_fields(meta(1000, 1156).t(), meta(3712, 1000).t())["tile"] != "128x144x64"
    assert tile_fields(meta(3072, 3072), meta(3072, 3072).t())["tile"] == "128x192x64"
    with bankops.options(persistent=False):
        assert tile_fields(meta(1156, 1000), meta(3712, 1000).t())["tile"] != "128x144x64"


def test_tall_tiles_where_wider_ones_leave_sms_idle():
    """192x96 tiles (three consumers, persistent blocks, unpaired, A and B k-major) where the
    wider ones leave SMs idle: x @ W.t() at 1536^3 is 128 of them (8 x 16, one an SM) against
    132 of 128x144 and 96 of 128x192; 3072x768x16384 alike (128 against 96 of 128x192). An
    n-major B tile of 96 columns would load half of the next tile's block (measured a third
    slower at 3072x768x16384): row-major B takes other tiles. 3072^3 keeps 128x192; a split
    last wave pairs two consumers (tail=0 here always); without persistent blocks, none."""
    line = tile_fields(meta(1536, 1536), meta(1536, 1536).t())
    assert (line["tile"], line["persistent"], line["multicast"], line["tail"], line["blocks"]) == (
        "192x96x64", "1", "1", "0", "128"), line
    assert tile_fields(meta(3072, 16384), meta(768, 16384).t())["tile"] == "192x96x64"
    assert tile_fields(meta(3072, 16384), meta(16384, 768))["tile"] != "192x96x64"
    assert tile_fields(meta(1536, 1536), meta(1536, 1536))["tile"] == "128x192x64"
    assert tile_fields(meta(3072, 3072), meta(3072, 3072).t())["tile"] == "128x192x64"
    with bankops.options(persistent=False):
        assert tile_fields(meta(1536, 1536), meta(1536, 1536).t())["tile"] != "192x96x64"


def test_tall_broad_candidate():
    """192x192 tiles (three consumers of 64 x 192) are a persistent candidate of every operand
    major where C's rows are 16-byte aligned: 1152x4096x1024 is 132 of them, one wave, against
    198 of 128x192; pairs share a k-major B (its 192 rows halve), not an n-major one (its three
    64-column blocks do not); no split last wave (that pairs two consumers); never split, never
    a block a tile."""
    def tall_broad(a, b, **kw):
        return [c.route for c in bankops.gemm_route(a, b, num_sms=132, cc=90, **kw).candidates
                if c.route.split()[1] == "192x192x64"]
    for a in (meta(1152, 1024), meta(1024, 1152).t()):
        for b, multicast in ((meta(1024, 4096), "1"), (meta(4096, 1024).t(), "2")):
            (line,) = tall_broad(a, b)
            f = fields(line)
            assert (f["split"], f["persistent"], f["multicast"], f["tail"], f["blocks"]) == (
                "1", "1", multicast, "0", "132"), line
    assert tall_broad(meta(1152, 1024), meta(1024, 4092)) == []  # C's rows 8184 bytes apart
    with bankops.options(persistent=False):
        assert tall_broad(meta(1152, 1024), meta(1024, 4096)) == []


def test_float32_k_zero_takes_a_block_a_tile():
    """float32 with K = 0 (C is zeros, or the bias) takes the 128x128 tile, a block a tile, on
    a grid that would take 128x256 with any k: that tile's blocks run pieces of k."""
    assert route(meta(4096, 8, dtype=F32), meta(8, 4096, dtype=F32)).startswith("ffma 128x256x8 wide"), "k = 8"
    for b in (meta(0, 4096, dtype=F32), meta(4096, 0, dtype=F32).t()):
        line = route(meta(4096, 0, dtype=F32), b)
        assert line.startswith("ffma 128x128x8 big"), line


def test_float_families():
    """float32 runs the FFMA kernel, float64 the DFMA one (the same family), on any device."""
    line = route(meta(4096, 4096, dtype=F32), meta(4096, 4096, dtype=F32))
    assert line.startswith("ffma 128x256x8 wide a=kvec b=xasync staging=vector"), line
    assert route(meta(4096, 4096, dtype=F64), meta(4096, 4096, dtype=F64)).startswith("ffma 64x64x8 big"), line


def test_sm_count_is_the_devices():
    """The float32 128x256 grid shares its short last wave by k over the device's own SMs:
    4096^3 is 512 tiles, 116 past 3 waves of 132 (132 stream-K blocks), 80 past 4 waves of 108
    (108 blocks); each with partial sums of 128 KB + a flag per stream-K block."""
    a, b = meta(4096, 4096, dtype=F32), meta(4096, 4096, dtype=F32)
    h, r = fields(route(a, b, device=H100)), fields(route(a, b, device=A100))
    assert h["stream_k"] == "132/116" and r["stream_k"] == "108/80", (h, r)
    assert int(h["scratch"]) == 132 * (128 * 256 * 4 + 4) and int(r["scratch"]) == 108 * (128 * 256 * 4 + 4)
    assert h["sms"] == "132" and r["sms"] == "108" and r["cc"] == "80"


def test_operand_majors_and_views():
    """The route reads the operands' strides: a transposed B (x @ W.t()) is Bs[BN][BK]; A with m
    contiguous (the weight gradient dy.t() @ x) As[BK][BM], by TMA; a strided A (no unit
    stride) takes the mma.sync register fill, its tile along the faster dim; rows off 16 bytes
    (odd K) on matrices of 256 x 256 or more are copied into aligned rows first (scratch: both
    copies)."""
    x, w = meta(8192, 4096), meta(4096, 4096)
    assert fields(route(x, w.t()))["b"] == "nk"
    dy, x = meta(8192, 4096), meta(8192, 4096)
    line = route(dy.t(), x)
    assert line.startswith("wgmma 128x256x64 producer=tma a=km b=kn repack=none"), line
    strided = meta(8192, 8192)[:, ::2].t()  # (4096, 8192), strides (2, 8192): m the faster dim
    assert route(strided, x).startswith("mma 128x128x32 fill=registers a=km b=kn"), route(strided, x)
    a, b = meta(4095, 4093), meta(4093, 4097)
    line = route(a, b)
    assert line.startswith("wgmma 128x256x64 producer=tma") and fields(line)["repack"] == "a,b", line
    assert int(fields(line)["scratch"]) >= 2 * (4095 * 4096 + 4093 * 4160)
    off = meta(4096 * 4096 + 1)[1:].view(4096, 4096)  # a storage offset of one element
    assert fields(route(off, meta(4096, 4096)))["repack"] == "a"


def test_options():
    """bankops.options(wgmma=False) keeps 16-bit calls on mma.sync, repack=False realigns in the
    Hopper kernel's producers instead of copying, stream_k=False gives ragged float32 grids to
    the 128x128 tile; the options are read once per call, and explain follows."""
    a, b = meta(4096, 4096), meta(4096, 4096)
    with bankops.options(wgmma=False):
        assert route(a, b).startswith("mma 128x256x64"), route(a, b)
        assert {r["kernel"] for r in bankops.explain("gemm", "swizzle", BF16, m=4096, n=4096, k=4096, cc=90).rows} == {
            "gemm_mma/cp.async"}
    with bankops.options(repack=False):
        line = route(meta(4095, 4093), meta(4093, 4097))
        assert line.startswith("wgmma 128x128x64 producer=realign") and fields(line)["scratch"] == "0", line
    f = meta(4096, 4096, dtype=F32), meta(4096, 4352, dtype=F32)
    assert route(*f).startswith("ffma 128x256x8 wide"), route(*f)
    with bankops.options(stream_k=False):
        assert route(*f).startswith("ffma 128x128x8 big"), route(*f)


def test_options_are_the_calling_threads():
    """A thread's options are its own: another thread plans with the defaults meanwhile, and the
    block's end restores what was there (nested blocks too). Bad names and values are refused,
    naming the option and what is expected."""
    a, b = meta(4096, 4096), meta(4096, 4096)
    seen = {}
    inside, leave = threading.Event(), threading.Event()

    def other():
        inside.wait()
        seen["other"] = route(a, b)
        leave.set()

    t = threading.Thread(target=other)
    t.start()
    with bankops.options(wgmma=False):
        with bankops.options(split_k=False):
            assert torch.ops.bankops._gemm_options("").startswith("wgmma=0,repack=1,stream_k=1,split_k=0")
        assert torch.ops.bankops._gemm_options("") == \
            "wgmma=0,repack=1,stream_k=1,split_k=1,persistent=1,prefetch=1,refuse_tma=0,plan=0"
        inside.set()
        leave.wait(30)
        seen["mine"] = route(a, b)
    t.join()
    assert seen["other"].startswith("wgmma 128x256x64") and seen["mine"].startswith("mma 128x256x64"), seen
    assert route(a, b).startswith("wgmma 128x256x64")
    with pytest.raises(TypeError, match=r"unknown option 'turbo'; expected one of: wgmma, repack"):
        with bankops.options(turbo=True):
            pass
    with pytest.raises(TypeError, match=r"expected split_k=True or False, got 2"):
        with bankops.options(split_k=2):
            pass
    assert torch.ops.bankops._gemm_options("").startswith("wgmma=1")


def test_route_fields_and_candidates():
    """bankops.gemm_route's result is the route line (str) with its fields by name and the plans
    the router weighed: every legal one of each tier it reached, in order, the chosen one among
    them once; the Hopper plans with the time their model predicts, mma.sync's without (no
    model), and the chosen Hopper plan the least of them by a tenth or more, or the first."""
    a, b = meta(4096, 4096), meta(4096, 4096)
    r = bankops.gemm_route(a, b, num_sms=132, cc=90)
    assert isinstance(r, str) and r == route(a, b)
    f = r.fields
    assert (f["family"], f["tile"], f["split"], f["persistent"], f["multicast"], f["layout"]) == (
        "wgmma", "128x256x64", 1, 1, 2, "swizzle"), f
    cands = r.candidates
    chosen = [c for c in cands if c.chosen]
    assert len(chosen) == 1 and chosen[0].route == r and chosen[0].tier == "hopper", cands
    hopper = [c for c in cands if c.tier == "hopper"]
    assert len(hopper) > 5 and all(c.predicted_us is not None and c.predicted_us > 0 for c in hopper), hopper
    assert [c.tier for c in cands][-1] == "mma" and cands[-1].predicted_us is None
    best = hopper[0].predicted_us
    for c in hopper[1:]:
        if c.predicted_us < 0.9 * best:
            best = c.predicted_us
    assert chosen[0].predicted_us == best
    rows = bankops.gemm_route(meta(8, 4096, dtype=F32), meta(4096, 4096, dtype=F32).t(), num_sms=132, cc=90)
    assert rows.fields["family"] == "rows" and "ring" not in rows.fields, rows
    assert [c.tier for c in rows.candidates if c.chosen] == ["rows"]
    ring = bankops.gemm_route(meta(16, 4096, dtype=F32), meta(4096, 4096, dtype=F32).t(), num_sms=132, cc=90)
    assert ring.fields["ring"] is True and ring.fields["split"] >= 1, ring


def test_plan_option_takes_that_plan():
    """bankops.options(plan=key) makes the call take the candidate of that key, whatever its tier
    or predicted time (the tuner times each this way); a key no legal plan of the call has raises."""
    a, b = meta(4096, 4096), meta(4096, 4096)
    r = bankops.gemm_route(a, b, num_sms=132, cc=90)
    assert r.chosen_by == "model"
    others = [c for c in r.candidates if not c.chosen]
    assert len({c.key for c in r.candidates}) == len(r.candidates) and others, r.candidates
    for c in (others[0], others[-1]):
        with bankops.options(plan=c.key):
            forced = bankops.gemm_route(a, b, num_sms=132, cc=90)
        assert forced == c.route and forced.chosen_by == "option", (forced, c)
    with bankops.options(plan=12345):
        with pytest.raises(RuntimeError, match=r"options\(plan=12345\) names no legal plan of this call"):
            route(a, b)
    with pytest.raises(TypeError, match="expected plan=<a candidate's key"):
        with bankops.options(plan=-1):
            pass


def test_tuned_table_is_taken_near_its_shapes(tmp_path):
    """A GPU's measured table (bankops.tune's format, loaded with bankops.tune.load): a call of the
    same dtype, layout and majors within a factor of two of an entry's shape on one dim takes
    the entry's plan where the call has it (gemm_route says the table chose); farther calls, other
    dtypes or majors, other GPUs, a plan the call does not have, and the GPU after its table is
    dropped take the model's."""
    from bankops import tune

    a, b = meta(4096, 4096), meta(4096, 4096)
    model = bankops.gemm_route(a, b, num_sms=132, cc=90, gpu="Test GPU")
    want = next(c for c in model.candidates if c.route.fields["tile"] == "128x128x64" and c.route.fields["split"] == 1)
    entry = dict(dtype="bfloat16", layout="swizzle", a_km=False, b_kn=True, batch=1, m=4096, n=4096, k=4096,
                 plan=want.key)
    table = dict(format=tune.FORMAT, gpu="Test GPU", sms=132, cc=90, driver="0.0", entries=[entry])
    path = tmp_path / "test-gpu.json"
    path.write_text(json.dumps(table))
    tune.load(str(path))
    try:
        near = bankops.gemm_route(a, b, num_sms=132, cc=90, gpu="Test GPU")
        assert near.fields["tile"] == "128x128x64" and near.chosen_by == "table test-gpu.json", near
        assert near == bankops.gemm_route(a, b, num_sms=132, cc=90, gpu="Test GPU"), "the same table, the same plan"
        wider = bankops.gemm_route(meta(4096, 8192), meta(8192, 4096), num_sms=132, cc=90, gpu="Test GPU")
        assert wider.fields["tile"] == "128x128x64" and wider.chosen_by.startswith("table"), wider
        for other in [bankops.gemm_route(meta(1024, 1024), meta(1024, 1024), num_sms=132, cc=90, gpu="Test GPU"),
                      bankops.gemm_route(meta(4096, 4096, dtype=F16), meta(4096, 4096, dtype=F16), num_sms=132, cc=90,
                                         gpu="Test GPU"),
                      bankops.gemm_route(a, meta(4096, 4096).t(), num_sms=132, cc=90, gpu="Test GPU"),
                      bankops.gemm_route(a, b, num_sms=132, cc=90, gpu="Other GPU"),
                      bankops.gemm_route(a, b, num_sms=114, cc=90, gpu="Test GPU")]:
            assert other.chosen_by == "model", other
        assert bankops.explain("gemm", "swizzle", BF16, m=4096, n=4096, k=4096, num_sms=132, cc=90,
                               gpu="Test GPU").route == near
        entry["plan"] = 12345  # no call has it
        path.write_text(json.dumps(table))
        tune.load(str(path))
        assert bankops.gemm_route(a, b, num_sms=132, cc=90, gpu="Test GPU") == model
        # An entry where the model's plan was fastest leaves calls near it to the model, each
        # with the plan the model gives its own shape.
        path.write_text(json.dumps(dict(table, entries=[dict(entry, plan=want.key, model_plan=want.key)])))
        tune.load(str(path))
        for x, y in [(a, b), (meta(4096, 8192), meta(8192, 4096))]:
            assert bankops.gemm_route(x, y, num_sms=132, cc=90, gpu="Test GPU").chosen_by == "model"
    finally:
        tune.unregister("Test GPU", 132)
    assert bankops.gemm_route(a, b, num_sms=132, cc=90, gpu="Test GPU").chosen_by == "model"
    path.write_text(json.dumps(dict(table, format="other/1")))
    with pytest.raises(ValueError, match="is not a bankops-tuning/1 table"):
        tune.load(str(path))
    path.write_text(json.dumps(dict(table, entries=[dict(entry, dtype="int8")])))
    with pytest.raises(ValueError, match="test-gpu.json"):
        tune.load(str(path))


def test_users_table_layers_over_the_shipped_one(tmp_path, monkeypatch):
    """A table outside bankops/tuning/ (the user's, bankops.tune's default) adds to the shipped table
    of its GPU: calls near its entries take its plans, calls near only the shipped entries theirs,
    and where both timed the same call the user's entry stands; chosen_by names both files. A
    shipped file, and one of a GPU nothing ships for, stand alone."""
    from bankops import _tuning, tune

    a, b = meta(4096, 4096), meta(4096, 4096)
    model = bankops.gemm_route(a, b, num_sms=132, cc=90, gpu="Test GPU")
    plans = {c.route.fields["tile"]: c.key for c in model.candidates if c.route.fields.get("split") == 1}
    def entry(m, tile):
        return dict(dtype="bfloat16", layout="swizzle", a_km=False, b_kn=True, batch=1, m=m, n=4096, k=4096,
                    plan=plans[tile])
    head = dict(format=tune.FORMAT, gpu="Test GPU", sms=132, cc=90, driver="0.0")
    package, user = tmp_path / "package", tmp_path / "user"
    package.mkdir(), user.mkdir()
    (package / "test-gpu.json").write_text(json.dumps(dict(head, entries=[entry(4096, "128x128x64"),
                                                                        entry(16384, "128x128x64")])))
    (user / "test-gpu.json").write_text(json.dumps(dict(head, entries=[entry(16384, "128x192x64")])))
    monkeypatch.setattr(_tuning, "PACKAGE_DIR", str(package))
    monkeypatch.setenv("BANKOPS_TUNING_DIR", str(user))

    def routed(m):
        r = bankops.gemm_route(meta(m, 4096), b, num_sms=132, cc=90, gpu="Test GPU")
        return r.fields["tile"], r.chosen_by

    try:
        _tuning.load_all()
        by = "table test-gpu.json over test-gpu.json"
        assert routed(4096) == ("128x128x64", by), "the shipped entry serves a call the user did not time"
        assert routed(16384) == ("128x192x64", by), "the user's entry of the same call stands"
        tune.load(str(package / "test-gpu.json"))
        assert routed(16384) == ("128x128x64", "table test-gpu.json"), "a shipped file stands alone"
        alone = dict(head, gpu="Other GPU", entries=[entry(16384, "128x192x64")])
        assert tune.layered(alone, "x.json", str(user / "x.json")) == (alone, "x.json")
        (user / "nameless.json").write_text(json.dumps(dict(format=tune.FORMAT, sms=132, entries=[])))
        with pytest.raises(ValueError, match="nameless.json"):
            tune.load(str(user / "nameless.json"))
    finally:
        tune.unregister("Test GPU", 132)
    monkeypatch.undo()
    _tuning.load_all()


def test_tuner_report_lists_each_call():
    """python -m bankops.tune --report: a line a call with the model's plan and time beside the
    table's (the model's own named as such), their ratio, and the table's GPU and conditions."""
    from bankops import tune
    rows = "rows 8x64x256 a=mk b=kn split={} stages=4{} layout=swizzle blocks=128 sms=132 cc=90 scratch=0"
    entries = [dict(dtype="bfloat16", layout="swizzle", a_km=False, b_kn=True, batch=1, m=8, n=4096, k=4096, plan=2,
                    route=rows.format(2, ""), us=12.0, model_plan=1,
                    model_route="mma 32x128x128 fill=cp.async a=mk b=kn split=3 layout=swizzle blocks=96", model_us=13.5),
               dict(dtype="float16", layout="swizzle", a_km=True, b_kn=True, batch=2, m=64, n=64, k=64, plan=3,
                    route=rows.format(1, " persistent"), us=2.0, model_plan=3, model_route=rows.format(1, " persistent"),
                    model_us=2.0)]
    table = dict(gpu="Test GPU", sms=132, driver="1.0", torch="2.x", date="2026-12-03", entries=entries)
    lines = tune.report(table)
    assert lines[0] == "Test GPU (132 SMs, driver 1.0, torch 2.x, 2026-12-03): 2 calls", lines
    assert lines[-2] == "| bfloat16 | swizzle | 8x4096x4096 | mk, kn | mma 32x128x128 split=3 | 13.5 | rows 8x64x256 split=2 | 12.0 | 1.125 |"
    assert lines[-1] == "| float16 | swizzle | 2x64x64x64 | km, kn | rows 8x64x256 split=1 persistent | 2.0 | the model's | 2.0 | 1.000 |"

def test_tuner_update_replaces_the_calls_it_timed():
    """python -m bankops.tune --update: the calls timed now replace their entries in the table, the
    others stay in their order, the header is the new run's; another GPU's, driver's or torch's
    table is refused (its times do not compare)."""
    from bankops import tune

    def entry(m, us, dtype="bfloat16"):
        return dict(dtype=dtype, layout="swizzle", a_km=False, b_kn=False, batch=1, m=m, n=4096, k=4096, us=us)

    head = dict(format=tune.FORMAT, gpu="Test GPU", sms=132, cc=90, driver="1.0", torch="2.x")
    old = dict(head, date="2026-12-03", entries=[entry(1, 10.0), entry(8, 11.0), entry(64, 12.0)])
    new = dict(head, date="2026-12-04", entries=[entry(8, 9.0), entry(8, 20.0, "float32")])
    got = tune.merged(old, new)
    assert got["date"] == "2026-12-04"
    assert [(e["dtype"], e["m"], e["us"]) for e in got["entries"]] == [
        ("bfloat16", 1, 10.0), ("bfloat16", 64, 12.0), ("bfloat16", 8, 9.0), ("float32", 8, 20.0)]
    for field, value in (("gpu", "Other GPU"), ("driver", "2.0"), ("torch", "3.x")):
        with pytest.raises(ValueError, match=f"cannot update a table of {field}"):
            tune.merged(dict(old, **{field: value}), new)


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(os.path.dirname(bankops.__file__), "tuning", "*.json"))),
                         ids=os.path.basename)
def test_shipped_tables_hold_what_the_tuner_wrote(path):
    """Each table shipped in bankops/tuning/ loads, is named for its GPU, and each entry is what
    bankops.tune writes: the plan it names timed among the call's plans, the model's too, and
    another plan than the model's only where it ended sooner by the tuner's margin."""
    from bankops import tune

    table = tune.load(path)
    assert os.path.basename(path) == tune.slug(table["gpu"]) + ".json" and table["sms"] > 0 and table["entries"]
    for e in table["entries"]:
        assert_tuned_entry(e)


def assert_tuned_entry(e):
    """A table entry as bankops.tune writes it: its plan's and the model's times among the timed
    plans, its plan the model's exactly where its route is, another only by the tuner's margin."""
    from bankops import tune

    timed = dict((r, us) for r, us in e["timed"])
    assert timed[e["route"]] == e["us"] and timed[e["model_route"]] == e["model_us"], e["route"]
    assert (e["plan"] == e["model_plan"]) == (e["route"] == e["model_route"]), e["route"]
    assert e["plan"] == e["model_plan"] or e["us"] < (1 - tune.MARGIN) * e["model_us"], e["route"]


def linear_calls(m, k, n, dtype="float32", layout="swizzle"):
    """A Linear layer's three products as the tuner names them: y = x @ W.t(), dx = dy @ W, dW = dy.t() @ x."""
    from bankops.tune import Call
    return [Call(f"{m}x{n}x{k}t", dtype, layout, 1), Call(f"{m}x{k}x{n}", dtype, layout, 1),
            Call(f"t{n}x{k}x{m}", dtype, layout, 1)]


def test_tuner_records_a_models_calls(tmp_path):
    """bankops.tune.record(): every gemm and linear call made inside it, on any thread and in
    backward, once per distinct call (dtype, layout, majors, batch, m, n, k) in the order first
    made, with its count, in the tuner's shape names; nothing outside it, no call with a zero dim;
    records do not nest. The calls go to a file and back, and tune() times each in its own dtype
    and layout where it crosses shape strings with the dtypes and layouts given."""
    from bankops import tune

    lin = bankops.nn.Linear(64, 48)
    x = torch.randn(3, 5, 64, requires_grad=True)
    bankops.gemm(torch.randn(4, 4), torch.randn(4, 4))  # before: not recorded
    with tune.record() as calls:
        (lin(x) * torch.randn(3, 5, 48)).sum().backward()
        for _ in range(2):
            bankops.gemm(torch.randn(9, 7).t(), torch.randn(11, 9).t())
        worker = threading.Thread(target=lambda: bankops.gemm(torch.randn(2, 7, 9), torch.randn(2, 9, 4), "pad"))
        worker.start()
        worker.join()
        bankops.gemm(torch.randn(0, 9), torch.randn(9, 4))
        assert calls == [], "filled when the block ends"
        with pytest.raises(RuntimeError, match="does not nest"):
            with tune.record():
                pass
    bankops.gemm(torch.randn(5, 5), torch.randn(5, 5))  # after: not recorded
    assert calls == linear_calls(15, 64, 48) + [tune.Call("t7x11x9t", "float32", "swizzle", 2),
                                                tune.Call("2x7x4x9", "float32", "pad", 1)], calls
    with tune.record() as again:
        pass
    assert again == []
    for c in calls:
        s = tune.parse_shape(c.shape)
        assert tune.shape_text(*s) == c.shape, s
    path = str(tmp_path / "calls.json")
    tune.write_calls(calls, path)
    assert tune.read_calls(path) == calls
    for bad, match in (([{"shape": "8x8"}], "does not hold recorded calls"),
                       ([dict(calls[0]._asdict(), dtype="int8")], "expected one of float16"),
                       ([dict(calls[0]._asdict(), shape="8x8x8x8x8")], "expected a shape as MxNxK or BxMxNxK")):
        with open(path, "w") as f:
            json.dump(bad, f)
        with pytest.raises(ValueError, match=match):
            tune.read_calls(path)
    todo = tune.to_time(calls[:1] + ["8x4096x4096t"], ("bfloat16", "float16"), ("swizzle",))
    assert todo == [(tune.Shape(1, 15, 48, 64, False, True), "float32", "swizzle"),
                    (tune.Shape(1, 8, 4096, 4096, False, True), "bfloat16", "swizzle"),
                    (tune.Shape(1, 8, 4096, 4096, False, True), "float16", "swizzle")], todo
    for dtypes, layouts, match in ((("int8",), ("swizzle",), "unknown dtype 'int8'"),
                                   (("float32",), ("wide",), "unknown layout 'wide'")):
        with pytest.raises(ValueError, match=match):
            tune.to_time(["8x8x8"], dtypes, layouts)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_tuner_checks_each_plan_against_a_times_b(dtype):
    """The tuner times only plans whose result agrees with a @ b to the dtype's rounding: a result
    rounded from float32 passes; one NaN, one element off by a few units of its size, or an
    unwritten (zero) output fails."""
    from bankops import tune

    torch.manual_seed(0)
    a, b = torch.randn(37, 301, dtype=dtype), torch.randn(301, 53, dtype=dtype)
    ref, bound = tune.answer(a, b)
    out = (a.float() @ b.float()).to(dtype)
    assert tune.agrees(out, ref, bound)
    for bad in (float("nan"), out[3, 4].item() + 8 * bound[3, 4].item()):
        wrong = out.clone()
        wrong[3, 4] = bad
        assert not tune.agrees(wrong, ref, bound)
    assert not tune.agrees(torch.zeros_like(out), ref, bound)


@requires_cuda
def test_cuda_tuner_writes_and_takes_its_table(tmp_path):
    """bankops.tune on the GPU at hand: every legal plan of each call timed, the fastest written
    (with each plan's time) where it beat the model's by the margin, and the same calls then
    routed by the table to it (else by the model to the model's), with the bits of that plan
    forced by its key."""
    from bankops import tune

    out = tmp_path / "table.json"
    table = tune(["256x512x384", "8x4096x4096t"], dtypes=("bfloat16",), out=str(out), reps=3, log=lambda *_: None)
    try:
        assert out.exists() and len(table["entries"]) == 2
        for e, (a_t, b_t) in zip(table["entries"], [(False, False), (False, True)]):
            assert_tuned_entry(e)
            assert "wrong" not in e, e["wrong"]
            assert e["us"] <= e["model_us"], e
            assert e["us"] == min(us for _, us in e["timed"]) or e["plan"] == e["model_plan"], e
            a, b = tune.operands(e["m"], e["n"], e["k"], a_t, b_t, torch.bfloat16)
            r = bankops.gemm_route(a, b)
            by = "model" if e["plan"] == e["model_plan"] else "table table.json"  # over the shipped table, if any
            assert r.chosen_by.split(" over ")[0] == by and str(r) == e["route"], (r, e["route"])
            with bankops.options(plan=e["plan"]):
                want = bankops.gemm(a, b)
            assert torch.equal(bankops.gemm(a, b), want)
    finally:
        tune.unregister(table["gpu"], table["sms"])
        bankops._tuning.load_all()  # the GPU's shipped table again, for the tests after this one


@requires_cuda
def test_cuda_tuner_times_the_calls_a_model_recorded(tmp_path):
    """A bfloat16 Linear layer's forward and backward on the GPU recorded (the backward's two
    products come from autograd's device thread), then tuned: one entry a call, each keyed with
    the majors the router saw when it was recorded."""
    from bankops import tune

    lin = bankops.nn.Linear(256, 384, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(24, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    with tune.record() as calls:
        (lin(x) * torch.randn(24, 384, device="cuda", dtype=torch.bfloat16)).sum().backward()
    assert calls == linear_calls(24, 256, 384, "bfloat16"), calls
    table = tune(calls, out=str(tmp_path / "table.json"), reps=2, log=lambda *_: None)
    try:
        got = [(e["dtype"], e["layout"], e["a_km"], e["b_kn"], e["m"], e["n"], e["k"]) for e in table["entries"]]
        assert got == [("bfloat16", "swizzle", False, False, 24, 384, 256), ("bfloat16", "swizzle", False, True, 24, 256, 384),
                       ("bfloat16", "swizzle", True, True, 384, 256, 24)], got
    finally:
        tune.unregister(table["gpu"], table["sms"])
        bankops._tuning.load_all()


@requires_cuda
def test_cuda_table_plans_near_their_shapes():
    """Each entry of this GPU's shipped table that names a plan (one the model did not pick):
    every m from half to twice its rows (about 64 of them where its rows are many, its own
    among them) takes a plan the table or the model chose, the entry's own shape the table's,
    and computes the product (against float64), with the same bits on every call and as its
    plan forced by its key."""
    from bankops import tune
    from test_gemm_majors import check  # noqa: PLC0415  (it imports this module)

    path = os.path.join(os.path.dirname(bankops.__file__), "tuning", tune.slug(torch.cuda.get_device_name()) + ".json")
    if not os.path.exists(path):
        pytest.skip(f"no table ships for {torch.cuda.get_device_name()}")
    entries = [e for e in tune.load(path)["entries"] if e["plan"] != e["model_plan"]]  # registered afresh
    for e in entries:
        dtype = getattr(torch, e["dtype"])
        step = max(1, 3 * e["m"] // 2 // 64)  # the 1.5 m values from m / 2 to 2 m, 64 of them
        for m in sorted({*range(max(1, e["m"] // 2), 2 * e["m"] + 1, step), e["m"]}):
            a, b = tune.operands(m, e["n"], e["k"], e["a_km"], not e["b_kn"], dtype)
            r = bankops.gemm_route(a, b, e["layout"])
            assert r.chosen_by in ("model", "table " + os.path.basename(path)), r.chosen_by
            if m == e["m"]:
                assert r.chosen_by != "model" and str(r) == e["route"], (str(r), e["route"])
            got = bankops.gemm(a, b, e["layout"])
            check(got, a, b)
            assert torch.equal(got, bankops.gemm(a, b, e["layout"])), ("the same bits every call", m, str(r))
            key = next(c.key for c in r.candidates if c.chosen)
            with bankops.options(plan=key):
                assert torch.equal(got, bankops.gemm(a, b, e["layout"])), ("the bits of its plan", m, str(r))


def test_explain_prints_the_route():
    """explain's report opens with the route line of the same problem, device and switches."""
    rep = bankops.explain("gemm", "swizzle", BF16, m=1024, n=1024, k=1024, num_sms=132, cc=90)
    assert rep.route == route(meta(1024, 1024), meta(1024, 1024)), rep.route
    assert rep.route.startswith("wgmma 128x64x64")
    lines = str(rep).splitlines()
    assert lines[1] == f"route: {rep.route}"
    chosen = [line for line in lines if line.startswith("  * ")]
    assert len(chosen) == 1 and chosen[0].split()[1] == "hopper" and chosen[0].endswith(str(rep.route)), lines[:12]
    rep = bankops.explain("gemm", "pad", F32, m=2048, n=2048, k=2048, a_transposed=True, num_sms=132)
    assert rep.route == route(meta(2048, 2048, dtype=F32).t(), meta(2048, 2048, dtype=F32), "pad"), rep.route
    assert bankops.gemm_route(meta(64, 64, dtype=F32), meta(64, 64, dtype=F32), num_sms=132, cc=90).startswith("ffma")


@pytest.mark.parametrize("bad", [dict(num_sms=0), dict(num_sms=2**32), dict(num_sms=-1), dict(cc=0), dict(cc=900)])
def test_bad_device(bad):
    """The device numbers are checked and named, never cast silently (0 SMs divides by zero)."""
    kw = dict(num_sms=132, cc=90) | bad
    with pytest.raises(RuntimeError, match="num_sms" if "num_sms" in bad else "cc"):
        torch.ops.bankops._gemm_route(meta(64, 64), meta(64, 64), "swizzle", kw["num_sms"], kw["cc"])
    with pytest.raises(RuntimeError, match="layout"):
        torch.ops.bankops._gemm_route(meta(64, 64), meta(64, 64), "diagonal", 132, 90)
    with pytest.raises(RuntimeError, match="columns"):
        torch.ops.bankops._gemm_route(meta(64, 63), meta(64, 64), "swizzle", 132, 90)


# The kernel names the profiler records, and the tile each route family's configuration spells.
def _tile_of(name):
    found = re.search(r"(?:Wgmma|Mma)Config<(\d+), (\d+), (\d+)", name)
    if found:
        return tuple(int(v) for v in found.groups())
    found = re.search(r"GemmShape<(\d+), (\d+), (\d+), (\d+), (\d+), \d+, (\d+)", name)
    assert found, name
    acc, qm, qn, wm, wn, bk = (int(v) for v in found.groups())
    vec = 16 // acc
    return wm * 4 * qm * vec, wn * 8 * qn * vec, bk


def _launched(fn):
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if "_kernel<" in e.name and "bankops" in e.name]


CASES = [  # (m, n, k, dtype, layout, views)
    (4096, 4096, 4096, BF16, "swizzle", "nn"), (4096, 4096, 4096, F16, "pad", "nn"),
    (1024, 1024, 1024, BF16, "swizzle", "nt"), (1536, 1536, 1536, F16, "swizzle", "nn"),
    (4095, 4097, 4093, BF16, "swizzle", "nn"), (1023, 2047, 130, F16, "none", "tn"),
    (4096, 4096, 4096, F32, "swizzle", "nn"), (2048, 2048, 2048, F32, "none", "tt"),
    (4095, 4097, 4093, F32, "pad", "nn"), (700, 515, 1029, F64, "swizzle", "nn"),
]


@requires_cuda
@pytest.mark.parametrize("m,n,k,dtype,layout,views", CASES, ids=lambda v: str(v).replace("torch.", ""))
def test_launcher_runs_the_route(m, n, k, dtype, layout, views):
    """On the current GPU, the gemm kernel launched is the route's family, tile and form
    (persistent or not) (and a copy kernel runs first exactly when the route copies operands)."""
    a = torch.randn(m, k, device="cuda").to(dtype) if views[0] == "n" else torch.randn(k, m, device="cuda").to(dtype).t()
    b = torch.randn(k, n, device="cuda").to(dtype) if views[1] == "n" else torch.randn(n, k, device="cuda").to(dtype).t()
    line = bankops.gemm_route(a, b, layout)
    names = _launched(lambda: bankops.gemm(a, b, layout))
    if not names:
        warnings.warn("the profiler recorded no bankops kernel: the launcher's choice is not checked")
        return
    family = line.split()[0] + ("_persistent" if fields(line).get("persistent") == "1" else "")
    gemm = [n for n in names if f"::{family}_kernel<" in n]
    assert len(gemm) == 1 and len(names) == 1 + (fields(line).get("repack", "none") != "none"), (line, names)
    tile = tuple(int(v) for v in line.split()[1].split("x"))
    assert _tile_of(gemm[0]) == tile, (line, gemm[0])
