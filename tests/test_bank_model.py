"""The bank model (kernels/bank_model.h) on the cases of the seed notes."""
import math

import pytest
import torch

from conftest import LAYOUTS

LANES = torch.arange(32)


def cost(addr, width=4, active=-1, store=False, src=None, zfill=False):
    src = None if src is None else torch.as_tensor(src)
    wavefronts, ideal = torch.ops.bankops._bank_cost(torch.as_tensor(addr), width, active, store, src, zfill).tolist()
    return wavefronts, ideal


@pytest.mark.parametrize("stride", range(0, 65))
def test_strided_words_seed_001(stride):
    """shared[s * tid] (4-byte words): lanes t and t+n collide iff 32/gcd(32, s) divides n,
    so the access takes gcd(32, s) wavefronts; odd strides are free, s = 0 broadcasts."""
    expected = 1 if stride == 0 else math.gcd(32, stride)
    assert cost(4 * stride * LANES) == (expected, 1)


def test_column_walk_with_and_without_padding_seed_004():
    """A warp reading one column of float[32][32]: every lane in one bank; float[32][33]: free."""
    column = 5
    assert cost(4 * (LANES * 32 + column)) == (32, 1)
    assert cost(4 * (LANES * 33 + column)) == (1, 1)


def test_broadcast_and_partial_broadcast():
    assert cost(torch.full((32,), 4 * 77)) == (1, 1)
    two_words_one_bank = torch.where(LANES < 16, 0, 4 * 32)
    assert cost(two_words_one_bank) == (2, 1)
    assert cost(4 * (LANES % 8)) == (1, 1)  # four lanes per word, eight banks


def test_inactive_lanes_do_not_count():
    addr = 4 * 32 * LANES  # all in bank 0
    assert cost(addr, active=0x1) == (1, 1)
    assert cost(addr, active=0xF0F0) == (8, 1)
    assert cost(addr, active=0) == (0, 0)


def test_wide_accesses_are_served_in_phases():
    assert cost(8 * LANES, width=8) == (2, 2)  # two half-warps of 128 bytes
    assert cost(16 * LANES, width=16) == (4, 4)  # four quarter-warps
    # 16-byte accesses 128 bytes apart: the 8 lanes of a phase share 4 banks
    assert cost(128 * LANES, width=16) == (32, 4)
    assert cost(2 * LANES, width=2) == (1, 1)  # two 16-bit lanes per word


# (8 or 16-byte lane addresses, wavefronts the H100 needs): bench/ncu.py's bank probe,
# smsp__sass_l1tex_data_pipe_lsu_wavefronts_mem_shared_op_ld, 2026-11-23.
MEASURED_WIDE = [
    (8, [512] * 32, 1),                                    # broadcast: pairs share, one phase
    (8, torch.where(LANES < 16, 0, 8), 1),                 # halves read X and X+8
    (8, torch.where(LANES < 16, 0, 128), 2),               # same bank, two words
    (8, 8 * (LANES % 16), 2),                              # lanes i and i+16 share: still two phases
    (8, 8 * ((LANES + 16) % 32), 2),
    (8, 8 * (LANES // 2), 1),                              # pairs share: 16 doubles, one phase
    (8, 8 * ((LANES & 1) | (LANES >> 1 & ~1)), 1),        # lanes i and i^2 share
    (8, 16 * LANES, 4),
    (8, 264 * LANES, 2),                                   # a padded float64 column
    (8, 256 * LANES, 32),
    (16, [1024] * 32, 2),                                  # broadcast: pairs share, half-warps
    (16, 16 * (LANES % 8), 4),                             # lanes i, i+8, ... share: quarter-warps
    (16, 16 * (LANES // 8), 2),
    (16, 16 * (LANES // 4), 2),
    (16, 32 * LANES, 8),
    (16, 144 * LANES, 4),
    (16, 16 * ((LANES & 1) | (LANES >> 1 & ~1)), 2),      # lanes i and i^2 share (gemm B fragment)
    (16, 16 * ((LANES & 3) | (LANES >> 1 & ~3)), 4),      # lanes i and i^4 share: quarter-warps
]


@pytest.mark.parametrize("width, addr, wavefronts", MEASURED_WIDE)
def test_wide_accesses_as_measured(width, addr, wavefronts):
    assert cost(addr, width=width)[0] == wavefronts


def test_pairs_that_share_only_where_both_lanes_run():
    pairs = 8 * (LANES // 2)
    assert cost(pairs, width=8) == (1, 1)
    assert cost(torch.where(LANES == 31, 160, pairs), width=8) == (2, 2)  # one pair differs: half-warps
    assert cost(4 * LANES * (LANES % 2 == 0), width=8, active=0x55555555) == (1, 1)  # partners sit out
    odd_pairs = 16 * ((LANES & 1) | (LANES >> 1 & ~1))  # lane i shares with lane i ^ 2
    assert cost(odd_pairs, width=16) == (2, 2)
    # The rule holds per half-warp: lanes 0-15 pair up (one phase), 16-31 do not (two).
    assert cost(torch.where(LANES == 31, 512, odd_pairs), width=16) == (3, 3)


@pytest.mark.parametrize("width", [8, 16])
def test_stores_never_pair(width):
    """Measured: STS.64 and STS.128 with lane pairs writing one address take the plain phases."""
    pairs = width * (LANES // 2)
    assert cost(pairs, width=width, store=True) == (width // 4, width // 4)  # 8 B: half-warps, 16 B: quarters
    assert cost(pairs, width=width) == (width // 8, width // 8)


def tile_addresses(name, layout, rows, col, elem_bytes):
    offsets = torch.ops.bankops._tile_map(name, layout)
    return offsets[rows, col] * elem_bytes


@pytest.mark.parametrize("layout", LAYOUTS)
def test_swizzle_303_rows_and_columns_seed_000(layout):
    """128-byte rows of eight 16-byte units: quarter-warp q reads column (c + q) % 8 of all 8
    rows. Dense rows put a column in one bank group (8 wavefronts a phase); pad and
    Swizzle<3,0,3> spread it; rows are free in every layout."""
    col_addr = torch.cat([tile_addresses("seed000/16", layout, torch.arange(8), (3 + q) % 8, 16) for q in range(4)])
    row_addr = torch.ops.bankops._tile_map("seed000/16", layout)[LANES // 8, LANES % 8] * 16
    assert cost(row_addr, width=16) == (4, 4)
    assert cost(col_addr, width=16) == ((32, 4) if layout == "none" else (4, 4))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_ldmatrix_rows_swizzle_333_seed_003(layout):
    """ldmatrix: each 8-lane phase hands in the 16-byte rows of one 8x8 block of a 16-bit
    tile with 128-byte rows. Dense: the 8 rows share 4 banks (8 wavefronts a phase);
    16-byte padding and Swizzle<3,3,3> make each phase one wavefront."""
    assert torch.ops.bankops._tile_info("seed003/2", "swizzle").tolist()[4:] == [3, 3, 3]
    addr = torch.cat([tile_addresses("seed003/2", layout, torch.arange(8), 8 * q, 2) for q in range(4)])
    assert cost(addr, width=16) == ((32, 4) if layout == "none" else (4, 4))


@pytest.mark.parametrize("elem_bytes", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_transpose_tile_accesses(layout, elem_bytes):
    """The transpose kernel's load phase writes a tile row (lane t -> tile(r, t)): free in every
    layout. Its store phase reads a tile column (lane t -> tile(t, c)): free under pad and
    swizzle for every element size. Under none, rows of 32*elem_bytes bytes pile onto
    4 // elem_bytes banks (1- and 2-byte elements), or a phase's rows all share one bank
    group (4 bytes and wider): 32 wavefronts in all."""
    tile = f"transpose/{elem_bytes}"
    ideal = {1: 1, 2: 1, 4: 1, 8: 2, 16: 4}[elem_bytes]
    none = {1: 8, 2: 16, 4: 32, 8: 32, 16: 32}[elem_bytes]
    for row in (0, 7, 31):
        assert cost(tile_addresses(tile, layout, row, LANES, elem_bytes), width=elem_bytes) == (ideal, ideal)
    for col in (0, 7, 31):
        column = tile_addresses(tile, layout, LANES, col, elem_bytes)
        assert cost(column, width=elem_bytes) == (none if layout == "none" else ideal, ideal)


def test_bad_access_is_refused():
    with pytest.raises(RuntimeError, match="expected addr to hold 32 lane addresses"):
        cost(torch.arange(16) * 4)
    with pytest.raises(RuntimeError, match="lane 1 address 2 is not 4-byte aligned"):
        cost(2 * LANES)


def rows(n, pitch):
    """Lane i's 16-byte chunk in n rows of 512/n bytes, rows `pitch` bytes apart."""
    per_row = 32 // n
    return pitch * (LANES // per_row) + 16 * (LANES % per_row)


# cp.async (16 bytes a lane): shared addresses, global addresses, wavefronts measured on the
# H100 with the probe (bench/ncu.py, 2026-11-23). A phase is split by the global lines it
# reads, and by the shared lines each line's data lands in.
MEASURED_COPY = [
    (16 * LANES, 16 * LANES, 4),                                  # both sides contiguous
    (16 * LANES, rows(2, 2048), 4),                               # 2 rows of 256 B
    (16 * LANES, rows(8, 2048), 8),                               # 8 rows of 64 B: 2 lines a phase
    (16 * LANES, 2048 * LANES, 32),                               # 32 rows: a line per lane
    (16 * LANES, 64 + 16 * LANES, 8),                             # global off its lines by 64 B
    (16 * LANES, 16 + 16 * LANES, 12),                            # ... by 16 B
    (16 + 16 * LANES, 16 * LANES, 12),                            # shared off by 16 B: sectors split
    (32 + 16 * LANES, 16 * LANES, 8),                             # ... by 32 B: only lines split
    (rows(2, 272), 16 * LANES, 8),                                # 256-byte rows + 16 B pad
    (rows(8, 80), rows(8, 2048), 15),                             # 64-byte rows + 16 B pad
    (16 * (LANES ^ (LANES >> 3 & 3)), rows(8, 2048), 8),          # 64-byte rows, swizzled: free
    (128 * LANES, 16 * LANES, 32),                                # a column: the bank conflict
]


@pytest.mark.parametrize("addr, src, wavefronts", MEASURED_COPY)
def test_cp_async_as_measured(addr, src, wavefronts):
    assert cost(addr, width=16, src=src)[0] == wavefronts


# cp.async of 4 bytes a lane, measured the same way (2026-11-23): one wavefront per global
# line, plus the busiest bank's extra words wherever the conflicting lanes read from, at
# most one wavefront per lane. Lanes 2i and 2i+1 copy bytes 0 and 16 of row i (the 128x256
# gemm tile's transposing copies), or lanes 8i..8i+7 the 32 bytes of row i.
PAIRS, EIGHTS = 2048 * (LANES // 2) + 16 * (LANES % 2), 2048 * (LANES // 8) + 4 * (LANES % 8)
MEASURED_COPY4 = [
    (4 * LANES, 4 * LANES, 1),                                    # both sides contiguous
    (2048 * (LANES % 2) + 4 * (LANES // 2), PAIRS, 17),           # to tile rows 0 and 4: one bank
    (2064 * (LANES % 2) + 4 * (LANES // 2), PAIRS, 17),           # ... other banks, conflicts across rows
    (4 * LANES, PAIRS, 16),                                       # to one line: 16 global lines
    (512 * (LANES % 8) + 4 * (LANES // 8), EIGHTS, 11),           # 4 lines, 8-way bank conflict
    (528 * (LANES % 8) + 4 * (LANES // 8), EIGHTS, 4),            # 4 lines into 8 shared lines: free
    (4 * LANES, 2048 * LANES, 32),                                # a line per lane
    (512 * LANES, 2048 * LANES, 32),                              # ... into one bank: no more
]


@pytest.mark.parametrize("addr, src, wavefronts", MEASURED_COPY4)
def test_cp_async_4_bytes_as_measured(addr, src, wavefronts):
    assert cost(addr, width=4, src=src)[0] == wavefronts


def test_cp_async_zero_filling_form_costs_a_wavefront_per_line():
    """Measured: the zero-filling form (source size in a register) doubles both probes above
    (contiguous: 8; 8 rows of 64 B: 16)."""
    assert cost(16 * LANES, width=16, src=16 * LANES, zfill=True) == (8, 8)
    assert cost(16 * LANES, width=16, src=rows(8, 2048), zfill=True) == (16, 16)
    with pytest.raises(RuntimeError, match="expected src with it"):
        cost(16 * LANES, width=16, zfill=True)
