"""transpose: every element size, dim pair and view, compared byte for byte."""
import pytest
import torch

import bankops
from conftest import LAYOUTS, as_bytes, random_tensor, requires_cuda

# One or two dtypes per element size: 1, 2, 4, 8 and 16 bytes.
DTYPES = [torch.bool, torch.int8, torch.float16, torch.bfloat16, torch.float32, torch.int32,
          torch.complex64, torch.float64, torch.int64, torch.complex128]

# (shape, dim0, dim1): empty, single elements, around the 32x32 tile, batched and N-d
# (the plane transpose and the gather that keeps the contiguous dim), 0-d and 1-d,
# a batch past one grid dimension. Sizes that are multiples of 16 take the 16-byte vector
# kernel for every element size (whole and partial tiles, batched, N-d); the others the
# scalar kernel.
CASES = [
    ((0, 5), -2, -1), ((1, 1), 0, 1), ((1, 7), 0, 1), ((7, 1), 0, 1),
    ((31, 33), 0, 1), ((32, 32), 0, 1), ((33, 31), 1, 0), ((64, 65), 0, 1), ((257, 129), -1, -2),
    ((3, 33, 65), -2, -1), ((3, 33, 65), 0, 2), ((3, 33, 65), 0, 1),
    ((2, 3, 4, 5), 1, 3), ((2, 3, 4, 5), 3, 0), ((2, 3, 4, 5), 1, 2),
    ((5,), 0, 0), ((), 0, -1), ((4, 5), 1, 1), ((70_000, 2, 3), -2, -1),
    ((16, 16), 0, 1), ((48, 80), 0, 1), ((272, 528), 1, 0), ((3, 48, 80), -2, -1),
    ((2, 32, 3, 16), 1, 3), ((5, 16, 2, 32), 1, 3),
    ((2, 392, 136), -2, -1),  # aligned rows past whole tiles of 128 (2-byte elements) and of 64 rows
]
CASE_IDS = [f"{'x'.join(map(str, s)) or 'scalar'}-{a}-{b}" for s, a, b in CASES]

VIEWS = {
    "sliced": lambda d: random_tensor((50, 90), torch.float32, d)[3:, ::3],
    "transposed": lambda d: random_tensor((45, 70), torch.float32, d).t(),
    "expanded": lambda d: random_tensor((40, 1), torch.float32, d).expand(40, 70),
    "batch-strided": lambda d: random_tensor((33, 4, 65), torch.float16, d).transpose(0, 1),
    "offset": lambda d: random_tensor((4001,), torch.float64, d)[1:].view(40, 100),
    # Aligned rows, a partial last vector per row (the vector kernel's element-wise edge).
    "row-sliced": lambda d: random_tensor((96, 128), torch.float32, d)[:, :37],
    "row-sliced-bytes": lambda d: random_tensor((96, 128), torch.int8, d)[:, 5:42][:, 11:],
    # A base 4 bytes past 16-byte alignment: the realigning vector kernel.
    "unaligned-base": lambda d: random_tensor((64 * 64 + 2,), torch.float16, d)[2:].view(64, 64),
    "unaligned-base-bytes": lambda d: random_tensor((300 * 70 + 7,), torch.int8, d)[7:].view(300, 70)[:, 3:69],
    # A strided inner dim: the scalar kernel, for narrow elements too.
    "strided-bytes": lambda d: random_tensor((40, 90), torch.int8, d)[:, ::3],
    "strided-half": lambda d: random_tensor((70, 80), torch.bfloat16, d)[:, ::2],
    # Nine non-trivial dims in a scrambled order: more than one launch can describe.
    "many-dims": lambda d: random_tensor((2, 3, 2, 3, 2, 3, 2, 3, 2), torch.int16, d).permute(8, 0, 7, 1, 6, 2, 5, 3, 4),
}


def expected(x, dim0, dim1):
    return x.transpose(dim0, dim1).contiguous() if x.dim() else x.clone()


def check(x, dim0, dim1, layout):
    got = bankops.transpose(x, dim0, dim1, layout)
    want = expected(x, dim0, dim1)
    assert got.shape == want.shape and got.dtype == want.dtype and got.device == x.device
    assert got.is_contiguous()
    assert torch.equal(as_bytes(got).cpu(), as_bytes(want).cpu())


@pytest.mark.parametrize("shape,dim0,dim1", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", [torch.int8, torch.float16, torch.float32, torch.complex64, torch.complex128], ids=str)
def test_reference_matches_torch(dtype, shape, dim0, dim1):
    check(random_tensor(shape, dtype), dim0, dim1, "swizzle")


@pytest.mark.parametrize("view", list(VIEWS))
def test_reference_views(view):
    check(VIEWS[view]("cpu"), -2, -1, "none")


@requires_cuda
@pytest.mark.parametrize("shape,dim0,dim1", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cuda_matches_reference(layout, dtype, shape, dim0, dim1):
    x = random_tensor(shape, dtype, "cuda")
    got = bankops.transpose(x, dim0, dim1, layout)
    ref = bankops.transpose(x.cpu(), dim0, dim1, layout)
    assert got.shape == ref.shape and got.is_contiguous()
    assert torch.equal(as_bytes(got).cpu(), as_bytes(ref))


@requires_cuda
@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cuda_views(layout, view):
    x = VIEWS[view]("cuda")
    check(x, -2, -1, layout)
    check(x, 0, -1, layout)


@requires_cuda
@pytest.mark.parametrize("n", [46_341, 46_352], ids=["realigned", "aligned"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cuda_beyond_int32_elements(layout, n):
    """n^2 > 2^31 int8 elements: 64-bit offsets in the vector kernel, rows off and on 16-byte
    boundaries (46352 = 16 * 2897)."""
    if torch.cuda.mem_get_info()[0] < 3 * n * n:
        pytest.skip("needs about 7 GB of free GPU memory")
    x = torch.randint(-128, 127, (n, n), dtype=torch.int8, device="cuda")
    assert torch.equal(bankops.transpose(x, layout=layout), x.t().contiguous())


@pytest.mark.parametrize("dtype", [torch.int8, torch.float16, torch.float32, torch.float64, torch.complex128], ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_vector_kernel_bank_model(layout, dtype):
    """Aligned planes take the 16-byte kernel: its tile stores (input row vectors) are free
    in every layout; its micro-tile row loads put 8 consecutive tile rows in each
    quarter-warp phase, which pad and swizzle spread over the 8 bank groups and `none`
    piles onto one (8 wavefronts a phase, 32 an instruction)."""
    rep = bankops.explain("transpose", layout, dtype, shape=(4096, 4096), num_sms=132)
    assert {r["width"] for r in rep.rows} == {16}
    assert not any("scalar" in r["instruction"] for r in rep.rows)
    assert rep.per_instruction("st") == 4
    assert rep.per_instruction("ld") == (32 if layout == "none" else 4)
    vec = 16 // dtype.itemsize
    assert rep.totals["ld"]["instructions"] == rep.totals["st"]["instructions"] == 4096 * 4096 // (32 * vec)


@pytest.mark.parametrize("dtype", [torch.int8, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("shape", [(4097, 8191), (1022, 64)], ids=["odd", "unaligned-output-rows"])
def test_unaligned_planes_take_the_realigning_vector_kernel(shape, dtype):
    """Rows that start off 16-byte boundaries are realigned in registers: the tile sees the
    same 16-byte stores as for aligned rows (partial tiles included), and the same 16-byte
    loads but for bytes, whose store phase reads 4-byte words in four passes."""
    rep = bankops.explain("transpose", "swizzle", dtype, shape=shape, num_sms=132)
    assert not any("scalar" in r["instruction"] for r in rep.rows)
    assert {(r["op"], r["width"]) for r in rep.rows} == {("st", 16), ("ld", 4 if dtype.itemsize == 1 else 16)}
    assert rep.conflicts == 0


@pytest.mark.parametrize("layout", LAYOUTS)
def test_realigned_byte_passes_bank_model(layout):
    """Realigned bytes read their micro-tile as 4-byte words, the word rotated across a warp's
    unit columns: pad and swizzle spread a warp's lds.32 over all 32 banks, `none` stacks the
    8 tile rows of a unit column on the same banks (H100, ncu, 4097x8191: 1.00, 1.00 and 8.00
    wavefronts per instruction)."""
    rep = bankops.explain("transpose", layout, torch.int8, shape=(4097, 8191), num_sms=132)
    assert rep.per_instruction("ld") == (8 if layout == "none" else 1)
    assert rep.per_instruction("st") == 4


def vec_params(elem_bytes):
    """TransposeVec<E, true>: (V, kRows, kThreads) of the realigning vector kernel (transpose.h)."""
    v = 16 // elem_bytes
    groups = 8 if elem_bytes <= 2 else 16
    return v, groups * v, groups * 16


def realign_tiles(elem_bytes, batch, n_i, n_j):
    """Tiles of the realigning kernel: along i they overlap by two groups of V rows, a 32-byte
    sector of an output row (start at row -2V, step S = kRows - 2V), so that each output
    sector has one owner."""
    v, rows, _ = vec_params(elem_bytes)
    s = rows - 2 * v
    return batch * -(-(n_i + 2 * v - 1) // s) * -(-n_j // (16 * v))


# One or two dtypes per element size the realigning kernel handles: 1, 2, 4 and 8 bytes.
REALIGN_DTYPES = [torch.bool, torch.int8, torch.float16, torch.bfloat16, torch.float32, torch.int32,
                  torch.complex64, torch.float64]


def ownership_shapes(elem_bytes):
    """(batch, n_i, n_j) around the realigning kernel's tile edges: output rows (n_i elements)
    shorter than a chunk, n_i around S (the tile step) and kRows (the tile), several tiles, one
    row; n_j odd (unaligned input rows, >= 16 output rows: every row-start residue when n_i is
    odd), or aligned with n_i unaligned; batched planes. Odd rows across two and three column
    tiles: a segment's last vector's words reach past the segment, whole or partial at the
    row's end."""
    v, rows, _ = vec_params(elem_bytes)
    s = rows - 2 * v
    n_is = sorted({1, 2, v - 1, v, v + 1, 2 * v - 1, 2 * v, 2 * v + 1, 3 * v + 1, s - 1, s, s + 1, rows - 1, rows,
                   rows + 1, 2 * s + 1, 3 * rows + 7} - {0})
    shapes = [(1, n_i, 37) for n_i in n_is]
    shapes += [(1, 1, 16 * v + 3), (1, 1, 1), (3, v - 1, 35), (3, s + 1, 19), (2, rows + 1, 16 * v)]
    shapes += [(1, s + 1, 32 * v + 5), (2, v + 1, 48 * v - 1), (1, 2 * rows + 3, 16 * v + 1)]
    shapes += [(1, n_i, 16 * v) for n_i in (v - 1, s + 1, 2 * s + 1) if (n_i * elem_bytes) % 16]
    # Interior tiles (no bound checked: every row of the tile, a sector past its last group, 16
    # bytes past its columns) beside edge tiles, and both sides of that condition: tile 1 (rows
    # from s - 2v) is interior from n_i = s + rows - v, the first column tile from n_j = 17 v
    # (odd sizes around it: unaligned input rows).
    shapes += [(1, 3 * rows + 7, 33 * v + 3), (2, s + rows - v, 17 * v + 1), (1, s + rows - v - 1, 17 * v + 1),
               (1, s + rows - v, 17 * v - 1)]
    return shapes


@pytest.mark.parametrize("dtype", REALIGN_DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_unaligned_planes_take_overlapping_tiles(layout, dtype):
    """The route of the shapes below: the realigning vector kernel, whose tiles overlap."""
    v, _, threads = vec_params(dtype.itemsize)
    for batch, n_i, n_j in ownership_shapes(dtype.itemsize):
        shape = (batch, n_i, n_j) if batch > 1 else (n_i, n_j)
        rep = bankops.explain("transpose", layout, dtype, shape=shape, num_sms=132)
        assert not any("scalar" in r["instruction"] for r in rep.rows), shape
        assert rep.totals["st"]["instructions"] == realign_tiles(dtype.itemsize, batch, n_i, n_j) * v * threads // 32, shape
        # Bytes read their 16-byte micro-tile rows as four 4-byte words.
        words = 4 if dtype.itemsize == 1 else 1
        assert rep.totals["ld"]["instructions"] == words * rep.totals["st"]["instructions"], shape


@requires_cuda
@pytest.mark.parametrize("dtype", REALIGN_DTYPES, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cuda_realigned_output_chunks_have_one_owner(layout, dtype):
    """Unaligned planes: each aligned 32-byte output sector is written by one store of one block
    (tiles overlap by two groups of rows; a lane writes one 16-byte chunk of it), and only the
    chunks at output row ends go out piecewise.
    The output starts as 0xFF bytes (conftest): a chunk skipped, written with a neighbouring
    tile's zeros, or piecewise with a gap fails the byte-exact comparison. The route of these
    shapes: test_unaligned_planes_take_overlapping_tiles."""
    for batch, n_i, n_j in ownership_shapes(dtype.itemsize):
        shape = (batch, n_i, n_j) if batch > 1 else (n_i, n_j)
        x = random_tensor(shape, dtype, "cuda")
        got = bankops.transpose(x, -2, -1, layout)
        assert torch.equal(as_bytes(got).cpu(), as_bytes(x.transpose(-2, -1).contiguous()).cpu()), shape


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.int8, torch.float16, torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("offset", [1, 3, 5])
def test_cuda_realigned_base_offsets(offset, dtype):
    """Rows of whole chunks from a base off 16 bytes (the realigning kernel, by the pointer):
    every output row starts at the same residue."""
    v, rows, _ = vec_params(dtype.itemsize)
    n_i, n_j = 2 * rows, 16 * v
    x = random_tensor((n_i * n_j + offset,), dtype, "cuda")[offset:].view(n_i, n_j)
    for layout in LAYOUTS:
        got = bankops.transpose(x, -2, -1, layout)
        assert torch.equal(as_bytes(got).cpu(), as_bytes(x.t().contiguous()).cpu()), layout
