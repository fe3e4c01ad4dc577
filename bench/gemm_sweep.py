"""16-bit gemm under swizzle across shapes: the kernel the dispatch picks (bankops.explain's
route and block tile), the same call with one switch off (`--off wgmma`: on the mma.sync
kernel, `bankops.options(wgmma=False)`; `--off repack`: misaligned rows realigned in the Hopper kernel's
producers instead of copied first, `repack=False`) and cuBLAS, timed alike in one
process (bench/run.py's CUDA-graph timing). For setting the dispatch rules between the
kernels (kernels/gemm/wgmma_plan.h's plans and copies), not for bench/results/.

    python3 bench/gemm_sweep.py [--dtype float16] [--off wgmma|repack] [MxNxK | BxMxNxK ...]
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.dirname(HERE)]  # bench/run.py; the working tree's bankops

import torch  # noqa: E402

import bankops  # noqa: E402
from run import time_ms  # noqa: E402

SHAPES = ["1024x1024x1024", "512x1024x1024", "1024x2048x1024", "2048x1792x1024", "1024x1024x4096",
          "768x1024x2048", "1024x1024x256", "4x512x512x1024", "8x256x512x1024", "1536x1536x1536",
          "1280x1536x1024", "1024x2048x4096", "16x256x512x1024"]


def route(dtype, batch, m, n, k):
    rep = bankops.explain("gemm", "swizzle", dtype, m=m, n=n, k=k, batch=batch)
    (kernel,) = {r["kernel"] for r in rep.rows}
    if not kernel.startswith("gemm_wgmma"):
        return kernel
    # The epilogue reads the C tile back in 16-byte rows, or (odd N) an element a lane.
    per_lane = {"lds C tile -> 16-byte rows of C": 8, "lds C tile -> elements of C (rows off 16 bytes)": 1}
    reads = sum(r["count"] * per_lane.get(r["instruction"], 0) for r in rep.rows)
    return f"{kernel} 128x{reads * 32 // 128}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--off", default="wgmma", choices=["wgmma", "repack"], help="the switch the third column turns off")
    ap.add_argument("shapes", nargs="*", default=SHAPES)
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    print(f"{torch.cuda.get_device_name()}; {args.dtype}; us per call (CUDA graphs, median)")
    print(f"{'shape':>18} {'route':>28} {'bankops':>9} {'no ' + args.off:>10} {'cuBLAS':>9} {'x off':>7} {'x cuBLAS':>9}")
    # The first shape a process timed came out slow on every side (1024^3 on mma.sync: 9.1 and
    # 18.4 us, 8.4 when timed again later in the same process; H100, 2026-11-25), even after 2 s
    # of other products: its first round is timed and dropped (a guard not yet checked there).
    for i, shape in enumerate(args.shapes[:1] + args.shapes):
        dims = [int(v) for v in shape.split("x")]
        batch, (m, n, k) = (dims[0] if len(dims) == 4 else 1), dims[-3:]
        lead = (batch,) if len(dims) == 4 else ()
        a = torch.randn(*lead, m, k, device="cuda", dtype=dtype)
        b = torch.randn(*lead, k, n, device="cuda", dtype=dtype)
        ours, _ = time_ms(lambda: bankops.gemm(a, b, "swizzle"), True, args.reps)
        with bankops.options(**{args.off: False}):
            off, _ = time_ms(lambda: bankops.gemm(a, b, "swizzle"), True, args.reps)
        peer, _ = time_ms(lambda: torch.matmul(a, b), True, args.reps)
        if i == 0:
            continue
        print(f"{shape:>18} {route(dtype, batch, m, n, k):>28} {ours * 1e3:9.2f} {off * 1e3:10.2f} {peer * 1e3:9.2f}"
              f" {off / ours:7.3f} {peer / ours:9.3f}", flush=True)


if __name__ == "__main__":
    main()
