"""The layout functors of kernels/layout.cuh, read through the tiles the kernels declare."""
import pytest
import torch

from conftest import LAYOUTS

TILES = [
    "transpose/1", "transpose/2", "transpose/4", "transpose/8", "transpose/16",
    "reduce_tree/4", "reduce_tree/8", "reduce_cols/4", "reduce_cols/8", "gemm/4", "gemm/8", "seed000/16",
]


# Tiles read with 16-byte vectors pad one vector per row (so rows stay 16-byte aligned).
PAD_BYTES = {"gemm/4": 16, "gemm/8": 16}


def tile(name, layout):
    offsets = torch.ops.bankops._tile_map(name, layout)
    rows, cols, size, elem_bytes, b, m, s = torch.ops.bankops._tile_info(name, layout).tolist()
    assert offsets.shape == (rows, cols)
    return offsets, dict(rows=rows, cols=cols, size=size, elem_bytes=elem_bytes, swizzle=(b, m, s))


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("name", TILES)
def test_layout_is_a_bijection_into_its_storage(name, layout):
    offsets, info = tile(name, layout)
    flat = offsets.reshape(-1)
    assert flat.min() >= 0 and flat.max() < info["size"]
    assert flat.unique().numel() == flat.numel(), "two logical elements share a storage slot"


@pytest.mark.parametrize("name", TILES)
def test_storage_cost(name):
    """none and swizzle use exactly the tile; pad adds one access unit (>= 4 bytes, 16 for
    vector tiles) per row."""
    _, none = tile(name, "none")
    _, pad = tile(name, "pad")
    _, swz = tile(name, "swizzle")
    dense = none["rows"] * none["cols"]
    assert none["size"] == dense and swz["size"] == dense
    unit = max(PAD_BYTES.get(name, 4), pad["elem_bytes"]) // pad["elem_bytes"]
    assert pad["size"] == pad["rows"] * (pad["cols"] + unit)


def test_swizzle_303_reproduces_seed_000_table():
    """Seed 000's 8x8 table for Swizzle<3,0,3>: physical column = logical column XOR row."""
    offsets, info = tile("seed000/16", "swizzle")
    assert info["swizzle"] == (3, 0, 3)
    table = [
        [0, 1, 2, 3, 4, 5, 6, 7],
        [1, 0, 3, 2, 5, 4, 7, 6],
        [2, 3, 0, 1, 6, 7, 4, 5],
        [3, 2, 1, 0, 7, 6, 5, 4],
        [4, 5, 6, 7, 0, 1, 2, 3],
        [5, 4, 7, 6, 1, 0, 3, 2],
        [6, 7, 4, 5, 2, 3, 0, 1],
        [7, 6, 5, 4, 3, 2, 1, 0],
    ]
    assert (offsets // 8 == torch.arange(8)[:, None]).all(), "a swizzle keeps every element in its row"
    assert (offsets % 8).tolist() == table


@pytest.mark.parametrize(
    "name,expected",
    [("transpose/4", (5, 0, 5)), ("transpose/2", (4, 1, 5)), ("transpose/1", (3, 2, 5)),
     ("transpose/8", (5, 0, 5)), ("reduce_cols/4", (3, 0, 5)), ("reduce_cols/8", (3, 0, 4)),
     ("reduce_tree/4", (5, 0, 5)), ("reduce_tree/8", (4, 0, 4))],
)
def test_bank_swizzle_parameters(name, expected):
    """DESIGN.md's usual choices fall out of the one rule in BankSwizzle."""
    assert tile(name, "swizzle")[1]["swizzle"] == expected
