"""bankops.explain (each kernel's shared-memory instructions through the bank model), the
bank maps of bankops.plot_banks and the bank probe's arguments. The predictions themselves
are checked against Nsight Compute by bench/ncu.py on the GPU."""
import pytest
import torch

import bankops
from bankops.explain import OPS
from conftest import LAYOUTS, requires_cuda

LANES = torch.arange(32)
F32, F16, BF16, F64 = torch.float32, torch.float16, torch.bfloat16, torch.float64

# (op, dtype, shape) for every kernel family and accumulator width the operators launch.
CALLS = [
    ("transpose", dt, dict(shape=(256, 320)))
    for dt in (torch.int8, F16, F32, F64, torch.complex128)
] + [
    ("reduce_sum", dt, shape)
    for dt in (F16, F32, F64, torch.int32)
    for shape in (dict(shape=(1 << 20,)), dict(shape=(8, 1 << 16), dim=-1), dict(shape=(4096, 96), dim=0),
                  dict(shape=(8, 300, 40), dim=1))
] + [
    ("gemm", dt, dict(m=256, n=192, k=160, a_transposed=at, b_transposed=bt))
    for dt in (F16, BF16, F32, F64)
    for at, bt in ((False, False), (True, True))
]


def ids(call):
    op, dt, shape = call
    return f"{op}-{str(dt).replace('torch.', '')}-" + "-".join(f"{k}={v}" for k, v in shape.items())


def moved_bytes(report):
    out = {}
    for r in report.rows:
        out[r["op"]] = out.get(r["op"], 0) + r["count"] * r["width"]
    return out


def conflicts(report, kinds=OPS):
    return sum(r["wavefronts"] - r["ideal"] for r in report.rows if r["op"] in kinds)


@pytest.mark.parametrize("call", CALLS, ids=ids)
def test_layouts_keep_their_promise(call):
    """swizzle: no bank conflict on any instruction; pad: fewer than none; none: conflicts
    (the point of the package, predicted from the kernels' own index functions)."""
    op, dtype, shape = call
    # One kernel for the three layouts: 16-bit gemm's swizzle takes the Hopper kernel on an
    # H100 (tests/test_gemm_wgmma.py), so these compare the mma.sync kernel's.
    none, pad, swizzle = (bankops.explain(op, layout, dtype, hopper=False, **shape) for layout in LAYOUTS)
    assert conflicts(none) > 0
    # pad is for the accesses that walk a tile column; its shifted rows cost cp.async extra
    # wavefronts instead (seed 003: test_pad_breaks_cp_async_lines).
    assert conflicts(pad, ("ld", "st", "ldsm")) < conflicts(none, ("ld", "st", "ldsm"))
    assert [r["instruction"] for r in swizzle.rows if r["wavefronts"] != r["ideal"]] == []
    # The layouts change where values sit, never how many bytes move (under `none` ptxas may
    # merge two neighbouring 4-byte loads into one 8-byte load, so instructions can differ).
    assert moved_bytes(none) == moved_bytes(swizzle)


@pytest.mark.parametrize("dtype", [F16, F32, F64])
def test_warp_per_row_needs_no_layout(dtype):
    """Rows short enough for a warp each reduce in registers and shuffles: shared memory only
    carries one sum per warp, so no layout has a conflict to remove."""
    reports = [bankops.explain("reduce_sum", layout, dtype, shape=(64, 4096), dim=-1) for layout in LAYOUTS]
    assert [conflicts(r) for r in reports] == [0, 0, 0]
    assert all(r["kernel"] == "reduce_rows" for r in reports[0].rows)


@pytest.mark.parametrize("call", CALLS, ids=ids)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_rows_are_consistent(call, layout):
    op, dtype, shape = call
    rep = bankops.explain(op, layout, dtype, **shape)
    assert rep.rows, "every operator stages through shared memory"
    for i, r in enumerate(rep.rows):
        assert r["op"] in OPS
        assert r["width"] in (1, 2, 4, 8, 16)
        assert r["count"] > 0 and r["iterations"] > 0
        assert r["ideal"] <= r["wavefronts"] <= 32 * r["count"]
        assert r["per_instruction"] == pytest.approx(r["wavefronts"] / r["count"])
        assert r["conflicts"] == (r["wavefronts"] - r["ideal"]) * r["iterations"]
        # The worst warp access is a real access, and the model costs it as recorded.
        addr, width = rep.worst_access(i)
        active = sum(1 << lane for lane, a in enumerate(addr) if a >= 0)
        store = r["op"] != "ld"
        cost = torch.ops.bankops._bank_cost(torch.tensor([max(a, 0) for a in addr]), width, active, store).tolist()
        assert r["worst_wavefronts"] >= r["per_instruction"]
        if r["op"] == "ldgsts":  # the map holds shared addresses only; global lines can add wavefronts
            assert cost[0] <= r["worst_wavefronts"]
        else:
            assert cost[0] == r["worst_wavefronts"]
    for kind, t in rep.totals.items():
        rows = [r for r in rep.rows if r["op"] == kind]
        assert t["instructions"] == sum(r["count"] * r["iterations"] for r in rows)
        assert t["wavefronts"] == sum(r["wavefronts"] * r["iterations"] for r in rows)
    assert rep.conflicts == sum(r["conflicts"] for r in rep.rows)


def test_transpose_column_read_costs_what_seed_004_says():
    """The transpose's tile-column read under none: 32 lanes in one bank (float32)."""
    rep = bankops.explain("transpose", "none", F32, shape=(4096, 4096))
    worst = max(rep.rows, key=lambda r: r["per_instruction"])
    assert worst["op"] == "ld" and worst["worst_wavefronts"] == 32
    assert bankops.explain("transpose", "pad", F32, shape=(4096, 4096)).conflicts == 0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_totals_scale_with_the_problem(layout):
    one = bankops.explain("transpose", layout, F32, shape=(100, 200))
    three = bankops.explain("transpose", layout, F32, shape=(3, 100, 200))
    for kind in ("ld", "st"):
        assert three.totals[kind]["instructions"] == 3 * one.totals[kind]["instructions"] > 0
        assert three.totals[kind]["wavefronts"] == 3 * one.totals[kind]["wavefronts"]
    g1 = bankops.explain("gemm", layout, F64, m=128, n=128, k=128)
    g2 = bankops.explain("gemm", layout, F64, m=128, n=128, k=128, batch=2)
    assert g2.conflicts == 2 * g1.conflicts
    assert {k: 2 * v["instructions"] for k, v in g1.totals.items()} == {k: v["instructions"] for k, v in g2.totals.items()}


def test_table_and_empty_problems():
    text = str(bankops.explain("reduce_sum", "none", F32, shape=(4096, 96), dim=0))
    assert "instruction" in text and "per launch, ld:" in text and "conflicts" in text
    empty = bankops.explain("transpose", "none", F32, shape=(0, 64))
    assert all(r["iterations"] == 0 for r in empty.rows) and empty.conflicts == 0


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="unknown op 'matmul'"):
        bankops.explain("matmul", "none", m=1, n=1, k=1)
    with pytest.raises(ValueError, match="expected m=, n= and k="):
        bankops.explain("gemm", "none", m=4)
    with pytest.raises(ValueError, match="expected shape="):
        bankops.explain("transpose", "none", shape=(5,))
    with pytest.raises(RuntimeError, match="'diagonal'.*none, pad, swizzle"):
        bankops.explain("transpose", "diagonal", shape=(4, 4))
    with pytest.raises(RuntimeError, match="gemm takes float32, float16, bfloat16 or float64"):
        bankops.explain("gemm", "pad", torch.int32, m=4, n=4, k=4)
    with pytest.raises(ValueError, match="no instruction matches 'ldmatrix'"):
        bankops.explain("transpose", "pad", shape=(64, 64)).find("ldmatrix")


def test_problems_past_int64_are_refused():
    """Problems no tensor can hold are an error, not an int64 overflow in the launch plans (a
    division by zero that ended the process); a reduce dim past the shape is named, not wrapped."""
    with pytest.raises(ValueError, match="more than any tensor"):  # explain's own check, before the op's
        bankops.explain("reduce_sum", "none", F32, shape=(2**62, 2**62, 2**62), dim=1)
    with pytest.raises(RuntimeError, match="more than 2\\^62 elements"):
        torch.ops.bankops._smem_trace("reduce_sum", "pad", F32, [2**40, 2**40, 2**40])
    with pytest.raises(RuntimeError, match="more than 2\\^62 elements"):
        torch.ops.bankops._smem_trace("transpose", "pad", F32, [2**40, 2**40, 2**40])
    with pytest.raises(ValueError, match="more than any tensor"):
        bankops.explain("gemm", "none", F32, m=2**40, n=2**40, k=8)
    with pytest.raises(ValueError, match="dim=5 is out of range for a 2-d shape"):
        bankops.explain("reduce_sum", "none", F32, shape=(4, 4), dim=5)
    assert bankops.explain("reduce_sum", "none", F32, shape=(2**31, 2**30), dim=0).rows  # 2^61 elements: fine


@pytest.mark.parametrize("num_sms", [0, -1, 2**31, 2**32, 2**32 + 1])
def test_sm_counts_are_checked_not_cast(num_sms):
    """An SM count outside [1, 65536] is an error naming num_sms: cast to int, 2**32 was 0 SMs
    (a division by zero that ended the process), 2**31 a negative count, 2**32 + 1 one SM."""
    with pytest.raises(RuntimeError, match="num_sms must be in"):
        bankops.explain("gemm", "none", F32, num_sms=num_sms, m=1024, n=1024, k=64)
    with pytest.raises(RuntimeError, match="num_sms must be in"):
        torch.ops.bankops._smem_trace("gemm", "none", F32, [1, 4096, 4096, 4096, 1, 1], num_sms)
    with pytest.raises(RuntimeError, match="num_sms must be in"):
        bankops.explain("reduce_sum", "none", F32, num_sms=num_sms, shape=(4096, 96), dim=0)


@pytest.mark.parametrize("store", [False, True], ids=["load", "store"])
@pytest.mark.parametrize("width", [1, 2, 4, 8, 16])
def test_bank_map_is_the_model_schedule(width, store):
    """Every active lane's words appear in the map of its phase, the rows are the model's
    wavefronts, and a bank serves at most one word per wavefront."""
    for trial in range(40):
        addr = width * torch.randint(0, 4096 // width, (32,))
        if trial % 4 == 3:  # lane pairs that share, for the pair rule
            addr = addr[torch.arange(32) & ~(1 << (trial // 4 % 2))]
        active = int(torch.randint(1, 2**32, ()).item()) if trial % 2 else -1
        lane, sharers, phase = torch.ops.bankops._bank_map(addr, width, active, store)
        wavefronts, _ = torch.ops.bankops._bank_cost(addr, width, active, store).tolist()
        assert lane.shape == sharers.shape == (wavefronts, 32) and phase.shape == (wavefronts,)
        assert ((lane >= 0) == (sharers > 0)).all()
        mask = active & 0xFFFFFFFF
        words = max(width // 4, 1)
        served = sharers.sum().item()
        expected = 0
        for p, group in enumerate(phases(addr, width, mask, store)):
            seen = {(int(addr[ln]) // 4 + w, ln) for ln in group for w in range(words)}
            expected += len(seen)
            assert set(lane[phase == p][lane[phase == p] >= 0].tolist()) <= set(group)
        assert served == expected


def phases(addr, width, mask, store):
    """The active lanes of each phase, by bank_model.h's rules: 128 bytes of requests, twice as
    many lanes for a load whose lanes pair up (every active lane reads the address of its active
    partner lane ^ 1, or every one lane ^ 2's) within the longer phase."""
    if width <= 4:
        return [[ln for ln in range(32) if mask >> ln & 1]]

    def share(first, n, x):
        return all(addr[ln] == addr[ln ^ x] for ln in range(first, first + n) if mask >> ln & 1 and mask >> (ln ^ x) & 1)

    out, first, lanes = [], 0, 128 // width
    while first < 32:
        n = 2 * lanes if not store and first % (2 * lanes) == 0 and (share(first, 2 * lanes, 1) or share(first, 2 * lanes, 2)) else lanes
        out.append([ln for ln in range(first, first + n) if mask >> ln & 1])
        first += n
    return out


def test_bank_map_of_a_column_walk():
    lane, sharers, phase = torch.ops.bankops._bank_map(4 * 32 * LANES, 4)
    assert lane.shape == (32, 32) and (lane[:, 0] == LANES).all() and (lane[:, 1:] == -1).all()
    lane, sharers, _ = torch.ops.bankops._bank_map(torch.full((32,), 4 * 5), 4)
    assert lane.shape == (1, 32) and lane[0, 5] == 0 and sharers[0, 5] == 32


def test_plot_banks_draws_the_worst_warp(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "map.png"
    fig = bankops.plot_banks("transpose", "none", "lds", dtype=F32, path=path, shape=(64, 64))
    assert path.stat().st_size > 1000
    ax = fig.axes[0]
    assert len(ax.get_yticks()) == 32  # 32 wavefronts: the column walk of seed 004
    fig = bankops.plot_banks("transpose", "swizzle", "lds", dtype=F32, shape=(64, 64))
    assert len(fig.axes[0].get_yticks()) == 4  # a 16-byte vector read: four quarter-warps, no conflict


def test_probe_arguments_are_checked():
    good = torch.zeros(1, 32, dtype=torch.long)
    with pytest.raises(RuntimeError, match="width 1, 2, 4, 8 or 16"):
        torch.ops.bankops._smem_probe(good, 3)
    with pytest.raises(RuntimeError, match=r"shape \[patterns, 32\]"):
        torch.ops.bankops._smem_probe(torch.zeros(32, dtype=torch.long), 4)
    with pytest.raises(RuntimeError, match="addr to hold integer byte offsets"):
        torch.ops.bankops._smem_probe(good.float(), 4)
    with pytest.raises(RuntimeError, match=r"addr\[0\]\[3\] = 6 is not -1 or a 4-byte aligned"):
        torch.ops.bankops._smem_probe(torch.tensor([[0, 0, 0, 6] + [0] * 28]), 4)
    with pytest.raises(RuntimeError, match="below"):
        torch.ops.bankops._smem_probe(torch.full((1, 32), 48 * 1024), 4)
    # Offsets near 2^63: offset + width wrapped negative and passed the bounds check, and the
    # probe then read a wild address (a dead CUDA context on the GPU).
    for name in ("addr", "src"):
        a = torch.full((1, 32), -1)
        a[0, 0] = 0
        bad = a.clone()
        bad[0, 0] = 2**63 - 16
        with pytest.raises(RuntimeError, match=rf"{name}\[0\]\[0\] = {2**63 - 16} is not -1"):
            torch.ops.bankops._smem_probe(bad if name == "addr" else a, 16, src=bad if name == "src" else a)
    with pytest.raises(RuntimeError, match="expected addr on a CUDA device"):
        torch.ops.bankops._smem_probe(good, 4)
    # cp.async probes: src gives each lane's global source offset.
    with pytest.raises(RuntimeError, match="cp.async copies 4, 8 or 16 bytes"):
        torch.ops.bankops._smem_probe(good, 2, src=good)
    with pytest.raises(RuntimeError, match="expected store=False"):
        torch.ops.bankops._smem_probe(good, 4, True, good)
    with pytest.raises(RuntimeError, match="src of addr's shape"):
        torch.ops.bankops._smem_probe(good, 4, src=torch.zeros(2, 32, dtype=torch.long))
    with pytest.raises(RuntimeError, match=r"src\[0\]\[0\] = 8 is not -1 or a 16-byte aligned"):
        torch.ops.bankops._smem_probe(good, 16, src=torch.full((1, 32), 8))
    with pytest.raises(RuntimeError, match="-1 exactly where addr is"):
        torch.ops.bankops._smem_probe(good, 4, src=torch.full((1, 32), -1))
    with pytest.raises(RuntimeError, match="expected addr on a CUDA device"):
        torch.ops.bankops._smem_probe(good, 4, src=good)


@requires_cuda
@pytest.mark.parametrize("width", [1, 2, 4, 8, 16])
def test_probe_reads_and_writes_what_it_is_told(width):
    """A load probe reads the fill pattern (4-byte word i holds i) at each lane's address; a
    store probe reports the value it stored; a lane that sits out reports 0."""
    addr = width * torch.randint(0, 4096 // width, (2, 32))
    addr[1, ::3] = -1
    got = torch.ops.bankops._smem_probe(addr.cuda(), width).cpu()
    words = max(width // 4, 1)
    for p in range(2):
        for ln in range(32):
            a = int(addr[p, ln])
            if a < 0:
                assert got[p, ln] == 0
                continue
            expect = 0
            for w in range(words):
                word = a // 4 + w
                expect ^= (word >> (8 * (a % 4)) & 0xFF) if width == 1 else (word >> (8 * (a % 4)) & 0xFFFF) if width == 2 else word
            assert got[p, ln] == expect, (p, ln, a)
    stored = torch.ops.bankops._smem_probe(addr.cuda(), width, True).cpu()
    assert ((stored == 0x1000 + LANES) | (addr < 0)).all() and (stored[addr < 0] == 0).all()


@requires_cuda
@pytest.mark.parametrize("width", [4, 8, 16])
def test_cp_async_probe_copies_what_it_is_told(width):
    """A cp.async probe copies from the global word each lane names (word i holds i) to its
    shared address and reports the first word that arrived."""
    addr = width * torch.randperm(4096 // width)[:32].reshape(1, 32)  # distinct: no lane overwrites another
    src = width * torch.randint(0, (1 << 20) // width, (1, 32))
    addr[0, ::5] = src[0, ::5] = -1
    got = torch.ops.bankops._smem_probe(addr.cuda(), width, src=src.cuda()).cpu()
    assert (got == torch.where(src >= 0, src // 4, 0)).all()


@pytest.mark.parametrize("dtype", [F16, F32])
def test_pad_breaks_cp_async_lines(dtype):
    """Seed 003: padding fixes the fragment loads but shifts every tile row off the 128-byte
    lines cp.async copies, which the hardware serves in more wavefronts; swizzle keeps the rows
    where they were and costs cp.async nothing over the dense tile (the mma.sync kernel: on
    Hopper, swizzle's 16-bit tiles are filled by TMA, no cp.async)."""
    none, pad, swizzle = (bankops.explain("gemm", layout, dtype, m=1024, n=1024, k=1024, hopper=False)
                          for layout in LAYOUTS)
    assert none.per_instruction("ldgsts") == swizzle.per_instruction("ldgsts")
    assert pad.per_instruction("ldgsts") > 1.5 * none.per_instruction("ldgsts")
    assert conflicts(swizzle) == 0


# (dtype, layout, options, problem) of routes over every family and fill: the trace of each must
# move, per iteration, exactly its block tile's bytes in its copies into the tiles and its stores
# of C or of a split's partial.
TILE_BYTE_CASES = [
    (BF16, "pad", {}, dict(m=1024, n=1024, k=1024)),                                  # mma.sync, cp.async
    (F16, "none", {}, dict(m=4096, n=4096, k=4096)),                                  # mma.sync 128x256
    (BF16, "pad", {}, dict(m=130, n=264, k=200, a_transposed=True, b_transposed=True)),
    (BF16, "swizzle", dict(repack=False), dict(m=4095, n=4097, k=4093)),              # wgmma, realigning producer
    (BF16, "swizzle", {}, dict(m=4096, n=4096, k=4096)),                              # wgmma persistent
    (BF16, "swizzle", {}, dict(m=2048, n=2304, k=2048)),                              # 128x192, split last wave
    (BF16, "swizzle", {}, dict(m=64, n=4096, k=4096, b_transposed=True)),             # the thin tile, split
    (F32, "swizzle", {}, dict(m=2048, n=2048, k=2048)),                               # ffma Wide, stream-K
    (F32, "pad", {}, dict(m=512, n=512, k=512, a_transposed=True)),                   # ffma Small
    (F32, "swizzle", {}, dict(m=64, n=4096, k=4096, b_transposed=True)),              # ffma split-K
    (F64, "none", {}, dict(m=256, n=192, k=160)),                                     # DFMA
    (F32, "swizzle", {}, dict(m=8, n=4096, k=4096, b_transposed=True)),               # rows, FFMA
    (F32, "none", {}, dict(m=16, n=4096, k=4096, b_transposed=True)),                 # rows, the ring along k
    (F32, "pad", {}, dict(m=16, n=4096, k=4096)),                                     # rows, the ring along n
    (BF16, "swizzle", {}, dict(m=16, n=4096, k=4096, b_transposed=True)),             # rows, mma.sync
]


@pytest.mark.parametrize("dtype,layout,opts,problem", TILE_BYTE_CASES,
                         ids=[f"{str(c[0])[6:]}-{c[1]}-{'x'.join(str(c[3][d]) for d in 'mnk')}" for c in TILE_BYTE_CASES])
def test_traces_move_each_tile_once(dtype, layout, opts, problem):
    """Each trace is pinned to its kernel's tile: per iteration its copies into A's and B's tiles
    (or the few-rows kernel's windows) move BM x BK and BN x BK elements, its stores of C a BM x BN
    tile of C's type and a split's partial one of floats, BM, BN and BK the route's block tile
    (the kernel's own constants). A trace whose loops drift from its kernel's (a chunk missed, or
    stored twice) fails here, without the profiler."""
    with bankops.options(**opts):
        rep = bankops.explain("gemm", layout, dtype, num_sms=132, cc=90, **problem)
    bm, bn, bk = (int(v) for v in rep.route.fields["tile"].split("x"))
    rows_kernel = rep.route.fields["family"] == "rows"
    e, c_bytes = dtype.itemsize, 2 if dtype in (F16, BF16) else dtype.itemsize
    want = {"A": bm * bk * e, "B": bn * bk * e, "C": bm * bn * c_bytes, "P": bm * bn * 4}
    got = dict.fromkeys(want, 0)
    for r in rep.rows:
        name = r["instruction"]
        if "edge" in name or "raw" in name or r["op"] not in ("st", "ldgsts"):
            continue  # partial tiles at C's edges, the realigning fill's raw stage; loads
        kind = ("A" if "x window" in name else "B" if "w window" in name else None) if rows_kernel else \
            "A" if " As[" in name else "B" if " Bs[" in name else None
        if kind is None:
            kind = "P" if name.split()[1] == "P" or "partial" in name else "C" if "C tile" in name else None
        if kind is not None and "peer" not in name and "sums <-" not in name:
            got[kind] += r["bytes"]
    for kind in want:
        if got[kind]:
            assert got[kind] == want[kind], (kind, got, want, str(rep))
    family = rep.route.fields["family"]
    assert got["A"] or family == "wgmma", rep  # TMA fills are no warp instruction
    assert got["C"] or got["P"] or family in ("ffma", "rows"), rep  # FFMA stores C from registers
