"""reduce_sum: the CPU reference against torch in float64, the CUDA kernels against the reference."""
import contextlib
import math
import os

import pytest
import torch

import bankops
from conftest import DEVICES, LAYOUTS, as_bytes, assert_close_bound, eps, random_tensor, requires_cuda

FLOATS = [torch.float32, torch.float16, torch.bfloat16, torch.float64]
INTS = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]

# (shape, dim, keepdim): 0-d, empty, one element, around the 256-thread tree, the warp
# per row (rows up to 8192) and the block per row, rows whose length leaves a scalar tail
# after the 16-byte vectors; columns with 16-byte vectors (inner * itemsize a multiple of 16)
# and without; long rows and columns that split into a second pass, grids past 65535.
CASES = [
    ((), None, False), ((), 0, False), ((), -1, True),
    ((0,), None, False), ((1,), None, False), ((7,), None, True),
    ((255,), None, False), ((256,), None, False), ((257,), None, False), ((4097,), None, False),
    ((8192,), None, False), ((8193,), None, False), ((100_003,), None, False),
    ((3, 0, 5), None, False), ((3, 0, 5), 1, False), ((3, 0, 5), 0, True),
    ((1, 1), 0, False), ((33, 65), 0, False), ((33, 65), 1, False), ((33, 65), -1, True),
    ((2, 3, 5, 7), 2, False), ((2, 3, 5, 7), 0, True), ((31, 33, 2), 1, False),
    ((7, 40_000), 1, False), ((2, 16_385), 1, False), ((5_000, 40), 0, False),
    ((37, 512), 0, True), ((3, 300, 64), 1, False), ((600, 1040), 0, False),
    ((70_000, 3), 1, False), ((70_000, 3, 2), 1, False), ((600_000, 2), 1, False),
]
CASE_IDS = [f"{'x'.join(map(str, s)) or 'scalar'}-dim{d}{'-keep' if k else ''}" for s, d, k in CASES]


def torch_sum(x, dim, keepdim):
    if dim is None:
        return x.sum(dim=tuple(range(x.dim())), keepdim=True) if keepdim else x.sum()
    return x.sum(dim=dim, keepdim=keepdim)


def sum_bound(x, dim, ref):
    """Rounding bound for a float sum: accumulator error growing like sqrt(n) times the
    slice's 2-norm (random inputs), plus one rounding to the output dtype."""
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    x64 = x.cpu().double()
    if dim is None or x.dim() == 0:
        n, norm = x.numel(), torch.linalg.vector_norm(x64)
    else:
        n, norm = x.shape[dim], torch.linalg.vector_norm(x64, dim=dim)
    return 8 * eps(acc) * math.sqrt(max(n, 1)) * norm.reshape(ref.shape) + eps(ref.dtype) * ref.double().abs()


def worst_bound(x, dim, keepdim, ref):
    """The worst-case rounding bound of n additions (n eps times the sum of magnitudes) plus one
    rounding to the output dtype."""
    acc = torch.float64 if x.dtype == torch.float64 else torch.float32
    x64 = x.cpu().double().abs()
    n = x.numel() if dim is None else x.shape[dim]
    total = x64.sum() if dim is None else x64.sum(dim, keepdim=keepdim)
    return (n * eps(acc) * total).reshape(ref.shape) + eps(ref.dtype) * ref.cpu().double().abs()


def check_against_reference(x, dim, keepdim, layout):
    got = bankops.reduce_sum(x, dim, keepdim, layout)
    ref = bankops.reduce_sum(x.cpu(), dim, keepdim, layout)
    assert got.device == x.device
    if x.dtype.is_floating_point:
        assert_close_bound(got, ref, sum_bound(x, dim, ref), "reduce_sum")
    else:
        assert got.dtype == torch.int64 and torch.equal(got.cpu(), ref)


@pytest.mark.parametrize("shape,dim,keepdim", CASES, ids=CASE_IDS)
def test_reference_matches_torch_float64(shape, dim, keepdim):
    x = torch.randn(shape, dtype=torch.float64)
    ref = bankops.reduce_sum(x, dim, keepdim)
    expected = torch_sum(x, dim, keepdim)
    assert_close_bound(ref, expected, sum_bound(x, dim, expected), "reference vs torch.sum")


@pytest.mark.parametrize("dtype", INTS + [torch.float16, torch.bfloat16])
def test_reference_dtypes_match_torch(dtype):
    x = random_tensor((37, 41), dtype)
    for dim in (None, 0, 1):
        ref = bankops.reduce_sum(x, dim)
        expected = torch_sum(x, dim, False)
        if dtype.is_floating_point:
            # torch.sum rounds its own float32 sum: allow both roundings
            assert_close_bound(ref, expected, 2 * sum_bound(x, dim, expected), "reference vs torch.sum")
        else:
            assert torch.equal(ref, expected)


@requires_cuda
@pytest.mark.parametrize("shape,dim,keepdim", CASES, ids=CASE_IDS)
@pytest.mark.parametrize("dtype", FLOATS + INTS, ids=str)
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cuda_matches_reference(layout, dtype, shape, dim, keepdim):
    check_against_reference(random_tensor(shape, dtype, "cuda"), dim, keepdim, layout)


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(
    "make,dim",
    [
        (lambda: torch.randn(40, 70, device="cuda")[:, ::3], 1),
        (lambda: torch.randn(40, 70, device="cuda").t(), 0),
        (lambda: torch.randn(5, 1, 3, device="cuda").expand(5, 64, 3), 1),
        (lambda: torch.randn(6, 7, 8, device="cuda").permute(2, 0, 1), None),
    ],
    ids=["sliced", "transposed", "expanded", "permuted"],
)
def test_cuda_noncontiguous(layout, make, dim):
    check_against_reference(make(), dim, False, layout)


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8], ids=str)
@pytest.mark.parametrize("shape,dim", [((1001,), None), ((9, 10_001), 1), ((5, 7, 64), 0), ((300, 64), 0)])
def test_cuda_unaligned_start(layout, dtype, shape, dim):
    """A view that starts one element past a 16-byte boundary: rows read a scalar head before
    their vectors, columns fall back to one column per lane."""
    n = math.prod(shape)
    x = random_tensor((n + 1,), dtype, "cuda")[1:].view(shape)
    assert x.data_ptr() % 16 != 0
    check_against_reference(x, dim, False, layout)


@requires_cuda
@pytest.mark.parametrize(
    "shape,dim,dtype",
    [((3_000_001,), None, torch.float32), ((1 << 25,), None, torch.float32), ((1 << 25,), None, torch.bfloat16),
     ((257, 3000), 0, torch.float32), ((3000, 257), 1, torch.float32), ((64, 50, 33), 1, torch.float32),
     ((2048, 1024), -1, torch.float16), ((512, 8192), 0, torch.float32), ((4, 2048, 256), 1, torch.float32)],
)
def test_deterministic_and_layout_independent(shape, dim, dtype):
    """The same input gives the same bits on every run, and under every layout: the layout
    changes where partial sums sit in shared memory, never the order they are added in (the
    second pass over split partials included)."""
    x = torch.randn(shape, device="cuda").to(dtype)
    first = bankops.reduce_sum(x, dim, layout="none")
    for layout in LAYOUTS:
        for _ in range(3):
            assert as_bytes(bankops.reduce_sum(x, dim, layout=layout)).equal(as_bytes(first))


def check_marked_sums(got, base, extra):
    """got (int64, on the GPU) is `base` everywhere except base + extra[i] at index i: checked
    at both ends, at every marked index, in total and by count, without copying it to the host."""
    m = got.numel()
    idx = sorted(set(extra) | {i % m for i in (0, 1, 2, -3, -2, -1)})
    assert {i: int(got[i]) for i in idx} == {i: base + extra.get(i, 0) for i in idx}
    assert int(got.sum()) == base * m + sum(extra.values())
    assert int((got != base).sum()) == sum(1 for e in extra.values() if e != 0)


@requires_cuda
@pytest.mark.parametrize("layout", LAYOUTS)
def test_cuda_beyond_int32_elements(layout):
    """2^31 + 1 elements (uint8, 2 GiB): 64-bit indexing in every kernel path (block-wide
    and warp-per-row rows, scalar columns, split passes). The input is ones except for marked
    values at both ends, so the expected sums are known and a kernel that stops at 2^31 or
    skips a row's head misses them."""
    n = (1 << 31) + 1
    # x, the int64 column sums of its (3, n / 3) view, and a comparison mask of them
    if torch.cuda.mem_get_info()[0] < n + 9 * (n // 3) + (1 << 30):
        pytest.skip("needs about 10 GB of free GPU memory")
    x = torch.ones(n, dtype=torch.uint8, device="cuda")
    marks = {0: 3, 1: 5, 2: 9, n - 3: 11, n - 2: 13, n - 1: 17}
    for i, v in marks.items():
        x[i] = v
    extra = {i: v - 1 for i, v in marks.items()}
    assert bankops.reduce_sum(x, layout=layout).item() == n + sum(extra.values())
    for rows, cols in ((3, n // 3), (n // 3, 3)):
        x2 = x.view(rows, cols)
        row_extra, col_extra = {}, {}
        for i, e in extra.items():
            row_extra[i // cols] = row_extra.get(i // cols, 0) + e
            col_extra[i % cols] = col_extra.get(i % cols, 0) + e
        check_marked_sums(bankops.reduce_sum(x2, 1, layout=layout), cols, row_extra)
        check_marked_sums(bankops.reduce_sum(x2, 0, layout=layout), rows, col_extra)
        del x2


# Expanded inputs (stride-0 dims): 2**40-element views of a few distinct elements, summed over
# an expanded dim, over a kept one and over all of them. A contiguous copy of the view would
# take 2-8 TB; reduce_sum reads the distinct elements only.
BIG = [((1,), (2**40,)), ((3, 1, 5, 1), (3, 2**36, 5, 16))]
BIG_CASES = [(0, None, False), (0, None, True), (0, 0, False), (0, -1, True),
             (1, None, False), (1, None, True), (1, 1, False), (1, 1, True)]
BIG_IDS = [f"{'x'.join(map(str, BIG[b][1]))}-dim{d}{'-keep' if k else ''}" for b, d, k in BIG_CASES]


def expanded_sum(base, sizes, dim, keepdim):
    """torch.sum of base.expand(sizes) in float64 (int64 for integers) from base's elements: a
    summed expanded dim multiplies; plus a bound on a float sum's rounding."""
    dims = range(base.dim()) if dim is None else [dim % base.dim()]
    repeat = math.prod(sizes[d] for d in dims if base.shape[d] != sizes[d])
    x = base.cpu().double() if base.dtype.is_floating_point else base.cpu().long()
    kept = [1 if d in dims else n for d, n in enumerate(sizes)]
    ref = (x.sum(dim=tuple(dims), keepdim=True) * repeat).expand(kept)
    if not keepdim:
        ref = ref.reshape([n for d, n in enumerate(kept) if d not in dims])
    acc = torch.float64 if base.dtype == torch.float64 else torch.float32
    if not base.dtype.is_floating_point:
        return ref, None
    return ref, 8 * eps(acc) * repeat * x.abs().sum() + eps(base.dtype) * ref.abs()


def check_expanded(got, base, sizes, dim, keepdim):
    ref, bound = expanded_sum(base, sizes, dim, keepdim)
    if base.dtype.is_floating_point:
        assert got.dtype == base.dtype
        assert_close_bound(got.double(), ref, bound, "reduce_sum of an expanded view")
    else:
        assert torch.equal(got.cpu(), ref)


@contextlib.contextmanager
def address_space_limit(extra=64 << 30):
    """Any allocation that would grow this process's address space by more than `extra` bytes
    fails (RLIMIT_AS, Linux), whatever the machine's overcommit policy; elsewhere no limit."""
    try:
        import resource

        with open("/proc/self/statm") as f:
            size = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (ImportError, OSError):
        yield
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = size + extra
    for cap in (soft, hard):
        if cap != resource.RLIM_INFINITY:
            limit = min(limit, cap)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64], ids=str)
@pytest.mark.parametrize("b,dim,keepdim", BIG_CASES, ids=BIG_IDS)
def test_reference_expanded_never_copies(b, dim, keepdim, dtype):
    shape, sizes = BIG[b]
    base = random_tensor(shape, dtype)
    x = base.expand(sizes)
    bankops.reduce_sum(torch.ones(64, 1).expand(64, 8), 1)  # start the CPU threads before the limit
    with address_space_limit():
        got = bankops.reduce_sum(x, dim, keepdim)
    check_expanded(got, base, sizes, dim, keepdim)


@requires_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64, torch.int64], ids=str)
@pytest.mark.parametrize("b,dim,keepdim", BIG_CASES, ids=BIG_IDS)
def test_cuda_expanded_never_copies(b, dim, keepdim, dtype):
    """Nothing larger than the output is allocated on the GPU, and every layout gives the same bits."""
    shape, sizes = BIG[b]
    base = random_tensor(shape, dtype, "cuda")
    x = base.expand(sizes)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated()
    results = [bankops.reduce_sum(x, dim, keepdim, layout) for layout in LAYOUTS]
    assert torch.cuda.max_memory_allocated() - start < 1 << 20
    check_expanded(results[0], base, sizes, dim, keepdim)
    for r in results[1:]:
        assert as_bytes(r).equal(as_bytes(results[0]))


# Views with stride-0 dims among others (sliced, transposed, offset, all dims expanded, empty),
# against torch.sum over the same view.
EXPANDED_VIEWS = {
    "middle": lambda dt, d: random_tensor((5, 1, 3), dt, d).expand(5, 64, 3),
    "outer-and-inner": lambda dt, d: random_tensor((1, 33, 1), dt, d).expand(7, 33, 65),
    "sliced": lambda dt, d: random_tensor((1, 70), dt, d).expand(40, 70)[:, 1::3],
    "transposed": lambda dt, d: random_tensor((9, 1), dt, d).expand(9, 300).t(),
    "offset": lambda dt, d: random_tensor((4, 1, 7), dt, d)[1:, :, 2:].expand(3, 257, 5),
    "all": lambda dt, d: random_tensor((), dt, d).expand(6, 4, 129),
    "empty": lambda dt, d: random_tensor((1, 0), dt, d).expand(5, 0),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", FLOATS + [torch.bool, torch.uint8, torch.int32], ids=str)
@pytest.mark.parametrize("view", list(EXPANDED_VIEWS))
def test_expanded_views_match_torch(view, dtype, device):
    x = EXPANDED_VIEWS[view](dtype, device)
    assert 0 in x.stride()
    for dim in [None, *range(x.dim())]:
        for keepdim in (False, True):
            expected = torch_sum(x, dim, keepdim)
            for layout in LAYOUTS:
                got = bankops.reduce_sum(x, dim, keepdim, layout)
                assert got.device == x.device and got.is_contiguous()
                if dtype.is_floating_point:
                    # torch.sum rounds its own float32 sum: allow both roundings, each the worst
                    # case for n terms (repeated values' rounding errors do not cancel)
                    bound = 2 * worst_bound(x, dim, keepdim, expected)
                    assert_close_bound(got, expected, bound, f"dim={dim} keepdim={keepdim}")
                else:
                    assert torch.equal(got, expected), f"dim={dim} keepdim={keepdim}"
