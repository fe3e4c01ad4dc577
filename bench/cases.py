"""What the benchmark times: each case is one input, the bankops call, its torch peer and a check."""
import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch

import bankops

f32, f16, bf16, f64 = torch.float32, torch.float16, torch.bfloat16, torch.float64

# Loose relative tolerances: summation order legitimately differs from the peer, but a
# dropped tile, a wrong index or TF32 sneaking into float32 gemm is well outside these.
RTOL = {f32: 1e-4, f16: 1e-2, bf16: 4e-2, f64: 1e-9}

L2_BYTES = 50 * 2**20  # the H100's (and H200's) L2
# The bytes a memory-bound case's input sets reach together (Case.copies): each timed call reads
# its input from DRAM, not from the L2 the calls before it filled.
ROTATE_BYTES = 4 * L2_BYTES


def sets_over(rotate_bytes, set_bytes, least=1):
    """Input sets of set_bytes each that together reach rotate_bytes (at least `least`)."""
    return max(least, math.ceil(rotate_bytes / set_bytes))


# The bench's sections in the order they run, and the "case" values of rows that belong to a
# section other than "models" (the rows of no case: "ops").
SECTIONS = ("ops", "models", "inference", "overhead")
CASE_SECTIONS = {None: "ops", "decode": "inference", "decode x@W": "inference", "overhead": "overhead"}


def rand(shape, dtype, device):
    """Random data, never zeros: an all-zero input would hide a kernel that reads nothing."""
    if dtype.is_floating_point:
        return torch.randn(shape, dtype=dtype, device=device)
    info = torch.iinfo(dtype)
    return torch.randint(max(info.min, -1000), min(info.max, 1000) + 1, shape, dtype=dtype, device=device)


def check_equal(out, ref, scale):
    if out.shape != ref.shape or out.dtype != ref.dtype:
        return f"MISMATCH: got {out.dtype}{list(out.shape)}, peer gives {ref.dtype}{list(ref.shape)}"
    if torch.equal(out, ref):
        return "ok"
    bad = int((out != ref).sum())
    return f"MISMATCH: {bad} of {ref.numel()} elements differ"


def check_close(out, ref, scale):
    """|out - ref| <= rtol * (|ref| + scale); scale is the typical size of a sum of randn terms."""
    if not ref.dtype.is_floating_point:
        return check_equal(out, ref, scale)
    if out.shape != ref.shape or out.dtype != ref.dtype:
        return f"MISMATCH: got {out.dtype}{list(out.shape)}, peer gives {ref.dtype}{list(ref.shape)}"
    rtol = RTOL[ref.dtype]
    ref64 = ref.double()
    diff = (out.double() - ref64).abs()
    ok = diff <= rtol * (ref64.abs() + scale)  # written so that NaN counts as bad
    if bool(ok.all()):
        return "ok"
    bad = int((~ok).sum())
    return (f"MISMATCH: {bad} of {ref.numel()} elements off, max |diff| {float(diff.nan_to_num(math.inf).max()):.3g}"
            f" (rtol {rtol:g}, scale {scale:.3g})")


@dataclass
class Case:
    op: str
    dtype: torch.dtype
    shape: list                      # input shape; [M, N, K] or [B, M, N, K] for gemm, [M, K, N] for linear
    make: Callable                   # device -> tuple of input tensors
    run: Callable                    # (inputs, layout) -> bankops result
    peer: Callable                   # inputs -> torch result
    peer_name: str
    check: Callable                  # (out, ref, scale) -> "ok" | "MISMATCH ..."
    scale: float = 0.0
    dim: Optional[int] = None
    quick: bool = False              # part of the --quick sweep
    model_case: Optional[str] = None  # the row's "case": which of a Linear layer's products, "layer", "decode"
    linear_shape: Optional[list] = None  # [M tokens, K in, N out] of that layer
    copies: int = 1                  # input sets (each from make) the timed calls take in turn, one a call
    weight_bytes: Optional[int] = None  # decode: the weight's bytes, for the rows' weight GB/s

    # Floating-point operations per element of M·N·K: a multiply and an add, three products
    # (forward, input grad, weight grad) for a Linear layer's training step.
    FLOPS = {"gemm": 2, "linear": 6}

    @property
    def memory_bound(self):
        return self.op not in self.FLOPS

    @property
    def section(self):
        """"models" for the shapes and calls of a Linear layer, "inference" for decode products,
        "ops" for the operator sweep."""
        return CASE_SECTIONS.get(self.model_case, "models")

    @property
    def eager(self):
        """Also timed eagerly: users call a model's layers eagerly, host overhead included."""
        return self.section != "ops"

    @property
    def unit(self):
        return "GB/s" if self.memory_bound else "TFLOP/s"

    def work(self, inputs, out):
        """Bytes read + written (memory-bound ops) or floating-point operations (gemm, linear)."""
        if self.memory_bound:
            return sum(t.nbytes for t in inputs) + out.nbytes
        return self.FLOPS[self.op] * math.prod(self.shape)

    def figure(self, work, ms):
        return work / (ms * 1e-3) / (1e9 if self.memory_bound else 1e12)

    @property
    def label(self):
        s = "x".join(map(str, self.shape))
        if self.op == "reduce_sum":
            s += ", all" if self.dim is None else f", dim={self.dim}"
        return s


def transpose(shape, dtype, quick=False, rotate_bytes=ROTATE_BYTES):
    batched = len(shape) > 2
    return Case(
        "transpose", dtype, list(shape),
        make=lambda dev: (rand(shape, dtype, dev),),
        run=lambda inp, layout: bankops.transpose(inp[0], -2, -1, layout=layout),
        peer=(lambda inp: inp[0].transpose(-2, -1).contiguous()) if batched else (lambda inp: inp[0].t().contiguous()),
        peer_name="x.transpose(-2,-1).contiguous()" if batched else "x.t().contiguous()",
        check=check_equal, quick=quick, copies=sets_over(rotate_bytes, math.prod(shape) * dtype.itemsize))


def reduce_sum(shape, dtype, dim=None, quick=False, rotate_bytes=ROTATE_BYTES):
    n = math.prod(shape) if dim is None else shape[dim]
    return Case(
        "reduce_sum", dtype, list(shape),
        make=lambda dev: (rand(shape, dtype, dev),),
        run=lambda inp, layout: bankops.reduce_sum(inp[0], dim, layout=layout),
        peer=(lambda inp: torch.sum(inp[0])) if dim is None else (lambda inp: torch.sum(inp[0], dim)),
        peer_name="torch.sum", check=check_close, scale=math.sqrt(n), dim=dim, quick=quick,
        copies=sets_over(rotate_bytes, math.prod(shape) * dtype.itemsize))


def peer_name(name, dtype, cpu):
    if cpu:
        return f"{name} (CPU)"
    return f"{name} (cuBLAS, no TF32)" if dtype == f32 else f"{name} (cuBLAS)"


def gemm(shape, dtype, quick=False, cpu=False, make=None, model_case=None, linear_shape=None):
    """a @ b for contiguous operands, or for the views that make(device) returns (a Linear
    layer's product: linear_gemm)."""
    *batch, m, n, k = shape
    return Case(
        "gemm", dtype, list(shape),
        make=make or (lambda dev: (rand((*batch, m, k), dtype, dev), rand((*batch, k, n), dtype, dev))),
        run=lambda inp, layout: bankops.gemm(inp[0], inp[1], layout=layout),
        peer=lambda inp: torch.matmul(inp[0], inp[1]),
        peer_name=peer_name("torch.matmul", dtype, cpu),
        check=check_close, scale=math.sqrt(k), quick=quick, model_case=model_case, linear_shape=linear_shape)


# The three products of a Linear layer y = x @ W.t() + b, as its forward and backward call
# gemm: (a, b) as (tensor, transposed?) over the contiguous x (M, K), W (N, K) and dy (M, N).
LINEAR_PRODUCTS = {
    "x@W.t()": (("x", False), ("W", True)),    # forward
    "dy@W": (("dy", False), ("W", False)),     # input grad
    "dy.t()@x": (("dy", True), ("x", False)),  # weight grad
}


def linear_gemm(product, linear_shape, dtype, quick=False, cpu=False):
    """One product of a Linear layer of [M tokens, K in, N out] on the views the layer passes;
    the row's shape is the product's own [m, n, k]."""
    m_tok, k_in, n_out = linear_shape
    stored = {"x": (m_tok, k_in), "W": (n_out, k_in), "dy": (m_tok, n_out)}
    a, b = LINEAR_PRODUCTS[product]

    def view_shape(name, transposed):
        return stored[name][::-1] if transposed else stored[name]

    def operand(dev, name, transposed):
        t = rand(stored[name], dtype, dev)
        return t.t() if transposed else t

    (m, k), (_, n) = view_shape(*a), view_shape(*b)
    return gemm((m, n, k), dtype, quick, cpu, make=lambda dev: (operand(dev, *a), operand(dev, *b)),
                model_case=product, linear_shape=list(linear_shape))


def decode(m, k, n, dtype, quick=False, cpu=False, rotate_bytes=ROTATE_BYTES, weight_kn=False):
    """x (M, K) @ W.t() with few rows M, W an (N, K) weight read in place: a served model's
    layer at decode, where reading the weight sets the time (with weight_kn, x @ W of a (K, N)
    weight, as models that store it (in, out) call it: case "decode x@W"). Each timed call takes
    the next of `copies` fresh (x, W) sets, together over rotate_bytes (at least two), so that
    it reads its weight from DRAM, not from the L2 the previous call filled; bankops and torch
    take the same sets in the same turn."""
    copies = sets_over(rotate_bytes, (m + n) * k * dtype.itemsize, least=2)

    def make(dev):
        return rand((m, k), dtype, dev), rand((k, n), dtype, dev) if weight_kn else rand((n, k), dtype, dev).t()

    case = gemm((m, n, k), dtype, quick, cpu, make=make, model_case="decode x@W" if weight_kn else "decode",
                linear_shape=[m, k, n])
    return dataclasses.replace(case, copies=copies, weight_bytes=n * k * dtype.itemsize)


def decode_cases(ms, kns, dtypes, quick=(), cpu=False, rotate_bytes=ROTATE_BYTES, weight_kn=False):
    return [decode(m, k, n, dt, (m, k, n, dt) in quick, cpu, rotate_bytes, weight_kn)
            for dt in dtypes for k, n in kns for m in ms]


@dataclass
class Overhead:
    """One operator's eager cost per call on tiny tensors, beside its torch peer's: the wall time
    of `calls` back-to-back calls (bench/run.py's run_overhead). bankops runs its default layout."""
    op: str
    shape: list                      # [64, 64]; gemm [M, N, K]; linear [M tokens, K in, N out]
    inputs: list                     # the input shapes, float32
    fn: Callable                     # bankops: (*inputs) -> result
    peer: Callable                   # torch: (*inputs) -> result
    peer_name: str
    calls: int
    dim: Optional[int] = None
    requires_grad: bool = False      # inputs that require grad: the call records its autograd node
    quick: bool = False
    section = "overhead"
    layout = "swizzle"               # bankops' default, which fn leaves in place
    dtype = f32

    def make(self, device):
        return tuple(rand(s, self.dtype, device).requires_grad_(self.requires_grad) for s in self.inputs)


def overhead_cases(calls):
    """Each operator on 64 x 64 float32 tensors (linear: x (64, 64), weight (64, 64), bias), inputs
    without grad, then transpose and linear on inputs that require grad (the autograd path)."""
    sq, lin = [(64, 64)], [(64, 64), (64, 64), (64,)]
    transpose_ = ("transpose", [64, 64], sq, bankops.transpose, lambda x: x.t().contiguous(), "x.t().contiguous()")
    linear_ = ("linear", [64, 64, 64], lin, bankops.linear, torch.nn.functional.linear, "torch.nn.functional.linear")
    return [
        Overhead(*transpose_, calls, quick=True),
        Overhead("reduce_sum", [64, 64], sq, bankops.reduce_sum, torch.sum, "torch.sum", calls),
        Overhead("reduce_sum", [64, 64], sq, lambda x: bankops.reduce_sum(x, -1), lambda x: torch.sum(x, -1),
                 "torch.sum", calls, dim=-1),
        Overhead("gemm", [64, 64, 64], sq * 2, bankops.gemm, torch.matmul, "torch.matmul", calls, quick=True),
        Overhead(*linear_, calls),
        Overhead(*transpose_, calls, requires_grad=True),
        Overhead(*linear_, calls, requires_grad=True),
    ]


def linear_step(module, x, dy):
    """Forward with bias, then backward of y against dy; returns y and the grads of x, weight
    and bias. Grads are set to None first, on both sides alike, so each call writes fresh ones:
    neither side's time includes adding into the previous call's grads."""
    x.grad = None
    module.zero_grad(set_to_none=True)
    y = module(x)
    y.backward(dy)
    return y.detach(), x.grad, module.weight.grad, module.bias.grad


def check_each(names, scales, precision=None):
    """check_close on each of a tuple of results, with its own scale (at the tolerance of
    `precision` when given: under autocast float32 grads carry bfloat16 products' rounding)."""
    def check(out, ref, _):
        as_ = (lambda t: t.to(precision)) if precision else (lambda t: t)
        bad = [f"{name}: {msg}" for name, o, r, s in zip(names, out, ref, scales)
               if (msg := check_close(as_(o), as_(r), s)) != "ok"]
        return "; ".join(bad) or "ok"
    return check


def linear(linear_shape, dtype, quick=False, cpu=False, autocast=None):
    """A Linear layer's training step: bankops.nn.Linear against torch.nn.Linear, one module per
    layout sharing the torch module's parameters. The parameters are redrawn as randn so that
    the check's scales (sqrt of each reduction's length) fit, as for the gemm rows: nn.Linear's
    own init would shrink y by sqrt(K) and leave the tolerance that much looser. autocast: a
    16-bit dtype both steps run under (torch.autocast on CUDA), float32 modules and inputs."""
    m_tok, k_in, n_out = linear_shape

    def step(module, x, dy):
        if autocast is None:
            return linear_step(module, x, dy)
        with torch.autocast("cuda", dtype=autocast):
            return linear_step(module, x, dy)

    def make(dev):
        lin = torch.nn.Linear(k_in, n_out, bias=True, device=dev, dtype=dtype)
        with torch.no_grad():
            for p in lin.parameters():
                p.copy_(rand(p.shape, dtype, dev))
        mine = {layout: bankops.nn.Linear.from_torch(lin, layout=layout) for layout in bankops.LAYOUTS}
        return rand((m_tok, k_in), dtype, dev).requires_grad_(), rand((m_tok, n_out), dtype, dev), lin, mine

    return Case(
        "linear", dtype, list(linear_shape), make=make,
        run=lambda inp, layout: step(inp[3][layout], inp[0], inp[1]),
        peer=lambda inp: step(inp[2], inp[0], inp[1]),
        peer_name=peer_name("torch.nn.Linear", dtype, cpu),
        check=check_each(("y", "x.grad", "weight.grad", "bias.grad"),
                         [math.sqrt(n) for n in (k_in, n_out, m_tok, m_tok)], autocast),
        quick=quick, model_case="layer" if autocast is None else f"layer, autocast {str(autocast)[6:]}",
        linear_shape=list(linear_shape))


def model_cases(shapes, dtypes, quick=(), cpu=False):
    """Per Linear shape [M, K, N] and dtype: its three products, then the layer's step."""
    return [c for s in shapes for dt in dtypes
            for c in [*[linear_gemm(p, s, dt, (s, dt) in quick, cpu) for p in LINEAR_PRODUCTS],
                      linear(s, dt, (s, dt) in quick, cpu)]]


# [M tokens, K in, N out] of Linear layers in models: a 7-8B transformer's attention
# projection and MLP up and down (hidden 4096, MLP 14336) at 8192 tokens and its projection at
# 1024, BERT-base / GPT-2 small's MLP (768, 3072), a narrow 1024 -> 4096, a 2048 cube and a
# 1536 cube (a mid-size layer whose products leave SMs idle on 128x192 and 128x256 tiles).
MODEL_SHAPES = [(8192, 4096, 4096), (8192, 4096, 14336), (8192, 14336, 4096), (4096, 1024, 4096),
                (2048, 2048, 2048), (16384, 768, 3072), (1024, 4096, 4096), (1536, 1536, 1536)]


def gpu_cases():
    """Memory-bound inputs rotate through sets over four L2s (ROTATE_BYTES), so timings are DRAM-bound."""
    n_full = 256 * 1024 * 1024  # 1 GiB of float32
    return [
        *[transpose((8192, 8192), dt, quick=dt == f32) for dt in (f32, f16, bf16, torch.int8, f64)],
        *[transpose((64, 1024, 1024), dt) for dt in (f32, f16, bf16, torch.int8)],
        *[transpose((4097, 8191), dt, quick=dt == f32) for dt in (f32, f16, bf16, torch.int8)],
        # reduce_sum: 1 GiB of each float type, rows (dim=-1), columns (dim=0), a middle dim
        reduce_sum((n_full,), f32, quick=True),
        *[reduce_sum((2 * n_full,), dt) for dt in (f16, bf16)],
        reduce_sum((32768, 1024), f32, dim=-1, quick=True),
        reduce_sum((1024, 32768), f32, dim=0),
        reduce_sum((256, 512, 256), f32, dim=1),
        reduce_sum((n_full,), torch.int32),
        gemm((2048, 2048, 2048), f32, quick=True),
        gemm((4096, 4096, 4096), f32),
        gemm((8192, 8192, 8192), f32),
        gemm((8192, 1024, 8192), f32),  # [M, N, K]: a skinny N
        gemm((4096, 4352, 4096), f32),  # a ragged grid: 128x256 with stream-K (128x128 without it)
        # float16/bfloat16 on tensor cores: the big squares, the small one where launch and
        # tail dominate, a middle one (the Hopper kernel's 128x128 tile: 72 tiles of 128x256,
        # 144 of 128x128), and sizes that break 16-byte row alignment (the realigning paths;
        # the bigger one fills whole waves of the Hopper kernel's tiles, 4.12 for the smaller);
        # the mid-size squares between, a short k and a long k at 8192, and mid-size grids whose
        # tiles end in a short last wave (192 and 198 tiles of 128x192 on 132 SMs).
        *[gemm(s, dt, quick=s == (4096, 4096, 4096) and dt == f16)
          for s in ((8192, 8192, 8192), (4096, 4096, 4096), (3072, 3072, 3072), (2048, 2048, 2048),
                    (1536, 1536, 1536), (1024, 1024, 1024), (8192, 8192, 1024), (1024, 8192, 8192),
                    (4095, 4097, 4093), (8191, 8193, 8189), (2048, 2304, 2048), (1152, 4096, 1024))
          for dt in (f16, bf16)],
        gemm((8, 1024, 1024, 1024), f32),
        # misaligned rows: 4-byte cp.async staging (Async4) on the 128x256 tile, 4097 columns
        # with the strip (kernels/gemm/ffma_strip.h)
        gemm((4095, 4097, 4093), f32),
        gemm((8191, 8193, 8189), f32),
        *model_cases(MODEL_SHAPES, (bf16, f32), quick=[((4096, 1024, 4096), bf16)]),
        # A float32 model under torch.autocast("cuda", torch.bfloat16), module against module.
        linear((8192, 4096, 4096), f32, autocast=bf16),
        # Decode: 1-128 tokens through a 7-8B transformer's projection and MLP up and down weights
        # (4 and 16: the few-rows kernel's FFMA and mma.sync forms at their edges; 64: between the
        # few-rows kernels and the 128-row tiles).
        *decode_cases((1, 4, 8, 16, 32, 64, 128), ((4096, 4096), (4096, 14336), (14336, 4096)), (bf16, f32),
                      quick=[(1, 4096, 4096, bf16), (32, 4096, 14336, bf16)]),
        # The same products on a weight stored (in, out), read n-major: x @ W (4 and 16: the
        # few-rows kernel's KN form at its tiles' edges).
        *decode_cases((1, 4, 8, 16, 32, 64), ((4096, 4096), (14336, 4096)), (bf16, f32), weight_kn=True),
        *overhead_cases(2000),
    ]


def cpu_cases():
    """Small shapes: the CPU reference is plain loops, and the whole run should take about a minute."""
    # One input set each: the CPU's caches are not the point here.
    cpu_transpose = functools.partial(transpose, rotate_bytes=0)
    cpu_reduce_sum = functools.partial(reduce_sum, rotate_bytes=0)
    return [
        cpu_transpose((1024, 1024), f32, quick=True),
        cpu_transpose((1024, 1024), f16),
        cpu_transpose((8, 256, 256), f32),
        cpu_transpose((1023, 2047), f32),
        cpu_reduce_sum((4 * 1024 * 1024,), f32, quick=True),
        cpu_reduce_sum((2048, 2048), f32, dim=-1, quick=True),
        cpu_reduce_sum((2048, 2048), f32, dim=0),
        cpu_reduce_sum((64, 256, 64), f32, dim=1),
        cpu_reduce_sum((4 * 1024 * 1024,), torch.int32),
        gemm((256, 256, 256), f32, quick=True, cpu=True),
        gemm((4, 128, 128, 128), f32, cpu=True),
        gemm((255, 257, 253), f32, cpu=True),
        # a small Linear and an odd one (no dim a multiple of 8), bfloat16 for its tolerances
        *model_cases([(256, 128, 192)], (f32,), quick=[((256, 128, 192), f32)], cpu=True),
        *model_cases([(129, 65, 97)], (f32, bf16), cpu=True),
        # decode rotates through two input sets (the CPU's caches are not the point here)
        *decode_cases((1, 8), ((256, 512), (512, 256)), (f32, bf16), quick=[(1, 256, 512, f32)], cpu=True,
                      rotate_bytes=0),
        *decode_cases((8,), ((256, 512),), (f32,), quick=[(8, 256, 512, f32)], cpu=True, rotate_bytes=0,
                      weight_kn=True),
        *overhead_cases(200),
    ]
