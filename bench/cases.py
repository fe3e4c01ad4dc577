"""What the benchmark times: each case is one input, the bankops call, its torch peer and a check."""
import math
from dataclasses import dataclass
from typing import Callable, Optional

import torch

import bankops

f32, f16, bf16, f64 = torch.float32, torch.float16, torch.bfloat16, torch.float64

# Loose relative tolerances: summation order legitimately differs from the peer, but a
# dropped tile, a wrong index or TF32 sneaking into float32 gemm is well outside these.
RTOL = {f32: 1e-4, f16: 1e-2, bf16: 4e-2, f64: 1e-9}


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
    shape: list                      # input shape; [M, N, K] or [B, M, N, K] for gemm
    make: Callable                   # device -> tuple of input tensors
    run: Callable                    # (inputs, layout) -> bankops result
    peer: Callable                   # inputs -> torch result
    peer_name: str
    check: Callable                  # (out, ref, scale) -> "ok" | "MISMATCH ..."
    scale: float = 0.0
    dim: Optional[int] = None
    quick: bool = False              # part of the --quick sweep

    @property
    def memory_bound(self):
        return self.op != "gemm"

    @property
    def unit(self):
        return "GB/s" if self.memory_bound else "TFLOP/s"

    def work(self, inputs, out):
        """Bytes read + written (memory-bound ops) or floating-point operations (gemm)."""
        if self.memory_bound:
            return sum(t.nbytes for t in inputs) + out.nbytes
        return 2 * math.prod(self.shape)

    def figure(self, work, ms):
        return work / (ms * 1e-3) / (1e9 if self.memory_bound else 1e12)

    @property
    def label(self):
        s = "x".join(map(str, self.shape))
        if self.op == "reduce_sum":
            s += ", all" if self.dim is None else f", dim={self.dim}"
        return s


def transpose(shape, dtype, quick=False):
    batched = len(shape) > 2
    return Case(
        "transpose", dtype, list(shape),
        make=lambda dev: (rand(shape, dtype, dev),),
        run=lambda inp, layout: bankops.transpose(inp[0], -2, -1, layout=layout),
        peer=(lambda inp: inp[0].transpose(-2, -1).contiguous()) if batched else (lambda inp: inp[0].t().contiguous()),
        peer_name="x.transpose(-2,-1).contiguous()" if batched else "x.t().contiguous()",
        check=check_equal, quick=quick)


def reduce_sum(shape, dtype, dim=None, quick=False):
    n = math.prod(shape) if dim is None else shape[dim]
    return Case(
        "reduce_sum", dtype, list(shape),
        make=lambda dev: (rand(shape, dtype, dev),),
        run=lambda inp, layout: bankops.reduce_sum(inp[0], dim, layout=layout),
        peer=(lambda inp: torch.sum(inp[0])) if dim is None else (lambda inp: torch.sum(inp[0], dim)),
        peer_name="torch.sum", check=check_close, scale=math.sqrt(n), dim=dim, quick=quick)


def gemm(shape, dtype, quick=False, cpu=False):
    *batch, m, n, k = shape
    return Case(
        "gemm", dtype, list(shape),
        make=lambda dev: (rand((*batch, m, k), dtype, dev), rand((*batch, k, n), dtype, dev)),
        run=lambda inp, layout: bankops.gemm(inp[0], inp[1], layout=layout),
        peer=lambda inp: torch.matmul(inp[0], inp[1]),
        peer_name="torch.matmul (CPU)" if cpu else "torch.matmul (cuBLAS, no TF32)" if dtype == f32
        else "torch.matmul (cuBLAS)",
        check=check_close, scale=math.sqrt(k), quick=quick)


def gpu_cases():
    """Memory-bound inputs are all well over the H100's 50 MB L2, so timings are DRAM-bound."""
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
        # the bigger one fills whole waves of the Hopper kernel's tiles, 4.12 for the smaller).
        *[gemm(s, dt, quick=s == (4096, 4096, 4096) and dt == f16)
          for s in ((8192, 8192, 8192), (4096, 4096, 4096), (1024, 1024, 1024), (1536, 1536, 1536),
                    (4095, 4097, 4093), (8191, 8193, 8189))
          for dt in (f16, bf16)],
        gemm((8, 1024, 1024, 1024), f32),
        # misaligned rows: 4-byte cp.async staging (Async4) on the 128x256 tile, 4097 columns
        # with the strip (kernels/gemm/ffma_strip.h)
        gemm((4095, 4097, 4093), f32),
        gemm((8191, 8193, 8189), f32),
    ]


def cpu_cases():
    """Small shapes: the CPU reference is plain loops, and the whole run should take about a minute."""
    return [
        transpose((1024, 1024), f32, quick=True),
        transpose((1024, 1024), f16),
        transpose((8, 256, 256), f32),
        transpose((1023, 2047), f32),
        reduce_sum((4 * 1024 * 1024,), f32, quick=True),
        reduce_sum((2048, 2048), f32, dim=-1, quick=True),
        reduce_sum((2048, 2048), f32, dim=0),
        reduce_sum((64, 256, 64), f32, dim=1),
        reduce_sum((4 * 1024 * 1024,), torch.int32),
        gemm((256, 256, 256), f32, quick=True, cpu=True),
        gemm((4, 128, 128, 128), f32, cpu=True),
        gemm((255, 257, 253), f32, cpu=True),
    ]
