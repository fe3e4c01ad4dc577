"""CUDA streams, graphs and devices: the operators launch on the current stream of their
inputs' device, allocate through torch's caching allocator, never synchronize the host,
and can be captured in a CUDA graph and replayed."""
import threading

import pytest
import torch

import bankops
from conftest import LAYOUTS, requires_cuda

pytestmark = requires_cuda


def all_three(a, b, x, layout):
    """One call of each operator (batched gemm from a transposed view, a transpose of
    outer dims, a reduction with a multi-block plan) and their sum as one output."""
    c = bankops.gemm(a, b.transpose(-1, -2), layout)
    t = bankops.transpose(x, 0, 2, layout)
    s = bankops.reduce_sum(x, 1, False, layout)
    return c, t, s, bankops.reduce_sum(c, None, False, layout)


def inputs(device="cuda"):
    return (
        torch.randn(3, 70, 45, device=device),
        torch.randn(3, 66, 45, device=device),
        torch.randn(5, 3000, 7, device=device),
    )


def reference(a, b, x, layout):
    return tuple(t.cpu() for t in all_three(a.cpu(), b.cpu(), x.cpu(), layout))


def assert_all_close(got, want):
    for name, g, w in zip(("gemm", "transpose", "reduce_sum", "reduce_sum(all)"), got, want):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-4, atol=1e-3 if name.endswith("(all)") else 1e-4,
                                   msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_cuda_graph_capture_and_replay(layout):
    static = inputs()
    # Warm up on a side stream, as torch.cuda.graph wants (first-call allocations, plans).
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        all_three(*static, layout)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        outs = all_three(*static, layout)
    for _ in range(2):  # fresh data each replay: the graph must read the static inputs again
        fresh = inputs()
        for dst, src in zip(static, fresh):
            dst.copy_(src)
        graph.replay()
        assert_all_close(outs, reference(*fresh, layout))


def test_cuda_graph_training_step():
    """make_graphed_callables captures forward and backward (bankops ops in both)."""
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)).cuda()
    mine = torch.nn.Sequential(bankops.nn.Linear(32, 64), torch.nn.ReLU(), bankops.nn.Linear(64, 8, layout="pad")).cuda()
    mine.load_state_dict(ref.state_dict())
    x = torch.randn(16, 32, device="cuda", requires_grad=True)
    graphed = torch.cuda.make_graphed_callables(mine, (x,))
    for _ in range(2):
        x = torch.randn(16, 32, device="cuda", requires_grad=True)
        xr = x.detach().clone().requires_grad_()
        graphed(x).square().sum().backward()
        ref(xr).square().sum().backward()
        torch.testing.assert_close(x.grad, xr.grad, rtol=1e-4, atol=1e-4)
        for p, q in zip(mine.parameters(), ref.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-4, atol=1e-4)
            p.grad = q.grad = None


@pytest.mark.parametrize("layout", LAYOUTS)
def test_side_stream(layout):
    """The inputs are written on a side stream after a long sleep there; an operator that
    launched on another stream would read them before they exist."""
    src = inputs()
    want = reference(*src, layout)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        # Allocated on the side stream (so the caching allocator ties them to it), filled
        # with NaN, then written only after the sleep.
        dst = tuple(torch.full_like(t, float("nan")) for t in src)
        torch.cuda._sleep(100_000_000)  # ~50 ms of GPU time
        for d, t in zip(dst, src):
            d.copy_(t)
        outs = all_three(*dst, layout)
    torch.cuda.current_stream().wait_stream(side)
    assert_all_close(outs, want)


def test_no_host_synchronization():
    """torch's sync debug mode fails on any synchronizing call made through torch (a
    device-to-host copy, .item(), a synchronizing allocation), forward and backward."""
    a, b, x = (t.requires_grad_() for t in inputs())
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for layout in LAYOUTS:
            outs = all_three(a, b, x, layout)
            sum(bankops.reduce_sum(o * o, layout=layout) for o in outs).backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert a.grad is not None and b.grad is not None and x.grad is not None


def test_compile_reduce_overhead():
    """torch.compile's CUDA-graph mode runs the operators inside its captured graph."""
    torch._dynamo.reset()
    f = torch.compile(lambda a, b, x: all_three(a, b, x, "swizzle"), mode="reduce-overhead", fullgraph=True)
    for _ in range(3):
        args = inputs()
        got = [t.clone() for t in f(*args)]
        assert_all_close(got, reference(*args, "swizzle"))


def route_case(name, device="cuda"):
    """Operands of a gemm on one of the routes that launch more than one kernel, take scratch
    memory or a cluster (on an H100; other GPUs route them otherwise, and the test still
    holds): the Hopper kernel (TMA), misaligned rows copied into aligned rows before it,
    float32 stream-K (partial sums in scratch), the mma.sync kernel and the Hopper kernel's thin
    tile split across a cluster, and the few-rows kernel, as x @ W.t()."""
    g = torch.Generator(device=device).manual_seed(len(name))
    r = lambda *s, dt=torch.bfloat16: torch.randn(*s, device=device, generator=g).to(dt)  # noqa: E731
    if name == "wgmma":
        return r(2048, 1024), r(1024, 2048)
    if name == "repack":
        return r(1030 * 517 + 1)[1:].view(1030, 517), r(517 * 1100 + 3)[3:].view(517, 1100)
    if name == "stream_k":
        return r(2048, 2048, dt=torch.float32), r(2048, 2048, dt=torch.float32)
    if name == "split_k":
        return r(24, 4096), r(4096, 4096).t()
    if name == "thin":
        return r(48, 4096), r(4096, 4096).t()
    return r(4, 4096), r(4096, 4096).t()  # rows


ROUTES = {"wgmma": "wgmma", "repack": "wgmma", "stream_k": "ffma", "split_k": "mma", "thin": "wgmma 64x64x64",
          "rows": "rows"}
HOPPER_132 = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0) and \
    torch.cuda.get_device_properties(0).multi_processor_count == 132


@pytest.mark.parametrize("name", list(ROUTES))
def test_cuda_graph_replays_each_gemm_route(name):
    """Captured in a CUDA graph (its scratch and copies from the graph's pool) and replayed
    on fresh inputs: the bits of the same call run eagerly."""
    a, b = route_case(name)
    if HOPPER_132:
        assert bankops.gemm_route(a, b).startswith(ROUTES[name]), bankops.gemm_route(a, b)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        bankops.gemm(a, b)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = bankops.gemm(a, b)
    for _ in range(2):
        a.copy_(torch.randn_like(a, dtype=torch.float32))
        b.copy_(torch.randn_like(b, dtype=torch.float32))
        graph.replay()
        assert torch.equal(out, bankops.gemm(a, b))


@pytest.mark.parametrize("names", [("wgmma", "repack"), ("stream_k", "split_k"), ("rows", "stream_k"),
                                   ("repack", "split_k")], ids="+".join)
def test_cuda_two_threads_two_streams(names):
    """Two Python threads call gemm at once, each on its own stream, one route each, over
    several inputs (scratch freed and reused across the streams): the bits of a serial run."""
    cases = {name: [route_case(name) for _ in range(3)] for name in names}
    for name in names:
        for i, (a, _) in enumerate(cases[name]):
            a.mul_(1 + i)  # distinct inputs per call
    serial = {name: [bankops.gemm(a, b) for a, b in cases[name]] for name in names}
    torch.cuda.synchronize()
    got, errors, start = {}, [], threading.Barrier(len(names))

    def worker(name):
        try:
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                start.wait()
                got[name] = [bankops.gemm(a, b) for _ in range(4) for a, b in cases[name]]
            stream.synchronize()
        except Exception as e:  # noqa: BLE001  (reported by the main thread)
            errors.append((name, e))

    threads = [threading.Thread(target=worker, args=(name,)) for name in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for name in names:
        for i, out in enumerate(got[name]):
            assert torch.equal(out, serial[name][i % 3]), (name, i)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs (multi-GPU test)")
def test_second_device_plans_with_its_own_sm_count():
    """Each device's route reads that device's SM count and compute capability (cached per
    device, not for the first one touched): touch cuda:1 first, then cuda:0."""
    for device in ("cuda:1", "cuda:0"):
        a, b = route_case("stream_k", device)
        props = torch.cuda.get_device_properties(device)
        line = bankops.gemm_route(a, b)
        assert f"sms={props.multi_processor_count} cc={props.major}{props.minor}" in line, line
        room = torch.ops.bankops._device_room(torch.device(device).index)  # measured on that device
        cc = 10 * props.major + props.minor
        assert line == torch.ops.bankops._gemm_route(a, b, "swizzle", props.multi_processor_count, cc, room)
        torch.testing.assert_close(bankops.gemm(a, b), (a.double() @ b.double()).float(), rtol=1e-4, atol=1e-3)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs (multi-GPU test)")
def test_second_device_current_stream_and_grads():
    """Inputs on cuda:1 while cuda:0 is current: results on cuda:1, launched on cuda:1's
    current stream (a side stream that writes the inputs late), gradients there too."""
    src = inputs("cuda:1")
    want = reference(*src, "pad")
    side = torch.cuda.Stream(device="cuda:1")
    side.wait_stream(torch.cuda.current_stream("cuda:1"))
    with torch.cuda.stream(side):  # makes cuda:1 current, side its current stream
        dst = tuple(torch.full_like(t, float("nan")) for t in src)
        torch.cuda._sleep(100_000_000)
        for d, t in zip(dst, src):
            d.copy_(t)
        torch.cuda.set_device(0)  # side stays cuda:1's current stream
        outs = all_three(*dst, "pad")
        assert torch.cuda.current_device() == 0
    torch.cuda.current_stream("cuda:1").wait_stream(side)
    assert all(o.device == torch.device("cuda:1") for o in outs)
    assert_all_close(outs, want)
    torch.cuda.set_device(0)
    a = src[0].clone().requires_grad_()
    bankops.reduce_sum(bankops.gemm(a, src[1].transpose(1, 2))).backward()
    assert a.grad.device == a.device
    want_grad = src[1].cpu().sum(1, keepdim=True).expand(3, 70, 45)
    torch.testing.assert_close(a.grad.cpu(), want_grad, rtol=1e-4, atol=1e-4)
