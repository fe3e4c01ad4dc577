import contextlib
import os
import re
import sys
import warnings

import pytest
import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import bankops  # noqa: E402

LAYOUTS = bankops.LAYOUTS
HAS_CUDA = torch.cuda.is_available()
requires_cuda = pytest.mark.skipif(not HAS_CUDA, reason="no CUDA GPU visible: kernel tests run on a GPU machine")
DEVICES = ["cpu"] + (["cuda"] if HAS_CUDA else [])


@pytest.fixture(autouse=True)
def poisoned_outputs():
    """Every output the operators allocate starts as 0xFF bytes (NaN for floats), so an
    element a kernel or the reference never writes fails the comparison."""
    torch.ops.bankops._set_poison(True)
    yield
    torch.ops.bankops._set_poison(False)


@pytest.fixture(autouse=True)
def fresh_seed(request):
    # A different seed per test and per run: fresh random inputs, but reproducible from the log.
    seed = hash((request.node.nodeid, os.getpid())) % (2**31)
    torch.manual_seed(seed)
    print(f"seed={seed}")


def random_tensor(shape, dtype, device="cpu"):
    """Random values of any dtype: standard normal for floats, small signed integers for
    integers (never all zeros)."""
    if dtype == torch.bool:
        return torch.rand(shape, device=device) < 0.5
    if dtype.is_complex:
        return torch.randn(shape, dtype=dtype, device=device)
    if dtype.is_floating_point:
        return torch.randn(shape, device=device).to(dtype)
    lo, hi = (0, 100) if dtype == torch.uint8 else (-100, 100)
    return torch.randint(lo, hi, shape, device=device).to(dtype)


def as_bytes(t):
    """The raw bytes of a tensor, for exact comparisons that NaN cannot slip through."""
    return t.contiguous().reshape(-1).view(torch.uint8)


def assert_close_bound(got, ref, bound, what=""):
    """|got - ref| <= bound elementwise, in float64; NaN anywhere fails."""
    assert got.shape == ref.shape, f"{what}: shape {tuple(got.shape)} != {tuple(ref.shape)}"
    assert got.dtype == ref.dtype, f"{what}: dtype {got.dtype} != {ref.dtype}"
    g, r = got.cpu().double(), ref.cpu().double()
    assert not torch.isnan(r).any(), f"{what}: the reference has NaN"
    err = (g - r).abs()
    ok = err <= bound.cpu().double()
    if not bool(ok.all()):
        i = int((~ok).reshape(-1).nonzero()[0])
        raise AssertionError(
            f"{what}: {int((~ok).sum())} of {ok.numel()} elements off; first at flat index {i}: "
            f"got {g.reshape(-1)[i].item()}, ref {r.reshape(-1)[i].item()}, bound {bound.reshape(-1)[i].item()}"
        )


def eps(dtype):
    return torch.finfo(dtype).eps


def with_room_for(nbytes, fn):
    """fn()'s result, run with torch's caching allocator held to what it has reserved plus
    nbytes (a per-process memory fraction): memory a call asks for beyond that is refused. The
    free blocks of segments that live tensors keep reserved (which empty_cache cannot give back:
    a small tensor another test left alive holds a 20 MB segment) are taken for the duration,
    else a request could be served from them whatever the fraction."""
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    device = torch.cuda.current_device()
    held = [torch.empty(block["size"], dtype=torch.uint8, device="cuda")
            for segment in torch.cuda.memory_snapshot() if segment["device"] == device
            for block in segment["blocks"] if block["state"] == "inactive"]
    room = torch.cuda.memory_reserved() + nbytes
    torch.cuda.set_per_process_memory_fraction(room / torch.cuda.get_device_properties(0).total_memory)
    try:
        out = fn()
        torch.cuda.synchronize()
        return out
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
        del held


@contextlib.contextmanager
def the_model_alone():
    """The router's model alone inside the block: this GPU's measured table (bankops.tune) set
    aside, for tests of the plan the model picks; the tables are registered again after."""
    from bankops import tune  # noqa: PLC0415

    if HAS_CUDA:
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        tune.unregister(props.name, props.multi_processor_count)
    try:
        yield
    finally:
        bankops._tuning.load_all()


def assert_chain_reads_what_came_before(chain, inputs, route_prefix, check):
    """chain(): [(out, a, b)] of gemm calls back to back on one stream, each reading an earlier
    call's out; each call routed to route_prefix (one for all, or a list of one a call) and out
    checked as a @ b (check), the same bits with options.prefetch off, then the chain replayed in
    a CUDA graph over fresh inputs (inputs: name -> (tensor, scale), refilled with randn * scale)
    and checked again."""
    def check_all(outs):
        prefixes = [route_prefix] * len(outs) if isinstance(route_prefix, str) else route_prefix
        for (got, a, b), prefix in zip(outs, prefixes, strict=True):
            assert bankops.gemm_route(a, b).startswith(prefix), (prefix, bankops.gemm_route(a, b))
            check(got, a, b)

    outs = chain()
    check_all(outs)
    with bankops.options(prefetch=False):
        assert all(torch.equal(u[0], v[0]) for u, v in zip(outs, chain())), "the same bits without the prefetch"
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = chain()
    for _ in range(3):
        for t, scale in inputs.values():
            t.copy_(torch.randn_like(t, dtype=torch.float32) * scale)
        graph.replay()
        check_all(outs)


def pytest_terminal_summary(terminalreporter):
    """Skipped tests, one line per reason (pytest's -rs gives one per test location)."""
    import collections

    reasons = collections.Counter(
        str(r.longrepr[2]).removeprefix("Skipped: ") if isinstance(r.longrepr, tuple) else str(r.longrepr)
        for r in terminalreporter.stats.get("skipped", []))
    if reasons:
        terminalreporter.section("skipped, by reason")
        for reason, count in reasons.most_common():
            terminalreporter.write_line(f"{count:6d}  {reason}")


@contextlib.contextmanager
def torch_warns(capfd, pattern):
    """Asserts the block raised a torch warning (TORCH_WARN) matching `pattern`, every time:
    torch hands such a warning to Python's warnings where a Python warning handler is set (it
    is recorded here whatever the filters) and else prints it on stderr (read here)."""
    capfd.readouterr()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    text = "\n".join(str(w.message) for w in caught) + "\n" + capfd.readouterr().err
    assert re.search(pattern, text), f"no warning matching {pattern!r}; got:\n{text}"
