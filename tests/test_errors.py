"""Bad arguments raise errors that name the argument and what was expected."""
import os
import re
import subprocess
import sys

import pytest
import torch

import bankops
from conftest import DEVICES, requires_cuda

ops = torch.ops.bankops


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "call",
    [
        lambda x: ops.reduce_sum(x, None, False, "diagonal"),
        lambda x: ops.transpose(x, 0, 1, "Swizzle"),
        lambda x: ops.gemm(x, x, ""),
    ],
    ids=["reduce_sum", "transpose", "gemm"],
)
def test_unknown_layout_lists_the_valid_ones(device, call):
    expected = "expected one of: " + ", ".join(bankops.LAYOUTS)
    with pytest.raises(RuntimeError, match=r"unknown layout .* for argument layout; " + re.escape(expected)):
        call(torch.randn(4, 4, device=device))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "call,message",
    [
        (lambda d: ops.gemm(torch.randn(4, device=d), torch.randn(4, 4, device=d)), r"expected a to be 2-D \(M, K\) or 3-D"),
        (lambda d: ops.gemm(torch.randn(2, 2, 2, 2, device=d), torch.randn(2, 2, device=d)), r"expected a to be 2-D"),
        (lambda d: ops.gemm(torch.randn(4, 4, device=d), torch.randn(2, 4, 4, device=d)), r"expected b to be 2-D like a"),
        (lambda d: ops.gemm(torch.randn(4, 5, device=d), torch.randn(4, 5, device=d)), r"a's columns \(K=5\) must equal b's rows \(4\)"),
        (lambda d: ops.gemm(torch.randn(2, 4, 5, device=d), torch.randn(3, 5, 4, device=d)), r"a has batch size 2 but b has 3"),
        (lambda d: ops.gemm(torch.randn(4, 4, device=d), torch.randn(4, 4, device=d).half()), r"b has dtype torch.float16 but a has torch.float32"),
        (lambda d: ops.gemm(torch.ones(4, 4, dtype=torch.int32, device=d), torch.ones(4, 4, dtype=torch.int32, device=d)),
         r"a has dtype torch.int32; expected float32, float16, bfloat16 or float64"),
        (lambda d: ops.reduce_sum(torch.randn(4, 4, dtype=torch.complex64, device=d)), r"x has dtype torch.complex64; expected one of bool"),
        (lambda d: ops.reduce_sum(torch.randn(4, 4, device=d), 2), r"dim=2 is out of range for a 2-d tensor \(expected -2 to 1\)"),
        (lambda d: ops.reduce_sum(torch.randn((), device=d), 1), r"dim=1 is out of range for a 0-d tensor \(expected -1 to 0\)"),
        (lambda d: ops.transpose(torch.randn(4, 4, device=d), 0, -3), r"dim1=-3 is out of range for a 2-d tensor"),
        (lambda d: ops.transpose(torch.randn(4, device=d)), r"dim0=-2 is out of range for a 1-d tensor"),
    ],
)
def test_bad_arguments(device, call, message):
    with pytest.raises(RuntimeError, match=message):
        call(device)


@pytest.mark.parametrize(
    "call,arg",
    [
        (lambda x: ops.gemm(None, x), "gemm: expected a"),
        (lambda x: ops.gemm(x, None), "gemm: expected b"),
        (lambda x: ops.linear(None, x), "linear: expected x"),
        (lambda x: ops.linear(x, None), "linear: expected weight"),
        (lambda x: bankops.gemm(None, x), "gemm: expected a"),
        (lambda x: bankops.linear(None, x), "linear: expected x"),
    ],
    ids=["gemm-a", "gemm-b", "linear-x", "linear-weight", "bankops.gemm", "bankops.linear"],
)
def test_none_for_a_tensor_is_named(call, arg):
    """None beside another tensor reaches the op as an undefined tensor: the message says None, not a shape."""
    with pytest.raises(RuntimeError, match=re.escape(arg) + " to be a tensor, got None"):
        call(torch.randn(4, 4))


@pytest.mark.parametrize(
    "dtype", [torch.int8, torch.uint8, torch.int16, torch.int64, torch.bool, torch.complex64, torch.complex128],
    ids=str)
def test_dtypes_have_their_python_names(dtype):
    """A refused dtype is printed as Python names it (torch.int8), beside the Python names expected."""
    x = torch.zeros(4, 4, dtype=dtype)
    with pytest.raises(RuntimeError, match=re.escape(f"gemm: a has dtype {dtype}; expected float32")):
        ops.gemm(x, x)
    with pytest.raises(RuntimeError, match=re.escape(f"gemm: b has dtype {dtype} but a has torch.float32")):
        ops.gemm(torch.zeros(4, 4), x)
    with pytest.raises(RuntimeError, match=re.escape(f"linear: x has dtype {dtype}; expected torch.float32")):
        ops.linear(x, x)
    if dtype.is_complex:
        with pytest.raises(RuntimeError, match=re.escape(f"reduce_sum: x has dtype {dtype}; expected one of")):
            ops.reduce_sum(x)


def test_layout_with_a_nul_byte_is_printed_whole():
    """The layout is printed with bytes outside printable ASCII escaped: a NUL would end the message."""
    x = torch.randn(4, 4)
    expected = r"unknown layout 'pad\x00' for argument layout; expected one of: " + ", ".join(bankops.LAYOUTS)
    for call in (lambda: ops.gemm(x, x, "pad\0"), lambda: ops.transpose(x, 0, 1, "pad\0"),
                 lambda: bankops.reduce_sum(x, layout="pad\0")):
        with pytest.raises(RuntimeError, match=re.escape(expected)):
            call()


def test_sparse_input_is_refused():
    # The dispatcher refuses sparse tensors before a kernel runs, naming the backend.
    x = torch.randn(4, 4).to_sparse()
    with pytest.raises(NotImplementedError, match=r"Could not run 'bankops::reduce_sum' with arguments from the 'SparseCPU' backend"):
        ops.reduce_sum(x)


@requires_cuda
def test_mixed_devices():
    a = torch.randn(4, 4, device="cuda")
    with pytest.raises(RuntimeError, match=r"a is on cuda:0 but b is on cpu; a and b must be on the same device"):
        ops.gemm(a, torch.randn(4, 4))
    with pytest.raises(RuntimeError, match=r"a is on cpu but b is on cuda:0"):
        ops.gemm(torch.randn(4, 4), a)


@pytest.mark.parametrize(
    "call,message",
    [
        (lambda: ops._bank_cost(torch.full((32,), 2**32, dtype=torch.long), 4), r"lane 0 address 4294967296 is outside \[0, 2\^32\)"),
        (lambda: ops._bank_map(torch.arange(32, dtype=torch.float) * 4, 4), r"_bank_map: expected addr to hold integer byte addresses, got dtype torch.float32"),
        (lambda: ops._bank_cost(torch.zeros(32, dtype=torch.complex64), 4), r"expected addr to hold integer byte addresses"),
        (lambda: ops._bank_cost(torch.arange(32) * 4, 4, 2**32), r"expected active to be a 32-lane mask"),
        (lambda: ops._bank_cost(torch.arange(32) * 4, 4, -2), r"expected active to be a 32-lane mask"),
        (lambda: ops._bank_cost(torch.arange(32) * 16, 16, -1, False, torch.arange(32.0)), r"expected src to hold integer byte addresses"),
        (lambda: ops._set_poison(2), r"_set_poison: expected on to be True or False \(1 or 0\), got 2"),
        (lambda: ops._gemm_options("stream_k=-1"), r"_gemm_options: expected stream_k=0 or =1, got 'stream_k=-1'"),
        (lambda: ops._gemm_options("turbo=1"), r"_gemm_options: unknown option 'turbo'; expected one of: wgmma, "),
        (lambda: ops._tile_info("nope", "none"), r"_tile_info: unknown tile 'nope'"),
        (lambda: ops._tile_info("gemm/4", "tiled"), r"unknown layout 'tiled'"),
    ],
    ids=["addr-past-2^32", "float-addr", "complex-addr", "active-2^32", "active-minus-2", "float-src", "poison-2",
         "option-value", "option-name", "tile-info-name", "tile-info-layout"],
)
def test_private_ops_refuse_bad_arguments(call, message):
    """The test hooks check their arguments as the operators do: shared-memory addresses are
    32-bit integers, active a 32-lane mask, the switch and the options 0 or 1, and errors name
    the hook."""
    with pytest.raises(RuntimeError, match=message):
        call()


def misaligned_cpu(rows, cols):
    """A float32 CPU tensor whose data starts one byte into its buffer (from_blob-like memory)."""
    x = torch.frombuffer(bytearray(4 * rows * cols + 4), dtype=torch.float32, offset=1, count=rows * cols)
    return x.view(rows, cols).copy_(torch.randn(rows, cols))


def misaligned_cuda(rows, cols):
    """The same on the GPU, through DLPack from CuPy memory one byte into an allocation, filled
    by a byte copy from the host (torch's and CuPy's own kernels would fault on it), and the
    aligned tensor of the same values."""
    cupy = pytest.importorskip("cupy")
    host = torch.randn(rows, cols)
    raw = cupy.cuda.alloc(4 * rows * cols + 4)
    cupy.cuda.runtime.memcpy(raw.ptr + 1, host.data_ptr(), 4 * rows * cols, 1)  # host to device
    arr = cupy.ndarray((rows, cols), dtype=cupy.float32, memptr=raw + 1)
    try:
        x = torch.from_dlpack(arr)
    except Exception as e:  # noqa: BLE001  (torch may refuse such memory: then nothing reaches bankops)
        pytest.skip(f"torch.from_dlpack refuses a misaligned array: {e}")
    return x, host.cuda(), raw


@pytest.mark.parametrize("device", DEVICES)
def test_misaligned_base_pointer_is_copied_not_faulted_on(device):
    """An input whose data pointer is off a multiple of its element size (only from_blob or
    DLPack memory can be) is read from an aligned copy: the same results as the aligned
    tensor, no misaligned-address fault (issue: reduce_sum and gemm's scalar paths faulted)."""
    if device == "cpu":
        x = misaligned_cpu(67, 45)
        ref = x.clone()
    else:  # no torch kernel may read x itself: ref is the same values, aligned
        x, ref, _keep = misaligned_cuda(67, 45)
    assert x.data_ptr() % 4 != 0
    assert torch.equal(bankops.gemm(x, x.t()), bankops.gemm(ref, ref.t()))
    assert torch.equal(bankops.reduce_sum(x, 0), bankops.reduce_sum(ref, 0))
    assert torch.equal(bankops.reduce_sum(x), bankops.reduce_sum(ref))
    assert torch.equal(bankops.transpose(x), ref.t().contiguous())
    w = ref[:13].clone()
    assert torch.equal(bankops.linear(x, w, x[0, :13]), bankops.linear(ref, w, ref[0, :13]))


# Every operator and test hook, called with arguments of every wrong kind: wrong dtypes,
# 0-d, meta and sparse tensors, NaN and inf values, negative and huge ints, bad strings. Each
# call must raise (or return); a crash (a signal ending the process) fails. One subprocess per
# op runs its calls, so that a crash names the op and does not take pytest down.
SWEEP = r"""
import itertools, sys, torch, bankops
ops = torch.ops.bankops
dev = sys.argv[2]
f = lambda *s: torch.randn(s, device=dev)
tensors = [f(4, 4), f(), f(0, 4), f(4, 4).half(), torch.ones(4, 4, dtype=torch.int64, device=dev),
           torch.ones(4, 4, dtype=torch.bool, device=dev), torch.full((4, 4), float("nan"), device=dev),
           torch.full((4, 4), float("inf"), device=dev), torch.randn(4, 4, dtype=torch.complex64, device=dev),
           torch.empty(4, 4, device="meta"), f(2, 3, 4).transpose(0, 2), f(4, 4).to_sparse()]
ints = [0, -1, 5, -5, 2**31, -2**31, 2**62, -2**62]
# Probe addresses: lane offsets 16 bytes apart, every lane off, past the end, near 2^63, negative.
addrs = [(torch.arange(32, device=dev) * 16).view(1, 32), torch.full((2, 32), -1, device=dev),
         torch.full((1, 32), 1 << 20, device=dev), torch.full((1, 32), 2**63 - 16, device=dev),
         torch.full((1, 32), -16, device=dev)]
strs = ["swizzle", "", "SWIZZLE", "pad\0", "none" * 100]
calls = {
    "reduce_sum": lambda: [(t, d, k, s) for t in tensors for d in [None, *ints] for k in (False, True) for s in strs[:2]],
    "transpose": lambda: [(t, a, b, s) for t in tensors for a in ints[:4] for b in ints for s in strs[:2]],
    "gemm": lambda: [(a, b, s) for a in tensors for b in tensors for s in strs[:2]],
    "linear": lambda: [(a, b, c, s) for a in tensors[:6] for b in tensors for c in [None, *tensors[:4]] for s in strs[:2]],
    "_tile_map": lambda: [(t, s) for t in ["gemm/4", "", "x" * 1000] for s in strs],
    "_tile_info": lambda: [(t, s) for t in ["gemm/4", "", "x" * 1000] for s in strs],
    "_bank_cost": lambda: [(t, w, a) for t in [*tensors, torch.arange(32) * 4, torch.arange(32) * -4] for w in ints[:4] + [16]
                           for a in ints],
    "_bank_map": lambda: [(t, w, a) for t in [*tensors, torch.arange(32) * 4] for w in ints[:4] + [16] for a in ints],
    "_set_poison": lambda: [(i,) for i in ints],
    "_gemm_options": lambda: [(s,) for s in strs + ["wgmma=2", "wgmma", "=1", ",", "split_k=1,,wgmma=0", "x" * 10000]],
    "_smem_probe": lambda: [(t, w, st, src, z) for t in [*tensors, *addrs] for w in [4, 16, 3, 0, -1, 2**31]
                            for st in (False, True) for src in [None, addrs[0], tensors[0]] for z in (False, True)],
    "_smem_trace": lambda: [(op, s, dt, p, n) for op in ["gemm", "transpose", "reduce_sum", ""] for s in strs[:2]
                            for dt in [torch.float32, torch.int8, torch.complex64]
                            for p in [[], [1, 2, 3], [1, 2**40, 2**40, 2**40, 1, 1], [-1, 4, 4], [1, 4, 4, 4, 1, 1]]
                            for n in [132, 0, 2**40]],
    "_gemm_route": lambda: [(a, b, s, n, c) for a in tensors for b in tensors[:4] for s in strs[:2]
                            for n in [132, 0, -1, 2**40] for c in [90, 0, 2**40]]
                           + [(tensors[0], tensors[0], "swizzle", 132, 90, r) for r in rooms],
    "_device_room": lambda: [(i,) for i in ints],
}
calls["_gemm_candidates"] = calls["_gemm_route"]
# Tables: entries of every wrong length, dtype and layout code, dims and keys; unknown GPUs.
calls["_gemm_tuning"] = lambda: [(g, n, 90, "d", e, "t.json") for g in ["", "x", "\0" * 3] for n in [132, 0, 2**40]
                                 for e in [[], [1] * 9, [7, 2, 0, 1, 1, 4096, 4096, 4096, 1], [7, 2, 0, 1] + [-1] * 5,
                                           [7] * 8, [99, 9, 0, 0, 2**62, 2**62, 2**62, 2**62, 2**62]]]

# Cluster rooms: too short, negative, past the SMs' slots, not whole clusters, huge; a valid one.
rooms = [[], [-2] * 28, [2**40] * 28, [3] * 28, [2**62] * 28, [0] * 28]
name = sys.argv[1]
tried = raised = 0
for op in [getattr(ops, name)]:
    for args in calls[name]():
        tried += 1
        try:
            op(*args)
        except Exception:
            raised += 1
print(name, tried, raised)
"""


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("op", ["reduce_sum", "transpose", "gemm", "linear", "_tile_map", "_tile_info", "_bank_cost",
                                "_bank_map", "_set_poison", "_gemm_options", "_gemm_tuning", "_smem_probe", "_smem_trace",
                                "_gemm_route", "_gemm_candidates", "_device_room"])
def test_bad_argument_sweep_never_crashes(op, device, tmp_path):
    script = tmp_path / "sweep.py"
    script.write_text(SWEEP)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run([sys.executable, str(script), op, device], capture_output=True, text=True, timeout=600, env=env)
    assert run.returncode == 0, f"{op} on {device}: exit {run.returncode}\n{run.stdout[-2000:]}\n{run.stderr[-3000:]}"
    name, tried, raised = run.stdout.split()[-3:]
    assert name == op and int(tried) > 0


@pytest.mark.parametrize("call,error,message", [
    (lambda x: bankops.reduce_sum(None), TypeError, "reduce_sum: expected x to be a tensor, got None"),
    (lambda x: bankops.transpose([1, 2]), TypeError, "transpose: expected x to be a tensor, got list"),
    (lambda x: bankops.transpose(x, 2**70), ValueError, f"transpose: expected dim0 to fit in 64 bits, got {2**70}"),
    (lambda x: bankops.reduce_sum(x, -2**64), ValueError, f"reduce_sum: expected dim to fit in 64 bits, got {-2**64}"),
    (lambda x: bankops.explain("gemm", m=64.5, n=64, k=64), ValueError,
     "explain('gemm'): expected m to be an int in [0, 2^62], got 64.5"),
    (lambda x: bankops.explain("gemm", m=True, n=64, k=64), ValueError, "expected m to be an int"),
    (lambda x: bankops.explain("gemm", m=2**40, n=2**40, k=64), ValueError,
     "explain('gemm'): the output holds 1208925819614629174706176 elements, more than any tensor"),
    (lambda x: bankops.explain("transpose", shape=(2**40, 2**40)), ValueError, "shape holds 1208925819614629174706176"),
    (lambda x: bankops.explain("reduce_sum", shape=(4, 4), dim=1.5), ValueError,
     "expected dim to be an int in [-2, 2^62], got 1.5"),
    (lambda x: bankops.explain("transpose", shape=(64, 64)).worst_access(99), ValueError,
     "instruction 99 is out of range: the report has"),
], ids=["reduce_sum-None", "transpose-list", "dim0-2^70", "dim--2^64", "m-float", "m-bool", "gemm-oversized",
        "transpose-oversized", "dim-float", "instruction-99"])
def test_python_api_names_the_bad_argument(call, error, message):
    """The Python functions name the argument the dispatcher could not take (a tensor that is none,
    an int past 64 bits) and explain's problem (ints that fit a tensor), in their own words."""
    with pytest.raises(error, match=re.escape(message)):
        call(torch.randn(4, 4))
